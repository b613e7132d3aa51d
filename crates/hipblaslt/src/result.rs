//! Each hipBLASLt call lc0rs makes, returning `Result` with the status' name.

use std::ffi::{c_int, c_void};

use hipblaslt_sys::{
    HeuristicResult, HipblasLt, HipblasLtHandle, HipblasStatus, MatmulAlgo, MatmulDesc,
    MatmulPreference, MatrixLayout, PREF_MAX_WORKSPACE_BYTES, STATUS_SUCCESS, status_name,
};

/// A failed hipBLASLt call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call} failed: HIPBLAS_STATUS_{} ({status})", status_name(*status))]
pub struct HipblasLtError {
    pub call: &'static str,
    pub status: HipblasStatus,
}

fn check(call: &'static str, status: HipblasStatus) -> Result<(), HipblasLtError> {
    if status == STATUS_SUCCESS {
        Ok(())
    } else {
        Err(HipblasLtError { call, status })
    }
}

pub fn create(lib: &HipblasLt) -> Result<HipblasLtHandle, HipblasLtError> {
    let mut handle = std::ptr::null_mut();
    // SAFETY: writes one handle.
    check("hipblasLtCreate", unsafe { (lib.fns.create)(&mut handle) })?;
    Ok(handle)
}

/// # Safety
/// `handle` came from [`create`] and is not used afterwards.
pub unsafe fn destroy(lib: &HipblasLt, handle: HipblasLtHandle) -> Result<(), HipblasLtError> {
    // SAFETY: as the caller promises.
    check("hipblasLtDestroy", unsafe { (lib.fns.destroy)(handle) })
}

/// hipBLASLt's version, `major·100000 + minor·100 + patch`.
///
/// # Safety
/// `handle` is live.
pub unsafe fn version(lib: &HipblasLt, handle: HipblasLtHandle) -> Result<i32, HipblasLtError> {
    let mut version: c_int = 0;
    // SAFETY: as the caller promises; writes one int.
    check("hipblasLtGetVersion", unsafe {
        (lib.fns.get_version)(handle, &mut version)
    })?;
    Ok(version)
}

/// A matmul descriptor with `compute` accumulation and `scale`-typed alpha/beta.
pub fn matmul_desc_create(
    lib: &HipblasLt,
    compute: c_int,
    scale: c_int,
) -> Result<MatmulDesc, HipblasLtError> {
    let mut desc = std::ptr::null_mut();
    // SAFETY: writes one handle.
    check("hipblasLtMatmulDescCreate", unsafe {
        (lib.fns.matmul_desc_create)(&mut desc, compute, scale)
    })?;
    Ok(desc)
}

/// Sets a descriptor attribute to the bytes of `value` (its C type per the attribute).
///
/// # Safety
/// `desc` is live and `T` is the attribute's C type (docs/gpu-apis.md §4.4).
pub unsafe fn matmul_desc_set<T: Copy>(
    lib: &HipblasLt,
    desc: MatmulDesc,
    attribute: c_int,
    value: &T,
) -> Result<(), HipblasLtError> {
    // SAFETY: as the caller promises; `value` is readable for its size.
    check("hipblasLtMatmulDescSetAttribute", unsafe {
        (lib.fns.matmul_desc_set_attribute)(
            desc,
            attribute,
            (value as *const T).cast::<c_void>(),
            size_of::<T>(),
        )
    })
}

/// # Safety
/// `desc` is live and not used afterwards.
pub unsafe fn matmul_desc_destroy(lib: &HipblasLt, desc: MatmulDesc) -> Result<(), HipblasLtError> {
    // SAFETY: as the caller promises.
    check("hipblasLtMatmulDescDestroy", unsafe {
        (lib.fns.matmul_desc_destroy)(desc)
    })
}

/// A column-major `rows × cols` layout with leading dimension `ld`.
pub fn matrix_layout_create(
    lib: &HipblasLt,
    data_type: c_int,
    rows: u64,
    cols: u64,
    ld: i64,
) -> Result<MatrixLayout, HipblasLtError> {
    let mut layout = std::ptr::null_mut();
    // SAFETY: writes one handle.
    check("hipblasLtMatrixLayoutCreate", unsafe {
        (lib.fns.matrix_layout_create)(&mut layout, data_type, rows, cols, ld)
    })?;
    Ok(layout)
}

/// # Safety
/// `layout` is live and not used afterwards.
pub unsafe fn matrix_layout_destroy(
    lib: &HipblasLt,
    layout: MatrixLayout,
) -> Result<(), HipblasLtError> {
    // SAFETY: as the caller promises.
    check("hipblasLtMatrixLayoutDestroy", unsafe {
        (lib.fns.matrix_layout_destroy)(layout)
    })
}

/// Up to `wanted` algorithms for `D = op(A)·op(B)` (C = D) that fit in `workspace_bytes`, best
/// first; empty where hipBLASLt has none (e.g. an epilogue without kernels for this arch).
///
/// # Safety
/// All handles are live.
pub unsafe fn algo_get_heuristic(
    lib: &HipblasLt,
    handle: HipblasLtHandle,
    desc: MatmulDesc,
    [a, b, d]: [MatrixLayout; 3],
    workspace_bytes: u64,
    wanted: usize,
) -> Result<Vec<HeuristicResult>, HipblasLtError> {
    let mut pref: MatmulPreference = std::ptr::null_mut();
    // SAFETY: writes one handle.
    check("hipblasLtMatmulPreferenceCreate", unsafe {
        (lib.fns.matmul_preference_create)(&mut pref)
    })?;
    let mut results = vec![HeuristicResult::default(); wanted];
    let mut count: c_int = 0;
    // SAFETY: `pref` is live; `results` has room for `wanted` entries of the C layout
    // (56 bytes, asserted in sys.rs).
    let status = unsafe {
        let set = (lib.fns.matmul_preference_set_attribute)(
            pref,
            PREF_MAX_WORKSPACE_BYTES,
            (&workspace_bytes as *const u64).cast(),
            size_of::<u64>(),
        );
        let status = if set == STATUS_SUCCESS {
            check(
                "hipblasLtMatmulAlgoGetHeuristic",
                (lib.fns.matmul_algo_get_heuristic)(
                    handle,
                    desc,
                    a,
                    b,
                    d,
                    d,
                    pref,
                    wanted as c_int,
                    results.as_mut_ptr(),
                    &mut count,
                ),
            )
        } else {
            check("hipblasLtMatmulPreferenceSetAttribute", set)
        };
        (lib.fns.matmul_preference_destroy)(pref);
        status
    };
    match status {
        Ok(()) => {}
        // "No algorithm" comes back as NOT_SUPPORTED on some releases, as count 0 on others.
        Err(e) if e.status == hipblaslt_sys::STATUS_NOT_SUPPORTED => return Ok(Vec::new()),
        Err(e) => return Err(e),
    }
    results.truncate(count.clamp(0, wanted as c_int) as usize);
    results.retain(|r| r.state == STATUS_SUCCESS);
    Ok(results)
}

/// The operands of one matmul: `D = alpha·op(A)·op(B) + beta·C` with C = D (in place).
#[derive(Debug, Clone, Copy)]
pub struct Matmul {
    pub desc: MatmulDesc,
    pub a: (u64, MatrixLayout),
    pub b: (u64, MatrixLayout),
    pub d: (u64, MatrixLayout),
    pub alpha: f32,
    pub beta: f32,
    pub workspace: u64,
    pub workspace_bytes: usize,
}

/// Enqueues `m` with `algo` on `stream`.
///
/// # Safety
/// Handles are live, addresses are device memory matching the layouts, the workspace is as
/// large as said, and `stream` is a live `hipStream_t`.
pub unsafe fn matmul(
    lib: &HipblasLt,
    handle: HipblasLtHandle,
    m: &Matmul,
    algo: &MatmulAlgo,
    stream: *mut c_void,
) -> Result<(), HipblasLtError> {
    // SAFETY: as the caller promises.
    check("hipblasLtMatmul", unsafe {
        (lib.fns.matmul)(
            handle,
            m.desc,
            (&m.alpha as *const f32).cast(),
            m.a.0 as *const c_void,
            m.a.1,
            m.b.0 as *const c_void,
            m.b.1,
            (&m.beta as *const f32).cast(),
            m.d.0 as *const c_void,
            m.d.1,
            m.d.0 as *mut c_void,
            m.d.1,
            algo,
            m.workspace as *mut c_void,
            m.workspace_bytes,
            stream,
        )
    })
}
