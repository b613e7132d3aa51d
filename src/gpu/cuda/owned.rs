//! Owners of the raw cuBLAS and cuBLASLt objects cudarc hands out as bare handles: each is
//! destroyed exactly once, when its owner drops, so that no device code holds a manual `Drop`.

use cudarc::cublas::result as blas;
use cudarc::cublas::sys as blas_sys;
use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys as lt_sys;

use crate::gpu::{GpuResult, library_error};

/// A cuBLAS handle.
pub struct BlasHandle(blas_sys::cublasHandle_t);

// SAFETY: the handle is used only under its device's mutex, on the device's one stream.
unsafe impl Send for BlasHandle {}

impl BlasHandle {
    pub fn new() -> GpuResult<Self> {
        blas::create_handle()
            .map(Self)
            .map_err(library_error("cuBLAS", "cublasCreate"))
    }

    pub fn raw(&self) -> blas_sys::cublasHandle_t {
        self.0
    }
}

impl Drop for BlasHandle {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed only here.
        let _ = unsafe { blas::destroy_handle(self.0) };
    }
}

/// A cuBLASLt handle.
pub struct LtHandle(lt_sys::cublasLtHandle_t);

// SAFETY: used only under `CudaDevice::lt`'s mutex, on the device's one stream.
unsafe impl Send for LtHandle {}

impl LtHandle {
    pub fn new() -> GpuResult<Self> {
        lt::create_handle()
            .map(Self)
            .map_err(library_error("cuBLASLt", "cublasLtCreate"))
    }

    pub fn raw(&self) -> lt_sys::cublasLtHandle_t {
        self.0
    }
}

impl Drop for LtHandle {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed only here.
        let _ = unsafe { lt::destroy_handle(self.0) };
    }
}

/// A cuBLASLt matmul descriptor (fp32 compute and scale).
pub struct MatmulDesc(lt_sys::cublasLtMatmulDesc_t);

// SAFETY: as for `LtHandle`.
unsafe impl Send for MatmulDesc {}

impl MatmulDesc {
    pub fn new() -> GpuResult<Self> {
        lt::create_matmul_desc(
            lt_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            lt_sys::cudaDataType_t::CUDA_R_32F,
        )
        .map(Self)
        .map_err(library_error("cuBLASLt", "cublasLtMatmulDescCreate"))
    }

    pub fn raw(&self) -> lt_sys::cublasLtMatmulDesc_t {
        self.0
    }

    /// Sets an attribute to `value`.
    ///
    /// # Safety
    /// `T` must be the C type cuBLASLt documents for `attribute` (a device pointer for the
    /// pointer attributes, which must stay valid for every matmul that uses it).
    pub unsafe fn set<T: Copy>(
        &self,
        attribute: lt_sys::cublasLtMatmulDescAttributes_t,
        value: T,
    ) -> GpuResult<()> {
        // SAFETY: `value` lives across the call, which copies `size_of::<T>()` bytes of it; its
        // type is the attribute's (the caller's promise).
        unsafe {
            lt::set_matmul_desc_attribute(
                self.0,
                attribute,
                (&value as *const T).cast(),
                size_of::<T>(),
            )
        }
        .map_err(library_error("cuBLASLt", "cublasLtMatmulDescSetAttribute"))
    }
}

impl Drop for MatmulDesc {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed only here.
        let _ = unsafe { lt::destroy_matmul_desc(self.0) };
    }
}

/// A cuBLASLt matrix layout.
pub struct MatrixLayout(lt_sys::cublasLtMatrixLayout_t);

// SAFETY: as for `LtHandle`.
unsafe impl Send for MatrixLayout {}

impl MatrixLayout {
    /// An fp16 column-major layout.
    pub fn half(layout: crate::gpu::gemm::MatrixLayout) -> GpuResult<Self> {
        lt::create_matrix_layout(
            lt_sys::cudaDataType_t::CUDA_R_16F,
            layout.rows as u64,
            layout.cols as u64,
            layout.ld as i64,
        )
        .map(Self)
        .map_err(library_error("cuBLASLt", "cublasLtMatrixLayoutCreate"))
    }

    pub fn raw(&self) -> lt_sys::cublasLtMatrixLayout_t {
        self.0
    }
}

impl Drop for MatrixLayout {
    fn drop(&mut self) {
        // SAFETY: created in `half`, destroyed only here.
        let _ = unsafe { lt::destroy_matrix_layout(self.0) };
    }
}

/// A cuBLASLt matmul preference (the heuristic's limits).
pub struct MatmulPreference(lt_sys::cublasLtMatmulPreference_t);

impl MatmulPreference {
    /// A preference that allows at most `workspace` bytes of workspace.
    pub fn with_workspace(workspace: u64) -> GpuResult<Self> {
        let pref = lt::create_matmul_pref()
            .map(Self)
            .map_err(library_error("cuBLASLt", "cublasLtMatmulPreferenceCreate"))?;
        // SAFETY: MAX_WORKSPACE_BYTES is a uint64; `workspace` lives across the call.
        unsafe {
            lt::set_matmul_pref_attribute(
                pref.0,
                lt_sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&workspace as *const u64).cast(),
                size_of::<u64>(),
            )
        }
        .map_err(library_error("cuBLASLt", "cublasLtMatmulPreferenceSetAttribute"))?;
        Ok(pref)
    }

    pub fn raw(&self) -> lt_sys::cublasLtMatmulPreference_t {
        self.0
    }
}

impl Drop for MatmulPreference {
    fn drop(&mut self) {
        // SAFETY: created in `with_workspace`, destroyed only here.
        let _ = unsafe { lt::destroy_matmul_pref(self.0) };
    }
}
