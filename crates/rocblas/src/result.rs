//! Each rocBLAS call lc0rs makes, returning `Result` with rocBLAS' status text.

use std::ffi::{CStr, c_void};

use rocblas_sys::{
    DATATYPE_F16_R, DATATYPE_F32_R, GEMM_ALGO_STANDARD, OPERATION_NONE, OPERATION_TRANSPOSE,
    POINTER_MODE_HOST, Rocblas, RocblasHandle, RocblasStatus, STATUS_SUCCESS,
};

/// A failed rocBLAS call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call} failed: {message} (rocblas_status {status})")]
pub struct RocblasError {
    pub call: &'static str,
    pub status: RocblasStatus,
    pub message: String,
}

fn check(lib: &Rocblas, call: &'static str, status: RocblasStatus) -> Result<(), RocblasError> {
    if status == STATUS_SUCCESS {
        return Ok(());
    }
    // SAFETY: rocblas_status_to_string returns a static C string for any status.
    let text = unsafe { (lib.fns.status_to_string)(status) };
    let message = if text.is_null() {
        "unknown status".to_owned()
    } else {
        // SAFETY: non-null, NUL-terminated and static.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    };
    Err(RocblasError {
        call,
        status,
        message,
    })
}

/// A column-major fp16 GEMM with fp32 accumulation, `C_i = alpha·op(A_i)·op(B_i) + beta·C_i` for
/// `i < batch`, as rocBLAS takes it. Addresses are device addresses; strides are in elements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HalfGemm {
    pub transpose_a: bool,
    pub transpose_b: bool,
    pub m: i32,
    pub n: i32,
    pub k: i32,
    pub alpha: f32,
    pub beta: f32,
    pub a: u64,
    pub lda: i32,
    pub stride_a: i64,
    pub b: u64,
    pub ldb: i32,
    pub stride_b: i64,
    pub c: u64,
    pub ldc: i32,
    pub stride_c: i64,
    pub batch: i32,
}

fn operation(transpose: bool) -> i32 {
    if transpose {
        OPERATION_TRANSPOSE
    } else {
        OPERATION_NONE
    }
}

pub fn create_handle(lib: &Rocblas) -> Result<RocblasHandle, RocblasError> {
    let mut handle = std::ptr::null_mut();
    // SAFETY: writes one handle.
    check(lib, "rocblas_create_handle", unsafe {
        (lib.fns.create_handle)(&mut handle)
    })?;
    Ok(handle)
}

/// # Safety
/// `handle` came from [`create_handle`] and is not used afterwards.
pub unsafe fn destroy_handle(lib: &Rocblas, handle: RocblasHandle) -> Result<(), RocblasError> {
    // SAFETY: as the caller promises.
    check(lib, "rocblas_destroy_handle", unsafe {
        (lib.fns.destroy_handle)(handle)
    })
}

/// Binds `handle` to `stream`, alpha/beta on the host, and a preallocated workspace (so that
/// nothing is allocated during graph capture).
///
/// # Safety
/// `handle` is live; `stream` is a live `hipStream_t`; `workspace` is device memory of
/// `workspace_bytes` that outlives the handle's use.
pub unsafe fn configure(
    lib: &Rocblas,
    handle: RocblasHandle,
    stream: *mut c_void,
    workspace: u64,
    workspace_bytes: usize,
) -> Result<(), RocblasError> {
    // SAFETY: as the caller promises.
    unsafe {
        check(
            lib,
            "rocblas_set_stream",
            (lib.fns.set_stream)(handle, stream),
        )?;
        check(
            lib,
            "rocblas_set_pointer_mode",
            (lib.fns.set_pointer_mode)(handle, POINTER_MODE_HOST),
        )?;
        check(
            lib,
            "rocblas_set_workspace",
            (lib.fns.set_workspace)(handle, workspace as *mut c_void, workspace_bytes),
        )
    }
}

/// Runs `g` with `rocblas_gemm_ex` (batch 1) or `rocblas_gemm_strided_batched_ex`.
///
/// # Safety
/// `handle` is live and the addresses are device memory large enough for the shapes, leading
/// dimensions, strides and batch of `g`.
pub unsafe fn half_gemm(
    lib: &Rocblas,
    handle: RocblasHandle,
    g: &HalfGemm,
) -> Result<(), RocblasError> {
    let (alpha, beta) = (
        (&g.alpha as *const f32).cast::<c_void>(),
        (&g.beta as *const f32).cast::<c_void>(),
    );
    let (a, b, c) = (
        g.a as *const c_void,
        g.b as *const c_void,
        g.c as *mut c_void,
    );
    let (op_a, op_b) = (operation(g.transpose_a), operation(g.transpose_b));
    let f16 = DATATYPE_F16_R;
    if g.batch == 1 {
        // SAFETY: as the caller promises; C and D are the same matrix.
        return check(lib, "rocblas_gemm_ex", unsafe {
            (lib.fns.gemm_ex)(
                handle,
                op_a,
                op_b,
                g.m,
                g.n,
                g.k,
                alpha,
                a,
                f16,
                g.lda,
                b,
                f16,
                g.ldb,
                beta,
                c,
                f16,
                g.ldc,
                c,
                f16,
                g.ldc,
                DATATYPE_F32_R,
                GEMM_ALGO_STANDARD,
                0,
                0,
            )
        });
    }
    // SAFETY: as above.
    check(lib, "rocblas_gemm_strided_batched_ex", unsafe {
        (lib.fns.gemm_strided_batched_ex)(
            handle,
            op_a,
            op_b,
            g.m,
            g.n,
            g.k,
            alpha,
            a,
            f16,
            g.lda,
            g.stride_a,
            b,
            f16,
            g.ldb,
            g.stride_b,
            beta,
            c,
            f16,
            g.ldc,
            g.stride_c,
            c,
            f16,
            g.ldc,
            g.stride_c,
            g.batch,
            DATATYPE_F32_R,
            GEMM_ALGO_STANDARD,
            0,
            0,
        )
    })
}
