//! cuBLAS on one stream: the handle with a workspace of its own, and the fp16 GEMM (`GemmEx`,
//! or `GemmStridedBatchedEx` for batches) that `gemm=blas` and the batched products run.

use std::sync::Arc;

use cudarc::cublas::result as blas;
use cudarc::cublas::sys as blas_sys;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use super::owned::BlasHandle;
use crate::gpu::gemm::ColumnMajorGemm;
use crate::gpu::{GpuResult, library_error};

/// cuBLAS' workspace (NVIDIA recommends 32 MiB on Hopper).
const WORKSPACE_BYTES: usize = 32 << 20;

/// cuBLAS bound to a stream, with its workspace.
pub struct Blas {
    /// Dropped first: the handle before the workspace it uses.
    handle: BlasHandle,
    _workspace: CudaSlice<u8>,
}

impl Blas {
    /// A handle on `stream` with a workspace of its own, so that cuBLAS allocates nothing
    /// inside captured graphs (it otherwise adds memory alloc/free nodes to them). The
    /// workspace is zeroed once, as cuBLASLt's is (lt.rs).
    pub fn new(stream: &Arc<CudaStream>) -> GpuResult<Self> {
        let handle = BlasHandle::new()?;
        // SAFETY: the handle was just created; the stream outlives it (both owned by the
        // device).
        unsafe { blas::set_stream(handle.raw(), stream.cu_stream() as _) }
            .map_err(library_error("cuBLAS", "cublasSetStream"))?;
        let workspace = stream
            .alloc_zeros::<u8>(WORKSPACE_BYTES)
            .map_err(library_error("CUDA driver", "cuMemAlloc"))?;
        // SAFETY: the workspace outlives the handle (the handle is dropped first).
        unsafe {
            blas_sys::cublasSetWorkspace_v2(
                handle.raw(),
                workspace.device_ptr(stream).0 as *mut _,
                WORKSPACE_BYTES,
            )
        }
        .result()
        .map_err(library_error("cuBLAS", "cublasSetWorkspace"))?;
        Ok(Self {
            handle,
            _workspace: workspace,
        })
    }

    /// Runs a column-major fp16 GEMM with fp32 accumulation.
    pub fn gemm(&self, g: &ColumnMajorGemm) -> GpuResult<()> {
        let beta = 0.0f32;
        let op = |t: bool| {
            if t {
                blas_sys::cublasOperation_t::CUBLAS_OP_T
            } else {
                blas_sys::cublasOperation_t::CUBLAS_OP_N
            }
        };
        let f16 = blas_sys::cudaDataType_t::CUDA_R_16F;
        let compute = blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F;
        let algo = blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT;
        let (alpha, beta) = (
            (&g.alpha as *const f32).cast(),
            (&beta as *const f32).cast(),
        );
        let (m, n, k) = (g.m as i32, g.n as i32, g.k as i32);
        let (op_a, op_b) = (op(g.transpose_a), op(g.transpose_b));
        let handle = self.handle.raw();
        if g.batch == 1 {
            // SAFETY: the addresses are device buffers the caller sized for these shapes.
            return unsafe {
                blas::gemm_ex(
                    handle,
                    op_a,
                    op_b,
                    m,
                    n,
                    k,
                    alpha,
                    g.a.raw() as *const _,
                    f16,
                    g.lda as i32,
                    g.b.raw() as *const _,
                    f16,
                    g.ldb as i32,
                    beta,
                    g.c.raw() as *mut _,
                    f16,
                    g.ldc as i32,
                    compute,
                    algo,
                )
            }
            .map_err(library_error("cuBLAS", "cublasGemmEx"));
        }
        // SAFETY: as above, for every batch entry at its stride.
        unsafe {
            blas::gemm_strided_batched_ex(
                handle,
                op_a,
                op_b,
                m,
                n,
                k,
                alpha,
                g.a.raw() as *const _,
                f16,
                g.lda as i32,
                g.stride_a as i64,
                g.b.raw() as *const _,
                f16,
                g.ldb as i32,
                g.stride_b as i64,
                beta,
                g.c.raw() as *mut _,
                f16,
                g.ldc as i32,
                g.stride_c as i64,
                g.batch as i32,
                compute,
                algo,
            )
        }
        .map_err(library_error("cuBLAS", "cublasGemmStridedBatchedEx"))
    }
}
