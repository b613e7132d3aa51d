//! Per-kernel checks of the residual-tower kernels (`hip/conv.hip`) against f64 references
//! written from the definitions (lc0's 3×3 convolution with zero padding, squeeze-excitation in
//! scale-and-bias form, the policy maps), for every device. Outputs are poisoned (NaN) first.

use half::f16;
use lc0rs::gpu::kernels::{SE_RESIDUAL_THREADS, activation_code, launchers};
use lc0rs::gpu::{GpuBuffer, GpuDevice, Launch};
use lc0rs::weights::format::Activation;

use super::gpu::{activate_f64, worse};
use super::kernels::{download, poisoned, random_f16, upload};

/// The gather of 3×3 neighbourhoods: every value is a copy (or zero), so equality is exact.
pub fn check_conv_gather(device: &dyn GpuDevice) {
    // 112 and 16 channels take the 8-wide path, 5 the scalar one.
    for (case, &(batch, channels)) in [(2usize, 112usize), (3, 16), (1, 5)].iter().enumerate() {
        let x = random_f16(batch * 64 * channels, 500 + case as u64, 2.0);
        let x_gpu = upload(device, &x);
        let out = poisoned(device, batch * 64 * 9 * channels);
        let vector = if channels % 8 == 0 { 8 } else { 1 };
        // SAFETY: x holds `batch × 64 × channels` halves, out 9 times that.
        unsafe {
            launchers::conv_gather3x3(
                device,
                Launch::elements(batch * 64 * 9 * channels / vector),
                x_gpu.ptr(),
                channels as i32,
                out.ptr(),
                batch as i32,
            )
        }
        .unwrap();
        let got = download(device, &out, batch * 64 * 9 * channels);
        for b in 0..batch {
            for square in 0..64i32 {
                let (rank, file) = (square / 8, square % 8);
                for dy in -1..=1 {
                    for dx in -1..=1 {
                        let tap = ((dy + 1) * 3 + dx + 1) as usize;
                        let (r, f) = (rank + dy, file + dx);
                        for c in 0..channels {
                            let want = if (0..8).contains(&r) && (0..8).contains(&f) {
                                x[(b * 64 + (r * 8 + f) as usize) * channels + c]
                            } else {
                                0.0
                            };
                            let row = b * 64 + square as usize;
                            let at = (row * 9 + tap) * channels + c;
                            assert_eq!(
                                got[at].to_bits(),
                                want.to_bits(),
                                "case {case}: position {b} square {square} tap {tap} channel {c}"
                            );
                        }
                    }
                }
            }
        }
        eprintln!("conv_gather3x3 case {case} ({batch}x{channels}): exact");
    }
}

/// `x = act(y + bias + x)`.
pub fn check_bias_residual_act(device: &dyn GpuDevice) {
    let (rows, cols) = (3 * 64, 24);
    let y = random_f16(rows * cols, 600, 2.0);
    let bias = random_f16(cols, 601, 0.5);
    let x = random_f16(rows * cols, 602, 2.0);
    let gpu = [&y, &bias].map(|v| upload(device, v));
    let x_gpu = upload(device, &x);
    // SAFETY: y and x hold `rows × cols` halves, bias `cols`.
    unsafe {
        launchers::bias_residual_act(
            device,
            Launch::elements(rows * cols),
            gpu[0].ptr(),
            gpu[1].ptr(),
            x_gpu.ptr(),
            rows as i64,
            cols as i32,
            activation_code(Activation::Mish),
        )
    }
    .unwrap();
    let got = download(device, &x_gpu, rows * cols);
    let mut worst = 0.0f64;
    for i in 0..rows * cols {
        let v = f64::from(y[i]) + f64::from(bias[i % cols]) + f64::from(x[i]);
        let want = activate_f64(Activation::Mish, v);
        worst = worse(worst, (f64::from(got[i]) - want).abs() / (1.0 + want.abs()));
    }
    assert!(worst < 2e-3, "max relative error {worst}");
    eprintln!("bias_residual_act: max error {worst:.2e}");
}

/// Squeeze-excitation and the residual: pooled mean of `y + bias` per channel, fc1 + act,
/// fc2, then `act(sigmoid(γ)·(y + bias) + β + x)`, in f64.
pub fn check_se_residual(device: &dyn GpuDevice) {
    // Channel and SE widths below, at and above a 32- or 64-wide warp's.
    for (case, &(batch, channels, se, act)) in [
        (2usize, 16usize, 4usize, Activation::Mish),
        (3, 72, 40, Activation::Relu),
        (1, 130, 70, Activation::Mish),
    ]
    .iter()
    .enumerate()
    {
        let seed = 700 + 10 * case as u64;
        let y = random_f16(batch * 64 * channels, seed, 2.0);
        let bias = random_f16(channels, seed + 1, 0.5);
        let x = random_f16(batch * 64 * channels, seed + 2, 2.0);
        let w1 = random_f16(se * channels, seed + 3, 0.3);
        let b1 = random_f16(se, seed + 4, 0.2);
        let w2 = random_f16(2 * channels * se, seed + 5, 0.3);
        let b2 = random_f16(2 * channels, seed + 6, 0.2);
        let gpu: Vec<GpuBuffer> = [&y, &bias, &w1, &b1, &w2, &b2]
            .iter()
            .map(|v| upload(device, v))
            .collect();
        let x_gpu = upload(device, &x);
        let launch = Launch {
            grid: [batch as u32, 1, 1],
            block: [SE_RESIDUAL_THREADS, 1, 1],
            shared_bytes: ((3 * channels + se) * 4) as u32,
        };
        // SAFETY: y and x hold `batch × 64 × channels` halves, bias `channels`, w1 and b1
        // `se × channels` and `se`, w2 and b2 `2·channels × se` and `2·channels`.
        unsafe {
            launchers::se_residual(
                device,
                launch,
                gpu[0].ptr(),
                gpu[1].ptr(),
                x_gpu.ptr(),
                channels as i32,
                gpu[2].ptr(),
                gpu[3].ptr(),
                se as i32,
                gpu[4].ptr(),
                gpu[5].ptr(),
                activation_code(act),
            )
        }
        .unwrap();
        let got = download(device, &x_gpu, batch * 64 * channels);
        let with_bias: Vec<f64> = y
            .iter()
            .enumerate()
            .map(|(i, &v)| f64::from(v) + f64::from(bias[i % channels]))
            .collect();
        let want = se_f64(&with_bias, &x, batch, channels, (&w1, &b1), (&w2, &b2), act);
        let worst = got.iter().zip(&want).fold(0.0f64, |w, (&g, &t)| {
            worse(w, (f64::from(g) - t).abs() / (1.0 + t.abs()))
        });
        assert!(worst < 3e-3, "case {case}: max relative error {worst}");
        eprintln!(
            "se_residual case {case} ({batch}x{channels}, se {se}, {act:?}): max error {worst:.2e}"
        );
    }
}

/// Squeeze-excitation in f64 (lc0's scale-and-bias form) over `y` (`[batch·64][C]`, the
/// convolution's output with its bias): `act(sigmoid(γ)·y + β + x)`.
#[allow(clippy::too_many_arguments)]
pub fn se_f64(
    y: &[f64],
    x: &[f32],
    batch: usize,
    channels: usize,
    (w1, b1): (&[f32], &[f32]),
    (w2, b2): (&[f32], &[f32]),
    act: Activation,
) -> Vec<f64> {
    let se = b1.len();
    let mut out = vec![0.0; y.len()];
    for b in 0..batch {
        let at = |s: usize, c: usize| (b * 64 + s) * channels + c;
        let pooled: Vec<f64> = (0..channels)
            .map(|c| (0..64).map(|s| y[at(s, c)]).sum::<f64>() / 64.0)
            .collect();
        let hidden: Vec<f64> = (0..se)
            .map(|j| {
                let dot: f64 = (0..channels)
                    .map(|c| f64::from(w1[j * channels + c]) * pooled[c])
                    .sum();
                activate_f64(act, dot + f64::from(b1[j]))
            })
            .collect();
        let gates: Vec<f64> = (0..2 * channels)
            .map(|k| {
                (0..se)
                    .map(|j| f64::from(w2[k * se + j]) * hidden[j])
                    .sum::<f64>()
                    + f64::from(b2[k])
            })
            .collect();
        for s in 0..64 {
            for c in 0..channels {
                let scale = 1.0 / (1.0 + (-gates[c]).exp());
                out[at(s, c)] = activate_f64(
                    act,
                    scale * y[at(s, c)] + gates[channels + c] + f64::from(x[at(s, c)]),
                );
            }
        }
    }
    out
}

/// The policy gather through a permutation with unused inputs (−1): every output is its fp16
/// input exactly (as f32).
pub fn check_policy_gather(device: &dyn GpuDevice) {
    let (batch, count) = (3usize, 4000usize);
    let input = random_f16(batch * count, 800, 4.0);
    let input_gpu = upload(device, &input);
    // Index j goes to (j·7) mod 1858 for j < 1858 (7 is prime to 1858); the rest is unused.
    let map: Vec<i16> = (0..count)
        .map(|j| {
            if j < 1858 {
                ((j * 7) % 1858) as i16
            } else {
                -1
            }
        })
        .collect();
    let map_bytes: Vec<u8> = map.iter().flat_map(|i| i.to_le_bytes()).collect();
    let mut map_gpu = device.alloc(map_bytes.len()).unwrap();
    map_gpu.copy_from_host(device, 0, &map_bytes).unwrap();
    let mut out = device.alloc(batch * 1858 * 4).unwrap();
    out.fill(device, 0xFF).unwrap();
    // SAFETY: input holds `batch × count` halves, the map `count` indices, out `batch × 1858`
    // f32.
    unsafe {
        launchers::policy_gather(
            device,
            Launch::elements(batch * count),
            input_gpu.ptr(),
            count as i32,
            map_gpu.ptr(),
            count as i32,
            out.ptr(),
            batch as i32,
        )
    }
    .unwrap();
    let mut bytes = vec![0u8; batch * 1858 * 4];
    out.copy_to_host(device, 0, &mut bytes).unwrap();
    let got: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    for b in 0..batch {
        for j in 0..1858 {
            let want = f16::from_f32(input[b * count + j]).to_f32();
            assert_eq!(
                got[b * 1858 + (j * 7) % 1858],
                want,
                "position {b} input {j}"
            );
        }
    }
    eprintln!("policy_gather: exact");
}

/// Every tower kernel check of this file and of `winograd_kernels`, on one device.
pub fn check_tower_kernels(device: &dyn GpuDevice) {
    check_conv_gather(device);
    check_bias_residual_act(device);
    check_se_residual(device);
    check_policy_gather(device);
    super::winograd_kernels::check_winograd_convolutions(device);
    super::winograd_kernels::check_winograd_se(device);
}
