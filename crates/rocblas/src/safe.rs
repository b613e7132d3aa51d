//! A rocBLAS handle as an owned value.

use std::ffi::c_void;
use std::sync::Arc;

use crate::result::{self, HalfGemm, RocblasError};
use rocblas_sys::{Rocblas, RocblasHandle};

/// A rocBLAS handle bound to one stream and one workspace, destroyed when dropped.
pub struct Handle {
    lib: Arc<Rocblas>,
    handle: RocblasHandle,
}

// SAFETY: a rocBLAS handle may move between threads; lc0rs uses it under a lock, one call at a
// time, on one stream.
unsafe impl Send for Handle {}

impl Handle {
    /// A handle on the current device, bound to `stream` with the workspace at `workspace`.
    ///
    /// # Safety
    /// `stream` is a live `hipStream_t` and `workspace` device memory of `workspace_bytes`; both
    /// outlive the handle.
    pub unsafe fn new(
        lib: &Arc<Rocblas>,
        stream: *mut c_void,
        workspace: u64,
        workspace_bytes: usize,
    ) -> Result<Self, RocblasError> {
        let handle = Self {
            lib: lib.clone(),
            handle: result::create_handle(lib)?,
        };
        // SAFETY: as the caller promises; the handle is live.
        unsafe { result::configure(lib, handle.handle, stream, workspace, workspace_bytes) }?;
        Ok(handle)
    }

    /// Enqueues `g` on the handle's stream.
    ///
    /// # Safety
    /// The addresses in `g` are device memory large enough for its shapes, strides and batch.
    pub unsafe fn half_gemm(&self, g: &HalfGemm) -> Result<(), RocblasError> {
        // SAFETY: as the caller promises; the handle is live.
        unsafe { result::half_gemm(&self.lib, self.handle, g) }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        let _ = unsafe { result::destroy_handle(&self.lib, self.handle) };
    }
}
