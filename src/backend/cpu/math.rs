//! The f32 building blocks of the CPU forward pass.
//!
//! GEMMs use the `gemm` crate: measured on the 2-core CI machine (AMD EPYC) for T82's shapes it
//! ran 135 GFLOP/s at batch 1 (64×768×768) against 54 for `matrixmultiply` (threaded), and the
//! same or better at batch 8 (152 vs 152, 163 vs 144 GFLOP/s), and it parallelises through
//! rayon, which the rest of the pass uses too.

use rayon::prelude::*;

use crate::weights::format::Activation;
use crate::weights::network::{Dense, LayerNorm};

/// `out[rows][outputs] = x[rows][inputs] · Wᵀ (+ b)`, W stored `[outputs][inputs]`.
pub fn dense(x: &[f32], rows: usize, layer: &Dense) -> Vec<f32> {
    let (k, n) = (layer.inputs, layer.outputs);
    debug_assert_eq!(x.len(), rows * k);
    let mut out = vec![0.0f32; rows * n];
    matmul_transposed(&mut out, x, &layer.weights, rows, k, n, parallelism());
    if let Some(bias) = &layer.biases {
        out.par_chunks_mut(n)
            .for_each(|row| row.iter_mut().zip(bias).for_each(|(o, b)| *o += b));
    }
    out
}

/// `out[m][n] = a[m][k] · b[n][k]ᵀ`, all row-major.
pub fn matmul_transposed(
    out: &mut [f32],
    a: &[f32],
    b: &[f32],
    m: usize,
    k: usize,
    n: usize,
    par: gemm::Parallelism,
) {
    assert!(
        out.len() == m * n && a.len() == m * k && b.len() == n * k,
        "matmul shapes"
    );
    // SAFETY: the asserts above keep every access of the strided views below in bounds:
    // dst is m×n with row stride n, lhs m×k with row stride k, rhs k×n read from b as bᵀ.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            1,
            k as isize,
            b.as_ptr(),
            k as isize,
            1,
            0.0,
            1.0,
            false,
            false,
            false,
            par,
        );
    }
}

/// gemm's parallelism: the threads of the rayon pool we run in.
pub fn parallelism() -> gemm::Parallelism {
    match rayon::current_num_threads() {
        0 | 1 => gemm::Parallelism::None,
        n => gemm::Parallelism::Rayon(n),
    }
}

/// lc0's activation functions (docs/lc0-format.md §3.1).
pub fn activate(activation: Activation, x: f32) -> f32 {
    match activation {
        Activation::Identity => x,
        Activation::Relu => x.max(0.0),
        Activation::Relu2 => {
            let r = x.max(0.0);
            r * r
        }
        Activation::Mish => x * softplus(x).tanh(),
        Activation::Swish => x / (1.0 + (-x).exp()),
        Activation::Selu => {
            const SCALE: f32 = 1.050_701;
            const ALPHA: f32 = 1.673_263_2;
            if x > 0.0 {
                SCALE * x
            } else {
                SCALE * ALPHA * (x.exp() - 1.0)
            }
        }
        Activation::Tanh => x.tanh(),
        Activation::Sigmoid => 1.0 / (1.0 + (-x).exp()),
    }
}

/// `ln(1 + eˣ)` without overflow.
fn softplus(x: f32) -> f32 {
    if x > 20.0 { x } else { x.exp().ln_1p() }
}

pub fn activate_all(activation: Activation, values: &mut [f32]) {
    if activation != Activation::Identity {
        values
            .par_iter_mut()
            .for_each(|v| *v = activate(activation, *v));
    }
}

/// `x = LN(x + alpha·y)` row by row (biased variance, as lc0).
pub fn residual_layer_norm(x: &mut [f32], y: &[f32], alpha: f32, ln: &LayerNorm) {
    let width = ln.gammas.len();
    x.par_chunks_mut(width)
        .zip(y.par_chunks(width))
        .for_each(|(row, skip)| {
            row.iter_mut().zip(skip).for_each(|(v, s)| *v += alpha * s);
            normalize_row(row, ln);
        });
}

/// `x = LN(x)` row by row.
pub fn layer_norm(x: &mut [f32], ln: &LayerNorm) {
    x.par_chunks_mut(ln.gammas.len())
        .for_each(|row| normalize_row(row, ln));
}

fn normalize_row(row: &mut [f32], ln: &LayerNorm) {
    let n = row.len() as f32;
    let mean = row.iter().sum::<f32>() / n;
    let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
    let inv = 1.0 / (var + ln.eps).sqrt();
    for ((v, g), b) in row.iter_mut().zip(&ln.gammas).zip(&ln.betas) {
        *v = (*v - mean) * inv * g + b;
    }
}

/// Softmax of a row in place, max subtracted first.
pub fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in row.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    row.iter_mut().for_each(|v| *v /= sum);
}

/// A read-only strided matrix view into a slice.
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub data: &'a [f32],
    pub offset: usize,
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl View<'_> {
    /// The index one past the last element the view reads.
    fn end(&self) -> usize {
        self.offset + (self.rows - 1) * self.row_stride + (self.cols - 1) * self.col_stride + 1
    }
}

/// `out[m][n] = alpha·out + beta·(a · b)` for strided views `a` (m×k) and `b` (k×n), `out`
/// dense row-major, on the calling thread.
pub fn matmul_views(out: &mut [f32], a: View<'_>, b: View<'_>, alpha: f32, beta: f32) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert!(b.rows == k && out.len() == m * n, "matmul shapes");
    assert!(
        a.end() <= a.data.len() && b.end() <= b.data.len(),
        "views in bounds"
    );
    // SAFETY: the asserts above keep every strided access inside the slices.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            alpha != 0.0,
            a.data.as_ptr().add(a.offset),
            a.col_stride as isize,
            a.row_stride as isize,
            b.data.as_ptr().add(b.offset),
            b.col_stride as isize,
            b.row_stride as isize,
            alpha,
            beta,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activations_hand_computed() {
        let close = |a: f32, b: f32| (a - b).abs() < 1e-5;
        assert!(
            close(activate(Activation::Relu, -2.0), 0.0)
                && close(activate(Activation::Relu, 1.5), 1.5)
        );
        assert!(
            close(activate(Activation::Relu2, 3.0), 9.0)
                && close(activate(Activation::Relu2, -3.0), 0.0)
        );
        // mish(1) = tanh(ln(1 + e)) = 0.865098; mish(-1) = -tanh(ln(1 + 1/e)) = -0.303401.
        assert!(close(activate(Activation::Mish, 1.0), 0.865_098));
        assert!(close(activate(Activation::Mish, -1.0), -0.303_401));
        assert!(close(activate(Activation::Mish, 30.0), 30.0), "no overflow");
        // swish(1) = 1/(1 + 1/e) = 0.731059.
        assert!(close(activate(Activation::Swish, 1.0), 0.731_059));
        // selu(-1) = 1.0507·1.67326·(1/e − 1) = -1.111331.
        assert!(close(activate(Activation::Selu, -1.0), -1.111_331));
        assert!(close(activate(Activation::Selu, 2.0), 2.101_402));
        assert!(close(activate(Activation::Tanh, 0.5), 0.462_117));
        assert!(close(activate(Activation::Sigmoid, 0.0), 0.5));
        assert!(close(activate(Activation::Identity, -7.25), -7.25));
    }

    #[test]
    fn layer_norm_hand_computed() {
        // [1, 2, 3, 4]: mean 2.5, biased variance 1.25.
        let ln = LayerNorm {
            gammas: vec![1.0, 2.0, 1.0, 1.0],
            betas: vec![0.0, 0.0, 0.0, 0.5],
            eps: 0.0,
        };
        let mut x = vec![1.0, 2.0, 3.0, 4.0];
        layer_norm(&mut x, &ln);
        let s = 1.25f32.sqrt();
        let want = [-1.5 / s, 2.0 * -0.5 / s, 0.5 / s, 1.5 / s + 0.5];
        assert!(
            x.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6),
            "{x:?}"
        );
    }
}
