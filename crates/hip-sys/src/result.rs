//! Every HIP call as a `Result`, with the runtime's own error text.

use std::ffi::{CStr, c_int};

use crate::loader::Hip;
use crate::sys::{HIP_ERROR_NO_DEVICE, HIP_SUCCESS, HipErrorCode};

/// A failed HIP or hipRTC call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call} failed: {message} ({code})")]
pub struct HipError {
    pub call: &'static str,
    pub code: i32,
    pub message: String,
}

fn check(hip: &Hip, call: &'static str, code: HipErrorCode) -> Result<(), HipError> {
    if code == HIP_SUCCESS {
        return Ok(());
    }
    // SAFETY: hipGetErrorString returns a static C string for any code.
    let text = unsafe { (hip.runtime.hip_get_error_string)(code) };
    let message = if text.is_null() {
        "unknown error".to_owned()
    } else {
        // SAFETY: non-null and NUL-terminated (static string of the runtime).
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    };
    Err(HipError {
        call,
        code,
        message,
    })
}

/// Splits `major·10⁷ + minor·10⁵ + patch` (e.g. 50221153 → 5.2.21153).
pub fn version_text(version: i32) -> String {
    format!(
        "{}.{}.{}",
        version / 10_000_000,
        version / 100_000 % 100,
        version % 100_000
    )
}

pub fn runtime_version(hip: &Hip) -> Result<i32, HipError> {
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    check(hip, "hipRuntimeGetVersion", unsafe {
        (hip.runtime.hip_runtime_get_version)(&mut v)
    })?;
    Ok(v)
}

/// The number of GPUs; 0 where the runtime reports `hipErrorNoDevice`.
pub fn device_count(hip: &Hip) -> Result<usize, HipError> {
    let mut n: c_int = 0;
    // SAFETY: writes one int.
    let code = unsafe { (hip.runtime.hip_get_device_count)(&mut n) };
    if code == HIP_ERROR_NO_DEVICE {
        return Ok(0);
    }
    check(hip, "hipGetDeviceCount", code)?;
    Ok(n.max(0) as usize)
}

pub fn device_name(hip: &Hip, ordinal: usize) -> Result<String, HipError> {
    let mut buf = [0u8; 256];
    // SAFETY: writes at most 256 bytes including the NUL.
    check(hip, "hipDeviceGetName", unsafe {
        (hip.runtime.hip_device_get_name)(buf.as_mut_ptr().cast(), 256, ordinal as c_int)
    })?;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

pub fn device_attribute(hip: &Hip, attribute: c_int, ordinal: usize) -> Result<i32, HipError> {
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    check(hip, "hipDeviceGetAttribute", unsafe {
        (hip.runtime.hip_device_get_attribute)(&mut v, attribute, ordinal as c_int)
    })?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    #[test]
    fn versions_are_split_as_hip_packs_them() {
        assert_eq!(super::version_text(50_221_153), "5.2.21153");
        assert_eq!(super::version_text(60_200_000), "6.2.0");
        assert_eq!(super::version_text(70_100_005), "7.1.5");
    }
}
