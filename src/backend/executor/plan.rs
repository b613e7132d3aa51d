//! What runs at one batch size. Every padded batch size is enqueued (and captured as one graph)
//! once, so which kernel each operation runs on is decided once per size and device: a
//! [`PassPlan`] holds the options' thresholds (`dense_mma=N`, `norm_dense=N`, `pdl=N`,
//! `attention=`) as they apply at its size, and the device's capabilities, and answers the
//! passes' questions (which kernel takes this dense layer, this LayerNorm, this attention). The
//! passes ask it instead of testing sizes themselves; the attention body's own choices (which
//! LayerNorm is fused into which kernel, where the stream continues) are in its
//! [`BodyPlan`](super::attention::plan::BodyPlan), built on this one.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use crate::gpu::kernels::launchers::{DenseMma, LayerNormWarp, NormDense};
use crate::gpu::kernels::{
    AttentionFamily, AttentionKernel, AttentionLaunch, DENSE_ROWS_MAX, attention_launch,
    cuda_only_kernel_names, dense_mma_launch, dense_rows_splits, layer_norm_warp_kernel,
    matrix_kernel_names, norm_dense_launch, shared_kernel_names,
};
use crate::gpu::{GpuDevice, Launch};
use crate::weights::format::Activation;

/// Up to which batch size the fused LayerNorm + FFN1 kernel runs by default: at batch 1 it saves
/// T82 4–5.5 % of a pass; from batch 2 its LayerNorm, repeated by every block of a row group, costs
/// as much as the kernels it replaces, and more above (measured on the H100:
/// `docs/performance.md`).
pub const DEFAULT_NORM_DENSE_MAX_BATCH: usize = 1;

/// Up to which batch size dense layers run in `dense_mma` by default: with programmatic launch
/// it makes batch 1 18–19 % faster than cuBLASLt does (T82, BT4); at batch 2 T82 gains 10 % and
/// BT4 loses 13 % (its wider layers repeat each weight slice over 8 row groups), from 4 both
/// lose. Without programmatic launch (GPUs before sm_90) it measured as fast as cuBLASLt at
/// batch 1 (on the H100: `docs/performance.md`).
pub const DEFAULT_DENSE_MMA_MAX_BATCH: usize = 1;

/// Up to which batch size kernels launch with programmatic dependent launch by default (faster
/// at batch 1–8 on the H100, not at 64 and above: `docs/performance.md`).
pub const DEFAULT_PDL_MAX_BATCH: usize = 8;

/// Threads per block of the row kernels (layer norm, policy finish, dense rows).
pub const ROW_THREADS: u32 = 256;

/// Rows wider than this (smolgen's 6144-wide rows) take a block of [`WIDE_ROW_THREADS`] in the
/// block-per-row LayerNorm: they come in few rows (one per position), so each block needs more
/// parallel work.
const WIDE_ROW: usize = 2048;
const WIDE_ROW_THREADS: u32 = 1024;

/// The options that bound a plan's choices (`attention=`, `norm_dense=`, `dense_mma=`, `pdl=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanOptions {
    /// Use the attention on the device's matrix units where it has such a kernel (NVIDIA tensor
    /// cores from sm_80, AMD matrix cores on gfx11, gfx12, gfx90a, gfx94x, gfx950:
    /// `attention=matrix`, also spelled `mma`, the default) or the portable kernel
    /// (`attention=portable`).
    pub matrix_attention: bool,
    /// The largest batch whose attention-body layers run a LayerNorm and the dense layer after
    /// it as one kernel where the device has it (`norm_dense=N`, 0: never; default
    /// [`DEFAULT_NORM_DENSE_MAX_BATCH`]).
    pub norm_dense_max_batch: usize,
    /// The largest batch whose dense layers run in our `dense_mma` kernel where the device has
    /// it and the shape fits, instead of a library GEMM (`dense_mma=N`, 0: never; default
    /// [`DEFAULT_DENSE_MMA_MAX_BATCH`]).
    pub dense_mma_max_batch: usize,
    /// The largest batch whose kernels launch with programmatic dependent launch on NVIDIA
    /// sm_90 and newer (`pdl=N`, 0: never; default [`DEFAULT_PDL_MAX_BATCH`]): each kernel may
    /// start while the one before runs, and those that can load their weights before they
    /// wait for it.
    pub programmatic_max_batch: usize,
    /// Run a residual tower's squeeze-excitation end of a block as one kernel a board where
    /// the board's tiles and channels fit one block (`se_board=true`, the default), or as the
    /// output transform, the gates and their application (`se_board=false`).
    pub se_board: bool,
}

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            matrix_attention: true,
            norm_dense_max_batch: DEFAULT_NORM_DENSE_MAX_BATCH,
            dense_mma_max_batch: DEFAULT_DENSE_MMA_MAX_BATCH,
            programmatic_max_batch: DEFAULT_PDL_MAX_BATCH,
            se_board: true,
        }
    }
}

/// What a device offers a plan: its shape and the kernels it compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    pub warp_size: usize,
    pub multiprocessors: usize,
    /// Whether kernels may launch with programmatic dependent launch (NVIDIA sm_90+).
    pub programmatic_launch: bool,
    /// The kernel entry points the device has (the NVIDIA-only ones only on CUDA from sm_80, the
    /// AMD matrix-core ones only on the archs that have such cores, and the emulator).
    kernels: BTreeSet<&'static str>,
}

impl Capabilities {
    pub fn new(
        warp_size: usize,
        multiprocessors: usize,
        programmatic_launch: bool,
        kernels: impl IntoIterator<Item = &'static str>,
    ) -> Self {
        Self {
            warp_size,
            multiprocessors,
            programmatic_launch,
            kernels: kernels.into_iter().collect(),
        }
    }

    /// `device`'s capabilities (every lane of a backend is on the same GPU).
    pub fn of(device: &dyn GpuDevice) -> Self {
        let info = device.info();
        let kernels = shared_kernel_names()
            .chain(cuda_only_kernel_names())
            .chain(matrix_kernel_names())
            .filter(|name| device.has_kernel(name));
        Self::new(
            info.warp_size as usize,
            info.multiprocessors as usize,
            device.has_programmatic_launch(),
            kernels,
        )
    }

    fn has(&self, kernel: &str) -> bool {
        self.kernels.contains(kernel)
    }
}

/// The kernel a dense layer `y = act(x·Wᵀ (+ b))` runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenseKernel {
    /// `dense_rows` (at most [`DENSE_ROWS_MAX`] rows), `splits` warps per output.
    Rows { splits: usize, launch: Launch },
    /// `dense_mma` (NVIDIA tensor cores).
    Mma(DenseMma, Launch),
    /// The GEMM library (Lt with its epilogues, or BLAS).
    Library,
}

impl fmt::Display for DenseKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rows { .. } => f.write_str("dense_rows"),
            Self::Mma(kernel, _) => f.write_str(kernel.name()),
            Self::Library => f.write_str("library GEMM"),
        }
    }
}

/// The kernel a LayerNorm over rows of one width runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NormKernel {
    /// A warp per row, the member whose registers just hold a row.
    Warp(LayerNormWarp, Launch),
    /// A block per row (rows the warp kernels do not take), the row in shared memory.
    Block(Launch),
}

impl fmt::Display for NormKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Warp(kernel, _) => f.write_str(kernel.name()),
            Self::Block(launch) => write!(f, "layer_norm ({} threads)", launch.block[0]),
        }
    }
}

/// The choices of a pass over one batch size on one device.
#[derive(Debug, Clone)]
pub struct PassPlan {
    pub batch: usize,
    /// Whether the pass's kernels launch with programmatic dependent launch.
    pub programmatic_launch: bool,
    /// Whether dense layers run in `dense_mma` where a member takes the shape.
    dense_mma: bool,
    /// Whether a LayerNorm may run fused with the dense layer after it.
    norm_dense: bool,
    matrix_attention: bool,
    /// Whether a tower's squeeze-excitation may run in `winograd_se_board`.
    pub se_board: bool,
    device: Arc<Capabilities>,
}

impl PassPlan {
    pub fn new(device: Arc<Capabilities>, options: &PlanOptions, batch: usize) -> Self {
        Self {
            batch,
            programmatic_launch: batch <= options.programmatic_max_batch
                && device.programmatic_launch,
            dense_mma: batch <= options.dense_mma_max_batch,
            norm_dense: batch <= options.norm_dense_max_batch,
            matrix_attention: options.matrix_attention,
            se_board: options.se_board,
            device,
        }
    }

    /// The kernel of a dense layer of `inputs` → `outputs` on `rows` rows: `dense_rows` for at
    /// most [`DENSE_ROWS_MAX`] rows of a width it takes (a multiple of 8: the per-position
    /// layers at batch ≤ 4, which a library GEMM runs as one long K loop on a few blocks), else
    /// `dense_mma` in passes that take it, for a shape it takes, else the library.
    pub fn dense(&self, rows: usize, inputs: usize, outputs: usize) -> DenseKernel {
        if rows <= DENSE_ROWS_MAX && inputs.is_multiple_of(8) {
            let warp_size = self.device.warp_size;
            let warps_per_block = ROW_THREADS as usize / warp_size;
            let splits = dense_rows_splits(inputs, warp_size).min(warps_per_block);
            let launch = Launch {
                grid: [outputs.div_ceil(warps_per_block / splits) as u32, 1, 1],
                block: [ROW_THREADS, 1, 1],
                shared_bytes: 0,
            };
            return DenseKernel::Rows { splits, launch };
        }
        let mma = dense_mma_launch(rows, outputs, inputs)
            .filter(|(kernel, _)| self.dense_mma && self.device.has(kernel.name()));
        match mma {
            Some((kernel, launch)) => DenseKernel::Mma(kernel, launch),
            None => DenseKernel::Library,
        }
    }

    /// The LayerNorm kernel for `rows` rows of `cols` values with activation `act` before the
    /// residual: a warp per row where a member holds the row, its gamma and beta loaded early
    /// where every block has a multiprocessor of its own (registers then cost no occupancy);
    /// else a block per row, wide rows taking more threads.
    pub fn layer_norm(&self, rows: usize, cols: usize, act: Activation) -> NormKernel {
        let warp_size = self.device.warp_size;
        let blocks = rows.div_ceil(ROW_THREADS as usize / warp_size);
        let early = blocks <= self.device.multiprocessors;
        match layer_norm_warp_kernel(cols, warp_size, act, early) {
            Some(kernel) if cols.is_multiple_of(8) => NormKernel::Warp(
                kernel,
                Launch {
                    grid: [blocks as u32, 1, 1],
                    block: [ROW_THREADS, 1, 1],
                    shared_bytes: 0,
                },
            ),
            _ => NormKernel::Block(Launch {
                grid: [rows as u32, 1, 1],
                block: [
                    if cols > WIDE_ROW {
                        WIDE_ROW_THREADS
                    } else {
                        ROW_THREADS
                    },
                    1,
                    1,
                ],
                shared_bytes: (cols * size_of::<f32>()) as u32,
            }),
        }
    }

    /// `layer_norm_dense_mma` for a LayerNorm of `rows` rows of `inputs` values followed by a
    /// dense layer to `outputs`: in passes of at most `norm_dense=N` positions, for a shape a
    /// member takes, on a device that has it.
    pub fn norm_dense(
        &self,
        rows: usize,
        outputs: usize,
        inputs: usize,
    ) -> Option<(NormDense, Launch)> {
        norm_dense_launch(rows, outputs, inputs)
            .filter(|(kernel, _)| self.norm_dense && self.device.has(kernel.name()))
    }

    /// Whether `launch` has at most one block per multiprocessor.
    pub fn one_wave(&self, launch: &Launch) -> bool {
        (launch.grid[0] * launch.grid[1]) as usize <= self.device.multiprocessors
    }

    /// The attention kernel for heads of `depth` and its launch for `heads` heads: where asked
    /// for, the one on the device's matrix units (NVIDIA's tensor-core kernel, else AMD's
    /// matrix-core kernel, whichever the device compiled), else the portable one; `None` for a
    /// depth no kernel takes.
    pub fn attention(
        &self,
        depth: usize,
        heads: usize,
    ) -> Option<(AttentionKernel, AttentionLaunch)> {
        let fast = [AttentionFamily::TensorCores, AttentionFamily::MatrixCores]
            .into_iter()
            .filter_map(|family| AttentionKernel::for_depth(depth, family))
            .find(|k| self.matrix_attention && self.device.has(k.name()));
        let kernel =
            fast.or_else(|| AttentionKernel::for_depth(depth, AttentionFamily::Portable))?;
        let shape = (self.device.multiprocessors, self.device.warp_size);
        let launch = attention_launch(kernel, heads, self.batch, shape);
        Some((kernel, launch))
    }
}

impl AsRef<PassPlan> for PassPlan {
    fn as_ref(&self) -> &PassPlan {
        self
    }
}

impl fmt::Display for PassPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "batch {}: ", self.batch)?;
        f.write_str(if self.programmatic_launch {
            "programmatic launch"
        } else {
            "plain launches"
        })?;
        write!(
            f,
            "; dense layers: dense_rows up to {DENSE_ROWS_MAX} rows, then "
        )?;
        let has_mma = DenseMma::ALL.iter().any(|k| self.device.has(k.name()));
        f.write_str(if self.dense_mma && has_mma {
            "dense_mma where a member takes the shape, else the library GEMM"
        } else {
            "the library GEMM"
        })
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::gpu::kernels::cuda_kernel_names;

    /// An H100 (sm_90: 132 SMs, 32-wide warps, every kernel, programmatic launch).
    pub fn sm90() -> Arc<Capabilities> {
        Arc::new(Capabilities::new(32, 132, true, cuda_kernel_names(90)))
    }

    /// An A100 (sm_80: the tensor-core kernels, no programmatic launch).
    pub fn sm80() -> Arc<Capabilities> {
        Arc::new(Capabilities::new(32, 108, false, cuda_kernel_names(80)))
    }

    /// An AMD GPU of MI300X's shape (304 CUs, 64-wide waves) with the shared kernels only (as
    /// an arch without matrix-core kernels has them).
    pub fn amd() -> Arc<Capabilities> {
        Arc::new(Capabilities::new(64, 304, false, shared_kernel_names()))
    }

    /// An AMD MI300X (gfx942: 304 CUs, 64-wide waves): the shared and matrix-core kernels.
    pub fn mi300x() -> Arc<Capabilities> {
        let kernels = shared_kernel_names().chain(matrix_kernel_names());
        Arc::new(Capabilities::new(64, 304, false, kernels))
    }

    fn plan(device: Arc<Capabilities>, batch: usize) -> PassPlan {
        PassPlan::new(device, &PlanOptions::default(), batch)
    }

    #[test]
    fn the_defaults_are_the_documented_ones() {
        let o = PlanOptions::default();
        // `dense_mma=1`, `norm_dense=1`, `pdl=8`, `attention=matrix`.
        assert_eq!(
            (
                o.dense_mma_max_batch,
                o.norm_dense_max_batch,
                o.programmatic_max_batch
            ),
            (1, 1, 8)
        );
        assert!(o.matrix_attention);
        assert!(o.se_board);
    }

    #[test]
    fn programmatic_launch_up_to_batch_8_on_sm_90_only() {
        for (batch, on) in [(1, true), (8, true), (9, false), (64, false)] {
            assert_eq!(plan(sm90(), batch).programmatic_launch, on, "{batch}");
        }
        assert!(!plan(sm80(), 1).programmatic_launch);
        assert!(!plan(amd(), 1).programmatic_launch);
    }

    #[test]
    fn dense_layers_take_dense_rows_then_dense_mma_at_batch_1_then_the_library() {
        // T82's value head hidden layer at batch 1 and 4 (one row per position).
        assert!(matches!(
            plan(sm90(), 1).dense(1, 2048, 128),
            DenseKernel::Rows { splits: 8, .. }
        ));
        assert!(matches!(
            plan(sm90(), 4).dense(4, 2048, 128),
            DenseKernel::Rows { .. }
        ));
        // T82's QKV at batch 1 (64 rows, 768 → 2304): dense_mma; at 2 and 64 the library.
        let qkv = plan(sm90(), 1).dense(64, 768, 2304);
        assert_eq!(qkv.to_string(), "dense_mma_k768_g4");
        assert_eq!(plan(sm90(), 2).dense(128, 768, 2304), DenseKernel::Library);
        assert_eq!(
            plan(sm90(), 64).dense(64 * 64, 768, 2304),
            DenseKernel::Library
        );
        // A100: dense_mma without programmatic launch; AMD: never.
        assert!(matches!(
            plan(sm80(), 1).dense(64, 768, 2304),
            DenseKernel::Mma(..)
        ));
        assert_eq!(plan(amd(), 1).dense(64, 768, 2304), DenseKernel::Library);
        // A width dense_rows does not take.
        assert_eq!(plan(amd(), 1).dense(1, 12, 128), DenseKernel::Library);
    }

    #[test]
    fn dense_rows_give_each_output_its_warps() {
        // 2048 inputs on 32-wide warps: 8 warps (a block) per output; 64-wide waves: 4 of 4.
        let DenseKernel::Rows { splits, launch } = plan(sm90(), 1).dense(1, 2048, 128) else {
            panic!("dense_rows");
        };
        assert_eq!(
            (splits, launch.grid, launch.block),
            (8, [128, 1, 1], [256, 1, 1])
        );
        let DenseKernel::Rows { splits, launch } = plan(amd(), 1).dense(1, 256, 100) else {
            panic!("dense_rows");
        };
        assert_eq!((splits, launch.grid), (1, [25, 1, 1]));
    }

    #[test]
    fn layer_norms_take_the_warp_kernel_that_holds_a_row() {
        let id = Activation::Identity;
        // T82's 768-wide stream at batch 1: 64 rows in 8 blocks, gamma and beta early.
        let b1 = plan(sm90(), 1).layer_norm(64, 768, id);
        assert_eq!(b1.to_string(), "layer_norm_warp_early_c3");
        // At batch 256: 2048 blocks, more than the SMs; on 64-wide waves, 2 chunks.
        assert_eq!(
            plan(sm90(), 256).layer_norm(256 * 64, 768, id).to_string(),
            "layer_norm_warp_c3"
        );
        assert_eq!(
            plan(amd(), 1).layer_norm(64, 768, id).to_string(),
            "layer_norm_warp_early_c2"
        );
        // Smolgen's 6144-wide rows: a block of 1024 per row; Mish: the block kernel.
        let wide = plan(sm90(), 1).layer_norm(1, 6144, Activation::Swish);
        assert_eq!(wide.to_string(), "layer_norm (1024 threads)");
        let mish = plan(sm90(), 1).layer_norm(64, 768, Activation::Mish);
        assert_eq!(mish.to_string(), "layer_norm (256 threads)");
    }

    #[test]
    fn norm_dense_runs_up_to_its_batch_on_nvidia_only() {
        assert!(plan(sm90(), 1).norm_dense(64, 1024, 768).is_some());
        assert!(plan(sm80(), 1).norm_dense(64, 1024, 768).is_some());
        assert!(plan(sm90(), 2).norm_dense(128, 1024, 768).is_none());
        assert!(plan(amd(), 1).norm_dense(64, 1024, 768).is_none());
    }

    #[test]
    fn attention_is_the_tensor_core_kernel_where_asked_for_and_compiled() {
        let (kernel, launch) = plan(sm90(), 1).attention(32, 24).unwrap();
        assert_eq!(
            (kernel.name(), launch.heads_per_block),
            ("attention_mma_d32", Some(1))
        );
        let (_, launch) = plan(sm90(), 64).attention(32, 24).unwrap();
        assert_eq!(launch.heads_per_block, Some(4));
        let (kernel, _) = plan(amd(), 1).attention(32, 24).unwrap();
        assert_eq!(kernel.name(), "attention_d32");
        // AMD matrix cores: four waves of 64 a block, one head and position each.
        let (kernel, launch) = plan(mi300x(), 256).attention(32, 24).unwrap();
        assert_eq!(kernel.name(), "attention_matrix_d32");
        assert_eq!(
            (
                launch.launch.grid,
                launch.launch.block,
                launch.heads_per_block
            ),
            ([24, 256, 1], [256, 1, 1], None)
        );
        assert!(kernel.adds_qkv_bias());
        let portable = PlanOptions {
            matrix_attention: false,
            ..PlanOptions::default()
        };
        let (kernel, _) = PassPlan::new(sm90(), &portable, 1)
            .attention(32, 24)
            .unwrap();
        assert!(!kernel.uses_tensor_cores());
        let (kernel, _) = PassPlan::new(mi300x(), &portable, 1)
            .attention(64, 12)
            .unwrap();
        assert_eq!(kernel.name(), "attention_d64");
        assert!(plan(sm90(), 1).attention(48, 24).is_none());
    }

    #[test]
    fn the_plan_names_its_choices() {
        assert_eq!(
            plan(sm90(), 1).to_string(),
            "batch 1: programmatic launch; dense layers: dense_rows up to 4 rows, then dense_mma \
             where a member takes the shape, else the library GEMM"
        );
        assert_eq!(
            plan(amd(), 1).to_string(),
            "batch 1: plain launches; dense layers: dense_rows up to 4 rows, then the library GEMM"
        );
    }
}
