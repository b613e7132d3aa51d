//! One typed function per kernel of `hip/`: the only place that names a kernel by its entry point
//! and turns Rust values into kernel arguments. Each launcher's parameters carry the names and
//! types of the kernel's own (a test parses the kernel sources and compares them), so a call that
//! swaps two arguments of one type by name, or passes a count where a pointer belongs, does not
//! compile or does not pass that test. Kernels of one body instantiated several times (row
//! widths, head depths) form a family: one launcher that takes which member to run. Every
//! launcher is `unsafe`: what a kernel reads and writes is beyond Rust's checks, so the caller
//! keeps the [device-memory contract](crate::gpu#the-device-memory-contract).

pub use super::layer_norm::LayerNormWarp;
use crate::gpu::{DevicePtr, GpuDevice, GpuResult, KernelArg, Launch};

/// How a kernel parameter travels: its C type's kind in `hip/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// A pointer (`T*`).
    Ptr,
    /// `int`.
    I32,
    /// `long` (64 bits on the platforms the kernels are built for).
    I64,
    /// `float`.
    F32,
}

/// A Rust value a launcher passes to a kernel.
pub trait KernelParam: Copy {
    const KIND: ArgKind;
    fn arg(self) -> KernelArg;
}

impl KernelParam for DevicePtr {
    const KIND: ArgKind = ArgKind::Ptr;
    fn arg(self) -> KernelArg {
        KernelArg::Ptr(Some(self))
    }
}

/// A pointer the kernel accepts as null (an optional bias, skip connection or input).
impl KernelParam for Option<DevicePtr> {
    const KIND: ArgKind = ArgKind::Ptr;
    fn arg(self) -> KernelArg {
        KernelArg::Ptr(self)
    }
}

impl KernelParam for i32 {
    const KIND: ArgKind = ArgKind::I32;
    fn arg(self) -> KernelArg {
        KernelArg::I32(self)
    }
}

impl KernelParam for i64 {
    const KIND: ArgKind = ArgKind::I64;
    fn arg(self) -> KernelArg {
        KernelArg::I64(self)
    }
}

impl KernelParam for f32 {
    const KIND: ArgKind = ArgKind::F32;
    fn arg(self) -> KernelArg {
        KernelArg::F32(self)
    }
}

/// A kernel entry point and its parameters (name and kind), as its launcher passes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelSignature {
    pub name: &'static str,
    pub params: &'static [(&'static str, ArgKind)],
}

/// The entry points of one launcher (one kernel, or a family's members) and their parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelFamily {
    pub names: &'static [&'static str],
    pub params: &'static [(&'static str, ArgKind)],
}

/// Declares launchers: `name(params);` for one kernel, `name [Family: Member = entry, …]
/// (params);` for a family listed here (an enum `Family` of its members and a launcher taking
/// one), `name [Family] (params);` for a family made elsewhere (a type with `name(self)` and
/// `NAMES`, every member's entry point). The list given first collects every declared entry
/// point's signature.
macro_rules! launchers {
    ($signatures:ident; $(
        $(#[$doc:meta])*
        $launcher:ident $([$family:ident $(: $($member:ident = $entry:ident),+ $(,)?)?])?
            ($($param:ident: $ty:ty),* $(,)?);
    )*) => {
        $(launchers!(@launcher $(#[$doc])* $launcher [$($family $(: $($member = $entry),+)?)?]
            ($($param: $ty),*));)*

        /// Every entry point declared here, by launcher, with its parameters.
        pub const $signatures: &[KernelFamily] = &[$(
            launchers!(@signatures $launcher [$($family)?] ($($param: $ty),*))
        ),*];
    };
    (@launcher $(#[$doc:meta])* $launcher:ident [] ($($param:ident: $ty:ty),*)) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The [device-memory contract](crate::gpu#the-device-memory-contract) for every
        /// pointer, with the sizes the kernel derives from the other arguments and `launch`.
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $launcher(
            device: &dyn GpuDevice,
            launch: Launch,
            $($param: $ty),*
        ) -> GpuResult<()> {
            let args = [$(KernelParam::arg($param)),*];
            // SAFETY: the arguments match the kernel's parameters (a test compares them with
            // the sources); the pointers are the caller's promise.
            unsafe { device.launch(stringify!($launcher), launch, &args) }
        }
    };
    (@launcher $(#[$doc:meta])* $launcher:ident [$family:ident: $($member:ident = $entry:ident),+]
        ($($param:ident: $ty:ty),*)) => {
        /// The members of a kernel family (one body, instantiated per member); see the launcher.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $family {
            $($member),+
        }

        impl $family {
            /// Every member, in declaration order.
            pub const ALL: &[Self] = &[$(Self::$member),+];
            /// Every member's entry point, in declaration order.
            pub const NAMES: &[&str] = &[$(stringify!($entry)),+];

            /// The member's entry point in `hip/`.
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$member => stringify!($entry)),+
                }
            }
        }

        launchers!(@launcher $(#[$doc])* $launcher [$family] ($($param: $ty),*));
    };
    (@launcher $(#[$doc:meta])* $launcher:ident [$family:ident] ($($param:ident: $ty:ty),*)) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The [device-memory contract](crate::gpu#the-device-memory-contract) for every
        /// pointer, with the sizes the kernel derives from the other arguments and `launch`.
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $launcher(
            device: &dyn GpuDevice,
            kernel: $family,
            launch: Launch,
            $($param: $ty),*
        ) -> GpuResult<()> {
            let args = [$(KernelParam::arg($param)),*];
            // SAFETY: the arguments match the member's parameters (a test compares them with
            // the sources); the pointers are the caller's promise.
            unsafe { device.launch(kernel.name(), launch, &args) }
        }
    };
    (@signatures $launcher:ident [] ($($param:ident: $ty:ty),*)) => {
        KernelFamily {
            names: &[stringify!($launcher)],
            params: &[$((stringify!($param), <$ty as KernelParam>::KIND)),*],
        }
    };
    (@signatures $launcher:ident [$family:ident] ($($param:ident: $ty:ty),*)) => {
        KernelFamily {
            names: $family::NAMES,
            params: &[$((stringify!($param), <$ty as KernelParam>::KIND)),*],
        }
    };
}

launchers! { SHARED;
    /// The embedding's input tokens: each square's 112 input planes, then `extra_width` values
    /// of `extra` (none when null).
    expand_tokens(
        masks: DevicePtr,
        values: DevicePtr,
        extra: Option<DevicePtr>,
        extra_width: i32,
        extra_batch_stride: i32,
        tokens: DevicePtr,
        batch: i32,
    );
    /// PE_DENSE's 12 piece planes per square, the preprocessing layer's input.
    pe_dense_input(masks: DevicePtr, values: DevicePtr, out: DevicePtr, batch: i32);
    /// `x = act(x + bias)` over `rows × cols`.
    bias_activation(x: DevicePtr, bias: Option<DevicePtr>, rows: i64, cols: i32, act: i32);
    /// A dense layer of at most `DENSE_ROWS_MAX` rows, `splits` warps per output.
    dense_rows(
        x: DevicePtr,
        ldx: i32,
        w: DevicePtr,
        bias: Option<DevicePtr>,
        y: DevicePtr,
        ldy: i32,
        rows: i32,
        n: i32,
        k: i32,
        act: i32,
        splits: i32,
    );
    /// The input gating: `x = x · mult + add` per square and channel.
    input_gating(x: DevicePtr, mult: DevicePtr, add: DevicePtr, rows: i64, cols: i32);
    /// `out = LN(act(input + bias)·alpha + skip)`, one block per row (any width, any activation).
    layer_norm(
        out: DevicePtr,
        input: DevicePtr,
        bias: Option<DevicePtr>,
        act: i32,
        alpha: f32,
        skip: Option<DevicePtr>,
        gamma: DevicePtr,
        beta: DevicePtr,
        eps: f32,
        cols: i32,
    );
    /// `out = LN((input + bias)·alpha + skip)`, one warp per row held in registers: the member
    /// (made from one list of row widths, `layer_norm.rs`) is the row's chunks of 8 values per
    /// lane, the activation, and whether gamma and beta load with the row (for grids of at most
    /// a block per SM; see `layer_norm_warp_kernel`).
    layer_norm_warp [LayerNormWarp](
        out: DevicePtr,
        input: DevicePtr,
        bias: Option<DevicePtr>,
        alpha: f32,
        skip: Option<DevicePtr>,
        gamma: DevicePtr,
        beta: DevicePtr,
        eps: f32,
        rows: i32,
        cols: i32,
    );
    /// Attention of every head over its position's 64 tokens (portable: one block per head and
    /// position), adding the QKV bias where given (what a BLAS GEMM left out) and an optional
    /// smolgen bias; the member is the head depth.
    attention [PortableAttention: D16 = attention_d16, D32 = attention_d32, D64 = attention_d64](
        qkv: DevicePtr,
        qkv_bias: Option<DevicePtr>,
        bias: Option<DevicePtr>,
        ctx: DevicePtr,
        heads: i32,
    );
    /// The naive attention `attnbench` compares with (one thread per query, 64 per block, one
    /// block per head and position); the member is the head depth.
    attention_naive [NaiveAttention:
        D16 = attention_naive_d16,
        D32 = attention_naive_d32,
        D64 = attention_naive_d64,
    ](qkv: DevicePtr, bias: Option<DevicePtr>, ctx: DevicePtr, heads: i32);
    /// The unfused attention's softmax, in place over rows of 64 scores, adding the smolgen
    /// bias where given (32 threads per row).
    softmax_rows64(scores: DevicePtr, bias: Option<DevicePtr>, rows: i64);
    /// The attention policy's logits into lc0's 1858 moves (promotions from `ppo`).
    policy_finish(
        logits: DevicePtr,
        keys: DevicePtr,
        key_stride: i32,
        ppo: DevicePtr,
        dp: i32,
        map: DevicePtr,
        out: DevicePtr,
    );
    /// The value head's output to Q, D and M (M = 0 without a moves-left head).
    value_finish(value: DevicePtr, wdl: i32, mlh: Option<DevicePtr>, out: DevicePtr, batch: i32);
    /// The 3×3 neighbourhood of every square (im2col) for a convolution as a GEMM.
    conv_gather3x3(x: DevicePtr, channels: i32, out: DevicePtr, batch: i32);
    /// `x = act(y + bias + x)`: a residual block's second convolution and skip.
    bias_residual_act(y: DevicePtr, bias: DevicePtr, x: DevicePtr, rows: i64, cols: i32, act: i32);
    /// A residual block's second convolution with squeeze-and-excitation and the skip.
    se_residual(
        y: DevicePtr,
        bias: DevicePtr,
        x: DevicePtr,
        channels: i32,
        w1: DevicePtr,
        b1: DevicePtr,
        se: i32,
        w2: DevicePtr,
        b2: DevicePtr,
        act: i32,
    );
    /// The input convolution's input as Winograd points (`[tiles][points][planes]`, tile-major)
    /// straight from the uploaded planes (`planes` masks, u64, and values, f32, a position); the
    /// member is the output tile, F(2×2, 3×3) or F(4×4, 3×3).
    winograd_planes [WinogradPlanes: F2 = winograd_planes_f2, F4 = winograd_planes_f4](
        masks: DevicePtr,
        values: DevicePtr,
        planes: i32,
        v: DevicePtr,
        batch: i32,
    );
    /// A 3×3 convolution's Winograd products to its fp16 output: bias and activation, written
    /// to `out` and transformed from it for the next convolution where given; each board's
    /// channel means into the first half of its squeeze-excitation gates (`[batch][2C]` f32)
    /// where given.
    winograd_output [WinogradOutput: F2 = winograd_output_f2, F4 = winograd_output_f4](
        m: DevicePtr,
        channels: i32,
        bias: DevicePtr,
        act: i32,
        out: DevicePtr,
        v: Option<DevicePtr>,
        means: Option<DevicePtr>,
    );
    /// A 3×3 convolution's Winograd products into the f32 residual stream `x`: bias, the
    /// residual where given (`x` itself, updated in place), the activation; rounded into
    /// `x_half` (fp16) where given, and transformed for the next convolution where given.
    winograd_stream_output [WinogradStreamOutput: F2 = winograd_stream_output_f2, F4 = winograd_stream_output_f4](
        m: DevicePtr,
        channels: i32,
        bias: DevicePtr,
        residual: Option<DevicePtr>,
        act: i32,
        x: DevicePtr,
        x_half: Option<DevicePtr>,
        v: Option<DevicePtr>,
    );
    /// Squeeze-excitation's gates (`[batch][2C]` f32, in place) from the channel means that
    /// `winograd_output` left in them, `per_block` positions a block.
    se_gates_of_means(
        gates: DevicePtr,
        channels: i32,
        w1: DevicePtr,
        b1: DevicePtr,
        se: i32,
        w2: DevicePtr,
        b2: DevicePtr,
        act: i32,
        per_block: i32,
        batch: i32,
    );
    /// Squeeze-excitation's gates and the skip applied to the f32 residual stream, rounded into
    /// `x_half` where given, transformed for the next convolution where given.
    winograd_se_apply [WinogradSeApply: F2 = winograd_se_apply_f2, F4 = winograd_se_apply_f4](
        y: DevicePtr,
        gates: DevicePtr,
        channels: i32,
        x: DevicePtr,
        act: i32,
        x_half: Option<DevicePtr>,
        v: Option<DevicePtr>,
    );
    /// The end of a narrow tower's block with squeeze-excitation, one block per board: the
    /// second convolution's output transform, the gates, their application with the skip to
    /// the f32 stream `x` (rounded into `x_half` where given), and the next convolution's points
    /// where given.
    winograd_se_board [WinogradSeBoard: F2 = winograd_se_board_f2, F4 = winograd_se_board_f4](
        m: DevicePtr,
        channels: i32,
        bias: DevicePtr,
        w1: DevicePtr,
        b1: DevicePtr,
        se: i32,
        w2: DevicePtr,
        b2: DevicePtr,
        act: i32,
        x: DevicePtr,
        x_half: Option<DevicePtr>,
        v: Option<DevicePtr>,
    );
    /// A convolutional policy head's outputs to the 1858 logits through `map`.
    policy_gather(
        input: DevicePtr,
        per_position: i32,
        map: DevicePtr,
        count: i32,
        out: DevicePtr,
        batch: i32,
    );
    /// The first `batch` positions' Q, D, M and their picked logits (`ends`: u32 a position,
    /// `indices`: u16 a pick) out of a pass's `outputs` over `size` positions, into one array.
    gather_picked(
        outputs: DevicePtr,
        size: i32,
        batch: i32,
        ends: DevicePtr,
        indices: DevicePtr,
        total: i32,
        out: DevicePtr,
    );
}

launchers! { CUDA_ONLY;
    /// The attention on NVIDIA tensor cores (sm_80 and newer): the inputs and outputs of
    /// [`attention`] with the QKV bias already added (by the GEMM), `heads_per_block` heads per
    /// block; the member is the head depth.
    attention_mma [TensorCoreAttention:
        D16 = attention_mma_d16,
        D32 = attention_mma_d32,
        D64 = attention_mma_d64,
    ](
        qkv: DevicePtr,
        bias: Option<DevicePtr>,
        ctx: DevicePtr,
        heads: i32,
        heads_per_block: i32,
    );
    /// `normed = LN(alpha·(x + x_bias) + skip)` and `y = act(normed·Wᵀ + bias)` in one kernel
    /// on NVIDIA tensor cores (sm_80 and newer), for small batches: blocks of 16 rows and 32
    /// outputs (see `norm_dense_launch`); `normed` must not alias `x` or `skip`. The member is
    /// the input width k.
    layer_norm_dense_mma [NormDense:
        K256 = layer_norm_dense_mma_k256,
        K512 = layer_norm_dense_mma_k512,
        K768 = layer_norm_dense_mma_k768,
        K1024 = layer_norm_dense_mma_k1024,
    ](
        normed: DevicePtr,
        x: DevicePtr,
        x_bias: Option<DevicePtr>,
        alpha: f32,
        skip: DevicePtr,
        gamma: DevicePtr,
        beta: DevicePtr,
        eps: f32,
        w: DevicePtr,
        bias: Option<DevicePtr>,
        act: i32,
        y: DevicePtr,
        n: i32,
    );
    /// `y = act(x·Wᵀ + bias)` on NVIDIA tensor cores (sm_80 and newer) for a few rows (a pass's
    /// per-square layers at batch 1): blocks of 16 rows and 32 outputs, the weights loaded before
    /// the kernel waits for its predecessor (see `dense_mma_launch`). The member is the input
    /// width k and the 16-row groups a block takes (one unless named).
    dense_mma [DenseMma:
        K256 = dense_mma_k256,
        K512 = dense_mma_k512,
        K768 = dense_mma_k768,
        K1024 = dense_mma_k1024,
        K1536 = dense_mma_k1536,
        K256G4 = dense_mma_k256_g4,
        K768G4 = dense_mma_k768_g4,
        K1024G2 = dense_mma_k1024_g2,
    ](
        x: DevicePtr,
        w: DevicePtr,
        bias: Option<DevicePtr>,
        act: i32,
        y: DevicePtr,
        m: i32,
        n: i32,
    );
}

launchers! { AMD_MATRIX;
    /// The attention on AMD matrix cores (WMMA on gfx11/gfx12, MFMA on gfx90a/gfx94x/gfx950,
    /// and the emulator): the arguments and result of [`attention`], one block of four waves
    /// per head and position; the member is the head depth.
    attention_matrix [MatrixAttention:
        D16 = attention_matrix_d16,
        D32 = attention_matrix_d32,
        D64 = attention_matrix_d64,
    ](
        qkv: DevicePtr,
        qkv_bias: Option<DevicePtr>,
        bias: Option<DevicePtr>,
        ctx: DevicePtr,
        heads: i32,
    );
    /// One matrix instruction of `form` (1: WMMA gfx11, 2: WMMA gfx12, 3: MFMA 16×16×16) on
    /// register contents the caller lays out (`input`: each lane's A, B and C elements; `output`:
    /// its D elements), one wave per block; NaN where the target lacks the form.
    matrix_instruction_check(input: DevicePtr, output: DevicePtr, form: i32);
}

/// Every declared entry point of `signatures`.
pub fn entry_points(signatures: &'static [KernelFamily]) -> impl Iterator<Item = KernelSignature> {
    signatures.iter().flat_map(|family| {
        family.names.iter().map(|&name| KernelSignature {
            name,
            params: family.params,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::kernels::expand::expanded_source;

    /// The declaration after `KERNEL void ` without its `__launch_bounds__(…) ` if it has one.
    fn without_launch_bounds(declaration: &str) -> &str {
        match declaration.strip_prefix("__launch_bounds__(") {
            Some(rest) => rest.split_once(") ").expect("closed launch bounds").1,
            None => declaration,
        }
    }

    /// Every `KERNEL void [__launch_bounds__(…)] name(params)` of the kernel sources: its name
    /// and each parameter's name and kind, read from the C declaration.
    fn declared_kernels(source: &str) -> Vec<(String, Vec<(String, ArgKind)>)> {
        source
            .split("KERNEL void ")
            .skip(1)
            .map(|rest| {
                let rest = without_launch_bounds(rest);
                let (name, rest) = rest.split_once('(').expect("a parameter list");
                let params = rest.split_once(')').expect("a closed parameter list").0;
                let params = params.split(',').map(|p| c_parameter(p.trim())).collect();
                (name.trim().to_owned(), params)
            })
            .collect()
    }

    /// A C parameter's name (its last word) and kind (a pointer, or its scalar type).
    fn c_parameter(declaration: &str) -> (String, ArgKind) {
        let split = declaration
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .expect("a type before the name");
        let (ty, name) = declaration.split_at(split + 1);
        let kind = if ty.contains('*') {
            ArgKind::Ptr
        } else {
            match ty.trim() {
                "int" => ArgKind::I32,
                "long" => ArgKind::I64,
                "float" => ArgKind::F32,
                other => panic!("no kernel argument kind for C type {other:?} ({declaration})"),
            }
        };
        (name.to_owned(), kind)
    }

    #[test]
    fn c_parameters_are_read_by_kind() {
        let parsed = declared_kernels(concat!(
            "KERNEL void k(const __half* __restrict__ x, long rows, int cols, float eps) {}\n",
            "KERNEL void __launch_bounds__(THREADS) b(int* y) {}",
        ));
        let expected = vec![
            ("x".to_owned(), ArgKind::Ptr),
            ("rows".to_owned(), ArgKind::I64),
            ("cols".to_owned(), ArgKind::I32),
            ("eps".to_owned(), ArgKind::F32),
        ];
        let bounded = vec![("y".to_owned(), ArgKind::Ptr)];
        assert_eq!(
            parsed,
            vec![("k".to_owned(), expected), ("b".to_owned(), bounded)]
        );
    }

    #[test]
    fn every_launcher_matches_its_kernel_declaration() {
        let declared = declared_kernels(&expanded_source());
        let launchers: Vec<_> = entry_points(SHARED)
            .chain(entry_points(CUDA_ONLY))
            .chain(entry_points(AMD_MATRIX))
            .collect();
        assert_eq!(
            declared.len(),
            launchers.len(),
            "kernels without a launcher or the reverse"
        );
        for signature in launchers {
            let (_, params) = declared
                .iter()
                .find(|(name, _)| name == signature.name)
                .unwrap_or_else(|| panic!("{} is not declared in hip/", signature.name));
            let expected: Vec<_> = signature
                .params
                .iter()
                .map(|(name, kind)| (name.to_string(), *kind))
                .collect();
            assert_eq!(*params, expected, "{}", signature.name);
        }
    }

    /// The sections of `src` that open with `opening` at the start of a line, up to the next
    /// `#endif` at the start of a line.
    fn sections(src: &str, opening: &str) -> Vec<std::ops::Range<usize>> {
        src.match_indices(&format!("\n{opening}"))
            .map(|(from, _)| from..from + 1 + src[from + 1..].find("\n#endif").unwrap())
            .collect()
    }

    #[test]
    fn vendor_kernels_are_declared_under_their_conditions() {
        let src = expanded_source();
        let cuda = sections(&src, "#if defined(GPU_CUDA) &&");
        let amd = sections(&src, "#if defined(GPU_HIP) && defined(LC0RS_MATRIX_FORM)");
        assert!(!cuda.is_empty(), "the CUDA-only sections");
        assert_eq!(amd.len(), 1, "the AMD matrix-core section");
        let within =
            |at: usize, list: &[std::ops::Range<usize>]| list.iter().any(|s| s.contains(&at));
        let declared_at = |name: &str| {
            src.match_indices("KERNEL void ")
                .find(|(at, m)| {
                    let rest = &src[at + m.len()..];
                    without_launch_bounds(rest).starts_with(&format!("{name}("))
                })
                .map(|(at, _)| at)
                .unwrap_or_else(|| panic!("{name} is not declared"))
        };
        for (list, in_cuda, in_amd) in [
            (SHARED, false, false),
            (CUDA_ONLY, true, false),
            (AMD_MATRIX, false, true),
        ] {
            for signature in entry_points(list) {
                let at = declared_at(signature.name);
                assert_eq!(within(at, &cuda), in_cuda, "{}", signature.name);
                assert_eq!(within(at, &amd), in_amd, "{}", signature.name);
            }
        }
    }

    #[test]
    fn families_name_their_members_entry_points() {
        assert_eq!(PortableAttention::D32.name(), "attention_d32");
        assert_eq!(TensorCoreAttention::D64.name(), "attention_mma_d64");
        assert_eq!(MatrixAttention::D16.name(), "attention_matrix_d16");
        assert_eq!(
            PortableAttention::NAMES,
            ["attention_d16", "attention_d32", "attention_d64"]
        );
        let layer_norm = SHARED
            .iter()
            .find(|family| family.names.contains(&"layer_norm_warp_c1"))
            .expect("the warp LayerNorm's launcher");
        assert_eq!(layer_norm.names, LayerNormWarp::NAMES);
    }
}
