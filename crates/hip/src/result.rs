//! Every HIP call as a `Result`, with the runtime's own error text.

use std::ffi::{CStr, c_int, c_void};

use hip_sys::Hip;
use hip_sys::sys::{
    CAPTURE_MODE_THREAD_LOCAL, CAPTURE_STATUS_NONE, DEVICE_PROPERTIES_BUFFER_BYTES, EVENT_DEFAULT,
    GCN_ARCH_NAME_OFFSET_R0000, GCN_ARCH_NAME_OFFSET_R0600, HIP_ERROR_NO_DEVICE,
    HIP_ERROR_STREAM_CAPTURE_INVALIDATED, HIP_SUCCESS, HOST_MALLOC_DEFAULT, HipErrorCode, HipEvent,
    HipFunction, HipGraph, HipGraphExec, HipModule, HipStream, STREAM_NON_BLOCKING,
};

/// A failed HIP or hipRTC call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call} failed: {message} ({code})")]
pub struct HipError {
    pub call: &'static str,
    pub code: i32,
    pub message: String,
}

impl HipError {
    /// Whether work outside a stream capture invalidated it: nothing of it ran.
    pub fn is_capture_invalidated(&self) -> bool {
        self.code == HIP_ERROR_STREAM_CAPTURE_INVALIDATED
    }
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

/// Makes GPU `ordinal` current for this thread (HIP's current device is per thread).
pub fn set_device(hip: &Hip, ordinal: usize) -> Result<(), HipError> {
    // SAFETY: takes an int.
    check(hip, "hipSetDevice", unsafe {
        (hip.device.hip_set_device)(ordinal as c_int)
    })
}

/// The GPU current for this thread.
pub fn current_device(hip: &Hip) -> Result<usize, HipError> {
    let mut ordinal: c_int = 0;
    // SAFETY: writes one int.
    check(hip, "hipGetDevice", unsafe {
        (hip.device.hip_get_device)(&mut ordinal)
    })?;
    Ok(ordinal.max(0) as usize)
}

pub fn total_memory(hip: &Hip, ordinal: usize) -> Result<usize, HipError> {
    let mut bytes = 0usize;
    // SAFETY: writes one size_t.
    check(hip, "hipDeviceTotalMem", unsafe {
        (hip.device.hip_device_total_mem)(&mut bytes, ordinal as c_int)
    })?;
    Ok(bytes)
}

/// (free, total) bytes of the current device.
pub fn memory_info(hip: &Hip) -> Result<(usize, usize), HipError> {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: writes two size_t.
    check(hip, "hipMemGetInfo", unsafe {
        (hip.device.hip_mem_get_info)(&mut free, &mut total)
    })?;
    Ok((free, total))
}

/// Allocates `bytes` on the current device.
pub fn malloc(hip: &Hip, bytes: usize) -> Result<*mut c_void, HipError> {
    let mut ptr = std::ptr::null_mut();
    // SAFETY: writes one pointer.
    check(hip, "hipMalloc", unsafe {
        (hip.device.hip_malloc)(&mut ptr, bytes)
    })?;
    Ok(ptr)
}

/// # Safety
/// `ptr` came from [`malloc`] and is not used afterwards.
pub unsafe fn free(hip: &Hip, ptr: *mut c_void) -> Result<(), HipError> {
    // SAFETY: as the caller promises.
    check(hip, "hipFree", unsafe { (hip.device.hip_free)(ptr) })
}

/// Allocates `bytes` of pinned host memory.
pub fn host_malloc(hip: &Hip, bytes: usize) -> Result<*mut c_void, HipError> {
    let mut ptr = std::ptr::null_mut();
    // SAFETY: writes one pointer.
    check(hip, "hipHostMalloc", unsafe {
        (hip.device.hip_host_malloc)(&mut ptr, bytes, HOST_MALLOC_DEFAULT)
    })?;
    Ok(ptr)
}

/// # Safety
/// `ptr` came from [`host_malloc`] and is not used afterwards.
pub unsafe fn host_free(hip: &Hip, ptr: *mut c_void) -> Result<(), HipError> {
    // SAFETY: as the caller promises.
    check(hip, "hipHostFree", unsafe {
        (hip.device.hip_host_free)(ptr)
    })
}

/// Stream-ordered copy of `bytes` bytes.
///
/// # Safety
/// `dst` and `src` are valid for `bytes` bytes of the direction `kind` names, and stay valid
/// until the stream has run the copy.
pub unsafe fn memcpy_async(
    hip: &Hip,
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: c_int,
    stream: HipStream,
) -> Result<(), HipError> {
    // SAFETY: as the caller promises.
    check(hip, "hipMemcpyAsync", unsafe {
        (hip.device.hip_memcpy_async)(dst, src, bytes, kind, stream)
    })
}

/// # Safety
/// `dst` is device memory of at least `bytes` bytes.
pub unsafe fn memset_async(
    hip: &Hip,
    dst: *mut c_void,
    value: u8,
    bytes: usize,
    stream: HipStream,
) -> Result<(), HipError> {
    // SAFETY: as the caller promises.
    check(hip, "hipMemsetAsync", unsafe {
        (hip.device.hip_memset_async)(dst, c_int::from(value), bytes, stream)
    })
}

/// A non-blocking stream on the current device.
pub fn stream_create(hip: &Hip) -> Result<HipStream, HipError> {
    let mut stream = std::ptr::null_mut();
    // SAFETY: writes one handle.
    check(hip, "hipStreamCreateWithFlags", unsafe {
        (hip.device.hip_stream_create_with_flags)(&mut stream, STREAM_NON_BLOCKING)
    })?;
    Ok(stream)
}

/// # Safety
/// `stream` is a live stream of this runtime, not used afterwards.
pub unsafe fn stream_destroy(hip: &Hip, stream: HipStream) -> Result<(), HipError> {
    // SAFETY: as the caller promises.
    check(hip, "hipStreamDestroy", unsafe {
        (hip.device.hip_stream_destroy)(stream)
    })
}

/// # Safety
/// `stream` is a live stream of this runtime (ROCm 7 no longer checks handles).
pub unsafe fn stream_synchronize(hip: &Hip, stream: HipStream) -> Result<(), HipError> {
    // SAFETY: as the caller promises.
    check(hip, "hipStreamSynchronize", unsafe {
        (hip.device.hip_stream_synchronize)(stream)
    })
}

/// An event with timing enabled.
pub fn event_create(hip: &Hip) -> Result<HipEvent, HipError> {
    let mut event = std::ptr::null_mut();
    // SAFETY: writes one handle.
    check(hip, "hipEventCreateWithFlags", unsafe {
        (hip.device.hip_event_create_with_flags)(&mut event, EVENT_DEFAULT)
    })?;
    Ok(event)
}

/// # Safety
/// `event` and `stream` are live handles of this runtime.
pub unsafe fn event_record(hip: &Hip, event: HipEvent, stream: HipStream) -> Result<(), HipError> {
    // SAFETY: as the caller promises.
    check(hip, "hipEventRecord", unsafe {
        (hip.device.hip_event_record)(event, stream)
    })
}

/// Waits until the work before `event`'s record has completed.
///
/// # Safety
/// `event` is a live event of this runtime.
pub unsafe fn event_synchronize(hip: &Hip, event: HipEvent) -> Result<(), HipError> {
    // SAFETY: as the caller promises.
    check(hip, "hipEventSynchronize", unsafe {
        (hip.device.hip_event_synchronize)(event)
    })
}

/// Milliseconds between two recorded events, waiting for `end` first (hipEventElapsedTime
/// itself answers hipErrorNotReady for unfinished events).
///
/// # Safety
/// Both are live events of this runtime.
pub unsafe fn event_elapsed_ms(hip: &Hip, start: HipEvent, end: HipEvent) -> Result<f32, HipError> {
    let mut ms = 0f32;
    // SAFETY: as the caller promises; writes one float.
    unsafe {
        check(
            hip,
            "hipEventSynchronize",
            (hip.device.hip_event_synchronize)(end),
        )?;
        check(
            hip,
            "hipEventElapsedTime",
            (hip.device.hip_event_elapsed_time)(&mut ms, start, end),
        )?;
    }
    Ok(ms)
}

/// # Safety
/// `event` is a live event, not used afterwards.
pub unsafe fn event_destroy(hip: &Hip, event: HipEvent) -> Result<(), HipError> {
    // SAFETY: as the caller promises.
    check(hip, "hipEventDestroy", unsafe {
        (hip.device.hip_event_destroy)(event)
    })
}

/// Loads a code object (ELF or offload bundle) on the current device.
pub fn module_load_data(hip: &Hip, image: &[u8]) -> Result<HipModule, HipError> {
    let mut module = std::ptr::null_mut();
    // SAFETY: the image is a complete code object in memory for the duration of the call.
    check(hip, "hipModuleLoadData", unsafe {
        (hip.device.hip_module_load_data)(&mut module, image.as_ptr().cast())
    })?;
    Ok(module)
}

/// # Safety
/// `module` is a live module of this runtime.
pub unsafe fn module_get_function(
    hip: &Hip,
    module: HipModule,
    name: &CStr,
) -> Result<HipFunction, HipError> {
    let mut function = std::ptr::null_mut();
    // SAFETY: as the caller promises; `name` is NUL-terminated.
    check(hip, "hipModuleGetFunction", unsafe {
        (hip.device.hip_module_get_function)(&mut function, module, name.as_ptr())
    })?;
    Ok(function)
}

/// # Safety
/// `module` is a live module, none of whose functions is used afterwards.
pub unsafe fn module_unload(hip: &Hip, module: HipModule) -> Result<(), HipError> {
    // SAFETY: as the caller promises.
    check(hip, "hipModuleUnload", unsafe {
        (hip.device.hip_module_unload)(module)
    })
}

/// Launches `function` on `stream` with `params`: one pointer to each argument's value.
///
/// # Safety
/// The arguments match the kernel's parameter list in number, order and type; every device
/// pointer among them is valid for what the kernel touches.
pub unsafe fn module_launch_kernel(
    hip: &Hip,
    function: HipFunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared_bytes: u32,
    stream: HipStream,
    params: &mut [*mut c_void],
) -> Result<(), HipError> {
    // SAFETY: as the caller promises; no `extra` array.
    check(hip, "hipModuleLaunchKernel", unsafe {
        (hip.device.hip_module_launch_kernel)(
            function,
            grid[0],
            grid[1],
            grid[2],
            block[0],
            block[1],
            block[2],
            shared_bytes,
            stream,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    })
}

/// # Safety
/// `stream` is a live stream of this runtime.
pub unsafe fn stream_begin_capture(hip: &Hip, stream: HipStream) -> Result<(), HipError> {
    // SAFETY: as the caller promises.
    check(hip, "hipStreamBeginCapture", unsafe {
        (hip.device.hip_stream_begin_capture)(stream, CAPTURE_MODE_THREAD_LOCAL)
    })
}

/// Ends a capture; the graph is null where nothing was captured.
///
/// # Safety
/// `stream` is a live stream of this runtime that is capturing.
pub unsafe fn stream_end_capture(hip: &Hip, stream: HipStream) -> Result<HipGraph, HipError> {
    let mut graph = std::ptr::null_mut();
    // SAFETY: as the caller promises; writes one handle.
    check(hip, "hipStreamEndCapture", unsafe {
        (hip.device.hip_stream_end_capture)(stream, &mut graph)
    })?;
    Ok(graph)
}

/// Whether `stream` is capturing.
///
/// # Safety
/// `stream` is a live stream of this runtime.
pub unsafe fn stream_is_capturing(hip: &Hip, stream: HipStream) -> Result<bool, HipError> {
    let mut status: c_int = CAPTURE_STATUS_NONE;
    // SAFETY: as the caller promises; writes one enum.
    check(hip, "hipStreamIsCapturing", unsafe {
        (hip.device.hip_stream_is_capturing)(stream, &mut status)
    })?;
    Ok(status != CAPTURE_STATUS_NONE)
}

/// # Safety
/// `graph` is a live graph of this runtime.
pub unsafe fn graph_instantiate(hip: &Hip, graph: HipGraph) -> Result<HipGraphExec, HipError> {
    let mut exec = std::ptr::null_mut();
    // SAFETY: as the caller promises; no error node or log buffer.
    check(hip, "hipGraphInstantiate", unsafe {
        (hip.device.hip_graph_instantiate)(
            &mut exec,
            graph,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    })?;
    Ok(exec)
}

/// # Safety
/// `exec` and `stream` are live handles of this runtime.
pub unsafe fn graph_launch(
    hip: &Hip,
    exec: HipGraphExec,
    stream: HipStream,
) -> Result<(), HipError> {
    // SAFETY: as the caller promises.
    check(hip, "hipGraphLaunch", unsafe {
        (hip.device.hip_graph_launch)(exec, stream)
    })
}

/// # Safety
/// `exec` is a live executable graph, not used afterwards.
pub unsafe fn graph_exec_destroy(hip: &Hip, exec: HipGraphExec) -> Result<(), HipError> {
    // SAFETY: as the caller promises.
    check(hip, "hipGraphExecDestroy", unsafe {
        (hip.device.hip_graph_exec_destroy)(exec)
    })
}

/// # Safety
/// `graph` is a live graph, not used afterwards.
pub unsafe fn graph_destroy(hip: &Hip, graph: HipGraph) -> Result<(), HipError> {
    // SAFETY: as the caller promises.
    check(hip, "hipGraphDestroy", unsafe {
        (hip.device.hip_graph_destroy)(graph)
    })
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
