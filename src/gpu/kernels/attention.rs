//! The attention kernels: which family and member runs a head depth, and its launch shape.

use super::Launch;
use super::launchers::{self, MatrixAttention, PortableAttention, TensorCoreAttention};
use crate::gpu::{DevicePtr, GpuDevice, GpuError, GpuResult};

/// Threads per block of the portable attention kernels (`ATTENTION_THREADS` in hip/attention.hip).
pub const ATTENTION_THREADS: u32 = 128;
/// Threads per block of the tensor-core attention kernels (`MMA_ATTENTION_THREADS`).
pub const MMA_ATTENTION_THREADS: u32 = 128;

/// Waves per block of the matrix-core attention kernels (`MATRIX_ATTENTION_THREADS` in
/// hip/matrix.hip is 4 · WARP_SIZE).
pub const MATRIX_ATTENTION_WAVES: u32 = 4;

/// The most heads one block of a tensor-core attention kernel takes (in turn, with the next
/// head's copies overlapping this one's compute).
pub const MMA_MAX_HEADS_PER_BLOCK: usize = 4;
/// How an attention kernel runs for `batch` positions of `heads` heads on a GPU with
/// `multiprocessors` SMs or CUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionLaunch {
    pub launch: Launch,
    /// The tensor-core kernels' last argument; `None` for the portable ones (a head per block).
    pub heads_per_block: Option<i32>,
}

/// What an attention kernel reads and writes: `qkv` (`batch·64 × 3·heads·depth`), the QKV bias
/// where the kernel adds it (`3·heads·depth`; not the tensor-core kernels, whose QKV GEMM adds
/// it), the smolgen bias (`batch × heads × 64 × 64`) where the net has one, and `ctx`
/// (`batch·64 × heads·depth`).
#[derive(Debug, Clone, Copy)]
pub struct AttentionArgs {
    pub qkv: DevicePtr,
    pub qkv_bias: Option<DevicePtr>,
    pub bias: Option<DevicePtr>,
    pub ctx: DevicePtr,
    pub heads: i32,
}

/// Which implementation of the attention: portable, NVIDIA tensor cores (`mma.sync`), or AMD
/// matrix cores (WMMA, MFMA).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionFamily {
    Portable,
    TensorCores,
    MatrixCores,
}

/// An attention kernel: one per supported head depth and family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionKernel {
    Portable(PortableAttention),
    TensorCores(TensorCoreAttention),
    MatrixCores(MatrixAttention),
}

impl AttentionKernel {
    /// Launches the kernel as `how` says on `args`.
    ///
    /// # Safety
    /// `args` keep the device-memory contract (`crate::gpu`) for `how`'s batch: each pointer
    /// holds the elements [`AttentionArgs`] names.
    pub unsafe fn launch(
        self,
        device: &dyn GpuDevice,
        how: AttentionLaunch,
        args: AttentionArgs,
    ) -> GpuResult<()> {
        let AttentionArgs {
            qkv,
            qkv_bias,
            bias,
            ctx,
            heads,
        } = args;
        // SAFETY: the caller's promise, passed on unchanged.
        unsafe {
            match self {
                Self::Portable(k) => {
                    launchers::attention(device, k, how.launch, qkv, qkv_bias, bias, ctx, heads)
                }
                Self::TensorCores(_) if qkv_bias.is_some() => Err(GpuError::Unsupported(
                    "the tensor-core attention adds no QKV bias (its QKV GEMM does)".to_owned(),
                )),
                Self::TensorCores(k) => launchers::attention_mma(
                    device,
                    k,
                    how.launch,
                    qkv,
                    bias,
                    ctx,
                    heads,
                    how.heads_per_block.unwrap_or(1),
                ),
                Self::MatrixCores(k) => launchers::attention_matrix(
                    device, k, how.launch, qkv, qkv_bias, bias, ctx, heads,
                ),
            }
        }
    }

    /// The kernel of `family` for a head depth, if one exists.
    pub fn for_depth(depth: usize, family: AttentionFamily) -> Option<Self> {
        use AttentionFamily::*;
        Some(match (depth, family) {
            (16, Portable) => Self::Portable(PortableAttention::D16),
            (32, Portable) => Self::Portable(PortableAttention::D32),
            (64, Portable) => Self::Portable(PortableAttention::D64),
            (16, TensorCores) => Self::TensorCores(TensorCoreAttention::D16),
            (32, TensorCores) => Self::TensorCores(TensorCoreAttention::D32),
            (64, TensorCores) => Self::TensorCores(TensorCoreAttention::D64),
            (16, MatrixCores) => Self::MatrixCores(MatrixAttention::D16),
            (32, MatrixCores) => Self::MatrixCores(MatrixAttention::D32),
            (64, MatrixCores) => Self::MatrixCores(MatrixAttention::D64),
            _ => return None,
        })
    }

    /// The kernel's entry point in `hip/`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Portable(kernel) => kernel.name(),
            Self::TensorCores(kernel) => kernel.name(),
            Self::MatrixCores(kernel) => kernel.name(),
        }
    }

    /// Whether this is the NVIDIA tensor-core kernel.
    pub fn uses_tensor_cores(self) -> bool {
        matches!(self, Self::TensorCores(_))
    }

    /// Whether the kernel adds the QKV bias itself (so the QKV GEMM may run without it).
    pub fn adds_qkv_bias(self) -> bool {
        !self.uses_tensor_cores()
    }

    /// The block size the kernel is written for on a GPU of `warp_size` lanes a wave.
    pub fn threads(self, warp_size: usize) -> u32 {
        match self {
            Self::Portable(_) => ATTENTION_THREADS,
            Self::TensorCores(_) => MMA_ATTENTION_THREADS,
            Self::MatrixCores(_) => MATRIX_ATTENTION_WAVES * warp_size as u32,
        }
    }
}

/// One block per (head, position) for the portable kernels. The tensor-core kernels take several
/// heads per block where that still gives every multiprocessor a block (measured on the H200:
/// 4 heads per block is faster from batch 64 up, 1 head per block at batch 1: 7.3 → 3.0 µs).
pub fn attention_launch(
    kernel: AttentionKernel,
    heads: usize,
    batch: usize,
    (multiprocessors, warp_size): (usize, usize),
) -> AttentionLaunch {
    let grouped = batch * heads.div_ceil(MMA_MAX_HEADS_PER_BLOCK) >= multiprocessors;
    let heads_per_block = match (kernel.uses_tensor_cores(), grouped) {
        (false, _) => None,
        (true, true) => Some(MMA_MAX_HEADS_PER_BLOCK),
        (true, false) => Some(1),
    };
    AttentionLaunch {
        launch: Launch {
            grid: [
                heads.div_ceil(heads_per_block.unwrap_or(1)) as u32,
                batch as u32,
                1,
            ],
            block: [kernel.threads(warp_size), 1, 1],
            shared_bytes: 0,
        },
        heads_per_block: heads_per_block.map(|h| h as i32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::kernels::{
        cuda_only_kernel_names, matrix_kernel_names, shared_kernel_names, source,
    };

    fn kernel(depth: usize, tensor_cores: bool) -> AttentionKernel {
        let family = if tensor_cores {
            AttentionFamily::TensorCores
        } else {
            AttentionFamily::Portable
        };
        AttentionKernel::for_depth(depth, family).unwrap()
    }

    #[test]
    fn attention_kernels_exist_for_the_depths_the_source_has() {
        use AttentionFamily::*;
        for depth in [16, 32, 64] {
            for family in [Portable, TensorCores, MatrixCores] {
                let name = AttentionKernel::for_depth(depth, family).unwrap().name();
                let listed = shared_kernel_names()
                    .chain(cuda_only_kernel_names())
                    .chain(matrix_kernel_names())
                    .any(|k| k == name);
                assert!(listed, "{name} is not a listed kernel");
                assert!(
                    source().contains(&format!(" {name}(")),
                    "{name} is not in the source"
                );
            }
        }
        assert_eq!(AttentionKernel::for_depth(48, Portable), None);
    }

    #[test]
    fn attention_threads_match_the_kernel() {
        assert!(source().contains(&format!("#define ATTENTION_THREADS {ATTENTION_THREADS}\n")));
        assert!(source().contains(&format!(
            "#define MMA_ATTENTION_THREADS {MMA_ATTENTION_THREADS}\n"
        )));
        // T82 on an H200 (132 SMs): 4 heads per block from 22 positions (132 blocks), 1 below.
        let big = attention_launch(kernel(32, true), 24, 22, (132, 32));
        assert_eq!(
            (big.launch.grid, big.heads_per_block),
            ([6, 22, 1], Some(4))
        );
        assert_eq!(big.launch.block, [MMA_ATTENTION_THREADS, 1, 1]);
        let small = attention_launch(kernel(32, true), 24, 21, (132, 32));
        assert_eq!(
            (small.launch.grid, small.heads_per_block),
            ([24, 21, 1], Some(1))
        );
        // A head count that does not divide: the last block takes the rest.
        assert_eq!(
            attention_launch(kernel(16, true), 6, 4096, (2, 32))
                .launch
                .grid,
            [2, 4096, 1]
        );
        let portable = attention_launch(kernel(32, false), 24, 1024, (132, 32));
        assert_eq!(
            (portable.launch.grid, portable.heads_per_block),
            ([24, 1024, 1], None)
        );
        assert_eq!(portable.launch.block, [ATTENTION_THREADS, 1, 1]);
    }
}
