//! Finding and loading one ROCm install: `ROCM_PATH/lib` alone where `ROCM_PATH` is set, else
//! `/opt/rocm/lib`, then the system search path; HIP runtime majors 7, 6, 5 (never mixed); hipRTC
//! from `libhiprtc.so.<major>` beside the runtime, else from the runtime itself (where hipRTC
//! lived up to ROCm 6). A runtime file that exists but does not load (e.g. built for a newer
//! glibc) ends the search with its error: quietly using another install instead would hide why.

use std::path::{Path, PathBuf};

use libloading::Library;

use crate::sys::{DeviceFns, RtcFns, RuntimeFns};

/// Runtime majors, newest first.
pub const RUNTIME_MAJORS: [u32; 3] = [7, 6, 5];

/// Why the HIP libraries could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(
        "the HIP runtime (libamdhip64.so.7/.6/.5) was not found; tried: {tried}. Install ROCm or set ROCM_PATH"
    )]
    NotFound { tried: String },
    /// `ROCM_PATH` names the install to use, and it has no runtime.
    #[error("ROCM_PATH={rocm_path} has no HIP runtime (libamdhip64.so.7/.6/.5) in {rocm_path}/lib")]
    NotInRocmPath { rocm_path: String },
    /// A runtime file exists but does not load; no other install is tried in its place.
    #[error(
        "the HIP runtime {library} exists but could not be loaded: {detail} (no other ROCm install is used in its place; set ROCM_PATH to a working one)"
    )]
    Broken { library: String, detail: String },
    #[error("{library}: missing symbol {symbol}: {detail}")]
    Symbol {
        library: String,
        symbol: &'static str,
        detail: String,
    },
    #[error("hipRTC was not found beside {runtime} (libhiprtc.so.{major}) nor inside it")]
    NoRtc { runtime: String, major: u32 },
    /// A companion library (rocBLAS, hipBLASLt) of the loaded runtime failed to open.
    #[error("{library} could not be loaded: {detail}")]
    Open { library: String, detail: String },
    /// The loaded ROCm release has no usable version of a companion library.
    #[error("{library} is not available for HIP runtime {runtime_version}: {reason}")]
    Unsupported {
        library: &'static str,
        runtime_version: i32,
        reason: &'static str,
    },
}

/// The runtime libraries to try, in order, with their majors. Where `ROCM_PATH` is set, only the
/// files in its `lib` that exist (it names the install to use; none there is an error); else
/// those in `default_dir` (`/opt/rocm/lib`), then plain sonames for the system search.
pub fn library_candidates(
    rocm_path: Option<&Path>,
    default_dir: &Path,
) -> Result<Vec<(PathBuf, u32)>, LoadError> {
    if let Some(rocm) = rocm_path {
        let found = runtimes_in(&rocm.join("lib"));
        if found.is_empty() {
            return Err(LoadError::NotInRocmPath {
                rocm_path: rocm.display().to_string(),
            });
        }
        return Ok(found);
    }
    let mut out = runtimes_in(default_dir);
    out.extend(
        RUNTIME_MAJORS.map(|major| (PathBuf::from(format!("libamdhip64.so.{major}")), major)),
    );
    Ok(out)
}

/// The runtime files in `dir` that exist, newest major first.
fn runtimes_in(dir: &Path) -> Vec<(PathBuf, u32)> {
    RUNTIME_MAJORS
        .into_iter()
        .map(|major| (dir.join(format!("libamdhip64.so.{major}")), major))
        .filter(|(path, _)| path.exists())
        .collect()
}

/// Whether `path` names a file (has a directory part) rather than a soname for the system search.
fn is_file_path(path: &Path) -> bool {
    path.parent().is_some_and(|dir| !dir.as_os_str().is_empty())
}

/// The loaded HIP runtime and hipRTC of one ROCm install.
pub struct Hip {
    pub runtime: RuntimeFns,
    pub device: DeviceFns,
    pub rtc: RtcFns,
    /// What was loaded, as given to the loader (a path or a soname).
    pub runtime_library: PathBuf,
    pub rtc_library: PathBuf,
    pub major: u32,
    _runtime: Library,
    _rtc: Option<Library>,
}

/// The whole message of a loading error: libloading keeps dlerror's text (the file that was
/// missing, the symbol that did not resolve) in the error's source.
pub(crate) fn describe(e: &libloading::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        text = format!("{text}: {inner}");
        source = inner.source();
    }
    text
}

/// Opens a companion library of the loaded runtime (rocBLAS, hipBLASLt) at `path`.
pub fn open_companion(path: &Path) -> Result<Library, LoadError> {
    // SAFETY: loading a ROCm library runs its initialisers, which are sound to run.
    unsafe { Library::new(path) }.map_err(|e| LoadError::Open {
        library: path.display().to_string(),
        detail: describe(&e),
    })
}

/// Resolves `name` in `lib` as a function pointer of type `T` (shared with rocblas-sys and
/// hipblaslt-sys).
pub fn symbol<T: Copy>(lib: &Library, library: &Path, name: &'static str) -> Result<T, LoadError> {
    // SAFETY: the caller names a symbol whose C signature is `T` (sys.rs, gpu-apis.md §7);
    // libloading adds the terminating NUL.
    unsafe { lib.get::<T>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| LoadError::Symbol {
            library: library.display().to_string(),
            symbol: name,
            detail: describe(&e),
        })
}

impl Hip {
    /// Loads from `ROCM_PATH` (if set), else `/opt/rocm/lib` or the system path.
    pub fn load() -> Result<Self, LoadError> {
        let rocm = std::env::var_os("ROCM_PATH").map(PathBuf::from);
        Self::load_from(rocm.as_deref(), Path::new("/opt/rocm/lib"))
    }

    /// Loads the first runtime of [`library_candidates`] that opens, and its hipRTC.
    pub fn load_from(rocm_path: Option<&Path>, default_dir: &Path) -> Result<Self, LoadError> {
        Self::load_first(&library_candidates(rocm_path, default_dir)?)
    }

    /// Loads the first of `candidates` (path or soname, major) that opens; a file path that does
    /// not open is an error, a soname that does not is passed over.
    pub fn load_first(candidates: &[(PathBuf, u32)]) -> Result<Self, LoadError> {
        let mut tried = Vec::new();
        for (path, major) in candidates.iter().cloned() {
            // SAFETY: loading the HIP runtime runs its initialisers, which are sound to run.
            match unsafe { Library::new(&path) } {
                Ok(lib) => return Self::from_runtime(lib, path, major),
                Err(e) if is_file_path(&path) => {
                    return Err(LoadError::Broken {
                        library: path.display().to_string(),
                        detail: describe(&e),
                    });
                }
                Err(e) => tried.push(format!("{} ({})", path.display(), describe(&e))),
            }
        }
        Err(LoadError::NotFound {
            tried: tried.join("; "),
        })
    }

    fn from_runtime(lib: Library, path: PathBuf, major: u32) -> Result<Self, LoadError> {
        let runtime = RuntimeFns {
            hip_runtime_get_version: symbol(&lib, &path, "hipRuntimeGetVersion")?,
            hip_driver_get_version: symbol(&lib, &path, "hipDriverGetVersion")?,
            hip_get_device_count: symbol(&lib, &path, "hipGetDeviceCount")?,
            hip_device_get_name: symbol(&lib, &path, "hipDeviceGetName")?,
            hip_device_get_attribute: symbol(&lib, &path, "hipDeviceGetAttribute")?,
            hip_get_error_string: symbol(&lib, &path, "hipGetErrorString")?,
            hip_get_device_properties: symbol(&lib, &path, "hipGetDeviceProperties")?,
            hip_get_device_properties_r0600: symbol(&lib, &path, "hipGetDevicePropertiesR0600")
                .ok(),
        };
        let device = device_fns(&lib, &path)?;
        let rtc_name = format!("libhiprtc.so.{major}");
        let rtc_path = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(dir) => dir.join(&rtc_name),
            None => PathBuf::from(&rtc_name),
        };
        // SAFETY: as for the runtime.
        let (rtc_lib, rtc_path) = match unsafe { Library::new(&rtc_path) } {
            Ok(rtc) => (Some(rtc), rtc_path),
            Err(_) => (None, path.clone()),
        };
        let source = rtc_lib.as_ref().unwrap_or(&lib);
        let rtc = rtc_fns(source, &rtc_path).map_err(|e| match (&rtc_lib, e) {
            (None, LoadError::Symbol { .. }) => LoadError::NoRtc {
                runtime: path.display().to_string(),
                major,
            },
            (_, e) => e,
        })?;
        Ok(Self {
            runtime,
            device,
            rtc,
            runtime_library: path,
            rtc_library: rtc_path,
            major,
            _runtime: lib,
            _rtc: rtc_lib,
        })
    }
}

fn device_fns(lib: &Library, path: &Path) -> Result<DeviceFns, LoadError> {
    Ok(DeviceFns {
        hip_set_device: symbol(lib, path, "hipSetDevice")?,
        hip_get_device: symbol(lib, path, "hipGetDevice")?,
        hip_device_total_mem: symbol(lib, path, "hipDeviceTotalMem")?,
        hip_mem_get_info: symbol(lib, path, "hipMemGetInfo")?,
        hip_malloc: symbol(lib, path, "hipMalloc")?,
        hip_free: symbol(lib, path, "hipFree")?,
        hip_host_malloc: symbol(lib, path, "hipHostMalloc")?,
        hip_host_free: symbol(lib, path, "hipHostFree")?,
        hip_memcpy_async: symbol(lib, path, "hipMemcpyAsync")?,
        hip_memset_async: symbol(lib, path, "hipMemsetAsync")?,
        hip_stream_create_with_flags: symbol(lib, path, "hipStreamCreateWithFlags")?,
        hip_stream_destroy: symbol(lib, path, "hipStreamDestroy")?,
        hip_stream_synchronize: symbol(lib, path, "hipStreamSynchronize")?,
        hip_event_create_with_flags: symbol(lib, path, "hipEventCreateWithFlags")?,
        hip_event_record: symbol(lib, path, "hipEventRecord")?,
        hip_event_elapsed_time: symbol(lib, path, "hipEventElapsedTime")?,
        hip_event_synchronize: symbol(lib, path, "hipEventSynchronize")?,
        hip_event_destroy: symbol(lib, path, "hipEventDestroy")?,
        hip_module_load_data: symbol(lib, path, "hipModuleLoadData")?,
        hip_module_get_function: symbol(lib, path, "hipModuleGetFunction")?,
        hip_module_unload: symbol(lib, path, "hipModuleUnload")?,
        hip_module_launch_kernel: symbol(lib, path, "hipModuleLaunchKernel")?,
        hip_stream_begin_capture: symbol(lib, path, "hipStreamBeginCapture")?,
        hip_stream_end_capture: symbol(lib, path, "hipStreamEndCapture")?,
        hip_stream_is_capturing: symbol(lib, path, "hipStreamIsCapturing")?,
        hip_graph_instantiate: symbol(lib, path, "hipGraphInstantiate")?,
        hip_graph_launch: symbol(lib, path, "hipGraphLaunch")?,
        hip_graph_upload: symbol(lib, path, "hipGraphUpload").ok(),
        hip_graph_exec_destroy: symbol(lib, path, "hipGraphExecDestroy")?,
        hip_graph_destroy: symbol(lib, path, "hipGraphDestroy")?,
    })
}

fn rtc_fns(lib: &Library, path: &Path) -> Result<RtcFns, LoadError> {
    Ok(RtcFns {
        hiprtc_version: symbol(lib, path, "hiprtcVersion")?,
        hiprtc_get_error_string: symbol(lib, path, "hiprtcGetErrorString")?,
        hiprtc_create_program: symbol(lib, path, "hiprtcCreateProgram")?,
        hiprtc_compile_program: symbol(lib, path, "hiprtcCompileProgram")?,
        hiprtc_get_program_log_size: symbol(lib, path, "hiprtcGetProgramLogSize")?,
        hiprtc_get_program_log: symbol(lib, path, "hiprtcGetProgramLog")?,
        hiprtc_get_code_size: symbol(lib, path, "hiprtcGetCodeSize")?,
        hiprtc_get_code: symbol(lib, path, "hiprtcGetCode")?,
        hiprtc_destroy_program: symbol(lib, path, "hiprtcDestroyProgram")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(dir: &Path, name: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(name), b"not a library").unwrap();
    }

    #[test]
    fn rocm_path_alone_is_searched_newest_major_first() {
        let root = tempfile::tempdir().unwrap();
        let rocm = root.path().join("rocm-6.2");
        let opt = root.path().join("opt-rocm-lib");
        touch(&rocm.join("lib"), "libamdhip64.so.6");
        touch(&rocm.join("lib"), "libamdhip64.so.5");
        touch(&opt, "libamdhip64.so.7");
        let found = library_candidates(Some(&rocm), &opt).unwrap();
        assert_eq!(
            found,
            [
                (rocm.join("lib/libamdhip64.so.6"), 6),
                (rocm.join("lib/libamdhip64.so.5"), 5)
            ]
        );
    }

    #[test]
    fn without_rocm_path_the_default_directory_comes_before_system_names() {
        let root = tempfile::tempdir().unwrap();
        let opt = root.path().join("opt-rocm-lib");
        touch(&opt, "libamdhip64.so.7");
        let found = library_candidates(None, &opt).unwrap();
        assert_eq!(
            found,
            [
                (opt.join("libamdhip64.so.7"), 7),
                ("libamdhip64.so.7".into(), 7),
                ("libamdhip64.so.6".into(), 6),
                ("libamdhip64.so.5".into(), 5)
            ]
        );
        let none = library_candidates(None, &root.path().join("nothing")).unwrap();
        assert!(none.iter().all(|(p, _)| !is_file_path(p)), "{none:?}");
    }

    #[test]
    fn a_rocm_path_without_a_runtime_is_an_error_naming_it() {
        let root = tempfile::tempdir().unwrap();
        let rocm = root.path().join("rocm-empty");
        let error =
            library_candidates(Some(&rocm), &root.path().join("opt")).expect_err("nothing there");
        let message = error.to_string();
        assert!(
            message.contains(&format!("ROCM_PATH={}", rocm.display())),
            "{message}"
        );
    }

    /// A broken file is not passed over for a later candidate (here a runtime no machine has):
    /// the error is about the broken file.
    #[test]
    fn a_broken_runtime_file_ends_the_search() {
        let root = tempfile::tempdir().unwrap();
        touch(&root.path().join("lib"), "libamdhip64.so.6");
        let fake = root.path().join("lib/libamdhip64.so.6");
        let error = Hip::load_first(&[(fake.clone(), 6), ("libamdhip64.so.99".into(), 99)])
            .err()
            .expect("a text file is no library");
        assert!(matches!(error, LoadError::Broken { .. }), "{error}");
        assert!(!error.to_string().contains("so.99"), "{error}");
    }

    #[test]
    fn a_broken_library_is_an_error_naming_it() {
        let root = tempfile::tempdir().unwrap();
        touch(&root.path().join("lib"), "libamdhip64.so.6");
        let fake = root.path().join("lib/libamdhip64.so.6");
        let error = Hip::load_first(&[(fake.clone(), 6)])
            .err()
            .expect("a text file is no library");
        let message = error.to_string();
        assert!(
            message.contains(&fake.display().to_string()) && message.contains("ROCM_PATH"),
            "{message}"
        );
    }
}
