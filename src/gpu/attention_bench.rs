//! The attention microbenchmark (`lc0rs attnbench`): which attention wins at lc0's shapes (64
//! tokens, heads × depth, with or without the smolgen bias). Every implementation runs on the same
//! inputs on one device; its output is checked against an f64 reference before it is timed.
//!
//! The implementations: a naive kernel (one thread per query), the unfused path (a strided-batched
//! GEMM per head for the scores, a softmax kernel, a GEMM per head for the context: how a backend
//! without a fused kernel runs it, as lc0's HIP backend does with one pointer-array GEMM per
//! product instead of one per head), and the executor's two kernels, portable and tensor-core.

use half::f16;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::gpu::kernels::launchers::{self, NaiveAttention};
use crate::gpu::kernels::{AttentionArgs, AttentionFamily, AttentionKernel, attention_launch};
use crate::gpu::{BatchedProduct, GpuBuffer, GpuDevice, GpuError, Launch};
use crate::profile::Peak;

/// One attention implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionImpl {
    Naive,
    Unfused,
    Portable,
    TensorCores,
    MatrixCores,
}

impl AttentionImpl {
    pub const ALL: [Self; 5] = [
        Self::Naive,
        Self::Unfused,
        Self::Portable,
        Self::TensorCores,
        Self::MatrixCores,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Naive => "naive",
            Self::Unfused => "unfused",
            Self::Portable => "portable",
            Self::TensorCores => "mma",
            Self::MatrixCores => "matrix",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|i| i.name() == name)
    }

    /// The largest max-abs error against the f64 reference that counts as correct (for the
    /// benchmark's inputs: values in ±2, bias in ±3). The unfused path rounds its scores and
    /// probabilities to fp16 between the steps (as lc0 does): about four times the fused
    /// kernels' error, which is the fp16 rounding of the output.
    pub fn tolerance(self) -> f64 {
        match self {
            Self::Unfused => 1e-2,
            _ => 4e-3,
        }
    }
}

/// One shape: `batch` positions of 64 tokens, `heads` heads of `depth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    pub heads: usize,
    pub depth: usize,
    pub batch: usize,
    /// With the smolgen bias ([position][head][64][64]) added to the scores.
    pub smolgen: bool,
}

impl Case {
    fn d_model(&self) -> usize {
        self.heads * self.depth
    }

    /// Two products of 64 × 64 × depth per head and position, 2 FLOPs per multiply-add.
    pub fn flops(&self) -> f64 {
        4.0 * (self.batch * self.heads * 64 * 64 * self.depth) as f64
    }

    /// Compulsory traffic in fp16: Q, K, V and the output once, plus the bias if given.
    pub fn bytes(&self) -> f64 {
        let per_position = 4 * 64 * self.d_model() + usize::from(self.smolgen) * self.heads * 4096;
        2.0 * (self.batch * per_position) as f64
    }
}

/// One timed implementation at one shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    pub implementation: AttentionImpl,
    pub case: Case,
    /// Median time of one call, or why the device cannot time it (the emulator has no clock).
    pub us: Result<f64, String>,
    /// Largest absolute difference from the f64 reference (first and last position).
    pub max_abs_error: f64,
}

impl Measurement {
    pub fn tflops(&self) -> Option<f64> {
        self.us
            .as_ref()
            .ok()
            .map(|us| self.case.flops() / us * 1e-6)
    }

    pub fn gbytes_per_s(&self) -> Option<f64> {
        self.us
            .as_ref()
            .ok()
            .map(|us| self.case.bytes() / us * 1e-3)
    }

    /// The CSV header of [`csv_row`](Self::csv_row) (also printed by the PyTorch script).
    pub const CSV_HEADER: &str = "kernel,heads,depth,batch,bias,us,tflops,gbps,pct_flop_peak,pct_bw_peak,max_abs_err,status,notes";

    pub fn csv_row(&self, peak: Option<Peak>) -> String {
        let c = &self.case;
        let numbers = match (&self.us, self.tflops(), self.gbytes_per_s()) {
            (Ok(us), Some(tflops), Some(gbps)) => {
                let (pct_flop, pct_bw) = peak.map_or((String::new(), String::new()), |p| {
                    (
                        format!("{:.1}", 100.0 * tflops / p.tflops),
                        format!("{:.1}", 100.0 * gbps / p.gbytes_per_s),
                    )
                });
                format!("{us:.2},{tflops:.2},{gbps:.1},{pct_flop},{pct_bw}")
            }
            _ => ",,,,".to_owned(),
        };
        let note = self.us.as_ref().err().map_or(String::new(), |why| {
            format!("not timed: {}", why.replace(',', ";"))
        });
        format!(
            "{},{},{},{},{},{numbers},{:.3e},ok,{note}",
            self.implementation.name(),
            c.heads,
            c.depth,
            c.batch,
            if c.smolgen { "yes" } else { "no" },
            self.max_abs_error,
        )
    }
}

/// Why an implementation could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum AttnBenchError {
    #[error("{implementation} at {case:?}: not available on this device ({reason})")]
    Unavailable {
        implementation: &'static str,
        case: Case,
        reason: String,
    },
    #[error(
        "{implementation} at {case:?}: max abs error {error:.3e} against the f64 reference (limit {limit:.0e}), at position {position}, head {head}, query {query}"
    )]
    Wrong {
        implementation: &'static str,
        case: Case,
        error: f64,
        limit: f64,
        position: usize,
        head: usize,
        query: usize,
    },
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

/// Inputs and outputs of one shape on the device, with the host's copy of the inputs.
struct Buffers {
    qkv: Vec<f32>,
    bias: Vec<f32>,
    qkv_gpu: GpuBuffer,
    bias_gpu: GpuBuffer,
    ctx: GpuBuffer,
    /// The unfused path's scores and probabilities, [position][head][64][64].
    scores: GpuBuffer,
}

impl Buffers {
    fn new(device: &dyn GpuDevice, case: &Case, seed: u64) -> Result<Self, GpuError> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut values = |n: usize, scale: f32| -> Vec<f32> {
            (0..n)
                .map(|_| f16::from_f32(rng.random_range(-scale..scale)).to_f32())
                .collect()
        };
        let qkv = values(case.batch * 64 * 3 * case.d_model(), 2.0);
        let bias = values(case.batch * case.heads * 4096, 3.0);
        let upload = |v: &[f32]| -> Result<GpuBuffer, GpuError> {
            let bytes: Vec<u8> = v
                .iter()
                .flat_map(|&x| f16::from_f32(x).to_le_bytes())
                .collect();
            let mut buffer = device.alloc(bytes.len())?;
            buffer.copy_from_host(device, 0, &bytes)?;
            Ok(buffer)
        };
        Ok(Self {
            qkv_gpu: upload(&qkv)?,
            bias_gpu: upload(&bias)?,
            ctx: device.alloc(case.batch * 64 * case.d_model() * 2)?,
            scores: device.alloc(case.batch * case.heads * 4096 * 2)?,
            qkv,
            bias,
        })
    }
}

/// Times `implementation` at `case`: one checked call, `warmup` calls, then `repeats` runs of
/// `iterations` calls between two events; the median per-call time.
pub fn measure(
    device: &dyn GpuDevice,
    implementation: AttentionImpl,
    case: Case,
    (warmup, iterations, repeats): (usize, usize, usize),
) -> Result<Measurement, AttnBenchError> {
    check_available(device, implementation, &case)?;
    let buffers = Buffers::new(device, &case, 82)?;
    // SAFETY: `buffers` were just made for `case` on `device`, and only these calls use them.
    let max_abs_error = unsafe { check(device, implementation, &case, &buffers)? };
    let runs = (warmup, iterations, repeats);
    // SAFETY: as for `check`.
    let us = match unsafe { time(device, implementation, &case, &buffers, runs) } {
        Ok(us) => Ok(us),
        Err(GpuError::Unsupported(why)) => Err(why),
        Err(error) => return Err(error.into()),
    };
    Ok(Measurement {
        implementation,
        case,
        us,
        max_abs_error,
    })
}

/// The median per-call time in µs of `repeats` event-timed runs of `iterations` calls.
///
/// # Safety
/// As for [`run`].
unsafe fn time(
    device: &dyn GpuDevice,
    implementation: AttentionImpl,
    case: &Case,
    buffers: &Buffers,
    (warmup, iterations, repeats): (usize, usize, usize),
) -> Result<f64, GpuError> {
    // SAFETY: the caller's promise, passed on to `run`.
    unsafe {
        // The first event before any warm-up, so that a device without events says so at once.
        device.clear_events();
        device.record_event()?;
        for _ in 0..warmup {
            run(device, implementation, case, buffers)?;
        }
        let mut times = Vec::with_capacity(repeats);
        for _ in 0..repeats.max(1) {
            let start = device.record_event()?;
            for _ in 0..iterations.max(1) {
                run(device, implementation, case, buffers)?;
            }
            let end = device.record_event()?;
            times.push(f64::from(device.elapsed_ms(start, end)?) * 1e3 / iterations.max(1) as f64);
        }
        device.clear_events();
        times.sort_by(f64::total_cmp);
        Ok(times[times.len() / 2])
    }
}

fn check_available(
    device: &dyn GpuDevice,
    implementation: AttentionImpl,
    case: &Case,
) -> Result<(), AttnBenchError> {
    let unavailable = |reason: String| AttnBenchError::Unavailable {
        implementation: implementation.name(),
        case: *case,
        reason,
    };
    // Every implementation is measured at the depths the fused kernels have (16, 32, 64).
    let Some(fused) = AttentionKernel::for_depth(case.depth, family(implementation)) else {
        return Err(unavailable(format!(
            "head depth {} (the kernels have 16, 32 and 64)",
            case.depth
        )));
    };
    let kernel = match implementation {
        AttentionImpl::Naive => naive_member(case.depth).name(),
        AttentionImpl::Unfused => "softmax_rows64",
        AttentionImpl::Portable | AttentionImpl::TensorCores | AttentionImpl::MatrixCores => {
            fused.name()
        }
    };
    if !device.has_kernel(kernel) {
        return Err(unavailable(format!("no {kernel} kernel")));
    }
    Ok(())
}

/// One call of `implementation` over `buffers`.
///
/// # Safety
/// `b` was made by `Buffers::new` on `device`'s GPU for `case`, and no other work uses it.
unsafe fn run(
    device: &dyn GpuDevice,
    implementation: AttentionImpl,
    case: &Case,
    b: &Buffers,
) -> Result<(), GpuError> {
    // SAFETY: `b`'s buffers hold `case`'s qkv, bias, scores and context (the caller's
    // promise), the sizes every launch below derives from `case`.
    unsafe {
        let bias = case.smolgen.then(|| b.bias_gpu.ptr());
        let heads = case.heads as i32;
        match implementation {
            AttentionImpl::Naive => launchers::attention_naive(
                device,
                naive_member(case.depth),
                Launch {
                    grid: [case.heads as u32, case.batch as u32, 1],
                    block: [64, 1, 1],
                    shared_bytes: 0,
                },
                b.qkv_gpu.ptr(),
                bias,
                b.ctx.ptr(),
                heads,
            ),
            AttentionImpl::Unfused => unfused(device, case, b),
            AttentionImpl::Portable | AttentionImpl::TensorCores | AttentionImpl::MatrixCores => {
                let kernel = AttentionKernel::for_depth(case.depth, family(implementation))
                    .expect("checked by check_available");
                let info = device.info();
                let shape = (info.multiprocessors as usize, info.warp_size as usize);
                let how = attention_launch(kernel, case.heads, case.batch, shape);
                let args = AttentionArgs {
                    qkv: b.qkv_gpu.ptr(),
                    qkv_bias: None,
                    bias,
                    ctx: b.ctx.ptr(),
                    heads,
                };
                kernel.launch(device, how, args)
            }
        }
    }
}

/// The fused kernel family an implementation runs (the naive and unfused ones are measured at
/// the portable kernel's depths).
fn family(implementation: AttentionImpl) -> AttentionFamily {
    match implementation {
        AttentionImpl::TensorCores => AttentionFamily::TensorCores,
        AttentionImpl::MatrixCores => AttentionFamily::MatrixCores,
        _ => AttentionFamily::Portable,
    }
}

/// The naive kernel for a depth of 16, 32 or 64 (`check_available` turns away the others).
fn naive_member(depth: usize) -> NaiveAttention {
    match depth {
        16 => NaiveAttention::D16,
        32 => NaiveAttention::D32,
        _ => NaiveAttention::D64,
    }
}

/// Scores = Q·Kᵀ/√depth per head (batched over positions), softmax with the bias, context = P·V
/// per head.
///
/// # Safety
/// As for [`run`].
unsafe fn unfused(device: &dyn GpuDevice, case: &Case, b: &Buffers) -> Result<(), GpuError> {
    // SAFETY: as in `run`: `b` holds `case`'s tensors, which bound every product and row.
    unsafe {
        let (d_model, depth) = (case.d_model(), case.depth);
        let row_stride = 3 * d_model;
        let position_stride = 64 * row_stride;
        let half = |buffer: &GpuBuffer, elements: usize| buffer.at(2 * elements);
        for h in 0..case.heads {
            device.batched_product(&BatchedProduct {
                batch: case.batch,
                m: 64,
                n: 64,
                k: depth,
                alpha: 1.0 / (depth as f32).sqrt(),
                a: half(&b.qkv_gpu, h * depth),
                lda: row_stride,
                stride_a: position_stride,
                b: half(&b.qkv_gpu, d_model + h * depth),
                ldb: row_stride,
                stride_b: position_stride,
                b_transposed: false,
                c: half(&b.scores, h * 4096),
                ldc: 64,
                stride_c: case.heads * 4096,
            })?;
        }
        let rows = case.batch * case.heads * 64;
        launchers::softmax_rows64(
            device,
            Launch::elements(rows * 32),
            b.scores.ptr(),
            case.smolgen.then(|| b.bias_gpu.ptr()),
            rows as i64,
        )?;
        for h in 0..case.heads {
            device.batched_product(&BatchedProduct {
                batch: case.batch,
                m: 64,
                n: depth,
                k: 64,
                alpha: 1.0,
                a: half(&b.scores, h * 4096),
                lda: 64,
                stride_a: case.heads * 4096,
                b: half(&b.qkv_gpu, 2 * d_model + h * depth),
                ldb: row_stride,
                stride_b: position_stride,
                b_transposed: true,
                c: half(&b.ctx, h * depth),
                ldc: d_model,
                stride_c: 64 * d_model,
            })?;
        }
        Ok(())
    }
}

/// Runs once into a poisoned output and compares the first and the last position with the f64
/// reference; the max abs error.
///
/// # Safety
/// As for [`run`].
unsafe fn check(
    device: &dyn GpuDevice,
    implementation: AttentionImpl,
    case: &Case,
    b: &Buffers,
) -> Result<f64, AttnBenchError> {
    let elements = case.batch * 64 * case.d_model();
    // SAFETY: `b` was made for `case` on this device (the caller's promise): `ctx` holds
    // `elements` halves; nothing else uses the buffers.
    unsafe {
        device.fill(b.ctx.ptr(), elements * 2, 0xFF)?; // fp16 NaN everywhere
        run(device, implementation, case, b)?;
    }
    let mut bytes = vec![0u8; elements * 2];
    b.ctx.copy_to_host(device, 0, &mut bytes)?;
    let got: Vec<f32> = bytes
        .chunks_exact(2)
        .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
        .collect();
    let limit = implementation.tolerance();
    let mut worst = 0.0f64;
    for position in [0, case.batch - 1] {
        for head in 0..case.heads {
            for query in 0..64 {
                let want = reference_row(case, &b.qkv, &b.bias, (position, head, query));
                let start = (position * 64 + query) * case.d_model() + head * case.depth;
                let error = want
                    .iter()
                    .zip(&got[start..start + case.depth])
                    .map(|(w, &g)| (f64::from(g) - w).abs())
                    .fold(
                        0.0,
                        |a: f64, e| if e.is_nan() { f64::INFINITY } else { a.max(e) },
                    );
                worst = worst.max(error);
                if worst > limit {
                    return Err(AttnBenchError::Wrong {
                        implementation: implementation.name(),
                        case: *case,
                        error: worst,
                        limit,
                        position,
                        head,
                        query,
                    });
                }
            }
        }
    }
    Ok(worst)
}

/// The attention output of one query, in f64.
pub fn reference_row(
    case: &Case,
    qkv: &[f32],
    bias: &[f32],
    (position, head, query): (usize, usize, usize),
) -> Vec<f64> {
    let (d_model, depth) = (case.d_model(), case.depth);
    let at = |token: usize, part: usize, j: usize| {
        f64::from(qkv[(position * 64 + token) * 3 * d_model + part * d_model + head * depth + j])
    };
    let logits: Vec<f64> = (0..64)
        .map(|key| {
            let dot: f64 = (0..depth).map(|j| at(query, 0, j) * at(key, 1, j)).sum();
            let smolgen = if case.smolgen {
                f64::from(bias[((position * case.heads + head) * 64 + query) * 64 + key])
            } else {
                0.0
            };
            dot / (depth as f64).sqrt() + smolgen
        })
        .collect();
    let max = logits.iter().copied().fold(f64::MIN, f64::max);
    let weights: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
    let sum: f64 = weights.iter().sum();
    (0..depth)
        .map(|j| (0..64).map(|key| weights[key] / sum * at(key, 2, j)).sum())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flops_and_bytes_follow_the_shape() {
        // T82's attention: 24 heads of depth 32. Per position and head 2·64·64·32 multiply-adds.
        let case = Case {
            heads: 24,
            depth: 32,
            batch: 256,
            smolgen: true,
        };
        assert_eq!(case.flops(), 4.0 * 256.0 * 24.0 * 4096.0 * 32.0);
        // Q, K, V, output: 4 × 64 × 768 halves; bias 24 × 4096 halves; per position.
        assert_eq!(
            case.bytes(),
            2.0 * 256.0 * (4.0 * 64.0 * 768.0 + 24.0 * 4096.0)
        );
        let m = Measurement {
            implementation: AttentionImpl::Portable,
            case,
            us: Ok(100.0),
            max_abs_error: 1e-3,
        };
        assert!((m.tflops().unwrap() - case.flops() / 100e-6 / 1e12).abs() < 1e-9);
        let row = m.csv_row(None);
        assert!(row.starts_with("portable,24,32,256,yes,100.00,"), "{row}");
        assert_eq!(
            row.split(',').count(),
            Measurement::CSV_HEADER.split(',').count()
        );
        let untimed = Measurement {
            us: Err("timing, here".to_owned()),
            ..m
        };
        let row = untimed.csv_row(None);
        assert!(
            row.ends_with(",1.000e-3,ok,not timed: timing; here"),
            "{row}"
        );
        assert_eq!(
            row.split(',').count(),
            Measurement::CSV_HEADER.split(',').count()
        );
    }

    #[test]
    fn the_reference_of_equal_keys_is_the_mean_of_the_values() {
        // With all Q and K zero the scores are equal: the output is the mean of V's rows.
        let case = Case {
            heads: 1,
            depth: 16,
            batch: 1,
            smolgen: false,
        };
        let mut qkv = vec![0.0f32; 64 * 3 * 16];
        for token in 0..64 {
            for j in 0..16 {
                qkv[token * 48 + 32 + j] = (token * 16 + j) as f32;
            }
        }
        let row = reference_row(&case, &qkv, &[], (0, 0, 5));
        for (j, v) in row.iter().enumerate() {
            // mean over tokens of token·16 + j = 31.5·16 + j
            assert!((v - (31.5 * 16.0 + j as f64)).abs() < 1e-9);
        }
    }

    #[test]
    fn implementations_are_named_both_ways() {
        for i in AttentionImpl::ALL {
            assert_eq!(AttentionImpl::from_name(i.name()), Some(i));
        }
        assert_eq!(AttentionImpl::from_name("flash"), None);
    }
}
