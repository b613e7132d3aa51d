//! The raw layer: types, enum values, the functions lc0rs calls (docs/gpu-apis.md §3, §6) and
//! loading them. Values are identical in ROCm 5.2 → 7.x unless noted.

use std::ffi::{c_char, c_int, c_void};
use std::path::{Path, PathBuf};

use hip_sys::{Library, LoadError, Platform, open_companion, symbol};

pub type RocblasHandle = *mut c_void;
pub type RocblasStatus = c_int;
pub type RocblasInt = c_int;
pub type RocblasStride = i64;

pub const STATUS_SUCCESS: RocblasStatus = 0;
pub const STATUS_INVALID_HANDLE: RocblasStatus = 1;
pub const STATUS_NOT_IMPLEMENTED: RocblasStatus = 2;
pub const STATUS_INVALID_SIZE: RocblasStatus = 4;
pub const STATUS_MEMORY_ERROR: RocblasStatus = 5;
pub const STATUS_INTERNAL_ERROR: RocblasStatus = 6;
pub const STATUS_INVALID_VALUE: RocblasStatus = 11;
pub const STATUS_ARCH_MISMATCH: RocblasStatus = 15;

/// `rocblas_operation`.
pub const OPERATION_NONE: c_int = 111;
pub const OPERATION_TRANSPOSE: c_int = 112;
/// `rocblas_datatype`.
pub const DATATYPE_F16_R: c_int = 150;
pub const DATATYPE_F32_R: c_int = 151;
pub const DATATYPE_BF16_R: c_int = 168;
/// `rocblas_gemm_algo`.
pub const GEMM_ALGO_STANDARD: c_int = 0;
/// `rocblas_pointer_mode`: alpha/beta on the host.
pub const POINTER_MODE_HOST: c_int = 0;

/// The rocBLAS soname of a ROCm release (runtime version `major·10⁷ + minor·10⁵ + patch`):
/// `.so.0` up to 5.5, `.so.3` for 5.6–5.7, `.so.4` for 6.x, `.so.5` for 7.x.
pub fn soname(runtime_version: i32) -> Option<&'static str> {
    let (major, minor) = (
        runtime_version / 10_000_000,
        runtime_version / 100_000 % 100,
    );
    Some(match (major, minor) {
        (5, 0..=5) => "librocblas.so.0",
        (5, _) => "librocblas.so.3",
        (6, _) => "librocblas.so.4",
        (7, _) => "librocblas.so.5",
        _ => return None,
    })
}

/// rocBLAS's file name on `platform` for `runtime_version`: [`soname`] on Linux; `rocblas.dll`
/// in every release of AMD's HIP SDK for Windows (5.x to 7.x; docs/windows.md).
pub fn library_name(platform: Platform, runtime_version: i32) -> Option<&'static str> {
    match platform {
        Platform::Linux => soname(runtime_version),
        Platform::Windows => (5..=7)
            .contains(&(runtime_version / 10_000_000))
            .then_some("rocblas.dll"),
    }
}

/// The rocBLAS functions lc0rs uses.
#[derive(Clone, Copy)]
pub struct RocblasFns {
    pub create_handle: unsafe extern "C" fn(*mut RocblasHandle) -> RocblasStatus,
    pub destroy_handle: unsafe extern "C" fn(RocblasHandle) -> RocblasStatus,
    pub set_stream: unsafe extern "C" fn(RocblasHandle, *mut c_void) -> RocblasStatus,
    pub set_workspace: unsafe extern "C" fn(RocblasHandle, *mut c_void, usize) -> RocblasStatus,
    pub set_pointer_mode: unsafe extern "C" fn(RocblasHandle, c_int) -> RocblasStatus,
    pub status_to_string: unsafe extern "C" fn(RocblasStatus) -> *const c_char,
    #[allow(clippy::type_complexity)]
    pub gemm_ex: unsafe extern "C" fn(
        RocblasHandle,
        c_int,
        c_int,
        RocblasInt,
        RocblasInt,
        RocblasInt,
        *const c_void,
        *const c_void,
        c_int,
        RocblasInt,
        *const c_void,
        c_int,
        RocblasInt,
        *const c_void,
        *const c_void,
        c_int,
        RocblasInt,
        *mut c_void,
        c_int,
        RocblasInt,
        c_int,
        c_int,
        i32,
        u32,
    ) -> RocblasStatus,
    #[allow(clippy::type_complexity)]
    pub gemm_strided_batched_ex: unsafe extern "C" fn(
        RocblasHandle,
        c_int,
        c_int,
        RocblasInt,
        RocblasInt,
        RocblasInt,
        *const c_void,
        *const c_void,
        c_int,
        RocblasInt,
        RocblasStride,
        *const c_void,
        c_int,
        RocblasInt,
        RocblasStride,
        *const c_void,
        *const c_void,
        c_int,
        RocblasInt,
        RocblasStride,
        *mut c_void,
        c_int,
        RocblasInt,
        RocblasStride,
        RocblasInt,
        c_int,
        c_int,
        i32,
        u32,
    ) -> RocblasStatus,
}

/// Loaded rocBLAS.
pub struct Rocblas {
    pub fns: RocblasFns,
    pub library: PathBuf,
    _lib: Library,
}

impl Rocblas {
    /// Loads the rocBLAS matching `runtime_version` from `dir` (the HIP runtime's directory), or
    /// by soname when the runtime came from the system search path.
    pub fn load(dir: Option<&Path>, runtime_version: i32) -> Result<Self, LoadError> {
        let name = library_name(Platform::HOST, runtime_version).ok_or(LoadError::Unsupported {
            library: "rocBLAS",
            runtime_version,
            reason: "lc0rs knows the rocBLAS library names of ROCm 5.x to 7.x",
        })?;
        let path = dir.map_or_else(|| PathBuf::from(name), |d| d.join(name));
        let lib = open_companion(&path)?;
        let fns = RocblasFns {
            create_handle: symbol(&lib, &path, "rocblas_create_handle")?,
            destroy_handle: symbol(&lib, &path, "rocblas_destroy_handle")?,
            set_stream: symbol(&lib, &path, "rocblas_set_stream")?,
            set_workspace: symbol(&lib, &path, "rocblas_set_workspace")?,
            set_pointer_mode: symbol(&lib, &path, "rocblas_set_pointer_mode")?,
            status_to_string: symbol(&lib, &path, "rocblas_status_to_string")?,
            gemm_ex: symbol(&lib, &path, "rocblas_gemm_ex")?,
            gemm_strided_batched_ex: symbol(&lib, &path, "rocblas_gemm_strided_batched_ex")?,
        };
        Ok(Self {
            fns,
            library: path,
            _lib: lib,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_match_the_facts_file() {
        assert_eq!((OPERATION_NONE, OPERATION_TRANSPOSE), (111, 112));
        assert_eq!(
            (DATATYPE_F16_R, DATATYPE_F32_R, DATATYPE_BF16_R),
            (150, 151, 168)
        );
        assert_eq!(
            (STATUS_SUCCESS, STATUS_INVALID_VALUE, STATUS_ARCH_MISMATCH),
            (0, 11, 15)
        );
        assert_eq!(std::mem::size_of::<RocblasStride>(), 8);
        assert_eq!(std::mem::size_of::<RocblasInt>(), 4);
    }

    #[test]
    fn windows_name_is_unversioned_for_every_known_release() {
        assert_eq!(
            library_name(Platform::Windows, 50_500_000),
            Some("rocblas.dll")
        );
        assert_eq!(
            library_name(Platform::Windows, 70_100_000),
            Some("rocblas.dll")
        );
        assert_eq!(library_name(Platform::Windows, 80_000_000), None);
        assert_eq!(
            library_name(Platform::Linux, 60_200_000),
            Some("librocblas.so.4")
        );
    }

    #[test]
    fn soname_follows_the_rocm_release() {
        assert_eq!(soname(50_221_153), Some("librocblas.so.0"));
        assert_eq!(soname(50_500_000), Some("librocblas.so.0"));
        assert_eq!(soname(50_700_000), Some("librocblas.so.3"));
        assert_eq!(soname(60_200_000), Some("librocblas.so.4"));
        assert_eq!(soname(70_100_000), Some("librocblas.so.5"));
        assert_eq!(soname(40_000_000), None);
    }

    #[test]
    fn a_missing_library_is_an_error_naming_it() {
        let dir = std::env::temp_dir().join("lc0rs-no-rocm-here");
        let e = Rocblas::load(Some(&dir), 60_200_000)
            .err()
            .expect("nothing to load there");
        let name = library_name(Platform::HOST, 60_200_000).unwrap();
        assert!(e.to_string().contains(name), "{e}");
    }
}
