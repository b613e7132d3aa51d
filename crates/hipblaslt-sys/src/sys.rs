//! The raw layer: the FFI-critical structs, the enum values of the `hipDataType` scheme (ROCm 6.0 → 7.x) and the
//! functions lc0rs calls (docs/gpu-apis.md §4). ROCm 5.5–5.7 shipped the same soname with a different
//! enum scheme and struct sizes, so those releases are refused rather than misread.
//!
//! These constants are *not* cuBLASLt's (its attribute numbers differ); keep the tables apart.

use std::ffi::{c_int, c_void};
use std::path::{Path, PathBuf};

use hip_sys::{Library, LoadError, Platform, open_companion, symbol};

pub type HipblasLtHandle = *mut c_void;
pub type MatmulDesc = *mut c_void;
pub type MatrixLayout = *mut c_void;
pub type MatmulPreference = *mut c_void;
pub type HipblasStatus = c_int;

/// `hipblasLtMatmulAlgo_t` (ROCm 5.7 → 7.x): opaque algorithm bytes plus its workspace need.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MatmulAlgo {
    pub data: [u8; 16],
    pub max_workspace_bytes: usize,
}

/// `hipblasLtMatmulHeuristicResult_t`: one candidate from `hipblasLtMatmulAlgoGetHeuristic`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct HeuristicResult {
    pub algo: MatmulAlgo,
    pub workspace_size: usize,
    pub state: HipblasStatus,
    pub waves_count: f32,
    pub reserved: [c_int; 4],
}

const _: () = assert!(size_of::<MatmulAlgo>() == 24);
const _: () = assert!(size_of::<HeuristicResult>() == 56);
const _: () = assert!(align_of::<HeuristicResult>() == 8);
const _: () = assert!(std::mem::offset_of!(HeuristicResult, workspace_size) == 24);
const _: () = assert!(std::mem::offset_of!(HeuristicResult, state) == 32);
const _: () = assert!(std::mem::offset_of!(HeuristicResult, waves_count) == 36);
const _: () = assert!(std::mem::offset_of!(HeuristicResult, reserved) == 40);

/// `hipblasStatus_t`.
pub const STATUS_SUCCESS: HipblasStatus = 0;
pub const STATUS_NOT_SUPPORTED: HipblasStatus = 7;
const STATUS_NAMES: [&str; 12] = [
    "SUCCESS",
    "NOT_INITIALIZED",
    "ALLOC_FAILED",
    "INVALID_VALUE",
    "MAPPING_ERROR",
    "EXECUTION_FAILED",
    "INTERNAL_ERROR",
    "NOT_SUPPORTED",
    "ARCH_MISMATCH",
    "HANDLE_IS_NULLPTR",
    "INVALID_ENUM",
    "UNKNOWN",
];

/// The `HIPBLAS_STATUS_*` name of `status` (hipBLASLt has no string function of its own).
pub fn status_name(status: HipblasStatus) -> &'static str {
    usize::try_from(status)
        .ok()
        .and_then(|i| STATUS_NAMES.get(i))
        .copied()
        .unwrap_or("unrecognised status")
}

/// `hipDataType` (ROCm 6+).
pub const HIP_R_32F: c_int = 0;
pub const HIP_R_16F: c_int = 2;
pub const HIP_R_16BF: c_int = 14;
/// `hipblasComputeType_t`: fp32 accumulation.
pub const COMPUTE_32F: c_int = 2;
/// `hipblasOperation_t`.
pub const OP_N: i32 = 111;
pub const OP_T: i32 = 112;

/// `hipblasLtMatmulDescAttributes_t` (stable 6.0 → 7.x).
pub const DESC_TRANSA: c_int = 0;
pub const DESC_TRANSB: c_int = 1;
pub const DESC_EPILOGUE: c_int = 2;
pub const DESC_BIAS_POINTER: c_int = 3;
pub const DESC_BIAS_DATA_TYPE: c_int = 4;
/// `hipblasLtMatrixLayoutAttribute_t`.
pub const LAYOUT_BATCH_COUNT: c_int = 0;
pub const LAYOUT_STRIDED_BATCH_OFFSET: c_int = 1;
/// `hipblasLtMatmulPreferenceAttributes_t`: the workspace limit (u64; default 0 = none).
pub const PREF_MAX_WORKSPACE_BYTES: c_int = 1;

/// `hipblasLtEpilogue_t` (u32).
pub const EPILOGUE_DEFAULT: u32 = 1;
pub const EPILOGUE_RELU: u32 = 2;
pub const EPILOGUE_BIAS: u32 = 4;
pub const EPILOGUE_RELU_BIAS: u32 = 6;
pub const EPILOGUE_GELU: u32 = 32;
pub const EPILOGUE_GELU_BIAS: u32 = 36;
/// Bias then SiLU, from ROCm 7.0 (hipBLASLt 1.0). Whether an arch has kernels for it only shows
/// at run time: the heuristic returns no algorithm, and the caller falls back to BIAS + own SiLU.
pub const EPILOGUE_SWISH_BIAS_EXT: u32 = 65540;
pub const EPILOGUE_SWISH_EXT: u32 = 65536;

/// The hipBLASLt sonames to try, in order, for a HIP runtime version (`major·10⁷ + minor·10⁵ +
/// patch`): AMD's ROCm 6.x ships `.so.0`; Debian builds hipBLASLt 1.x (`.so.1`, as in ROCm 7)
/// against its HIP 6.4 runtime. Which hipBLASLt was found is then checked by its own version
/// ([`check_version`]), once a handle exists.
pub fn sonames(runtime_version: i32) -> Result<&'static [&'static str], LoadError> {
    library_names(Platform::Linux, runtime_version)
}

/// hipBLASLt's file names to try on `platform` ([`sonames`] on Linux). Windows: AMD's HIP SDK
/// has it from 6.4.2 as `hipblaslt.dll`; ROCm's own Windows builds name it `libhipblaslt.dll`
/// (docs/windows.md).
pub fn library_names(
    platform: Platform,
    runtime_version: i32,
) -> Result<&'static [&'static str], LoadError> {
    let unsupported = |reason| LoadError::Unsupported {
        library: "hipBLASLt",
        runtime_version,
        reason,
    };
    match (platform, runtime_version / 10_000_000) {
        (_, 5) => Err(unsupported(
            "ROCm 5.x hipBLASLt uses the older enum scheme; gemm=lt needs ROCm 6.0 or newer, gemm=blas (rocBLAS) does not",
        )),
        (Platform::Linux, 6) => Ok(&["libhipblaslt.so.0", "libhipblaslt.so.1"]),
        (Platform::Linux, 7) => Ok(&["libhipblaslt.so.1"]),
        (Platform::Windows, 6 | 7) => Ok(&["hipblaslt.dll", "libhipblaslt.dll"]),
        _ => Err(unsupported(
            "lc0rs knows the hipBLASLt library names of ROCm 6.x and 7.x",
        )),
    }
}

/// The oldest hipBLASLt lc0rs reads (0.6.0, ROCm 6.0: the `hipDataType` enum scheme), as
/// `hipblasLtGetVersion` reports it: `major·100000 + minor·100 + patch`.
pub const MIN_VERSION: i32 = 600;

/// A `hipblasLtGetVersion` value as `major.minor.patch`.
pub fn version_text(version: i32) -> String {
    format!(
        "{}.{}.{}",
        version / 100_000,
        version / 100 % 1000,
        version % 100
    )
}

/// Refuses a hipBLASLt older than [`MIN_VERSION`] (that of ROCm 5.x, with another enum scheme),
/// whatever soname it came under.
pub fn check_version(version: i32) -> Result<(), String> {
    if version >= MIN_VERSION {
        Ok(())
    } else {
        Err(format!(
            "hipBLASLt {} is older than {} (ROCm 6.0), whose enum scheme lc0rs uses; gemm=blas (rocBLAS) works",
            version_text(version),
            version_text(MIN_VERSION)
        ))
    }
}

/// Whether the fused bias+SiLU epilogue exists: from hipBLASLt 1.0 (ROCm 7.0, and Debian's
/// hipBLASLt 1.x beside HIP 6.4), by the library's own version, not the runtime's.
pub fn has_swish_bias_epilogue(version: i32) -> bool {
    version >= 100_000
}

/// The hipBLASLt functions lc0rs uses.
#[derive(Clone, Copy)]
pub struct HipblasLtFns {
    pub create: unsafe extern "C" fn(*mut HipblasLtHandle) -> HipblasStatus,
    pub destroy: unsafe extern "C" fn(HipblasLtHandle) -> HipblasStatus,
    pub get_version: unsafe extern "C" fn(HipblasLtHandle, *mut c_int) -> HipblasStatus,
    pub matrix_layout_create:
        unsafe extern "C" fn(*mut MatrixLayout, c_int, u64, u64, i64) -> HipblasStatus,
    pub matrix_layout_set_attribute:
        unsafe extern "C" fn(MatrixLayout, c_int, *const c_void, usize) -> HipblasStatus,
    pub matrix_layout_destroy: unsafe extern "C" fn(MatrixLayout) -> HipblasStatus,
    pub matmul_desc_create: unsafe extern "C" fn(*mut MatmulDesc, c_int, c_int) -> HipblasStatus,
    pub matmul_desc_set_attribute:
        unsafe extern "C" fn(MatmulDesc, c_int, *const c_void, usize) -> HipblasStatus,
    pub matmul_desc_destroy: unsafe extern "C" fn(MatmulDesc) -> HipblasStatus,
    pub matmul_preference_create: unsafe extern "C" fn(*mut MatmulPreference) -> HipblasStatus,
    pub matmul_preference_set_attribute:
        unsafe extern "C" fn(MatmulPreference, c_int, *const c_void, usize) -> HipblasStatus,
    pub matmul_preference_destroy: unsafe extern "C" fn(MatmulPreference) -> HipblasStatus,
    #[allow(clippy::type_complexity)]
    pub matmul_algo_get_heuristic: unsafe extern "C" fn(
        HipblasLtHandle,
        MatmulDesc,
        MatrixLayout,
        MatrixLayout,
        MatrixLayout,
        MatrixLayout,
        MatmulPreference,
        c_int,
        *mut HeuristicResult,
        *mut c_int,
    ) -> HipblasStatus,
    /// `alpha`/`beta` point to values of the scale type (`f32` for `HIP_R_32F`).
    #[allow(clippy::type_complexity)]
    pub matmul: unsafe extern "C" fn(
        HipblasLtHandle,
        MatmulDesc,
        *const c_void,
        *const c_void,
        MatrixLayout,
        *const c_void,
        MatrixLayout,
        *const c_void,
        *const c_void,
        MatrixLayout,
        *mut c_void,
        MatrixLayout,
        *const MatmulAlgo,
        *mut c_void,
        usize,
        *mut c_void,
    ) -> HipblasStatus,
}

/// Loaded hipBLASLt.
pub struct HipblasLt {
    pub fns: HipblasLtFns,
    pub library: PathBuf,
    _lib: Library,
}

impl HipblasLt {
    /// Loads the first hipBLASLt of [`sonames`] for `runtime_version` that opens, from `dir` (the
    /// HIP runtime's directory), or by soname when the runtime came from the system search path.
    pub fn load(dir: Option<&Path>, runtime_version: i32) -> Result<Self, LoadError> {
        let mut failures = Vec::new();
        for name in library_names(Platform::HOST, runtime_version)? {
            let path = dir.map_or_else(|| PathBuf::from(name), |d| d.join(name));
            match open_companion(&path) {
                Ok(lib) => return Self::resolve(lib, path),
                Err(e) => failures.push(e.to_string()),
            }
        }
        Err(LoadError::Open {
            library: "hipBLASLt".to_owned(),
            detail: failures.join("; "),
        })
    }

    /// Resolves every function lc0rs calls in the opened `lib`.
    fn resolve(lib: Library, path: PathBuf) -> Result<Self, LoadError> {
        let fns = HipblasLtFns {
            create: symbol(&lib, &path, "hipblasLtCreate")?,
            destroy: symbol(&lib, &path, "hipblasLtDestroy")?,
            get_version: symbol(&lib, &path, "hipblasLtGetVersion")?,
            matrix_layout_create: symbol(&lib, &path, "hipblasLtMatrixLayoutCreate")?,
            matrix_layout_set_attribute: symbol(&lib, &path, "hipblasLtMatrixLayoutSetAttribute")?,
            matrix_layout_destroy: symbol(&lib, &path, "hipblasLtMatrixLayoutDestroy")?,
            matmul_desc_create: symbol(&lib, &path, "hipblasLtMatmulDescCreate")?,
            matmul_desc_set_attribute: symbol(&lib, &path, "hipblasLtMatmulDescSetAttribute")?,
            matmul_desc_destroy: symbol(&lib, &path, "hipblasLtMatmulDescDestroy")?,
            matmul_preference_create: symbol(&lib, &path, "hipblasLtMatmulPreferenceCreate")?,
            matmul_preference_set_attribute: symbol(
                &lib,
                &path,
                "hipblasLtMatmulPreferenceSetAttribute",
            )?,
            matmul_preference_destroy: symbol(&lib, &path, "hipblasLtMatmulPreferenceDestroy")?,
            matmul_algo_get_heuristic: symbol(&lib, &path, "hipblasLtMatmulAlgoGetHeuristic")?,
            matmul: symbol(&lib, &path, "hipblasLtMatmul")?,
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
    fn enum_values_are_the_rocm6_scheme_not_cublaslt() {
        assert_eq!(
            (HIP_R_32F, HIP_R_16F, HIP_R_16BF, COMPUTE_32F),
            (0, 2, 14, 2)
        );
        assert_eq!((DESC_TRANSA, DESC_TRANSB, DESC_EPILOGUE), (0, 1, 2));
        assert_eq!((DESC_BIAS_POINTER, DESC_BIAS_DATA_TYPE), (3, 4));
        assert_eq!(PREF_MAX_WORKSPACE_BYTES, 1);
        assert_eq!(
            (
                EPILOGUE_DEFAULT,
                EPILOGUE_BIAS,
                EPILOGUE_RELU_BIAS,
                EPILOGUE_GELU_BIAS
            ),
            (1, 4, 6, 36)
        );
        assert_eq!(EPILOGUE_SWISH_BIAS_EXT, EPILOGUE_SWISH_EXT | EPILOGUE_BIAS);
    }

    #[test]
    fn status_names_cover_the_enum() {
        assert_eq!(status_name(STATUS_SUCCESS), "SUCCESS");
        assert_eq!(status_name(STATUS_NOT_SUPPORTED), "NOT_SUPPORTED");
        assert_eq!(status_name(11), "UNKNOWN");
        assert_eq!(status_name(12), "unrecognised status");
        assert_eq!(status_name(-1), "unrecognised status");
    }

    #[test]
    fn windows_names_and_the_rocm5_refusal() {
        assert_eq!(
            library_names(Platform::Windows, 60_402_000).unwrap(),
            ["hipblaslt.dll", "libhipblaslt.dll"]
        );
        assert_eq!(
            library_names(Platform::Windows, 70_100_000).unwrap(),
            ["hipblaslt.dll", "libhipblaslt.dll"]
        );
        let e = library_names(Platform::Windows, 50_700_000).unwrap_err();
        assert!(e.to_string().contains("ROCm 5.x"), "{e}");
    }

    #[test]
    fn sonames_follow_the_rocm_release_and_refuse_rocm5() {
        assert_eq!(
            sonames(60_200_000).unwrap(),
            ["libhipblaslt.so.0", "libhipblaslt.so.1"]
        );
        assert_eq!(
            sonames(60_443_484).unwrap(),
            ["libhipblaslt.so.0", "libhipblaslt.so.1"]
        );
        assert_eq!(sonames(70_100_000).unwrap(), ["libhipblaslt.so.1"]);
        let e = sonames(50_700_000).unwrap_err().to_string();
        assert!(e.contains("hipBLASLt") && e.contains("6.0"), "{e}");
        assert!(sonames(80_000_000).is_err());
    }

    /// Versions as hipblasLtGetVersion packs them (`major·100000 + minor·100 + patch`): 0.4.0 is
    /// 400, 0.6.0 is 600, 0.12.1 is 1201, 1.1.0 (Debian's, per its hipblaslt-version.h) is 100100.
    #[test]
    fn the_library_version_decides_refusal_and_the_swish_epilogue() {
        assert_eq!(version_text(1201), "0.12.1");
        assert_eq!(version_text(100_100), "1.1.0");
        let e = check_version(400).unwrap_err();
        assert!(e.contains("0.4.0") && e.contains("0.6.0"), "{e}");
        assert!(check_version(600).is_ok() && check_version(100_100).is_ok());
        assert!(!has_swish_bias_epilogue(1201));
        assert!(has_swish_bias_epilogue(100_000));
    }

    #[test]
    fn heuristic_results_are_read_at_lc0rs_offsets() {
        // A result as the C library would write it, byte by byte.
        let mut bytes = [0u8; 56];
        bytes[16..24].copy_from_slice(&4096usize.to_ne_bytes());
        bytes[24..32].copy_from_slice(&1024usize.to_ne_bytes());
        bytes[32..36].copy_from_slice(&7i32.to_ne_bytes());
        bytes[36..40].copy_from_slice(&1.5f32.to_ne_bytes());
        // SAFETY: HeuristicResult is repr(C) plain data of exactly 56 bytes.
        let r: HeuristicResult = unsafe { std::mem::transmute(bytes) };
        assert_eq!(r.algo.max_workspace_bytes, 4096);
        assert_eq!(r.workspace_size, 1024);
        assert_eq!(r.state, STATUS_NOT_SUPPORTED);
        assert_eq!(r.waves_count, 1.5);
    }

    #[test]
    fn a_missing_library_is_an_error_naming_it() {
        let dir = std::env::temp_dir().join("lc0rs-no-rocm-here");
        for version in [70_000_000, 60_400_000] {
            let e = HipblasLt::load(Some(&dir), version)
                .err()
                .expect("nothing to load there")
                .to_string();
            for name in library_names(Platform::HOST, version).unwrap() {
                assert!(e.contains(name), "{e}");
            }
        }
    }
}
