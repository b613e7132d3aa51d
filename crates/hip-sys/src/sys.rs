//! Raw HIP and hipRTC types and the function pointers lc0rs uses (docs/gpu-apis.md §1.3, §2.1, §6).

use std::ffi::{c_char, c_int, c_uint, c_void};

/// `hipError_t`: a 4-byte C enum.
pub type HipErrorCode = c_int;
/// `hiprtcResult`: a 4-byte C enum.
pub type HiprtcResult = c_int;
/// `hiprtcProgram`: an opaque handle.
pub type HiprtcProgram = *mut c_void;

pub const HIP_SUCCESS: HipErrorCode = 0;
/// `hipErrorStreamCaptureInvalidated`: work outside a stream capture invalidated it.
pub const HIP_ERROR_STREAM_CAPTURE_INVALIDATED: HipErrorCode = 901;
/// Returned by `hipGetDeviceCount` where the runtime finds no GPU.
pub const HIP_ERROR_NO_DEVICE: HipErrorCode = 100;
pub const HIP_ERROR_INVALID_DEVICE: HipErrorCode = 101;
pub const HIPRTC_SUCCESS: HiprtcResult = 0;
pub const HIPRTC_ERROR_COMPILATION: HiprtcResult = 6;

/// `hipDeviceAttribute_t` values lc0rs reads (identical in ROCm 5.2–7.x).
pub const HIP_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: c_int = 63;
pub const HIP_DEVICE_ATTRIBUTE_WARP_SIZE: c_int = 87;

/// `hipGetDeviceProperties*`: fills a `hipDeviceProp_t` whose layout depends on the symbol.
pub type GetDeviceProperties = unsafe extern "C" fn(*mut c_void, c_int) -> HipErrorCode;
/// A buffer larger than every `hipDeviceProp_t` layout (792 bytes R0000, 1472 bytes R0600).
pub const DEVICE_PROPERTIES_BUFFER_BYTES: usize = 4096;
/// Where `gcnArchName` lies in `hipDeviceProp_tR0600` (ROCm 6.0–7.x, docs/gpu-apis.md §1.5).
pub const GCN_ARCH_NAME_OFFSET_R0600: usize = 1160;
/// Where `gcnArchName` lies in `hipDeviceProp_tR0000` (ROCm 5.x, and the unversioned symbol on 6/7).
pub const GCN_ARCH_NAME_OFFSET_R0000: usize = 396;

/// The HIP runtime functions.
#[derive(Clone, Copy)]
pub struct RuntimeFns {
    pub hip_runtime_get_version: unsafe extern "C" fn(*mut c_int) -> HipErrorCode,
    pub hip_driver_get_version: unsafe extern "C" fn(*mut c_int) -> HipErrorCode,
    pub hip_get_device_count: unsafe extern "C" fn(*mut c_int) -> HipErrorCode,
    pub hip_device_get_name: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> HipErrorCode,
    pub hip_device_get_attribute: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> HipErrorCode,
    pub hip_get_error_string: unsafe extern "C" fn(HipErrorCode) -> *const c_char,
    /// The exported legacy symbol: the R0000 layout on every release.
    pub hip_get_device_properties: GetDeviceProperties,
    /// `hipGetDevicePropertiesR0600`, present from ROCm 6.0.
    pub hip_get_device_properties_r0600: Option<GetDeviceProperties>,
}

/// The hipRTC functions.
#[derive(Clone, Copy)]
pub struct RtcFns {
    pub hiprtc_version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> HiprtcResult,
    pub hiprtc_get_error_string: unsafe extern "C" fn(HiprtcResult) -> *const c_char,
    pub hiprtc_create_program: unsafe extern "C" fn(
        *mut HiprtcProgram,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> HiprtcResult,
    pub hiprtc_compile_program:
        unsafe extern "C" fn(HiprtcProgram, c_int, *const *const c_char) -> HiprtcResult,
    pub hiprtc_get_program_log_size:
        unsafe extern "C" fn(HiprtcProgram, *mut usize) -> HiprtcResult,
    pub hiprtc_get_program_log: unsafe extern "C" fn(HiprtcProgram, *mut c_char) -> HiprtcResult,
    pub hiprtc_get_code_size: unsafe extern "C" fn(HiprtcProgram, *mut usize) -> HiprtcResult,
    pub hiprtc_get_code: unsafe extern "C" fn(HiprtcProgram, *mut c_char) -> HiprtcResult,
    pub hiprtc_destroy_program: unsafe extern "C" fn(*mut HiprtcProgram) -> HiprtcResult,
}

/// `hipStream_t`, `hipEvent_t`, `hipModule_t`, `hipFunction_t`, `hipGraph_t`, `hipGraphExec_t`:
/// opaque handles.
pub type HipStream = *mut c_void;
pub type HipEvent = *mut c_void;
pub type HipModule = *mut c_void;
pub type HipFunction = *mut c_void;
pub type HipGraph = *mut c_void;
pub type HipGraphExec = *mut c_void;

/// `hipMemcpyKind`.
pub const MEMCPY_HOST_TO_DEVICE: c_int = 1;
pub const MEMCPY_DEVICE_TO_HOST: c_int = 2;
/// `hipStreamNonBlocking`: no implicit synchronisation with the null stream.
pub const STREAM_NON_BLOCKING: c_uint = 1;
/// `hipEventDefault`: timing enabled.
pub const EVENT_DEFAULT: c_uint = 0;
/// `hipHostMallocDefault`: pinned, not write-combined.
pub const HOST_MALLOC_DEFAULT: c_uint = 0;
/// `hipStreamCaptureMode`: only this thread's unsafe calls are refused during capture.
pub const CAPTURE_MODE_THREAD_LOCAL: c_int = 1;
/// `hipStreamCaptureStatus`.
pub const CAPTURE_STATUS_NONE: c_int = 0;
pub const CAPTURE_STATUS_ACTIVE: c_int = 1;

/// `hipModuleLaunchKernel`.
pub type ModuleLaunchKernel = unsafe extern "C" fn(
    HipFunction,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    HipStream,
    *mut *mut c_void,
    *mut *mut c_void,
) -> HipErrorCode;

/// `hipGraphInstantiate`: the five-argument form in every release 5.x → 7.x.
pub type GraphInstantiate = unsafe extern "C" fn(
    *mut HipGraphExec,
    HipGraph,
    *mut c_void,
    *mut c_char,
    usize,
) -> HipErrorCode;

/// The HIP runtime functions that run work: memory, streams, events, modules, graphs. All are
/// exported by every release lc0rs loads (5.2 included).
#[derive(Clone, Copy)]
pub struct DeviceFns {
    pub hip_set_device: unsafe extern "C" fn(c_int) -> HipErrorCode,
    pub hip_get_device: unsafe extern "C" fn(*mut c_int) -> HipErrorCode,
    pub hip_device_total_mem: unsafe extern "C" fn(*mut usize, c_int) -> HipErrorCode,
    pub hip_mem_get_info: unsafe extern "C" fn(*mut usize, *mut usize) -> HipErrorCode,
    pub hip_malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> HipErrorCode,
    pub hip_free: unsafe extern "C" fn(*mut c_void) -> HipErrorCode,
    pub hip_host_malloc: unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> HipErrorCode,
    pub hip_host_free: unsafe extern "C" fn(*mut c_void) -> HipErrorCode,
    pub hip_memcpy_async:
        unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int, HipStream) -> HipErrorCode,
    pub hip_memset_async:
        unsafe extern "C" fn(*mut c_void, c_int, usize, HipStream) -> HipErrorCode,
    pub hip_stream_create_with_flags: unsafe extern "C" fn(*mut HipStream, c_uint) -> HipErrorCode,
    pub hip_stream_destroy: unsafe extern "C" fn(HipStream) -> HipErrorCode,
    pub hip_stream_synchronize: unsafe extern "C" fn(HipStream) -> HipErrorCode,
    pub hip_event_create_with_flags: unsafe extern "C" fn(*mut HipEvent, c_uint) -> HipErrorCode,
    pub hip_event_record: unsafe extern "C" fn(HipEvent, HipStream) -> HipErrorCode,
    pub hip_event_elapsed_time: unsafe extern "C" fn(*mut f32, HipEvent, HipEvent) -> HipErrorCode,
    pub hip_event_synchronize: unsafe extern "C" fn(HipEvent) -> HipErrorCode,
    pub hip_event_destroy: unsafe extern "C" fn(HipEvent) -> HipErrorCode,
    pub hip_module_load_data: unsafe extern "C" fn(*mut HipModule, *const c_void) -> HipErrorCode,
    pub hip_module_get_function:
        unsafe extern "C" fn(*mut HipFunction, HipModule, *const c_char) -> HipErrorCode,
    pub hip_module_unload: unsafe extern "C" fn(HipModule) -> HipErrorCode,
    pub hip_module_launch_kernel: ModuleLaunchKernel,
    pub hip_stream_begin_capture: unsafe extern "C" fn(HipStream, c_int) -> HipErrorCode,
    pub hip_stream_end_capture: unsafe extern "C" fn(HipStream, *mut HipGraph) -> HipErrorCode,
    pub hip_stream_is_capturing: unsafe extern "C" fn(HipStream, *mut c_int) -> HipErrorCode,
    pub hip_graph_instantiate: GraphInstantiate,
    pub hip_graph_launch: unsafe extern "C" fn(HipGraphExec, HipStream) -> HipErrorCode,
    pub hip_graph_exec_destroy: unsafe extern "C" fn(HipGraphExec) -> HipErrorCode,
    pub hip_graph_destroy: unsafe extern "C" fn(HipGraph) -> HipErrorCode,
}
