//! Every HIP call as a `Result`, with the runtime's own error text.

use std::ffi::{CStr, c_int};

use crate::loader::Hip;
use crate::sys::{
    DEVICE_PROPERTIES_BUFFER_BYTES, GCN_ARCH_NAME_OFFSET_R0000, GCN_ARCH_NAME_OFFSET_R0600,
    HIP_ERROR_NO_DEVICE, HIP_SUCCESS, HipErrorCode,
};

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
    // SAFETY: hipGetErrorString returns a static C string (or null) for any code.
    let message = unsafe { static_text((hip.runtime.hip_get_error_string)(code), "unknown error") };
    Err(HipError {
        call,
        code,
        message,
    })
}

/// The text of a library's static error string, or `fallback` where it gave none.
///
/// # Safety
/// `text` is null or points to a NUL-terminated string that outlives the call.
pub(crate) unsafe fn static_text(text: *const std::ffi::c_char, fallback: &str) -> String {
    if text.is_null() {
        return fallback.to_owned();
    }
    // SAFETY: non-null and NUL-terminated, as the caller promises.
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
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

/// The gfx architecture of GPU `ordinal` for `--offload-arch` (e.g. `gfx90a`), read from
/// `gcnArchName` through the properties layout this runtime exports (R0600 from ROCm 6, else the
/// 5.x layout; calling the unversioned symbol on 6/7 would return the old layout).
pub fn arch_name(hip: &Hip, ordinal: usize) -> Result<String, HipError> {
    let (call, get, offset) = match hip.runtime.hip_get_device_properties_r0600 {
        Some(get) => (
            "hipGetDevicePropertiesR0600",
            get,
            GCN_ARCH_NAME_OFFSET_R0600,
        ),
        None => (
            "hipGetDeviceProperties",
            hip.runtime.hip_get_device_properties,
            GCN_ARCH_NAME_OFFSET_R0000,
        ),
    };
    let mut props = vec![0u8; DEVICE_PROPERTIES_BUFFER_BYTES];
    // SAFETY: the buffer is larger than either properties layout.
    check(hip, call, unsafe {
        get(props.as_mut_ptr().cast(), ordinal as c_int)
    })?;
    arch_from_properties(&props, offset).ok_or_else(|| HipError {
        call,
        code: 0,
        message: format!("gcnArchName at byte {offset} is not a gfx architecture"),
    })
}

/// The architecture in a properties buffer: the NUL-terminated `gcnArchName` at `offset`
/// without its target features (`gfx90a:sramecc+:xnack-` → `gfx90a`); `None` unless it is a
/// gfx name (a wrong layout reads other fields).
pub fn arch_from_properties(props: &[u8], offset: usize) -> Option<String> {
    let field = props.get(offset..)?;
    let text = CStr::from_bytes_until_nul(field).ok()?.to_str().ok()?;
    let arch = text.split(':').next()?;
    let valid = arch.len() > 3
        && arch.starts_with("gfx")
        && arch[3..].bytes().all(|b| b.is_ascii_alphanumeric());
    valid.then(|| arch.to_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn versions_are_split_as_hip_packs_them() {
        assert_eq!(super::version_text(50_221_153), "5.2.21153");
        assert_eq!(super::version_text(60_200_000), "6.2.0");
        assert_eq!(super::version_text(70_100_005), "7.1.5");
    }

    fn properties_with(offset: usize, name: &[u8]) -> Vec<u8> {
        let mut props = vec![0u8; super::DEVICE_PROPERTIES_BUFFER_BYTES];
        props[offset..offset + name.len()].copy_from_slice(name);
        props
    }

    #[test]
    fn the_arch_is_read_at_the_layouts_offset_without_features() {
        let props = properties_with(1160, b"gfx90a:sramecc+:xnack-\0");
        assert_eq!(
            super::arch_from_properties(&props, 1160).as_deref(),
            Some("gfx90a")
        );
        let props = properties_with(396, b"gfx1100\0");
        assert_eq!(
            super::arch_from_properties(&props, 396).as_deref(),
            Some("gfx1100")
        );
        // The R0600 name read with the R0000 offset (or vice versa) is not an arch.
        assert_eq!(super::arch_from_properties(&props, 1160), None);
        let props = properties_with(396, b"AMD Radeon\0");
        assert_eq!(super::arch_from_properties(&props, 396), None);
        let unterminated = vec![b'g'; 1200];
        assert_eq!(super::arch_from_properties(&unterminated, 1160), None);
        assert_eq!(super::arch_from_properties(&[0u8; 16], 396), None);
    }
}
