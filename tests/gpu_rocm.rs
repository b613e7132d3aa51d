//! The `rocm-fp16` backend against the CPU oracle. They need an AMD GPU with ROCm (rocBLAS;
//! hipBLASLt for `gemm=lt` from ROCm 6), so they are `#[ignore]`d (reported as ignored, never as
//! passed, elsewhere) and run on such a machine with `cargo test --test gpu_rocm -- --ignored`.
//! No AMD GPU has run them yet (see README).

mod common;

use common::gpu::{
    bundled, check_backend_against_cpu, check_concurrent_against_cpu,
    check_first_passes_right_after_creation,
};
use common::tower::gpu_test_towers;
use lc0rs::weights::format::Activation;

#[test]
#[ignore = "needs an AMD GPU with ROCm (run with --ignored on one)"]
fn rocm_backend_matches_cpu_on_bundled_nets() {
    for net in ["bundled:tiny", "bundled:tiny-dense"] {
        check_backend_against_cpu(
            "rocm-fp16",
            net,
            &bundled(net),
            &["", "gemm=blas", "graph=false", "gemm=blas,max_batch=64"],
        );
    }
}

/// SiLU dense layers: hipBLASLt's SWISH_BIAS epilogue on ROCm 7 where the GPU has kernels for
/// it, else the bias epilogue plus our kernel.
#[test]
#[ignore = "needs an AMD GPU with ROCm (run with --ignored on one)"]
fn rocm_swish_variant_matches_cpu() {
    use lc0rs::netgen::{generate, preset};
    let mut arch = preset("tiny").unwrap();
    arch.format.default_activation = Activation::Swish;
    arch.format.ffn_activation = Activation::Swish;
    check_backend_against_cpu(
        "rocm-fp16",
        "swish",
        &generate(&arch, 23),
        &["", "gemm=blas"],
    );
}

/// Calls from several threads at once, each on a lane of its own (stream, rocBLAS/hipBLASLt
/// handles, buffers) up to `lanes`.
#[test]
#[ignore = "needs an AMD GPU with ROCm (run with --ignored on one)"]
fn rocm_concurrent_calls_run_on_lanes_and_match_cpu() {
    let report = check_concurrent_against_cpu("rocm-fp16", &bundled("bundled:tiny"), "lanes=2");
    assert!(report.contains("2 of at most 2 lanes made"), "{report}");
}

/// Evaluation immediately after creation, on both lanes (docs/gpu-ordering.md).
#[test]
#[ignore = "needs an AMD GPU with ROCm (run with --ignored on one)"]
fn rocm_first_passes_right_after_creation_match_cpu() {
    check_first_passes_right_after_creation("rocm-fp16", &bundled("bundled:tiny"), 3);
}

#[test]
#[ignore = "needs an AMD GPU with ROCm (run with --ignored on one)"]
fn rocm_overflow_is_an_error_not_nan() {
    common::gpu::check_overflow_is_reported("rocm-fp16");
}

/// Residual towers: the `tiny-se` preset (SE, mish, convolution policy, WDL, moves left) on
/// both GEMM paths, then a classical and an attention-policy tower.
#[test]
#[ignore = "needs an AMD GPU with ROCm (run with --ignored on one)"]
fn rocm_towers_match_cpu() {
    use lc0rs::netgen::{generate_tower, tower_preset};
    let tiny_se = generate_tower(&tower_preset("tiny-se").unwrap(), 5);
    check_backend_against_cpu(
        "rocm-fp16",
        "tiny-se",
        &tiny_se,
        &["", "gemm=blas,poison=true", "conv=gather", "conv=winograd4"],
    );
    for (label, model) in gpu_test_towers() {
        check_backend_against_cpu("rocm-fp16", label, &model, &["", "gemm=blas"]);
    }
}

/// The GPU's matrix instruction against a plain product (registers laid out by the documented
/// layout, as on `hip-emu`), and the matrix-core and portable attention kernels against f64,
/// where the arch has a matrix form; the portable attention alone elsewhere.
#[test]
#[ignore = "needs an AMD GPU with ROCm (run with --ignored on one)"]
fn rocm_matrix_instruction_and_attention_kernels_match_f64() {
    use common::{kernels, matrix};
    use lc0rs::gpu::GpuDevice;
    use lc0rs::gpu::kernels::{AttentionFamily, MatrixForm, amd_matrix_form};
    let device = lc0rs::gpu::hip::device::HipDevice::new(0, true)
        .unwrap_or_else(|e| panic!("no usable AMD GPU: {e}"));
    kernels::check_attention(&device, AttentionFamily::Portable);
    let Some(form) = amd_matrix_form(&device.info().arch) else {
        eprintln!(
            "{}: no matrix form; the portable attention only",
            device.info().arch
        );
        return;
    };
    let layout = match form {
        MatrixForm::WmmaGfx11 => &matrix::WMMA_GFX11,
        MatrixForm::WmmaGfx12 => &matrix::WMMA_GFX12,
        MatrixForm::Mfma16 => &matrix::MFMA_16,
    };
    matrix::check_instruction(&device, layout);
    kernels::check_attention(&device, AttentionFamily::MatrixCores);
}

/// The residual-tower kernels against f64 (common::conv_kernels) and the Winograd convolutions
/// against the direct convolution in f64 (common::winograd_kernels), on the GPU's wave size.
#[test]
#[ignore = "needs an AMD GPU with ROCm (run with --ignored on one)"]
fn rocm_tower_kernels_match_f64() {
    let device = lc0rs::gpu::hip::device::HipDevice::new(0, true)
        .unwrap_or_else(|e| panic!("no usable AMD GPU: {e}"));
    common::conv_kernels::check_tower_kernels(&device);
}
