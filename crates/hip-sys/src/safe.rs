//! hipRTC programs as owned values: create, compile for an architecture, take the code object.

use std::ffi::{CString, c_char, c_int};

use crate::loader::Hip;
use crate::result::{HipError, static_text};
use crate::sys::{HIPRTC_SUCCESS, HiprtcProgram, HiprtcResult};

/// A failed compilation, with hipRTC's log.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error(transparent)]
    Call(#[from] HipError),
    #[error("hipRTC could not compile for {arch}:\n{log}")]
    Failed { arch: String, log: String },
    #[error("source or option contains a NUL byte")]
    Nul,
}

fn rtc_check(hip: &Hip, call: &'static str, code: HiprtcResult) -> Result<(), HipError> {
    if code == HIPRTC_SUCCESS {
        return Ok(());
    }
    // SAFETY: hiprtcGetErrorString returns a static C string (or null) for any code.
    let message = unsafe {
        static_text(
            (hip.rtc.hiprtc_get_error_string)(code),
            "unknown hipRTC error",
        )
    };
    Err(HipError {
        call,
        code,
        message,
    })
}

/// hipRTC's version as (major, minor).
pub fn rtc_version(hip: &Hip) -> Result<(i32, i32), HipError> {
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: writes two ints.
    rtc_check(hip, "hiprtcVersion", unsafe {
        (hip.rtc.hiprtc_version)(&mut major, &mut minor)
    })?;
    Ok((major, minor))
}

/// A hipRTC program, destroyed when dropped.
struct Program<'a> {
    hip: &'a Hip,
    handle: HiprtcProgram,
}

impl Drop for Program<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle came from hiprtcCreateProgram and is destroyed once.
        unsafe { (self.hip.rtc.hiprtc_destroy_program)(&mut self.handle) };
    }
}

impl Program<'_> {
    fn log(&self) -> String {
        let mut size = 0usize;
        // SAFETY: writes one size_t.
        if unsafe { (self.hip.rtc.hiprtc_get_program_log_size)(self.handle, &mut size) }
            != HIPRTC_SUCCESS
            || size == 0
        {
            return String::new();
        }
        let mut buf = vec![0u8; size];
        // SAFETY: the buffer holds `size` bytes, as hipRTC asked for.
        unsafe {
            (self.hip.rtc.hiprtc_get_program_log)(self.handle, buf.as_mut_ptr().cast::<c_char>())
        };
        String::from_utf8_lossy(&buf)
            .trim_end_matches('\0')
            .to_owned()
    }
}

/// Compiles `source` for `--offload-arch=arch` (always explicit: without it hipRTC asks the GPU)
/// with extra `options`, returning the ELF code object.
pub fn compile(
    hip: &Hip,
    source: &str,
    name: &str,
    arch: &str,
    options: &[&str],
) -> Result<Vec<u8>, CompileError> {
    let src = CString::new(source).map_err(|_| CompileError::Nul)?;
    let name_c = CString::new(name).map_err(|_| CompileError::Nul)?;
    let mut handle: HiprtcProgram = std::ptr::null_mut();
    // SAFETY: valid C strings; no headers.
    rtc_check(hip, "hiprtcCreateProgram", unsafe {
        (hip.rtc.hiprtc_create_program)(
            &mut handle,
            src.as_ptr(),
            name_c.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    })?;
    let program = Program { hip, handle };
    let all: Vec<CString> = std::iter::once(format!("--offload-arch={arch}"))
        .chain(options.iter().map(|o| (*o).to_owned()))
        .map(|o| CString::new(o).map_err(|_| CompileError::Nul))
        .collect::<Result<_, _>>()?;
    let pointers: Vec<*const c_char> = all.iter().map(|o| o.as_ptr()).collect();
    // SAFETY: `pointers` holds valid C strings that outlive the call.
    let code = unsafe {
        (hip.rtc.hiprtc_compile_program)(program.handle, pointers.len() as c_int, pointers.as_ptr())
    };
    if code != HIPRTC_SUCCESS {
        let log = program.log();
        return Err(CompileError::Failed {
            arch: arch.to_owned(),
            log: if log.is_empty() {
                format!("hipRTC error {code}")
            } else {
                log
            },
        });
    }
    let mut size = 0usize;
    // SAFETY: writes one size_t.
    rtc_check(hip, "hiprtcGetCodeSize", unsafe {
        (hip.rtc.hiprtc_get_code_size)(program.handle, &mut size)
    })?;
    let mut code_object = vec![0u8; size];
    // SAFETY: the buffer holds `size` bytes.
    rtc_check(hip, "hiprtcGetCode", unsafe {
        (hip.rtc.hiprtc_get_code)(program.handle, code_object.as_mut_ptr().cast::<c_char>())
    })?;
    Ok(code_object)
}
