//! CUDA checks against the CPU. They need an NVIDIA GPU, so they are `#[ignore]`d (reported
//! as ignored, never as passed, on machines without one) and run on a GPU machine with
//! `cargo test --test gpu_cuda -- --ignored`. Outputs are poisoned before every run.

mod common;

use common::gpu::{
    bundled, check_against_cpu, check_backend_against_cpu, check_concurrent_against_cpu,
    check_first_passes_right_after_creation, layer_norm_error,
};
use half::f16;
use lc0rs::backend::create_backend;
use lc0rs::gpu::cuda::CudaDevice;
use lc0rs::gpu::kernels::{activation_code, attention_kernel};
use lc0rs::gpu::{GpuBuffer, GpuDevice, KernelArg, Launch};
use lc0rs::selftest::{encode_all, random_histories};
use lc0rs::weights::format::Activation;

fn device() -> CudaDevice {
    CudaDevice::new(0).unwrap_or_else(|e| panic!("no usable CUDA device: {e}"))
}

/// Deterministic values in [-scale, scale), rounded to f16 (so the CPU sees what the GPU sees).
fn random_f16(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = (s >> 11) as f32 / (1u64 << 53) as f32;
            f16::from_f32((2.0 * u - 1.0) * scale).to_f32()
        })
        .collect()
}

fn upload(device: &CudaDevice, values: &[f32]) -> GpuBuffer {
    let bytes: Vec<u8> = values
        .iter()
        .flat_map(|&v| f16::from_f32(v).to_le_bytes())
        .collect();
    let b = device.alloc(bytes.len()).unwrap();
    device.upload(b.ptr(), &bytes).unwrap();
    b
}

fn download(device: &CudaDevice, buffer: &GpuBuffer, n: usize) -> Vec<f32> {
    let mut bytes = vec![0u8; n * 2];
    device.download(buffer.ptr(), &mut bytes).unwrap();
    bytes
        .chunks_exact(2)
        .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
        .collect()
}

fn poisoned(device: &CudaDevice, n: usize) -> GpuBuffer {
    let b = device.alloc(n * 2).unwrap();
    device.fill(b.ptr(), n * 2, 0xFF).unwrap(); // f16 NaN everywhere
    b
}

#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn attention_kernel_matches_cpu() {
    let device = device();
    for tensor_cores in [false, true] {
        check_attention(&device, tensor_cores);
    }
}

/// Both attention kernels (portable, tensor-core) against an f64 reference.
fn check_attention(device: &CudaDevice, tensor_cores: bool) {
    for (case, &(batch, heads, depth, with_bias)) in [
        (1, 2, 32, true),
        (3, 24, 32, true),
        (17, 4, 64, true),
        (5, 8, 16, false),
        (64, 24, 32, true),
    ]
    .iter()
    .enumerate()
    {
        let d_model = heads * depth;
        let rows = batch * 64;
        let qkv = random_f16(rows * 3 * d_model, case as u64 + 1, 2.0);
        let bias = random_f16(batch * heads * 4096, case as u64 + 100, 3.0);
        let qkv_gpu = upload(device, &qkv);
        let bias_gpu = upload(device, &bias);
        // One head per block, and several (tensor-core kernels) where the "GPU" has 1 SM.
        for multiprocessors in [1_000_000, 1] {
            check_attention_launch(
                device,
                (depth, tensor_cores, multiprocessors),
                (batch, heads),
                (&qkv, &bias, with_bias),
                (&qkv_gpu, &bias_gpu),
                case,
            );
        }
    }
}

/// One launch of an attention kernel against the f64 reference.
fn check_attention_launch(
    device: &CudaDevice,
    (depth, tensor_cores, multiprocessors): (usize, bool, usize),
    (batch, heads): (usize, usize),
    (qkv, bias, with_bias): (&[f32], &[f32], bool),
    (qkv_gpu, bias_gpu): (&GpuBuffer, &GpuBuffer),
    case: usize,
) {
    let d_model = heads * depth;
    let rows = batch * 64;
    let kernel = attention_kernel(depth, tensor_cores).unwrap();
    let how = lc0rs::gpu::kernels::attention_launch(kernel, heads, batch, multiprocessors);
    let ctx = poisoned(device, rows * d_model);
    let mut args = vec![
        KernelArg::Ptr(qkv_gpu.ptr()),
        KernelArg::Ptr(if with_bias { bias_gpu.ptr() } else { 0 }),
        KernelArg::Ptr(ctx.ptr()),
        KernelArg::I32(heads as i32),
    ];
    args.extend(how.heads_per_block.map(KernelArg::I32));
    device.launch(kernel, how.launch, &args).unwrap();
    let got = download(device, &ctx, rows * d_model);
    let mut worst = 0.0f64;
    for b in 0..batch {
        for h in 0..heads {
            for q in 0..64 {
                let at = |t: usize, part: usize, j: usize| {
                    f64::from(qkv[(b * 64 + t) * 3 * d_model + part * d_model + h * depth + j])
                };
                let logits: Vec<f64> = (0..64)
                    .map(|k| {
                        let dot: f64 = (0..depth).map(|j| at(q, 0, j) * at(k, 1, j)).sum();
                        dot / (depth as f64).sqrt()
                            + if with_bias {
                                f64::from(bias[((b * heads + h) * 64 + q) * 64 + k])
                            } else {
                                0.0
                            }
                    })
                    .collect();
                let max = logits.iter().cloned().fold(f64::MIN, f64::max);
                let sum: f64 = logits.iter().map(|l| (l - max).exp()).sum();
                for j in 0..depth {
                    let want: f64 = (0..64)
                        .map(|k| (logits[k] - max).exp() / sum * at(k, 2, j))
                        .sum();
                    let g = f64::from(got[(b * 64 + q) * d_model + h * depth + j]);
                    assert!(
                        g.is_finite(),
                        "case {case}: output ({b},{h},{q},{j}) not written"
                    );
                    worst = worst.max((g - want).abs());
                }
            }
        }
    }
    assert!(worst < 4e-3, "case {case}: max abs error {worst}");
    eprintln!(
        "attention case {case} (batch {batch}, {heads} heads, depth {depth}, {:?} heads per block): max abs error {worst:.2e}",
        how.heads_per_block
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn layer_norm_kernel_matches_cpu() {
    let device = device();
    for (case, &(rows, cols, act)) in [
        (7, 768, Activation::Identity),
        (3, 6144, Activation::Swish),
        (130, 64, Activation::Mish),
        // Not a multiple of 8: the one-value-at-a-time path.
        (5, 100, Activation::Relu),
    ]
    .iter()
    .enumerate()
    {
        let input = random_f16(rows * cols, 7 + case as u64, 3.0);
        let skip = random_f16(rows * cols, 17 + case as u64, 1.0);
        let bias = random_f16(cols, 27 + case as u64, 0.5);
        let gamma = random_f16(cols, 37 + case as u64, 1.5);
        let beta = random_f16(cols, 47 + case as u64, 0.5);
        let alpha = 0.427_287f32;
        let (i, s, b, g, be) = (
            upload(&device, &input),
            upload(&device, &skip),
            upload(&device, &bias),
            upload(&device, &gamma),
            upload(&device, &beta),
        );
        let out = poisoned(&device, rows * cols);
        device
            .launch(
                "layer_norm",
                Launch {
                    grid: [rows as u32, 1, 1],
                    block: [if cols > 2048 { 1024 } else { 256 }, 1, 1],
                    shared_bytes: (cols * 4) as u32,
                },
                &[
                    KernelArg::Ptr(out.ptr()),
                    KernelArg::Ptr(i.ptr()),
                    KernelArg::Ptr(b.ptr()),
                    KernelArg::I32(activation_code(act)),
                    KernelArg::F32(alpha),
                    KernelArg::Ptr(s.ptr()),
                    KernelArg::Ptr(g.ptr()),
                    KernelArg::Ptr(be.ptr()),
                    KernelArg::F32(1e-6),
                    KernelArg::I32(cols as i32),
                ],
            )
            .unwrap();
        let got = download(&device, &out, rows * cols);
        let activate = |x: f64| match act {
            Activation::Swish => x / (1.0 + (-x).exp()),
            Activation::Mish => x * (1.0 + x.exp()).ln().tanh(),
            Activation::Relu => x.max(0.0),
            _ => x,
        };
        let pre = |r: usize, c: usize| {
            activate(f64::from(input[r * cols + c] + bias[c])) * f64::from(alpha)
                + f64::from(skip[r * cols + c])
        };
        let worst = layer_norm_error((rows, cols), pre, &gamma, &beta, &got);
        assert!(worst < 1e-2, "case {case}: max abs error {worst}");
        eprintln!("layer_norm case {case} ({rows}x{cols}): max abs error {worst:.2e}");
    }
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

/// The small-batch dense kernel against a naive f64 product, bias and activation: one to four
/// rows, widths from the heads' 3 outputs to smolgen's 6144, with and without a bias.
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA 13 (run with --ignored on one)"]
fn dense_rows_kernel_matches_cpu() {
    let device = device();
    for (case, &(rows, n, k, act, with_bias)) in [
        (1usize, 256usize, 2048usize, Activation::Swish, false),
        (4, 6144, 256, Activation::Identity, false),
        (3, 3, 128, Activation::Mish, true),
        (4, 130, 520, Activation::Relu, true),
        (2, 128, 2048, Activation::Tanh, true),
    ]
    .iter()
    .enumerate()
    {
        let seed = 300 + case as u64;
        let x = random_f16(rows * k, seed, 1.0);
        let w = random_f16(n * k, seed + 1, 0.1);
        let bias = random_f16(n, seed + 2, 0.5);
        let gpu = [&x, &w, &bias].map(|v| upload(&device, v));
        let y = poisoned(&device, rows * n);
        let splits = lc0rs::gpu::kernels::dense_rows_splits(k, 32);
        device
            .launch(
                "dense_rows",
                Launch {
                    grid: [n.div_ceil(8 / splits) as u32, 1, 1],
                    block: [256, 1, 1],
                    shared_bytes: 0,
                },
                &[
                    KernelArg::Ptr(gpu[0].ptr()),
                    KernelArg::I32(k as i32),
                    KernelArg::Ptr(gpu[1].ptr()),
                    KernelArg::Ptr(if with_bias { gpu[2].ptr() } else { 0 }),
                    KernelArg::Ptr(y.ptr()),
                    KernelArg::I32(n as i32),
                    KernelArg::I32(rows as i32),
                    KernelArg::I32(n as i32),
                    KernelArg::I32(k as i32),
                    KernelArg::I32(activation_code(act)),
                    KernelArg::I32(splits as i32),
                ],
            )
            .unwrap();
        let got = download(&device, &y, rows * n);
        let mut worst = 0.0f64;
        for r in 0..rows {
            for o in 0..n {
                let mut v: f64 = (0..k)
                    .map(|i| f64::from(x[r * k + i]) * f64::from(w[o * k + i]))
                    .sum();
                if with_bias {
                    v += f64::from(bias[o]);
                }
                let want = match act {
                    Activation::Identity => v,
                    Activation::Relu => v.max(0.0),
                    Activation::Swish => v / (1.0 + (-v).exp()),
                    Activation::Mish => v * (1.0 + v.exp()).ln().tanh(),
                    Activation::Tanh => v.tanh(),
                    _ => unreachable!(),
                };
                // fp16 output: half an ulp of |want| plus the fp32 sum's rounding.
                let err = (f64::from(got[r * n + o]) - want).abs() / (1.0 + want.abs());
                worst = worst.max(err);
            }
        }
        assert!(worst < 2e-3, "case {case}: max relative error {worst}");
        eprintln!("dense_rows case {case} ({rows}x{n}x{k}, {act:?}): max error {worst:.2e}");
    }
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
fn warp_layer_norm_kernel_matches_cpu() {
    let device = device();
    let (id, swish) = (Activation::Identity, Activation::Swish);
    for (case, &(rows, cols, with_skip, act)) in [
        (130usize, 768usize, true, id),
        (9, 64, false, id),
        (33, 2048, true, id),
        (17, 1024, false, id),
        // Smolgen's dense1 rows (bias, swish, no residual), and swish with a residual.
        (64, 256, false, swish),
        (70, 768, true, swish),
    ]
    .iter()
    .enumerate()
    {
        let seed = 100 + case as u64;
        let (input, skip, bias) = (
            random_f16(rows * cols, seed, 3.0),
            random_f16(rows * cols, seed + 1, 1.0),
            random_f16(cols, seed + 2, 0.5),
        );
        let (gamma, beta) = (
            random_f16(cols, seed + 3, 1.5),
            random_f16(cols, seed + 4, 0.5),
        );
        let alpha = 0.427_287f32;
        let gpu = [&input, &skip, &bias, &gamma, &beta].map(|v| upload(&device, v));
        let out = poisoned(&device, rows * cols);
        let skip_ptr = if with_skip { gpu[1].ptr() } else { 0 };
        let rows_per_block = 256 / 32;
        device
            .launch(
                lc0rs::gpu::kernels::layer_norm_warp_kernel(cols, 32, act).unwrap(),
                Launch {
                    grid: [rows.div_ceil(rows_per_block) as u32, 1, 1],
                    block: [256, 1, 1],
                    shared_bytes: 0,
                },
                &[
                    KernelArg::Ptr(out.ptr()),
                    KernelArg::Ptr(gpu[0].ptr()),
                    KernelArg::Ptr(gpu[2].ptr()),
                    KernelArg::F32(alpha),
                    KernelArg::Ptr(skip_ptr),
                    KernelArg::Ptr(gpu[3].ptr()),
                    KernelArg::Ptr(gpu[4].ptr()),
                    KernelArg::F32(1e-6),
                    KernelArg::I32(rows as i32),
                    KernelArg::I32(cols as i32),
                ],
            )
            .unwrap();
        let got = download(&device, &out, rows * cols);
        let pre = |r: usize, c: usize| {
            let v = f64::from(input[r * cols + c] + bias[c]);
            let v = if act == swish {
                v / (1.0 + (-v).exp())
            } else {
                v
            };
            v * f64::from(alpha)
                + if with_skip {
                    f64::from(skip[r * cols + c])
                } else {
                    0.0
                }
        };
        let worst = layer_norm_error((rows, cols), pre, &gamma, &beta, &got);
        assert!(worst < 1e-2, "case {case}: max abs error {worst}");
        eprintln!(
            "layer_norm_warp case {case} ({rows}x{cols}, {act:?}): max abs error {worst:.2e}"
        );
    }
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
        backend.profile_report().unwrap().passes.pop().unwrap()
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
