//! CUDA checks against the CPU. They need an NVIDIA GPU, so they are `#[ignore]`d (reported
//! as ignored, never as passed, on machines without one) and run on a GPU machine with
//! `cargo test --test gpu_cuda -- --ignored`. The per-kernel checks are common::kernels' (they run
//! on the emulated AMD GPU too, tests/gpu_emu.rs).

mod common;

use common::gpu::{
    bundled, check_against_cpu, check_backend_against_cpu, check_concurrent_against_cpu,
    check_first_passes_right_after_creation, check_picked_against_cpu,
};
use common::tower::gpu_test_towers;
use common::{conv_kernels, kernels};
use lc0rs::backend::create_backend;
use lc0rs::backend::oracle::{encode_all, random_histories};
use lc0rs::gpu::cuda::CudaDevice;
use lc0rs::gpu::kernels::AttentionFamily;
use lc0rs::weights::format::Activation;

fn device() -> CudaDevice {
    CudaDevice::new(0, true).unwrap_or_else(|e| panic!("no usable CUDA device: {e}"))
}

#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn attention_kernel_matches_cpu() {
    let device = device();
    for family in [AttentionFamily::Portable, AttentionFamily::TensorCores] {
        kernels::check_attention(&device, family);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn attnbench_implementations_match_f64() {
    kernels::check_attnbench_implementations(&device(), true);
}

#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn layer_norm_kernel_matches_cpu() {
    kernels::check_layer_norm(&device());
}

/// A search's call (each position's legal moves' logits only, copied out of the pinned
/// download buffer) against the cpu oracle, with and without graphs.
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn picked_policy_logits_match_cpu() {
    let net = bundled("bundled:tiny");
    check_picked_against_cpu(
        "cuda-fp16",
        &net,
        &["", "graph=false,poison=true"],
        &[1, 13, 40],
    );
}

/// The whole cuda-fp16 backend against the cpu oracle on the bundled nets, both GEMM paths,
/// with and without graphs, and with NaN-filled buffers (`poison`: any value read before the
/// pass wrote it would turn the outputs NaN).
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn backend_matches_cpu_on_bundled_nets() {
    for net in ["bundled:tiny", "bundled:tiny-dense"] {
        check_backend_against_cpu(
            "cuda-fp16",
            net,
            &bundled(net),
            &[
                "gemm=lt",
                "gemm=blas",
                "gemm=lt,graph=false",
                "gemm=lt,attention=portable,poison=true",
                "gemm=blas,max_batch=64,poison=true",
            ],
        );
    }
}

/// The small-batch dense kernel (common::kernels::check_dense_rows).
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn dense_rows_kernel_matches_cpu() {
    kernels::check_dense_rows(&device());
}

/// Calls from several threads at once: each gets a lane (its own stream and buffers) up to
/// `lanes`, the rest wait; every result still matches the cpu oracle.
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn concurrent_calls_run_on_lanes_and_match_cpu() {
    let network = bundled("bundled:tiny");
    for (options, made) in [
        ("lanes=2", "2 of at most 2 lanes made"),
        ("lanes=1", "1 of at most 1 lanes made"),
        ("lanes=3,gemm=blas", "3 of at most 3 lanes made"),
    ] {
        let report = check_concurrent_against_cpu("cuda-fp16", &network, options);
        eprintln!("{options}: {report}");
        assert!(report.contains(made), "{options}: {report}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn fused_layer_norm_dense_kernel_matches_f64() {
    kernels::check_norm_dense(&device());
}

#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn dense_mma_kernel_matches_f64() {
    kernels::check_dense_mma(&device());
}

/// The fused kernel inside the backend: the LayerNorm after the attention with FFN1 where its
/// grid fits one wave (T82 at batch 1), and the last LayerNorm of the first layer with the
/// second layer's smolgen compression (T82 and BT4, up to the batch given): two-layer nets of
/// both shapes against the cpu oracle, fused up to batch 64 (`norm_dense=64`, with NaN-filled
/// buffers and on the AMD path's attention and GEMMs too) and never (`norm_dense=0`).
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn fused_layer_norm_dense_in_the_backend_matches_cpu() {
    for name in ["t82", "bt4"] {
        let mut arch = lc0rs::netgen::preset(name).unwrap();
        arch.encoders = 2;
        let network = lc0rs::netgen::generate(&arch, 82);
        check_backend_against_cpu(
            "cuda-fp16",
            name,
            &network,
            &[
                "norm_dense=64,poison=true",
                "norm_dense=64,attention=portable,gemm=blas",
                "norm_dense=0",
                "dense_mma=64,poison=true",
                "dense_mma=64,pdl=64,poison=true",
            ],
        );
    }
}

/// Programmatic dependent launch (`pdl=N`, sm_90 and newer) at every batch size: each kernel
/// may start before the previous one has finished and must wait for it (those with weights
/// after loading them) in `PRIOR_KERNELS_DONE()`; a kernel that
/// read or wrote too early would put the outputs off the cpu oracle, or NaN from the poisoned
/// buffers. An attention net, a 2-layer T82 (the fused LayerNorm + FFN1 at batch 1) and an SE
/// tower, graphs on and off, both GEMM paths and attention kernels.
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn programmatic_launch_matches_cpu() {
    let arch = lc0rs::gpu::GpuDevice::info(&device()).arch.clone();
    if arch
        .trim_start_matches("sm_")
        .parse::<u32>()
        .is_ok_and(|sm| sm < 90)
    {
        eprintln!("pdl has no effect on {arch} (it needs sm_90): only plain launches are checked");
    }
    let sets = [
        "pdl=1024,poison=true",
        "pdl=1024,graph=false",
        "pdl=1024,gemm=blas,attention=portable,poison=true",
        "pdl=1024,dense_mma=64,poison=true",
        "pdl=0,dense_mma=0",
    ];
    use lc0rs::netgen::{generate, generate_tower, preset, tower_preset};
    check_backend_against_cpu("cuda-fp16", "tiny", &bundled("bundled:tiny"), &sets);
    let mut t82 = preset("t82").unwrap();
    t82.encoders = 2;
    check_backend_against_cpu("cuda-fp16", "t82", &generate(&t82, 82), &sets);
    let tiny_se = generate_tower(&tower_preset("tiny-se").unwrap(), 5);
    check_backend_against_cpu("cuda-fp16", "tiny-se", &tiny_se, &sets);
}

#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn warp_layer_norm_kernel_matches_cpu() {
    kernels::check_warp_layer_norm(&device());
}

/// A net with the paths the bundled ones do not take: ReLU default activation (fused into
/// the GEMM epilogue), SELU FFN, tanh smolgen, scalar value, no moves-left head, no gating, and
/// a policy width that is not a multiple of 8 (the promotion dot products' scalar path).
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn relu_scalar_variant_matches_cpu() {
    use lc0rs::netgen::{generate, preset};
    let mut arch = preset("tiny").unwrap();
    arch.format.default_activation = Activation::Relu;
    arch.format.smolgen_activation = Activation::Tanh;
    arch.format.ffn_activation = Activation::Selu;
    arch.format.wdl = false;
    arch.format.moves_left = false;
    arch.gating = false;
    arch.policy_d = 36;
    let network = generate(&arch, 21);
    for options in ["gemm=lt", "gemm=blas"] {
        let got = check_against_cpu("cuda-fp16", &network, (options, ""), 9, 16);
        assert!(got.m.iter().all(|&m| m == 0.0) && got.d.iter().all(|&d| d == 0.0));
    }
}

/// A net whose dense layers end in SiLU (embedding, FFN, heads): the `Silu` GEMM epilogue,
/// which cuBLASLt does not have, so the bias is fused and SiLU runs as a kernel (Lt), or both
/// run as a kernel (BLAS).
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn swish_variant_matches_cpu() {
    use lc0rs::netgen::{generate, preset};
    let mut arch = preset("tiny").unwrap();
    arch.format.default_activation = Activation::Swish;
    arch.format.ffn_activation = Activation::Swish;
    let network = generate(&arch, 23);
    for options in ["gemm=lt", "gemm=blas", "gemm=lt,graph=false"] {
        check_against_cpu("cuda-fp16", &network, (options, ""), 11, 16);
    }
}

/// Head selection on the GPU: each of tiny-dense's policy and value heads against the cpu
/// oracle with the same heads.
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn selected_heads_match_cpu() {
    let network = bundled("bundled:tiny-dense");
    for heads in [
        "policy_head=soft,value_head=q",
        "policy_head=optimistic,value_head=st,mlh=false",
    ] {
        check_against_cpu("cuda-fp16", &network, (heads, heads), 13, 32);
    }
}

/// The profiler's kernel-timestamp path (CUPTI, from the library path or the CUDA toolkit):
/// every operation of the event-timed path is there, in order, and the operations account for
/// the traced replay.
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 and CUPTI (run with --ignored on one)"]
fn traced_profile_accounts_for_the_pass() {
    let network = bundled("bundled:tiny");
    let profile_of = |options: &str| {
        let backend = create_backend("cuda-fp16", network.clone(), options).unwrap();
        let histories = random_histories(64, 3);
        let planes: Vec<_> = encode_all(&histories, backend.as_ref())
            .into_iter()
            .map(|e| e.planes)
            .collect();
        for _ in 0..2 {
            backend.evaluate(&planes).unwrap();
        }
        backend
            .profile_reports()
            .pop()
            .unwrap()
            .passes
            .pop()
            .unwrap()
    };
    let traced = profile_of("profile=true");
    let evented = profile_of("profile=true,graph=false");
    let lc0rs::profile::PassTiming::KernelTrace { busy_ms: busy } = traced.timing else {
        panic!(
            "no kernel timestamps: libcupti was found neither on the library path nor in the toolkit"
        );
    };
    let names = |p: &lc0rs::profile::PassProfile| -> Vec<(&str, Option<usize>)> {
        p.ops.iter().map(|o| (o.op, o.layer)).collect()
    };
    assert_eq!(names(&traced), names(&evented));
    let sum: f64 = traced.ops.iter().map(|o| o.ms).sum();
    eprintln!(
        "traced pass {:.4} ms, operations {sum:.4} ms, kernels busy {busy:.4} ms, replay by events {:.4} ms",
        traced.instrumented_ms, traced.pass_ms
    );
    assert!(busy > 0.0 && busy <= traced.instrumented_ms);
    assert!(
        sum <= traced.instrumented_ms * 1.000_1 && sum >= 0.95 * traced.instrumented_ms,
        "{sum} vs {}",
        traced.instrumented_ms
    );
    assert!(
        traced
            .ops
            .windows(2)
            .all(|w| w[0].start_ms <= w[1].start_ms)
    );
    assert!(traced.ops.iter().all(|o| o.ms > 0.0));
}

/// Evaluation immediately after creation (docs/gpu-ordering.md: why the weight upload cannot race
/// the first pass), on the bundled net and on a generated T82-sized one whose ~150 MB of weights
/// take the longest to upload.
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn first_passes_right_after_creation_match_cpu() {
    use lc0rs::netgen::{generate, preset};
    check_first_passes_right_after_creation("cuda-fp16", &bundled("bundled:tiny"), 3);
    check_first_passes_right_after_creation("cuda-fp16", &generate(&preset("t82").unwrap(), 5), 2);
}

#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn cuda_overflow_is_an_error_not_nan() {
    common::gpu::check_overflow_is_reported("cuda-fp16");
}

/// The residual-tower kernels (common::conv_kernels, common::winograd_kernels).
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn conv_kernels_match_cpu() {
    conv_kernels::check_tower_kernels(&device());
}

/// Residual towers through the whole backend: the `tiny-se` preset (SE, mish, convolution
/// policy, WDL, moves left) with every GEMM path and poisoned buffers, then a classical tower
/// and an attention-policy tower.
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn towers_match_cpu() {
    use lc0rs::netgen::{generate_tower, tower_preset};
    let tiny_se = generate_tower(&tower_preset("tiny-se").unwrap(), 5);
    check_backend_against_cpu(
        "cuda-fp16",
        "tiny-se",
        &tiny_se,
        &[
            "gemm=lt",
            "gemm=blas",
            "gemm=lt,graph=false",
            "gemm=lt,poison=true",
            "gemm=blas,max_batch=64,poison=true",
            "conv=gather,poison=true",
            "conv=winograd4,poison=true",
        ],
    );
    for (label, model) in gpu_test_towers() {
        check_backend_against_cpu(
            "cuda-fp16",
            label,
            &model,
            &["gemm=lt", "gemm=blas,poison=true"],
        );
    }
}
