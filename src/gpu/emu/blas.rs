//! rocBLAS and hipBLASLt as the emulator runs them: on the CPU, fp16 inputs, fp32 accumulation,
//! fp16 output, from the column-major arguments the ROCm device passes to the libraries
//! ([`ColumnMajorGemm`], and for hipBLASLt the layouts and epilogue code), checked the way the
//! libraries check them and against the live buffers, so that a mapping bug fails here as it
//! would on a GPU.

use half::f16;
use hipblaslt_sys::{
    EPILOGUE_BIAS, EPILOGUE_DEFAULT, EPILOGUE_RELU, EPILOGUE_RELU_BIAS, EPILOGUE_SWISH_BIAS_EXT,
    EPILOGUE_SWISH_EXT,
};

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
        let op = |l: MatrixLayout, t: bool| if t { (l.cols, l.rows) } else { (l.rows, l.cols) };
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
        check_range(memory, HIPBLASLT_CALL, "bias", bias, gemm.m)?;
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
        check_range(memory, call, name, at, elements)?;
    }
    Ok(())
}

fn check_range(
    memory: &Allocations,
    call: &'static str,
    name: &str,
    at: DevicePtr,
    elements: usize,
) -> GpuResult<()> {
    if at % 2 != 0 || !memory.contains(at, elements * 2) {
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
        .map(|at| read_f16(at, 0, g.m))
        .unwrap_or_default();
    for batch in 0..g.batch {
        // op(A) as m×k row-major and op(B) as k×n column-major in f32: both read along k.
        let a = gather(g.a + (batch * g.stride_a * 2) as u64, g.lda, g.transpose_a, (g.m, g.k));
        let b = gather_columns(g.b + (batch * g.stride_b * 2) as u64, g.ldb, g.transpose_b, (g.k, g.n));
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
        let c = g.c + (batch * g.stride_c * 2) as u64;
        for j in 0..g.n {
            let column = (0..g.m).map(|i| {
                let v = product[i + j * g.m] + bias.get(i).copied().unwrap_or(0.0);
                f16::from_f32(activate(v, epilogue.activation))
            });
            // SAFETY: checked against the live buffers (check_operands).
            let out = unsafe {
                std::slice::from_raw_parts_mut((c as *mut f16).add(j * g.ldc), g.m)
            };
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
fn read_f16(at: DevicePtr, offset: usize, count: usize) -> Vec<f32> {
    // SAFETY: callers checked the range against the live buffers; fp16 alignment checked too.
    let values = unsafe { std::slice::from_raw_parts((at as *const f16).add(offset), count) };
    values.iter().map(|v| v.to_f32()).collect()
}

/// The fp16 value `offset` elements from `at`, as f32.
fn read_one(at: DevicePtr, offset: usize) -> f32 {
    // SAFETY: as for read_f16.
    unsafe { (at as *const f16).add(offset).read() }.to_f32()
}

/// op(X) (`rows × cols`) of the column-major X at `at` (leading dimension `ld`), row-major.
fn gather(at: DevicePtr, ld: usize, transposed: bool, (rows, cols): (usize, usize)) -> Vec<f32> {
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
fn gather_columns(at: DevicePtr, ld: usize, transposed: bool, (rows, cols): (usize, usize)) -> Vec<f32> {
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
