//! Per-kernel checks against f64 references, written once for every device (CUDA, the emulated
//! AMD GPU at wave64 and wave32): launch geometry follows the device's warp size as the executor
//! computes it. Outputs are poisoned (fp16 NaN) before every launch.

use half::f16;
use lc0rs::gpu::kernels::launchers;
use lc0rs::gpu::kernels::{AttentionArgs, AttentionFamily, AttentionKernel, activation_code};
use lc0rs::gpu::{GpuBuffer, GpuDevice, Launch};
use lc0rs::weights::format::Activation;

use super::gpu::{activate_f64, layer_norm_error, layer_norm_f64, worse};

/// Threads per block of the executor's row kernels (`ROW_THREADS`).
const ROW_THREADS: u32 = 256;

/// Deterministic values in [-scale, scale), rounded to f16 (so the CPU sees what the GPU sees).
pub fn random_f16(n: usize, seed: u64, scale: f32) -> Vec<f32> {
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

pub fn upload(device: &dyn GpuDevice, values: &[f32]) -> GpuBuffer {
    let bytes: Vec<u8> = values
        .iter()
        .flat_map(|&v| f16::from_f32(v).to_le_bytes())
        .collect();
    let mut b = device.alloc(bytes.len()).unwrap();
    b.copy_from_host(device, 0, &bytes).unwrap();
    b
}

pub fn download(device: &dyn GpuDevice, buffer: &GpuBuffer, n: usize) -> Vec<f32> {
    let mut bytes = vec![0u8; n * 2];
    buffer.copy_to_host(device, 0, &mut bytes).unwrap();
    bytes
        .chunks_exact(2)
        .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
        .collect()
}

pub fn poisoned(device: &dyn GpuDevice, n: usize) -> GpuBuffer {
    let mut b = device.alloc(n * 2).unwrap();
    b.fill(device, 0xFF).unwrap(); // f16 NaN everywhere
    b
}

/// The attention kernels (portable, NVIDIA tensor-core, AMD matrix-core) against an f64
/// reference. The portable and matrix-core ones add the QKV bias themselves (the GEMM before them
/// has none on the BLAS path): given at every depth (cases 1-3), left out in two depth-32 cases.
pub fn check_attention(device: &dyn GpuDevice, family: AttentionFamily) {
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
        let adds_bias = AttentionKernel::for_depth(depth, family)
            .unwrap()
            .adds_qkv_bias();
        let qkv_bias = (adds_bias && (1..=3).contains(&case))
            .then(|| random_f16(3 * d_model, case as u64 + 200, 1.0));
        let qkv_gpu = upload(device, &qkv);
        let qkv_bias_gpu = qkv_bias.as_deref().map(|v| upload(device, v));
        let bias_gpu = upload(device, &bias);
        // One head per block, and several (tensor-core kernels) where the "GPU" has 1 SM; the
        // other kernels take one head per block either way.
        let grouped = family == AttentionFamily::TensorCores;
        for multiprocessors in [1_000_000, 1].into_iter().take(if grouped { 2 } else { 1 }) {
            check_attention_launch(
                device,
                (depth, family, multiprocessors),
                (batch, heads),
                (&qkv, qkv_bias.as_deref(), &bias, with_bias),
                (&qkv_gpu, qkv_bias_gpu.as_ref(), &bias_gpu),
                case,
            );
        }
    }
}

/// One launch of an attention kernel against the f64 reference.
fn check_attention_launch(
    device: &dyn GpuDevice,
    (depth, family, multiprocessors): (usize, AttentionFamily, usize),
    (batch, heads): (usize, usize),
    (qkv, qkv_bias, bias, with_bias): (&[f32], Option<&[f32]>, &[f32], bool),
    (qkv_gpu, qkv_bias_gpu, bias_gpu): (&GpuBuffer, Option<&GpuBuffer>, &GpuBuffer),
    case: usize,
) {
    let d_model = heads * depth;
    let rows = batch * 64;
    let kernel = AttentionKernel::for_depth(depth, family).unwrap();
    let shape = (multiprocessors, device.info().warp_size as usize);
    let how = lc0rs::gpu::kernels::attention_launch(kernel, heads, batch, shape);
    let ctx = poisoned(device, rows * d_model);
    let bias_arg = with_bias.then(|| bias_gpu.ptr());
    let (qkv_arg, heads_arg) = (qkv_gpu.ptr(), heads as i32);
    // SAFETY: the caller's qkv (`rows × 3·d_model`), QKV bias (`3·d_model`) and smolgen bias
    // (`batch × heads × 64 × 64`) buffers and `ctx` (`rows × d_model`), all live to the end.
    unsafe {
        let args = AttentionArgs {
            qkv: qkv_arg,
            qkv_bias: qkv_bias_gpu.map(GpuBuffer::ptr),
            bias: bias_arg,
            ctx: ctx.ptr(),
            heads: heads_arg,
        };
        kernel.launch(device, how, args)
    }
    .unwrap();
    let got = download(device, &ctx, rows * d_model);
    let mut worst = 0.0f64;
    for b in 0..batch {
        for h in 0..heads {
            for q in 0..64 {
                let at = |t: usize, part: usize, j: usize| {
                    let col = part * d_model + h * depth + j;
                    f64::from(qkv[(b * 64 + t) * 3 * d_model + col])
                        + qkv_bias.map_or(0.0, |v| f64::from(v[col]))
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
                    worst = worse(worst, (g - want).abs());
                }
            }
        }
    }
    assert!(worst < 4e-3, "case {case}: max abs error {worst}");
    eprintln!(
        "attention case {case} (batch {batch}, {heads} heads, depth {depth}, {:?} heads per block, QKV bias {}): max abs error {worst:.2e}",
        how.heads_per_block,
        qkv_bias.is_some()
    );
}

/// Every implementation `attnbench` times (the naive kernel, the unfused GEMM–softmax–GEMM path,
/// the portable kernel, with `tensor_cores` the mma kernel, and where the device has it the AMD
/// matrix-core kernel) at each head depth, with and
/// without the smolgen bias: `measure` compares each poisoned-then-written output with its f64
/// reference and fails beyond the implementation's tolerance.
pub fn check_attnbench_implementations(device: &dyn GpuDevice, tensor_cores: bool) {
    use lc0rs::gpu::attention_bench::{AttentionImpl, Case, measure};
    for implementation in AttentionImpl::ALL {
        if implementation == AttentionImpl::TensorCores && !tensor_cores {
            continue;
        }
        if implementation == AttentionImpl::MatrixCores
            && !device.has_kernel("attention_matrix_d16")
        {
            continue;
        }
        for depth in [16, 32, 64] {
            for (batch, smolgen) in [(2, false), (5, true)] {
                let case = Case {
                    heads: 3,
                    depth,
                    batch,
                    smolgen,
                };
                let m = measure(device, implementation, case, (0, 1, 1))
                    .unwrap_or_else(|e| panic!("{e}"));
                eprintln!(
                    "{} at {case:?}: max abs error {:.2e}",
                    implementation.name(),
                    m.max_abs_error
                );
            }
        }
    }
}

/// The block LayerNorm (`layer_norm`) with activations and rows of any width.
pub fn check_layer_norm(device: &dyn GpuDevice) {
    for (case, &(rows, cols, act)) in [
        // A row in registers at one chunk per thread (768 of 256 threads' 2048, smolgen's 6144
        // of 1024 threads' 8192), and one too wide for that (8704 > 8192): the loop over the
        // row in shared memory.
        (7, 768, Activation::Identity),
        (3, 6144, Activation::Swish),
        (2, 8704, Activation::Identity),
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
            upload(device, &input),
            upload(device, &skip),
            upload(device, &bias),
            upload(device, &gamma),
            upload(device, &beta),
        );
        let out = poisoned(device, rows * cols);
        let launch = Launch {
            grid: [rows as u32, 1, 1],
            block: [if cols > 2048 { 1024 } else { 256 }, 1, 1],
            shared_bytes: (cols * 4) as u32,
        };
        // SAFETY: input, skip and out hold `rows × cols` halves, bias, gamma and beta `cols`.
        unsafe {
            launchers::layer_norm(
                device,
                launch,
                out.ptr(),
                i.ptr(),
                Some(b.ptr()),
                activation_code(act),
                alpha,
                Some(s.ptr()),
                g.ptr(),
                be.ptr(),
                1e-6,
                cols as i32,
            )
        }
        .unwrap();
        let got = download(device, &out, rows * cols);
        let pre = |r: usize, c: usize| {
            activate_f64(act, f64::from(input[r * cols + c] + bias[c])) * f64::from(alpha)
                + f64::from(skip[r * cols + c])
        };
        let worst = layer_norm_error((rows, cols), pre, &gamma, &beta, &got);
        assert!(worst < 1e-2, "case {case}: max abs error {worst}");
        eprintln!("layer_norm case {case} ({rows}x{cols}): max abs error {worst:.2e}");
    }
}

/// The small-batch dense kernel against a naive f64 product, bias and activation: one to four
/// rows, widths from the heads' 3 outputs to smolgen's 6144, with and without a bias.
pub fn check_dense_rows(device: &dyn GpuDevice) {
    let warp = device.info().warp_size;
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
        let gpu = [&x, &w, &bias].map(|v| upload(device, v));
        let y = poisoned(device, rows * n);
        // As the executor launches it: at most one split per warp of the block.
        let warps_per_block = (ROW_THREADS / warp) as usize;
        let splits = lc0rs::gpu::kernels::dense_rows_splits(k, warp as usize).min(warps_per_block);
        let launch = Launch {
            grid: [n.div_ceil(warps_per_block / splits) as u32, 1, 1],
            block: [ROW_THREADS, 1, 1],
            shared_bytes: 0,
        };
        // SAFETY: x holds `rows × k`, w `n × k`, bias `n` and y `rows × n` halves.
        unsafe {
            launchers::dense_rows(
                device,
                launch,
                gpu[0].ptr(),
                k as i32,
                gpu[1].ptr(),
                with_bias.then(|| gpu[2].ptr()),
                y.ptr(),
                n as i32,
                rows as i32,
                n as i32,
                k as i32,
                activation_code(act),
                splits as i32,
            )
        }
        .unwrap();
        let got = download(device, &y, rows * n);
        let mut worst = 0.0f64;
        for r in 0..rows {
            for o in 0..n {
                let mut v: f64 = (0..k)
                    .map(|i| f64::from(x[r * k + i]) * f64::from(w[o * k + i]))
                    .sum();
                if with_bias {
                    v += f64::from(bias[o]);
                }
                let want = activate_f64(act, v);
                // fp16 output: half an ulp of |want| plus the fp32 sum's rounding.
                let err = (f64::from(got[r * n + o]) - want).abs() / (1.0 + want.abs());
                worst = worse(worst, err);
            }
        }
        assert!(worst < 2e-3, "case {case}: max relative error {worst}");
        eprintln!("dense_rows case {case} ({rows}x{n}x{k}, {act:?}): max error {worst:.2e}");
    }
}

/// The warp LayerNorms (`layer_norm_warp_*`), one warp (or wave) per row.
pub fn check_warp_layer_norm(device: &dyn GpuDevice) {
    let warp = device.info().warp_size;
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
        let gpu = [&input, &skip, &bias, &gamma, &beta].map(|v| upload(device, v));
        let skip_ptr = with_skip.then(|| gpu[1].ptr());
        let rows_per_block = (ROW_THREADS / warp) as usize;
        let launch = Launch {
            grid: [rows.div_ceil(rows_per_block) as u32, 1, 1],
            block: [ROW_THREADS, 1, 1],
            shared_bytes: 0,
        };
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
        // Both members: gamma and beta loaded with the row or after the sums.
        for early in [false, true] {
            let kernel =
                lc0rs::gpu::kernels::layer_norm_warp_kernel(cols, warp as usize, act, early)
                    .unwrap();
            let out = poisoned(device, rows * cols);
            // SAFETY: the inputs, skip and out hold `rows × cols` halves, bias, gamma and beta `cols`.
            unsafe {
                launchers::layer_norm_warp(
                    device,
                    kernel,
                    launch,
                    out.ptr(),
                    gpu[0].ptr(),
                    Some(gpu[2].ptr()),
                    alpha,
                    skip_ptr,
                    gpu[3].ptr(),
                    gpu[4].ptr(),
                    1e-6,
                    rows as i32,
                    cols as i32,
                )
            }
            .unwrap();
            let got = download(device, &out, rows * cols);
            let worst = layer_norm_error((rows, cols), pre, &gamma, &beta, &got);
            let name = kernel.name();
            assert!(worst < 1e-2, "case {case} {name}: max abs error {worst}");
            eprintln!("{name} case {case} ({rows}x{cols}, {act:?}): max abs error {worst:.2e}");
        }
    }
}

/// NVIDIA-only kernels (tensor cores, `cp.async`) are compiled for sm_80 and newer only: on an
/// older GPU the check fails with this message, not with a launch error.
fn assert_has_kernel(device: &dyn GpuDevice, kernel: &str) {
    let info = device.info();
    assert!(
        device.has_kernel(kernel),
        "{kernel} was not compiled for {} ({}): it needs an NVIDIA GPU of sm_80 or newer",
        info.name,
        info.arch
    );
}

/// The fused LayerNorm + dense kernel (`layer_norm_dense_mma`, NVIDIA only): `normed` against
/// LayerNorm in f64, and `y` against the dense layer and activation in f64 applied to that
/// reference rounded to fp16 (the kernel's A operand is fp16), at T82's and BT4's FFN1 shapes,
/// the smolgen compression after the second LayerNorm (32 outputs) and smaller ones of every
/// width, with and without the input's bias.
pub fn check_norm_dense(device: &dyn GpuDevice) {
    use lc0rs::gpu::kernels::norm_dense_launch;
    for (case, &(m, n, k, act, with_bias)) in [
        (64usize, 1024usize, 768usize, Activation::Relu2, true),
        (256, 1536, 768, Activation::Mish, true),
        (32, 64, 256, Activation::Identity, false),
        (16, 96, 512, Activation::Relu2, true),
        (64, 1536, 1024, Activation::Mish, true),
        (128, 32, 1024, Activation::Identity, true),
        (64, 32, 768, Activation::Identity, false),
    ]
    .iter()
    .enumerate()
    {
        let seed = 500 + case as u64;
        let (x, skip, x_bias) = (
            random_f16(m * k, seed, 3.0),
            random_f16(m * k, seed + 1, 1.0),
            random_f16(k, seed + 2, 0.5),
        );
        let (gamma, beta) = (random_f16(k, seed + 3, 1.5), random_f16(k, seed + 4, 0.5));
        let (w, bias) = (
            random_f16(n * k, seed + 5, 0.05),
            random_f16(n, seed + 6, 0.5),
        );
        let alpha = 0.6_f32;
        let gpu = [&x, &skip, &x_bias, &gamma, &beta, &w, &bias].map(|v| upload(device, v));
        let (normed, y) = (poisoned(device, m * k), poisoned(device, m * n));
        let (kernel, launch) = norm_dense_launch(m, n, k).expect("a supported shape");
        assert_has_kernel(device, kernel.name());
        // SAFETY: x, skip and normed hold `m × k` halves, the biases, gamma and beta `k` or `n`,
        // w `n × k` and y `m × n` (m and n whole blocks, the shape's launch).
        unsafe {
            launchers::layer_norm_dense_mma(
                device,
                kernel,
                launch,
                normed.ptr(),
                gpu[0].ptr(),
                with_bias.then(|| gpu[2].ptr()),
                alpha,
                gpu[1].ptr(),
                gpu[3].ptr(),
                gpu[4].ptr(),
                1e-6,
                gpu[5].ptr(),
                Some(gpu[6].ptr()),
                activation_code(act),
                y.ptr(),
                n as i32,
            )
        }
        .unwrap();
        let pre = |r: usize, c: usize| {
            let b = if with_bias { x_bias[c] } else { 0.0 };
            f64::from(x[r * k + c] + b) * f64::from(alpha) + f64::from(skip[r * k + c])
        };
        let got_normed = download(device, &normed, m * k);
        let norm_error = layer_norm_error((m, k), pre, &gamma, &beta, &got_normed);
        assert!(
            norm_error < 1e-2,
            "case {case}: normed max abs error {norm_error}"
        );
        // The kernel's A operand: the normalised rows rounded to fp16.
        let reference: Vec<f64> = layer_norm_f64((m, k), pre, &gamma, &beta)
            .into_iter()
            .map(|z| f64::from(f16::from_f64(z).to_f32()))
            .collect();
        let got = download(device, &y, m * n);
        let mut worst = 0.0f64;
        for r in 0..m {
            for o in 0..n {
                let v: f64 = (0..k)
                    .map(|c| reference[r * k + c] * f64::from(w[o * k + c]))
                    .sum::<f64>()
                    + f64::from(bias[o]);
                let want = activate_f64(act, v);
                let err = (f64::from(got[r * n + o]) - want).abs() / (1.0 + want.abs());
                worst = worse(worst, err);
            }
        }
        assert!(worst < 4e-3, "case {case}: y max relative error {worst}");
        eprintln!(
            "layer_norm_dense_mma case {case} ({m}x{n}x{k}, {act:?}): normed {norm_error:.2e}, y {worst:.2e}"
        );
    }
}

/// The small-batch dense kernel on tensor cores (`dense_mma`, NVIDIA only) against the dense
/// layer and activation in f64: T82's QKV, FFN2 and smolgen shapes at batch 1, BT4's FFN2, and
/// row counts that leave the last 16-row group partial, whose missing rows must stay untouched
/// (the output buffer is poisoned up to the end of the last block's 64 rows).
pub fn check_dense_mma(device: &dyn GpuDevice) {
    use lc0rs::gpu::kernels::dense_mma_launch;
    for (case, &(m, n, k, act, with_bias)) in [
        (64usize, 2304usize, 768usize, Activation::Identity, true),
        (64, 768, 1024, Activation::Identity, true),
        (24, 4096, 256, Activation::Identity, false),
        (64, 32, 768, Activation::Identity, false),
        (64, 1024, 1536, Activation::Mish, true),
        (40, 96, 512, Activation::Relu2, true),
        (7, 64, 1024, Activation::Swish, true),
        // Wide layers: 4 row groups a block (T82's QKV above; here 40 of 64 rows), 2 (BT4's QKV).
        (40, 2304, 768, Activation::Identity, true),
        (100, 3072, 1024, Activation::Identity, true),
    ]
    .iter()
    .enumerate()
    {
        let seed = 700 + case as u64;
        let x = random_f16(m * k, seed, 1.0);
        let w = random_f16(n * k, seed + 1, 0.05);
        let bias = random_f16(n, seed + 2, 0.5);
        let gpu = [&x, &w, &bias].map(|v| upload(device, v));
        let padded = m.next_multiple_of(64);
        let y = poisoned(device, padded * n);
        let (kernel, launch) = dense_mma_launch(m, n, k).expect("a supported shape");
        assert_has_kernel(device, kernel.name());
        // SAFETY: x holds `m × k`, w `n × k`, bias `n` halves, y `m` rows padded to 64 of `n`.
        unsafe {
            launchers::dense_mma(
                device,
                kernel,
                launch,
                gpu[0].ptr(),
                gpu[1].ptr(),
                with_bias.then(|| gpu[2].ptr()),
                activation_code(act),
                y.ptr(),
                m as i32,
                n as i32,
            )
        }
        .unwrap();
        let got = download(device, &y, padded * n);
        let mut worst = 0.0f64;
        for r in 0..m {
            for o in 0..n {
                let v: f64 = (0..k)
                    .map(|i| f64::from(x[r * k + i]) * f64::from(w[o * k + i]))
                    .sum::<f64>()
                    + if with_bias { f64::from(bias[o]) } else { 0.0 };
                let want = activate_f64(act, v);
                let err = (f64::from(got[r * n + o]) - want).abs() / (1.0 + want.abs());
                worst = worse(worst, err);
            }
        }
        let written_past = got[m * n..].iter().filter(|v| !v.is_nan()).count();
        assert_eq!(written_past, 0, "case {case}: values written past row {m}");
        assert!(worst < 4e-3, "case {case}: max relative error {worst}");
        eprintln!("dense_mma case {case} ({m}x{n}x{k}, {act:?}): max error {worst:.2e}");
    }
}
