//! Raw HIP and hipRTC types and the function pointers lc0rs uses (gpu-apis.md §1.3, §2.1, §7).

use std::ffi::{c_char, c_int, c_void};

/// `hipError_t`: a 4-byte C enum.
pub type HipErrorCode = c_int;
/// `hiprtcResult`: a 4-byte C enum.
pub type HiprtcResult = c_int;
/// `hiprtcProgram`: an opaque handle.
pub type HiprtcProgram = *mut c_void;

pub const HIP_SUCCESS: HipErrorCode = 0;
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
/// Where `gcnArchName` lies in `hipDeviceProp_tR0600` (ROCm 6.0–7.x, gpu-apis.md §1.5).
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
