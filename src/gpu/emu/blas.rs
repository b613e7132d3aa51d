//! rocBLAS and hipBLASLt as the emulator runs them: on the CPU, fp16 inputs, fp32 accumulation,
//! fp16 output, from the column-major arguments the ROCm device passes to the libraries
//! ([`ColumnMajorGemm`], and for hipBLASLt the layouts and epilogue code), checked the way the
//! libraries check them and against the live buffers, so that a mapping bug fails here as it
//! would on a GPU.

use ::hipblaslt::{
    EPILOGUE_BIAS, EPILOGUE_DEFAULT, EPILOGUE_RELU, EPILOGUE_RELU_BIAS, EPILOGUE_SWISH_BIAS_EXT,
    EPILOGUE_SWISH_EXT,
};
use half::f16;

use super::memory::Allocations;
use crate::gpu::gemm::{ColumnMajorGemm, MatrixLayout};
use crate::gpu::{DevicePtr, GpuError, GpuResult};

const ROCBLAS_CALL: &str = "rocblas_gemm_strided_batched_ex (emulated)";
const HIPBLASLT_CALL: &str = "hipblasLtMatmul (emulated)";

/// What runs on each output value after the product: a hipBLASLt epilogue's bias (indexed by
/// the row of D, i.e. the output feature) and activation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpilogueOnCpu {
    pub bias: Option<DevicePtr>,
    pub activation: LtActivation,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LtActivation {
    None,
    Relu,
    Swish,
}

impl EpilogueOnCpu {
    pub const NONE: Self = Self {
        bias: None,
        activation: LtActivation::None,
    };

    /// The epilogue hipBLASLt's code `epilogue` asks for, with the bias pointer the descriptor
    /// holds.
    pub fn from_lt(epilogue: u32, bias: Option<DevicePtr>) -> GpuResult<Self> {
        let (with_bias, activation) = match epilogue {
            EPILOGUE_DEFAULT => (false, LtActivation::None),
            EPILOGUE_RELU => (false, LtActivation::Relu),
            EPILOGUE_BIAS => (true, LtActivation::None),
            EPILOGUE_RELU_BIAS => (true, LtActivation::Relu),
            EPILOGUE_SWISH_EXT => (false, LtActivation::Swish),
            EPILOGUE_SWISH_BIAS_EXT => (true, LtActivation::Swish),
            other => {
                return Err(GpuError::Unsupported(format!(
                    "hipBLASLt epilogue {other} is not emulated"
                )));
            }
        };
        let bias = match (with_bias, bias) {
            (true, None) => {
                return Err(GpuError::Call {
                    call: HIPBLASLT_CALL,
                    detail: format!("epilogue {epilogue} needs a bias pointer"),
                });
            }
            (true, bias) => bias,
            (false, _) => None,
        };
        Ok(Self { bias, activation })
    }
}

/// A hipBLASLt matmul as the ROCm device describes it: transposes, the stored layouts of A, B
/// and D, their addresses, and the epilogue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LtMatmul {
    pub transpose_a: bool,
    pub transpose_b: bool,
    pub layouts: [MatrixLayout; 3],
    pub a: DevicePtr,
    pub b: DevicePtr,
    pub d: DevicePtr,
    pub epilogue: EpilogueOnCpu,
}

impl LtMatmul {
    /// The product the layouts describe, or hipBLASLt's refusal when they do not fit together.
    fn as_gemm(&self) -> GpuResult<ColumnMajorGemm> {
        let [a, b, d] = self.layouts;
        let op = |l: MatrixLayout, t: bool| {
            if t {
                (l.cols, l.rows)
            } else {
                (l.rows, l.cols)
            }
        };
        let ((m, k), (kb, n)) = (op(a, self.transpose_a), op(b, self.transpose_b));
        if k != kb || d.rows != m || d.cols != n {
            return Err(GpuError::Call {
                call: HIPBLASLT_CALL,
                detail: format!(
                    "layouts do not fit: op(A) {m}×{k}, op(B) {kb}×{n}, D {}×{}",
                    d.rows, d.cols
                ),
            });
        }
        for (name, l) in [("A", a), ("B", b), ("D", d)] {
            if l.ld < l.rows.max(1) {
                return Err(GpuError::Call {
                    call: HIPBLASLT_CALL,
                    detail: format!("{name}: leading dimension {} < rows {}", l.ld, l.rows),
                });
            }
        }
        Ok(ColumnMajorGemm {
            transpose_a: self.transpose_a,
            transpose_b: self.transpose_b,
            m,
            n,
            k,
            alpha: 1.0,
            a: self.a,
            lda: a.ld,
            stride_a: 0,
            b: self.b,
            ldb: b.ld,
            stride_b: 0,
            c: self.d,
            ldc: d.ld,
            stride_c: 0,
            batch: 1,
        })
    }
}

/// hipBLASLt's matmul with its epilogue.
pub fn lt_matmul(memory: &Allocations, op: &LtMatmul) -> GpuResult<()> {
    let gemm = op.as_gemm()?;
    check_operands(memory, &gemm, HIPBLASLT_CALL)?;
    if let Some(bias) = op.epilogue.bias {
        check_range(memory, HIPBLASLT_CALL, "bias", bias.raw(), gemm.m)?;
    }
    run(&gemm, &op.epilogue);
    Ok(())
}

/// rocBLAS' `gemm_strided_batched_ex` with fp16 A, B, C and fp32 compute, beta 0.
pub fn rocblas_gemm(memory: &Allocations, g: &ColumnMajorGemm) -> GpuResult<()> {
    let stored_rows = |t: bool, rows, cols| if t { cols } else { rows };
    for (name, ld, rows) in [
        ("lda", g.lda, stored_rows(g.transpose_a, g.m, g.k)),
        ("ldb", g.ldb, stored_rows(g.transpose_b, g.k, g.n)),
        ("ldc", g.ldc, g.m),
    ] {
        if ld < rows.max(1) {
            return Err(GpuError::Call {
                call: ROCBLAS_CALL,
                detail: format!("rocblas_status_invalid_size: {name} {ld} < {rows}"),
            });
        }
    }
    check_operands(memory, g, ROCBLAS_CALL)?;
    run(g, &EpilogueOnCpu::NONE);
    Ok(())
}

/// Refuses operands that reach outside the live buffers (a wrong leading dimension or stride).
fn check_operands(memory: &Allocations, g: &ColumnMajorGemm, call: &'static str) -> GpuResult<()> {
    let [a, b, c] = g.layouts();
    for (name, at, l, stride) in [
        ("A", g.a, a, g.stride_a),
        ("B", g.b, b, g.stride_b),
        ("C", g.c, c, g.stride_c),
    ] {
        if l.rows == 0 || l.cols == 0 || g.batch == 0 {
            continue;
        }
        let elements = (g.batch - 1) * stride + (l.cols - 1) * l.ld + l.rows;
        check_range(memory, call, name, at.raw(), elements)?;
    }
    Ok(())
}

fn check_range(
    memory: &Allocations,
    call: &'static str,
    name: &str,
    at: u64,
    elements: usize,
) -> GpuResult<()> {
    if !at.is_multiple_of(2) || !memory.contains(at, elements * 2) {
        return Err(GpuError::Call {
            call,
            detail: format!(
                "{name}: {elements} fp16 values at {at:#x} are not inside one live buffer"
            ),
        });
    }
    Ok(())
}

/// `C_i = epilogue(alpha·op(A_i)·op(B_i))`, checked beforehand.
fn run(g: &ColumnMajorGemm, epilogue: &EpilogueOnCpu) {
    let bias: Vec<f32> = epilogue
        .bias
        .map(|at| read_f16(at.raw(), 0, g.m))
        .unwrap_or_default();
    for batch in 0..g.batch {
        // op(A) as m×k row-major and op(B) as k×n column-major in f32: both read along k.
        let a = gather(
            g.a.raw() + (batch * g.stride_a * 2) as u64,
            g.lda,
            g.transpose_a,
            (g.m, g.k),
        );
        let b = gather_columns(
            g.b.raw() + (batch * g.stride_b * 2) as u64,
            g.ldb,
            g.transpose_b,
            (g.k, g.n),
        );
        let mut product = vec![0f32; g.m * g.n];
        // SAFETY: the slices hold m·k, k·n and m·n values, addressed by the strides given.
        unsafe {
            gemm::gemm(
                g.m,
                g.n,
                g.k,
                product.as_mut_ptr(),
                g.m as isize,
                1,
                false,
                a.as_ptr(),
                1,
                g.k as isize,
                b.as_ptr(),
                g.k as isize,
                1,
                0.0,
                g.alpha,
                false,
                false,
                false,
                gemm::Parallelism::Rayon(0),
            );
        }
        let c = g.c.raw() + (batch * g.stride_c * 2) as u64;
        for j in 0..g.n {
            let column = (0..g.m).map(|i| {
                let v = product[i + j * g.m] + bias.get(i).copied().unwrap_or(0.0);
                f16::from_f32(activate(v, epilogue.activation))
            });
            // SAFETY: checked against the live buffers (check_operands).
            let out =
                unsafe { std::slice::from_raw_parts_mut((c as *mut f16).add(j * g.ldc), g.m) };
            for (o, v) in out.iter_mut().zip(column) {
                *o = v;
            }
        }
    }
}

fn activate(v: f32, activation: LtActivation) -> f32 {
    match activation {
        LtActivation::None => v,
        LtActivation::Relu => v.max(0.0),
        LtActivation::Swish => v / (1.0 + (-v).exp()),
    }
}

/// `count` fp16 values from `at + offset` elements, as f32.
fn read_f16(at: u64, offset: usize, count: usize) -> Vec<f32> {
    // SAFETY: callers checked the range against the live buffers; fp16 alignment checked too.
    let values = unsafe { std::slice::from_raw_parts((at as *const f16).add(offset), count) };
    values.iter().map(|v| v.to_f32()).collect()
}

/// The fp16 value `offset` elements from `at`, as f32.
fn read_one(at: u64, offset: usize) -> f32 {
    // SAFETY: as for read_f16.
    unsafe { (at as *const f16).add(offset).read() }.to_f32()
}

/// op(X) (`rows × cols`) of the column-major X at `at` (leading dimension `ld`), row-major.
fn gather(at: u64, ld: usize, transposed: bool, (rows, cols): (usize, usize)) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows * cols);
    for i in 0..rows {
        if transposed {
            // op(X)(i, l) = X(l, i): column i of X, contiguous.
            out.extend(read_f16(at, i * ld, cols));
        } else {
            out.extend((0..cols).map(|l| read_one(at, i + l * ld)));
        }
    }
    out
}

/// op(X) (`rows × cols`) of the column-major X at `at`, column-major and contiguous.
fn gather_columns(at: u64, ld: usize, transposed: bool, (rows, cols): (usize, usize)) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows * cols);
    for j in 0..cols {
        if transposed {
            // op(X)(l, j) = X(j, l).
            out.extend((0..rows).map(|l| read_one(at, j + l * ld)));
        } else {
            out.extend(read_f16(at, j * ld, rows));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::gpu::{BatchedProduct, Epilogue, GpuBuffer, Linear};

    /// A live buffer holding `values` as fp16.
    fn buffer(memory: &Arc<Allocations>, values: &[f32]) -> GpuBuffer {
        let b = memory.alloc(values.len() * 2).unwrap();
        for (i, v) in values.iter().enumerate() {
            // SAFETY: inside the buffer just allocated.
            unsafe { (b.ptr().raw() as *mut f16).add(i).write(f16::from_f32(*v)) };
        }
        b
    }

    fn values(b: &GpuBuffer) -> Vec<f32> {
        read_f16(b.ptr().raw(), 0, b.bytes() / 2)
    }

    /// Small integers (exact in fp16, products exact in f32).
    fn small(len: usize, seed: usize) -> Vec<f32> {
        (0..len)
            .map(|i| ((i * 7 + seed) % 9) as f32 - 4.0)
            .collect()
    }

    #[test]
    fn lt_bias_swish_is_x_times_w_transposed_plus_bias_then_silu() {
        let memory = Arc::new(Allocations::default());
        // Y[3][5] (row stride 6) = silu(X[3][4] (row stride 4) · W[5][4]ᵀ + b[5]) / 8.
        let (m, n, k, ldy) = (3, 5, 4, 6);
        let (x, w, b) = (small(m * k, 1), small(n * k, 2), small(n, 3));
        let (xg, wg, bg) = (
            buffer(&memory, &x),
            buffer(&memory, &w),
            buffer(&memory, &b),
        );
        let y = buffer(&memory, &vec![99.0; m * ldy]);
        let op = Linear {
            m,
            n,
            k,
            x: xg.ptr(),
            ldx: k,
            w: wg.ptr(),
            y: y.ptr(),
            ldy,
            bias: Some(bg.ptr()),
            epilogue: Epilogue::Silu,
        };
        let matmul = LtMatmul {
            transpose_a: true,
            transpose_b: false,
            layouts: ColumnMajorGemm::from(&op).layouts(),
            a: op.w,
            b: op.x,
            d: op.y,
            epilogue: EpilogueOnCpu::from_lt(EPILOGUE_SWISH_BIAS_EXT, op.bias).unwrap(),
        };
        lt_matmul(&memory, &matmul).unwrap();
        let got = values(&y);
        for r in 0..m {
            for c in 0..n {
                let v: f32 = (0..k).map(|i| x[r * k + i] * w[c * k + i]).sum::<f32>() + b[c];
                let want = f16::from_f32(v / (1.0 + (-v).exp())).to_f32();
                assert_eq!(got[r * ldy + c], want, "Y[{r}][{c}]");
            }
            assert_eq!(got[r * ldy + n], 99.0, "padding of row {r}");
        }
    }

    #[test]
    fn strided_batched_products_are_a_times_b_transposed() {
        let memory = Arc::new(Allocations::default());
        let (batch, m, n, k) = (2, 3, 4, 5);
        let (a, b) = (small(batch * m * k, 4), small(batch * n * k, 5));
        let (ag, bg) = (buffer(&memory, &a), buffer(&memory, &b));
        let c = buffer(&memory, &vec![0.0; batch * m * n]);
        let op = BatchedProduct {
            batch,
            m,
            n,
            k,
            alpha: 0.5,
            a: ag.ptr(),
            lda: k,
            stride_a: m * k,
            b: bg.ptr(),
            ldb: k,
            stride_b: n * k,
            b_transposed: false,
            c: c.ptr(),
            ldc: n,
            stride_c: m * n,
        };
        rocblas_gemm(&memory, &ColumnMajorGemm::from(&op)).unwrap();
        let got = values(&c);
        for i in 0..batch {
            for r in 0..m {
                for col in 0..n {
                    let dot: f32 = (0..k)
                        .map(|l| a[i * m * k + r * k + l] * b[i * n * k + col * k + l])
                        .sum();
                    assert_eq!(got[i * m * n + r * n + col], 0.5 * dot);
                }
            }
        }
    }

    #[test]
    fn operands_outside_the_buffers_and_mismatched_layouts_are_refused() {
        let memory = Arc::new(Allocations::default());
        let (ag, bg, cg) = (
            buffer(&memory, &small(12, 1)),
            buffer(&memory, &small(12, 2)),
            buffer(&memory, &small(9, 3)),
        );
        // 3×4 · 4×3: a leading dimension of 5 for A reads past its 12 values.
        let g = ColumnMajorGemm {
            transpose_a: false,
            transpose_b: false,
            m: 3,
            n: 3,
            k: 4,
            alpha: 1.0,
            a: ag.ptr(),
            lda: 5,
            stride_a: 0,
            b: bg.ptr(),
            ldb: 4,
            stride_b: 0,
            c: cg.ptr(),
            ldc: 3,
            stride_c: 0,
            batch: 1,
        };
        let e = rocblas_gemm(&memory, &g).unwrap_err().to_string();
        assert!(e.contains("A:") && e.contains("live buffer"), "{e}");
        let e = rocblas_gemm(&memory, &ColumnMajorGemm { ldc: 2, ..g }).unwrap_err();
        assert!(e.to_string().contains("ldc 2 < 3"), "{e}");
        let layout = |rows, cols| MatrixLayout {
            rows,
            cols,
            ld: rows,
        };
        let mismatched = LtMatmul {
            transpose_a: false,
            transpose_b: false,
            layouts: [layout(3, 4), layout(3, 3), layout(3, 3)],
            a: ag.ptr(),
            b: bg.ptr(),
            d: cg.ptr(),
            epilogue: EpilogueOnCpu::NONE,
        };
        let e = lt_matmul(&memory, &mismatched).unwrap_err().to_string();
        assert!(e.contains("do not fit"), "{e}");
        assert!(EpilogueOnCpu::from_lt(EPILOGUE_BIAS, None).is_err());
    }
}
