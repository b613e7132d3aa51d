//! The kernel sources in `hip/` and what the Rust side needs to call them: which kernel and
//! launch shape fits a layer, and (in [`launchers`]) one typed launcher per kernel.

mod attention;
#[cfg(test)]
mod expand;
pub mod launchers;
mod layer_norm;
mod matrix;
mod winograd;

pub use self::attention::{
    ATTENTION_THREADS, AttentionArgs, AttentionFamily, AttentionKernel, AttentionLaunch,
    MATRIX_ATTENTION_WAVES, MMA_ATTENTION_THREADS, MMA_MAX_HEADS_PER_BLOCK, attention_launch,
};
pub use self::layer_norm::{WARP_NORM_MAX_COLS, layer_norm_warp_kernel};
pub use self::matrix::{MatrixForm, amd_matrix_form, matrix_kernel_names};
pub use self::winograd::{WINOGRAD_CHANNELS, WinogradTile};

use self::launchers::{DenseMma, NormDense};
use super::Launch;
use crate::weights::format::Activation;

/// The kernel files of `hip/` by job, in the order they form one translation unit after the
/// prelude: the one list of them (`.ci/run` reads it from `lc0rs compile-kernels --list-files`).
pub const KERNEL_FILES: [(&str, &str); 9] = [
    ("kernels.hip", include_str!("../../../hip/kernels.hip")),
    ("norms.hip", include_str!("../../../hip/norms.hip")),
    ("attention.hip", include_str!("../../../hip/attention.hip")),
    (
        "norm_dense.hip",
        include_str!("../../../hip/norm_dense.hip"),
    ),
    (
        "attention_baselines.hip",
        include_str!("../../../hip/attention_baselines.hip"),
    ),
    ("heads.hip", include_str!("../../../hip/heads.hip")),
    ("conv.hip", include_str!("../../../hip/conv.hip")),
    ("winograd.hip", include_str!("../../../hip/winograd.hip")),
    ("matrix.hip", include_str!("../../../hip/matrix.hip")),
];

/// The portability prelude followed by every kernel file, as one translation unit.
pub fn source() -> String {
    source_with("")
}

/// The prelude, then `shim` (the emulator's matrix instructions), then every kernel file.
pub fn source_with(shim: &str) -> String {
    [include_str!("../../../hip/prelude.h"), shim]
        .into_iter()
        .chain(KERNEL_FILES.iter().map(|(_, text)| *text))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The kernel entry points every vendor compiles from the files of `hip/`.
pub fn shared_kernel_names() -> impl Iterator<Item = &'static str> {
    launchers::entry_points(launchers::SHARED).map(|k| k.name)
}

/// NVIDIA-only fast paths (tensor cores), compiled under `GPU_CUDA` from
/// [`CUDA_TENSOR_CORE_MIN_ARCH`].
pub fn cuda_only_kernel_names() -> impl Iterator<Item = &'static str> {
    launchers::entry_points(launchers::CUDA_ONLY).map(|k| k.name)
}

/// The first compute capability (×10) with the instructions of the tensor-core kernels
/// (`mma.sync` m16n8k16 in fp16 with fp32 accumulation, `ldmatrix`, `cp.async`): sm_80.
pub const CUDA_TENSOR_CORE_MIN_ARCH: u32 = 80;

/// The kernels a CUDA module for compute capability `arch` (e.g. 75, 90) holds: the shared
/// ones, plus the tensor-core ones from sm_80 (older GPUs, e.g. a T4, use the portable
/// attention).
pub fn cuda_kernel_names(arch: u32) -> Vec<&'static str> {
    let tensor_cores = arch >= CUDA_TENSOR_CORE_MIN_ARCH;
    shared_kernel_names()
        .chain(cuda_only_kernel_names().filter(|_| tensor_cores))
        .collect()
}

/// The most rows `dense_rows` takes (`DENSE_ROWS_MAX` in hip/kernels.hip): dense layers with
/// at most this many rows (per-position layers at batch ≤ 4) run there instead of in a GEMM.
/// Measured on an H200, 2026-11-21, T82 at batch 1–8 (`f5d37bb`): from 5 rows cuBLASLt is as
/// fast or faster (docs/performance.md, "Decisions").
pub const DENSE_ROWS_MAX: usize = 4;

/// How many warps of `dense_rows` share one output of a `k`-wide layer: enough that each lane
/// loads one 16-byte chunk of the weight row (8 values per lane, `8·warp` per warp), at most 8,
/// a power of two (so that it divides the block's warps).
pub fn dense_rows_splits(k: usize, warp_size: usize) -> usize {
    k.div_ceil(8 * warp_size)
        .clamp(1, 8)
        .next_power_of_two()
        .min(8)
}

/// Threads per block of `se_residual` and `se_gates_of_means` (one or a few positions a block):
/// their loops are latency-bound (measured on the H200 for T78 at batch 1: 160 µs per block of
/// 256 threads), so a block takes as many threads as it may.
pub const SE_RESIDUAL_THREADS: u32 = 1024;

/// Positions a block of `se_gates_of_means` takes at most (`SE_POSITIONS` in hip/conv.hip):
/// each of its weights is read once for all of them.
pub const SE_POSITIONS: usize = 8;

/// Blocks `se_gates_of_means` spreads a batch over before it gives a block more than one
/// position: about a GPU's multiprocessors. A block's multiply-adds and shared-memory reads grow
/// with its positions, so 8 positions on 32 blocks (T78 at batch 256) took 25 µs on an H200
/// where one a block had taken 27.
pub const SE_GATES_BLOCKS: usize = 128;

/// The launch of `se_gates_of_means` over `batch` positions of `channels` with `se` hidden
/// units, and its positions a block: enough for `SE_GATES_BLOCKS` blocks, at most
/// `SE_POSITIONS` and what 48 KB of shared memory holds of their means and hidden units (f32),
/// at least one.
pub fn se_gates_launch(batch: usize, channels: usize, se: usize) -> (usize, Launch) {
    let floats = channels + se;
    let per_block = batch
        .div_ceil(SE_GATES_BLOCKS)
        .min(48 * 1024 / (floats * size_of::<f32>()))
        .clamp(1, SE_POSITIONS);
    let launch = Launch {
        grid: [batch.div_ceil(per_block) as u32, 1, 1],
        block: [SE_RESIDUAL_THREADS, 1, 1],
        shared_bytes: (per_block * floats * size_of::<f32>()) as u32,
    };
    (per_block, launch)
}

/// Rows and outputs of one block of `layer_norm_dense_mma` (`NORM_DENSE_ROWS`,
/// `NORM_DENSE_COLS` in hip/norm_dense.hip), and its threads.
pub const NORM_DENSE_ROWS: usize = 16;
pub const NORM_DENSE_COLS: usize = 32;
pub const NORM_DENSE_THREADS: u32 = 256;

/// The member of `layer_norm_dense_mma` and its launch for `m` rows, `n` outputs and `k`
/// inputs, or `None` where no member takes the shape (m and n multiples of the block, k one of
/// 256, 512, 768, 1024). Shared memory: the block's normalised rows as fp16 with a 32-value pad
/// per row, or the 8 warps' fp32 partial tiles, whichever is larger, then gamma, beta and the
/// input's bias (k halves each).
pub fn norm_dense_launch(m: usize, n: usize, k: usize) -> Option<(NormDense, Launch)> {
    let kernel = match k {
        256 => NormDense::K256,
        512 => NormDense::K512,
        768 => NormDense::K768,
        1024 => NormDense::K1024,
        _ => return None,
    };
    let fits = m.is_multiple_of(NORM_DENSE_ROWS) && n.is_multiple_of(NORM_DENSE_COLS) && m > 0;
    let rows = NORM_DENSE_ROWS * (k + 32) * 2;
    let partials = 8 * NORM_DENSE_ROWS * (NORM_DENSE_COLS + 4) * 4;
    let params = 3 * k * 2;
    fits.then_some(kernel).zip(Some(Launch {
        grid: [
            (n / NORM_DENSE_COLS) as u32,
            (m / NORM_DENSE_ROWS) as u32,
            1,
        ],
        block: [NORM_DENSE_THREADS, 1, 1],
        shared_bytes: (rows.max(partials) + params) as u32,
    }))
}

/// The narrowest layer whose `dense_mma` blocks take several 16-row groups where a member has
/// them: wide layers (QKV, smolgen's weight generation) then load each weight slice once per
/// block instead of once per group (at batch 1, by count of bytes, T82's QKV moves 10.5 MB
/// through L2 instead of 21; measured: +1.8 % for T82, +2.6 % for BT4 end to end).
pub const DENSE_MMA_GROUPED_MIN_N: usize = 2048;

/// The member of `dense_mma` and its launch for `m` rows, `n` outputs and `k` inputs, or `None`
/// where no member takes the shape (n a multiple of the block's 32 outputs; k one of 256, 512,
/// 768, 1024, 1536). Any m: the last row group of a block may be partial. Layers of at least
/// [`DENSE_MMA_GROUPED_MIN_N`] outputs take 4 row groups a block at k 256 and 768, 2 at 1024.
/// Its shared memory is static (the 8 warps' fp32 partial tiles).
pub fn dense_mma_launch(m: usize, n: usize, k: usize) -> Option<(DenseMma, Launch)> {
    let wide = n >= DENSE_MMA_GROUPED_MIN_N;
    let (kernel, groups) = match (k, wide) {
        (256, false) => (DenseMma::K256, 1),
        (256, true) => (DenseMma::K256G4, 4),
        (512, _) => (DenseMma::K512, 1),
        (768, false) => (DenseMma::K768, 1),
        (768, true) => (DenseMma::K768G4, 4),
        (1024, false) => (DenseMma::K1024, 1),
        (1024, true) => (DenseMma::K1024G2, 2),
        (1536, _) => (DenseMma::K1536, 1),
        _ => return None,
    };
    let row_blocks = m.div_ceil(NORM_DENSE_ROWS * groups);
    let fits = n.is_multiple_of(NORM_DENSE_COLS) && m > 0 && n > 0 && row_blocks <= 65_535;
    fits.then_some((
        kernel,
        Launch {
            grid: [(n / NORM_DENSE_COLS) as u32, row_blocks as u32, 1],
            block: [NORM_DENSE_THREADS, 1, 1],
            shared_bytes: 0,
        },
    ))
}

/// The activation code of `hip/prelude.h`.
pub fn activation_code(a: Activation) -> i32 {
    match a {
        Activation::Identity => 0,
        Activation::Relu => 1,
        Activation::Relu2 => 2,
        Activation::Mish => 3,
        Activation::Swish => 4,
        Activation::Selu => 5,
        Activation::Tanh => 6,
        Activation::Sigmoid => 7,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn norm_dense_block_matches_the_kernel() {
        for (name, value) in [
            ("NORM_DENSE_THREADS", NORM_DENSE_THREADS as usize),
            ("NORM_DENSE_ROWS", NORM_DENSE_ROWS),
            ("NORM_DENSE_COLS", NORM_DENSE_COLS),
            ("SE_POSITIONS", SE_POSITIONS),
            ("SE_THREADS", SE_RESIDUAL_THREADS as usize),
        ] {
            assert!(
                source().contains(&format!("#define {name} {value}\n")),
                "{name}"
            );
        }
    }

    /// T78's gates (512 channels, 32 hidden): a position a block up to 128 positions, then
    /// more a block (the last block the rest), at most 8; a tower too wide for them in 48 KB
    /// takes fewer, never none.
    #[test]
    fn se_gates_take_up_to_8_positions_a_block_within_48_kb() {
        assert_eq!(se_gates_launch(11, 512, 32).0, 1);
        assert_eq!(se_gates_launch(256, 512, 32).0, 2);
        let (per_block, launch) = se_gates_launch(1000, 512, 32);
        assert_eq!((per_block, launch.grid[0]), (8, 125));
        assert_eq!(launch.shared_bytes, 8 * (512 + 32) * 4);
        assert_eq!(se_gates_launch(4096, 2048, 256).0, 5);
        assert_eq!(se_gates_launch(3000, 20_000, 64).0, 1);
    }

    #[test]
    fn norm_dense_takes_whole_blocks_and_supported_widths() {
        let (kernel, t82_ffn1) = norm_dense_launch(64, 1024, 768).expect("T82's FFN1 at batch 1");
        assert_eq!(kernel.name(), "layer_norm_dense_mma_k768");
        assert_eq!(t82_ffn1.grid, [32, 4, 1]);
        // 16 rows of 768 + 32 halves (24,576 bytes) against 8·16·36 floats (18,432), then
        // gamma, beta and the input's bias (3 · 768 halves).
        assert_eq!(t82_ffn1.shared_bytes, 16 * 800 * 2 + 3 * 768 * 2);
        assert_eq!(
            norm_dense_launch(64, 64, 256).unwrap().1.shared_bytes,
            18_432 + 3 * 256 * 2
        );
        assert_eq!(norm_dense_launch(64, 1536, 512).unwrap().0, NormDense::K512);
        // BT4's FFN1 and the smolgen compression after its second LayerNorm.
        let (kernel, bt4_ffn1) = norm_dense_launch(64, 1536, 1024).expect("BT4's FFN1");
        assert_eq!(kernel, NormDense::K1024);
        assert_eq!(bt4_ffn1.grid, [48, 4, 1]);
        assert_eq!(bt4_ffn1.shared_bytes, 16 * 1056 * 2 + 3 * 1024 * 2);
        assert_eq!(norm_dense_launch(128, 32, 1024).unwrap().1.grid, [1, 8, 1]);
        for (m, n, k) in [
            (8, 1024, 768),
            (64, 1000, 768),
            (64, 1024, 640),
            (64, 1536, 1280),
        ] {
            assert!(norm_dense_launch(m, n, k).is_none(), "{m}x{n}x{k}");
        }
    }

    #[test]
    fn dense_mma_takes_any_rows_and_supported_widths() {
        // T82 at batch 1: QKV (64 rows, 768 → 2304), smolgen's weight generation (24 heads'
        // rows, 256 → 4096: the second row group half full) and BT4's FFN2 (1536 → 1024).
        let (kernel, qkv) = dense_mma_launch(64, 2304, 768).expect("T82's QKV at batch 1");
        assert_eq!(kernel.name(), "dense_mma_k768_g4");
        assert_eq!((qkv.grid, qkv.block), ([72, 1, 1], [256, 1, 1]));
        let (kernel, out) = dense_mma_launch(64, 768, 768).unwrap();
        assert_eq!((kernel.name(), out.grid), ("dense_mma_k768", [24, 4, 1]));
        assert_eq!(dense_mma_launch(24, 4096, 256).unwrap().1.grid, [128, 1, 1]);
        assert_eq!(
            dense_mma_launch(100, 3072, 1024).unwrap().1.grid,
            [96, 4, 1]
        );
        assert_eq!(dense_mma_launch(64, 1024, 1536).unwrap().0, DenseMma::K1536);
        assert_eq!(dense_mma_launch(64, 4096, 1536).unwrap().0, DenseMma::K1536);
        // Grids past 65,535 row blocks (the launch limit of grid y) are refused.
        assert!(dense_mma_launch(65_535 * 16, 32, 512).is_some());
        for (m, n, k) in [
            (0, 32, 256),
            (64, 1000, 768),
            (64, 32, 640),
            (64, 0, 768),
            (65_536 * 16, 32, 512),
        ] {
            assert!(dense_mma_launch(m, n, k).is_none(), "{m}x{n}x{k}");
        }
    }

    /// The kernels that load their weights before waiting for the previous kernel, and the
    /// function (the kernel itself or the body it calls) that holds the wait.
    const WEIGHTS_FIRST: [(&str, &str); 3] = [
        ("dense_rows", "KERNEL void dense_rows("),
        ("dense_mma_k*", "void dense_mma_body("),
        ("layer_norm_dense_mma_k*", "void layer_norm_dense_mma_body("),
    ];

    /// Whether `name` is `pattern`, or one of its family where the pattern ends in `*`.
    fn names(pattern: &str, name: &str) -> bool {
        match pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == pattern,
        }
    }

    /// With programmatic dependent launch a kernel may start before the previous one has
    /// finished, so each must wait for it before touching memory: `PRIOR_KERNELS_DONE()` as
    /// its first statement (a kernel without it would read or overwrite data too early), or,
    /// in the kernels that load their weights first (biases, gamma and beta included), after
    /// code that names none of the activations (`x`, `y`, `skip`, `normed`, ...) the previous
    /// kernel may still write.
    #[test]
    fn every_kernel_first_waits_for_the_prior_kernels() {
        let source = expand::expanded_source();
        let mut kernels = 0;
        for (at, _) in source.match_indices("\nKERNEL void ") {
            let body = at + source[at..].find('{').expect("a kernel body");
            let first = source[body + 1..].trim_start();
            let declaration = source[at..body]
                .trim_start()
                .trim_start_matches("KERNEL void ");
            let declaration = match declaration.strip_prefix("__launch_bounds__(") {
                Some(rest) => rest[rest.find(')').expect("bounds") + 1..].trim_start(),
                None => declaration,
            };
            let name = declaration.split('(').next().unwrap_or_default();
            kernels += 1;
            if first.starts_with("PRIOR_KERNELS_DONE();") {
                continue;
            }
            let Some((_, function)) = WEIGHTS_FIRST.iter().find(|(k, _)| names(k, name)) else {
                panic!("{name} does not begin with PRIOR_KERNELS_DONE()");
            };
            let start = source.find(function).expect("the function that waits");
            let open = start + source[start..].find('{').expect("its body");
            let wait = open
                + source[open..]
                    .find("PRIOR_KERNELS_DONE();")
                    .expect("a wait");
            let activations = ["x", "y", "skip", "normed", "input", "out"];
            // The code before the wait, comments left out.
            let before: String = source[open..wait]
                .lines()
                .map(|line| line.split("//").next().unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n");
            let named: Vec<&str> = before
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
                .filter(|token| activations.contains(token))
                .collect();
            assert!(named.is_empty(), "{name} uses {named:?} before its wait");
        }
        assert_eq!(
            kernels,
            shared_kernel_names().count()
                + cuda_only_kernel_names().count()
                + matrix_kernel_names().count()
        );
    }

    #[test]
    fn every_kernel_file_is_in_the_source() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("hip");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".hip"))
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = KERNEL_FILES.iter().map(|(n, _)| n.to_string()).collect();
        listed.sort();
        assert_eq!(on_disk, listed);
        // CI's hipcc check compiles the files itself: it reads the list, it does not repeat it.
        let ci = include_str!("../../../.ci/run");
        assert!(ci.contains("kernel_files=$(target/debug/lc0rs compile-kernels --list-files"));
    }

    #[test]
    fn tensor_core_kernels_exist_from_sm_80() {
        let turing = cuda_kernel_names(75);
        assert_eq!(turing.len(), shared_kernel_names().count());
        assert!(!turing.contains(&"attention_mma_d32"));
        assert!(cuda_kernel_names(80).contains(&"attention_mma_d32"));
        assert_eq!(
            cuda_kernel_names(90).len(),
            shared_kernel_names().count() + cuda_only_kernel_names().count()
        );
        // The source compiles them under the same condition.
        assert!(source().contains(&format!(
            "#if defined(GPU_CUDA) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= {}0)",
            CUDA_TENSOR_CORE_MIN_ARCH
        )));
    }

    #[test]
    fn dense_rows_splits_give_each_lane_one_chunk() {
        // Smolgen's dense1 and the value head's hidden layer (2048 wide): 8 warps per output;
        // smolgen's dense2 (256): one; a 520-wide layer: 3 chunks → 4 warps; 64-wide waves halve it.
        assert_eq!(dense_rows_splits(2048, 32), 8);
        assert_eq!(dense_rows_splits(256, 32), 1);
        assert_eq!(dense_rows_splits(520, 32), 4);
        assert_eq!(dense_rows_splits(2048, 64), 4);
        assert_eq!(dense_rows_splits(1 << 20, 32), 8);
        assert_eq!(dense_rows_splits(8, 32), 1);
    }

    #[test]
    fn dense_rows_limit_matches_the_kernel() {
        assert!(source().contains(&format!("#define DENSE_ROWS_MAX {DENSE_ROWS_MAX}\n")));
    }

    #[test]
    fn activation_codes_match_the_prelude() {
        let src = source();
        for (a, name) in [
            (Activation::Identity, "IDENTITY"),
            (Activation::Relu, "RELU"),
            (Activation::Relu2, "RELU2"),
            (Activation::Mish, "MISH"),
            (Activation::Swish, "SWISH"),
            (Activation::Selu, "SELU"),
            (Activation::Tanh, "TANH"),
            (Activation::Sigmoid, "SIGMOID"),
        ] {
            assert!(
                src.contains(&format!("#define ACT_{name} {}\n", activation_code(a))),
                "{name}"
            );
        }
    }
}
