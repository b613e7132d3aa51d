//! hipBLASLt objects as owned values: the handle, matmul descriptors and matrix layouts.

use std::ffi::c_int;
use std::sync::Arc;

use crate::result::{self, HipblasLtError};
use hipblaslt_sys::{HipblasLt, HipblasLtHandle, MatmulDesc, MatrixLayout};

/// A hipBLASLt handle, destroyed when dropped (which synchronises the device on ROCm 7).
pub struct Handle {
    pub lib: Arc<HipblasLt>,
    handle: HipblasLtHandle,
}

// SAFETY: used under a lock, one call at a time, on one stream (one handle per stream).
unsafe impl Send for Handle {}

impl Handle {
    /// A handle on the current device.
    pub fn new(lib: &Arc<HipblasLt>) -> Result<Self, HipblasLtError> {
        Ok(Self {
            lib: lib.clone(),
            handle: result::create(lib)?,
        })
    }

    pub fn raw(&self) -> HipblasLtHandle {
        self.handle
    }

    pub fn version(&self) -> Result<i32, HipblasLtError> {
        // SAFETY: a live handle.
        unsafe { result::version(&self.lib, self.handle) }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        let _ = unsafe { result::destroy(&self.lib, self.handle) };
    }
}

/// A matmul descriptor, destroyed when dropped.
pub struct Desc {
    lib: Arc<HipblasLt>,
    desc: MatmulDesc,
}

// SAFETY: owned plain host-side configuration, used under a lock.
unsafe impl Send for Desc {}

impl Desc {
    pub fn new(lib: &Arc<HipblasLt>, compute: c_int, scale: c_int) -> Result<Self, HipblasLtError> {
        Ok(Self {
            lib: lib.clone(),
            desc: result::matmul_desc_create(lib, compute, scale)?,
        })
    }

    pub fn raw(&self) -> MatmulDesc {
        self.desc
    }

    /// Sets `attribute` to `value`.
    ///
    /// # Safety
    /// `T` is the attribute's C type (docs/gpu-apis.md §4.4); a pointer value must stay valid while
    /// the descriptor is used.
    pub unsafe fn set<T: Copy>(&self, attribute: c_int, value: T) -> Result<(), HipblasLtError> {
        // SAFETY: as the caller promises; the descriptor is live.
        unsafe { result::matmul_desc_set(&self.lib, self.desc, attribute, &value) }
    }
}

impl Drop for Desc {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        let _ = unsafe { result::matmul_desc_destroy(&self.lib, self.desc) };
    }
}

/// A column-major matrix layout, destroyed when dropped.
pub struct Layout {
    lib: Arc<HipblasLt>,
    layout: MatrixLayout,
}

// SAFETY: owned plain host-side configuration, used under a lock.
unsafe impl Send for Layout {}

impl Layout {
    pub fn new(
        lib: &Arc<HipblasLt>,
        data_type: c_int,
        rows: usize,
        cols: usize,
        ld: usize,
    ) -> Result<Self, HipblasLtError> {
        Ok(Self {
            lib: lib.clone(),
            layout: result::matrix_layout_create(
                lib,
                data_type,
                rows as u64,
                cols as u64,
                ld as i64,
            )?,
        })
    }

    pub fn raw(&self) -> MatrixLayout {
        self.layout
    }
}

impl Drop for Layout {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        let _ = unsafe { result::matrix_layout_destroy(&self.lib, self.layout) };
    }
}
