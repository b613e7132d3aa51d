//! How the executor's row-major products map onto the column-major calls of BLAS and Lt
//! libraries (cuBLAS/rocBLAS `gemm_ex`, cuBLASLt/hipBLASLt matmul), written once for every
//! vendor, and the kernel pass that finishes a GEMM whose library could not fuse its epilogue.

use super::kernels::{activation_code, launchers};
use super::{
    BatchedProduct, DevicePtr, Epilogue, GemmPath, GpuDevice, GpuError, GpuResult, Launch, Linear,
};
use crate::weights::format::Activation;

/// `C_i = alpha·op(A_i)·op(B_i)` for `i < batch`, all matrices column-major with leading
/// dimensions and batch strides in elements (a row-major `R` is the column-major `Rᵀ`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ColumnMajorGemm {
    pub transpose_a: bool,
    pub transpose_b: bool,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    pub a: DevicePtr,
    pub lda: usize,
    pub stride_a: usize,
    pub b: DevicePtr,
    pub ldb: usize,
    pub stride_b: usize,
    pub c: DevicePtr,
    pub ldc: usize,
    pub stride_c: usize,
    pub batch: usize,
}

impl From<&Linear> for ColumnMajorGemm {
    /// Row-major `Y = X·Wᵀ` is column-major `Yᵀ = W·Xᵀ`: A is W (`[n][k]` row-major, so `k × n`
    /// column-major with ld k) used transposed, B is X (`k × m`, ld `ldx`), C is Y (`n × m`).
    fn from(op: &Linear) -> Self {
        Self {
            transpose_a: true,
            transpose_b: false,
            m: op.n,
            n: op.m,
            k: op.k,
            alpha: 1.0,
            a: op.w,
            lda: op.k,
            stride_a: 0,
            b: op.x,
            ldb: op.ldx,
            stride_b: 0,
            c: op.y,
            ldc: op.ldy,
            stride_c: 0,
            batch: 1,
        }
    }
}

impl From<&BatchedProduct> for ColumnMajorGemm {
    /// Row-major `C_i = A_i·B_iᵀ` is column-major `C_iᵀ = B_i·A_iᵀ` (as for [`Linear`]); with B
    /// stored as `[k][n]` (`C_i = A_i·B_i`), B is already the column-major `n × k` operand.
    fn from(op: &BatchedProduct) -> Self {
        Self {
            transpose_a: !op.b_transposed,
            transpose_b: false,
            m: op.n,
            n: op.m,
            k: op.k,
            alpha: op.alpha,
            a: op.b,
            lda: op.ldb,
            stride_a: op.stride_b,
            b: op.a,
            ldb: op.lda,
            stride_b: op.stride_a,
            c: op.c,
            ldc: op.ldc,
            stride_c: op.stride_c,
            batch: op.batch,
        }
    }
}

/// A column-major matrix as Lt libraries describe it: stored rows, columns, leading dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatrixLayout {
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
}

impl ColumnMajorGemm {
    /// The stored layouts of A, B and C (A and B before their transposition).
    pub fn layouts(&self) -> [MatrixLayout; 3] {
        let stored = |rows, cols, transposed: bool, ld| {
            let (rows, cols) = if transposed {
                (cols, rows)
            } else {
                (rows, cols)
            };
            MatrixLayout { rows, cols, ld }
        };
        [
            stored(self.m, self.k, self.transpose_a, self.lda),
            stored(self.k, self.n, self.transpose_b, self.ldb),
            MatrixLayout {
                rows: self.m,
                cols: self.n,
                ld: self.ldc,
            },
        ]
    }
}

/// What a GEMM library call did of a [`Linear`]'s bias and epilogue; the rest is left to
/// [`finish_with_kernel`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fused {
    Everything,
    Bias,
    Nothing,
}

/// The activation a GEMM epilogue applies.
pub fn epilogue_activation(epilogue: Epilogue) -> Activation {
    match epilogue {
        Epilogue::None => Activation::Identity,
        Epilogue::Relu => Activation::Relu,
        Epilogue::Silu => Activation::Swish,
    }
}

/// A dense layer on `path`: through the Lt library (`lt`, which says how much of the
/// epilogue it fused) or the BLAS library (`blas`, which fuses none), then our kernel for what
/// is left of the epilogue. Every device runs `GpuDevice::linear` through this.
///
/// # Safety
/// [`GpuDevice::linear`]'s: the device-memory contract for `op`'s pointers and sizes (`lt` and
/// `blas` are handed `op` or its column-major form and nothing else).
pub unsafe fn linear_on(
    device: &dyn GpuDevice,
    path: GemmPath,
    op: &Linear,
    lt: impl FnOnce(&Linear) -> GpuResult<Fused>,
    blas: impl FnOnce(&ColumnMajorGemm) -> GpuResult<()>,
) -> GpuResult<()> {
    let fused = match path {
        GemmPath::Lt => lt(op)?,
        GemmPath::Blas => {
            blas(&ColumnMajorGemm::from(op))?;
            Fused::Nothing
        }
    };
    // SAFETY: `op`'s pointers and sizes, the caller's promise.
    unsafe { finish_with_kernel(device, op, fused) }
}

/// Finishes `op` after a GEMM library did what `fused` says: adds the bias if still due and
/// applies the epilogue's activation, in one `bias_activation` pass (nothing if all was fused).
///
/// # Safety
/// As [`linear_on`]: `op.y` holds `m × n` values (`ldy == n` is checked), `op.bias` `n`.
unsafe fn finish_with_kernel(device: &dyn GpuDevice, op: &Linear, fused: Fused) -> GpuResult<()> {
    let bias = match fused {
        Fused::Everything => return Ok(()),
        Fused::Bias => None,
        Fused::Nothing => op.bias,
    };
    let activation = epilogue_activation(op.epilogue);
    if bias.is_none() && activation == Activation::Identity {
        return Ok(());
    }
    if op.ldy != op.n {
        return Err(GpuError::Unsupported(
            "a bias or activation on a strided GEMM output".to_owned(),
        ));
    }
    // SAFETY: the kernel touches `m × n` values of `y` (dense, checked above) and `n` of the
    // bias: inside what the caller promised for `op`.
    unsafe {
        launchers::bias_activation(
            device,
            Launch::elements(op.m * op.n / 8),
            op.y,
            bias,
            op.m as i64,
            op.n as i32,
            activation_code(activation),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An element offset into the test's memory array, standing for an address.
    fn offset(elements: u64) -> DevicePtr {
        // SAFETY: these tests only compute with the value; no device ever sees it.
        unsafe { DevicePtr::from_raw(elements) }
    }

    /// A BLAS reference written from the column-major definition alone: memory is one `f32`
    /// array and addresses are element offsets into it.
    fn run_column_major(g: &ColumnMajorGemm, memory: &mut [f32]) {
        for batch in 0..g.batch {
            let (a0, b0, c0) = (
                g.a.raw() as usize + batch * g.stride_a,
                g.b.raw() as usize + batch * g.stride_b,
                g.c.raw() as usize + batch * g.stride_c,
            );
            let op_a = |i: usize, l: usize| {
                if g.transpose_a {
                    memory[a0 + l + i * g.lda]
                } else {
                    memory[a0 + i + l * g.lda]
                }
            };
            let op_b = |l: usize, j: usize| {
                if g.transpose_b {
                    memory[b0 + j + l * g.ldb]
                } else {
                    memory[b0 + l + j * g.ldb]
                }
            };
            let mut out = vec![0f32; g.m * g.n];
            for j in 0..g.n {
                for i in 0..g.m {
                    out[i + j * g.m] =
                        g.alpha * (0..g.k).map(|l| op_a(i, l) * op_b(l, j)).sum::<f32>();
                }
            }
            for j in 0..g.n {
                for i in 0..g.m {
                    memory[c0 + i + j * g.ldc] = out[i + j * g.m];
                }
            }
        }
    }

    fn filled(len: usize, seed: u32) -> Vec<f32> {
        (0..len)
            .map(|i| ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) % 17) as f32 - 8.0)
            .collect()
    }

    #[test]
    fn a_linear_layer_is_x_times_w_transposed_in_row_major() {
        // m=5 rows, k=3 inputs (row stride 4), n=6 outputs (row stride 7: a strided output).
        let (m, k, n, ldx, ldy) = (5, 3, 6, 4, 7);
        let (x_at, w_at, y_at) = (0, 100, 200);
        let mut memory = filled(400, 1);
        let op = Linear {
            m,
            n,
            k,
            x: offset(x_at),
            ldx,
            w: offset(w_at),
            y: offset(y_at),
            ldy,
            bias: None,
            epilogue: Epilogue::None,
        };
        let before = memory.clone();
        run_column_major(&ColumnMajorGemm::from(&op), &mut memory);
        for r in 0..m {
            for c in 0..n {
                let expected: f32 = (0..k)
                    .map(|i| {
                        before[x_at as usize + r * ldx + i] * before[w_at as usize + c * k + i]
                    })
                    .sum();
                assert_eq!(memory[y_at as usize + r * ldy + c], expected, "Y[{r}][{c}]");
            }
            // The padding between rows is left alone.
            let pad = y_at as usize + r * ldy + n;
            assert_eq!(memory[pad], before[pad]);
        }
    }

    #[test]
    fn batched_products_are_a_times_b_transposed_per_batch() {
        let (batch, m, n, k) = (3, 4, 5, 2);
        let (lda, ldb, ldc) = (3, 2, 6);
        let (stride_a, stride_b, stride_c) = (20, 11, 40);
        let op = BatchedProduct {
            batch,
            m,
            n,
            k,
            alpha: 0.5,
            a: offset(0),
            lda,
            stride_a,
            b: offset(100),
            ldb,
            stride_b,
            b_transposed: false,
            c: offset(200),
            ldc,
            stride_c,
        };
        let mut memory = filled(400, 7);
        let before = memory.clone();
        run_column_major(&ColumnMajorGemm::from(&op), &mut memory);
        for i in 0..batch {
            for r in 0..m {
                for c in 0..n {
                    let expected: f32 = 0.5
                        * (0..k)
                            .map(|l| {
                                before[i * stride_a + r * lda + l]
                                    * before[100 + i * stride_b + c * ldb + l]
                            })
                            .sum::<f32>();
                    assert_eq!(memory[200 + i * stride_c + r * ldc + c], expected);
                }
            }
        }
    }

    #[test]
    fn lt_layouts_describe_the_stored_matrices() {
        let op = Linear {
            m: 64,
            n: 2304,
            k: 768,
            x: offset(0),
            ldx: 768,
            w: offset(0),
            y: offset(0),
            ldy: 2304,
            bias: None,
            epilogue: Epilogue::None,
        };
        let [w, x, y] = ColumnMajorGemm::from(&op).layouts();
        // W: [n][k] row-major = k×n column-major; X: k×m; Y: n×m.
        assert_eq!(
            w,
            MatrixLayout {
                rows: 768,
                cols: 2304,
                ld: 768
            }
        );
        assert_eq!(
            x,
            MatrixLayout {
                rows: 768,
                cols: 64,
                ld: 768
            }
        );
        assert_eq!(
            y,
            MatrixLayout {
                rows: 2304,
                cols: 64,
                ld: 2304
            }
        );
    }
}
