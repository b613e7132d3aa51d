//! Finding and loading one ROCm install.
//!
//! Linux: `ROCM_PATH/lib` alone where `ROCM_PATH` is set, else `/opt/rocm/lib`, then the system
//! search path; runtime majors 7, 6, 5 (`libamdhip64.so.<major>`, never mixed); hipRTC from
//! `libhiprtc.so.<major>` beside the runtime, else from the runtime itself (where hipRTC lived up
//! to ROCm 6).
//!
//! Windows (AMD's HIP SDK, docs/windows.md): `HIP_PATH\bin` alone where `HIP_PATH` is set (its
//! installer sets it), else the system search (the application's directory, System32 where the
//! AMD driver puts the runtime, `PATH`); `amdhip64_7.dll`, `amdhip64_6.dll`, then the
//! unversioned `amdhip64.dll` of the 5.x SDKs; hipRTC as `hiprtc<MM><mm>.dll` of the runtime's
//! own version.
//!
//! A runtime file that exists but does not load (e.g. built for a newer glibc) ends the search
//! with its error: quietly using another install instead would hide why.

use std::path::{Path, PathBuf};

use libloading::Library;

use crate::sys::{DeviceFns, HIP_SUCCESS, RtcFns, RuntimeFns};

/// Runtime majors, newest first.
pub const RUNTIME_MAJORS: [u32; 3] = [7, 6, 5];

/// Whose file names and install layout the ROCm libraries have. Every name is a pure function
/// of the platform, so both platforms' searches are tested on any host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    Linux,
    Windows,
}

impl Platform {
    /// The platform this program was built for (Linux naming on every non-Windows host).
    pub const HOST: Self = if cfg!(windows) {
        Self::Windows
    } else {
        Self::Linux
    };

    /// The environment variable that names the install to use.
    pub fn root_variable(self) -> &'static str {
        match self {
            Self::Linux => "ROCM_PATH",
            Self::Windows => "HIP_PATH",
        }
    }

    /// Where an install keeps its shared libraries: `lib` on Linux, `bin` on Windows.
    pub fn library_dir(self, root: &Path) -> PathBuf {
        match self {
            Self::Linux => root.join("lib"),
            Self::Windows => root.join("bin"),
        }
    }

    /// The HIP runtime's file name for `major`: `libamdhip64.so.6`; `amdhip64_6.dll`, and
    /// `amdhip64.dll` for the 5.x SDKs, which had no version in the name.
    pub fn runtime_name(self, major: u32) -> String {
        match (self, major) {
            (Self::Linux, _) => format!("libamdhip64.so.{major}"),
            (Self::Windows, 5) => "amdhip64.dll".to_owned(),
            (Self::Windows, _) => format!("amdhip64_{major}.dll"),
        }
    }

    /// hipRTC's file name for runtime version `runtime_version` (`major·10⁷ + minor·10⁵ +
    /// patch`): `libhiprtc.so.<major>`; `hiprtc<MM><mm>.dll` on Windows (e.g. `hiprtc0602.dll`).
    pub fn rtc_name(self, runtime_version: i32) -> String {
        let (major, minor) = major_minor(runtime_version);
        match self {
            Self::Linux => format!("libhiprtc.so.{major}"),
            Self::Windows => format!("hiprtc{major:02}{minor:02}.dll"),
        }
    }

    /// What to install where no runtime was found.
    fn install_hint(self) -> &'static str {
        match self {
            Self::Linux => "Install ROCm",
            Self::Windows => "Install the AMD GPU driver and AMD's HIP SDK for Windows",
        }
    }

    /// How the runtime file names read in messages: `libamdhip64.so.7/.6/.5`.
    fn runtime_names(self) -> String {
        match self {
            Self::Linux => "libamdhip64.so.7/.6/.5".to_owned(),
            Self::Windows => "amdhip64_7.dll/amdhip64_6.dll/amdhip64.dll".to_owned(),
        }
    }
}

/// The major and minor release of a HIP runtime version (`major·10⁷ + minor·10⁵ + patch`).
pub fn major_minor(runtime_version: i32) -> (i32, i32) {
    (
        runtime_version / 10_000_000,
        runtime_version / 100_000 % 100,
    )
}

/// Why the HIP libraries could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("the HIP runtime ({names}) was not found; tried: {tried}. {install} or set {variable}")]
    NotFound {
        names: String,
        tried: String,
        install: &'static str,
        variable: &'static str,
    },
    /// `ROCM_PATH` (Linux) or `HIP_PATH` (Windows) names the install to use, and it has no runtime.
    #[error("{variable}={root} has no HIP runtime ({names}) in {dir}")]
    NotInRocmPath {
        variable: &'static str,
        root: String,
        dir: String,
        names: String,
    },
    /// A runtime file exists but does not load; no other install is tried in its place.
    #[error(
        "the HIP runtime {library} exists but could not be loaded: {detail} (no other ROCm install is used in its place; set {variable} to a working one)"
    )]
    Broken {
        library: String,
        detail: String,
        variable: &'static str,
    },
    #[error("{library}: missing symbol {symbol}: {detail}")]
    Symbol {
        library: String,
        symbol: &'static str,
        detail: String,
    },
    #[error("hipRTC was not found beside {runtime} ({rtc}) nor inside it")]
    NoRtc { runtime: String, rtc: String },
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

/// The runtime libraries to try on `platform`, in order, with their majors. Where the install
/// root is set (`ROCM_PATH`, `HIP_PATH`), only the files in its library directory that exist (it
/// names the install to use; none there is an error); else those in `default_dir`
/// (`/opt/rocm/lib` on Linux, none on Windows), then plain names for the system search.
pub fn library_candidates(
    platform: Platform,
    root: Option<&Path>,
    default_dir: Option<&Path>,
) -> Result<Vec<(PathBuf, u32)>, LoadError> {
    if let Some(root) = root {
        let dir = platform.library_dir(root);
        let found = runtimes_in(platform, &dir);
        if found.is_empty() {
            return Err(LoadError::NotInRocmPath {
                variable: platform.root_variable(),
                root: root.display().to_string(),
                dir: dir.display().to_string(),
                names: platform.runtime_names(),
            });
        }
        return Ok(found);
    }
    let mut out = default_dir.map_or_else(Vec::new, |dir| runtimes_in(platform, dir));
    out.extend(RUNTIME_MAJORS.map(|major| (PathBuf::from(platform.runtime_name(major)), major)));
    Ok(out)
}

/// The runtime files in `dir` that exist, newest major first.
fn runtimes_in(platform: Platform, dir: &Path) -> Vec<(PathBuf, u32)> {
    RUNTIME_MAJORS
        .into_iter()
        .map(|major| (dir.join(platform.runtime_name(major)), major))
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
    // SAFETY: the caller names a symbol whose C signature is `T` (sys.rs, docs/gpu-apis.md §6);
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
    /// Loads from the install the environment names (`ROCM_PATH` on Linux, `HIP_PATH` on
    /// Windows), else from `/opt/rocm/lib` (Linux) or the system search path.
    pub fn load() -> Result<Self, LoadError> {
        let platform = Platform::HOST;
        let root = std::env::var_os(platform.root_variable()).map(PathBuf::from);
        let default_dir = match platform {
            Platform::Linux => Some(Path::new("/opt/rocm/lib")),
            Platform::Windows => None,
        };
        Self::load_from(platform, root.as_deref(), default_dir)
    }

    /// Loads the first runtime of [`library_candidates`] that opens, and its hipRTC.
    pub fn load_from(
        platform: Platform,
        root: Option<&Path>,
        default_dir: Option<&Path>,
    ) -> Result<Self, LoadError> {
        Self::load_first(platform, &library_candidates(platform, root, default_dir)?)
    }

    /// Loads the first of `candidates` (path or soname, major) that opens; a file path that does
    /// not open is an error, a soname that does not is passed over.
    pub fn load_first(
        platform: Platform,
        candidates: &[(PathBuf, u32)],
    ) -> Result<Self, LoadError> {
        let mut tried = Vec::new();
        for (path, major) in candidates.iter().cloned() {
            // SAFETY: loading the HIP runtime runs its initialisers, which are sound to run.
            match unsafe { Library::new(&path) } {
                Ok(lib) => return Self::from_runtime(platform, lib, path, major),
                Err(e) if is_file_path(&path) => {
                    return Err(LoadError::Broken {
                        library: path.display().to_string(),
                        detail: describe(&e),
                        variable: platform.root_variable(),
                    });
                }
                Err(e) => tried.push(format!("{} ({})", path.display(), describe(&e))),
            }
        }
        Err(LoadError::NotFound {
            names: platform.runtime_names(),
            tried: tried.join("; "),
            install: platform.install_hint(),
            variable: platform.root_variable(),
        })
    }

    fn from_runtime(
        platform: Platform,
        lib: Library,
        path: PathBuf,
        major: u32,
    ) -> Result<Self, LoadError> {
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
        let rtc_name = rtc_name(platform, &runtime, major);
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
                rtc: rtc_name.clone(),
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

/// hipRTC's file name for the loaded runtime: by the file's major on Linux; on Windows by the
/// major and minor the runtime reports (`hiprtc0602.dll`), or the file's major where it cannot.
fn rtc_name(platform: Platform, runtime: &RuntimeFns, major: u32) -> String {
    let from_file = major as i32 * 10_000_000;
    let version = match platform {
        Platform::Linux => from_file,
        Platform::Windows => {
            let mut reported = 0;
            // SAFETY: hipRuntimeGetVersion writes one int; it needs no GPU.
            let status = unsafe { (runtime.hip_runtime_get_version)(&mut reported) };
            if status == HIP_SUCCESS {
                reported
            } else {
                from_file
            }
        }
    };
    platform.rtc_name(version)
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
        let found = library_candidates(Platform::Linux, Some(&rocm), Some(&opt)).unwrap();
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
        let found = library_candidates(Platform::Linux, None, Some(&opt)).unwrap();
        assert_eq!(
            found,
            [
                (opt.join("libamdhip64.so.7"), 7),
                ("libamdhip64.so.7".into(), 7),
                ("libamdhip64.so.6".into(), 6),
                ("libamdhip64.so.5".into(), 5)
            ]
        );
        let none =
            library_candidates(Platform::Linux, None, Some(&root.path().join("nothing"))).unwrap();
        assert!(none.iter().all(|(p, _)| !is_file_path(p)), "{none:?}");
    }

    #[test]
    fn a_rocm_path_without_a_runtime_is_an_error_naming_it() {
        let root = tempfile::tempdir().unwrap();
        let rocm = root.path().join("rocm-empty");
        let error =
            library_candidates(Platform::Linux, Some(&rocm), Some(&root.path().join("opt")))
                .expect_err("nothing there");
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
        let error = Hip::load_first(
            Platform::Linux,
            &[(fake.clone(), 6), ("libamdhip64.so.99".into(), 99)],
        )
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
        let error = Hip::load_first(Platform::Linux, &[(fake.clone(), 6)])
            .err()
            .expect("a text file is no library");
        let message = error.to_string();
        assert!(
            message.contains(&fake.display().to_string()) && message.contains("ROCM_PATH"),
            "{message}"
        );
    }

    /// AMD's HIP SDK for Windows names the runtime `amdhip64_7.dll` from 7.1.1 and
    /// `amdhip64_6.dll` in 6.x, and ships it in `%HIP_PATH%\bin` (docs/windows.md).
    #[test]
    fn windows_hip_path_bin_is_searched_newest_major_first() {
        let root = tempfile::tempdir().unwrap();
        let hip_path = root.path().join("ROCm").join("6.4");
        touch(&hip_path.join("bin"), "amdhip64_6.dll");
        touch(&hip_path.join("bin"), "amdhip64_7.dll");
        touch(&hip_path.join("lib"), "amdhip64_6.dll");
        let found = library_candidates(Platform::Windows, Some(&hip_path), None).unwrap();
        assert_eq!(
            found,
            [
                (hip_path.join("bin").join("amdhip64_7.dll"), 7),
                (hip_path.join("bin").join("amdhip64_6.dll"), 6)
            ]
        );
    }

    /// The HIP SDK 5.x for Windows shipped the runtime as `amdhip64.dll`, without a version.
    #[test]
    fn windows_5x_runtime_has_no_version_in_its_name() {
        let root = tempfile::tempdir().unwrap();
        touch(&root.path().join("bin"), "amdhip64.dll");
        let found = library_candidates(Platform::Windows, Some(root.path()), None).unwrap();
        assert_eq!(found, [(root.path().join("bin").join("amdhip64.dll"), 5)]);
    }

    /// Without `HIP_PATH` the names go to the system search (System32, where the AMD driver
    /// installs the runtime, and `PATH`); no Linux directory is looked at.
    #[test]
    fn windows_without_hip_path_uses_the_system_search() {
        let found = library_candidates(Platform::Windows, None, None).unwrap();
        assert_eq!(
            found,
            [
                ("amdhip64_7.dll".into(), 7),
                ("amdhip64_6.dll".into(), 6),
                ("amdhip64.dll".into(), 5)
            ]
        );
    }

    #[test]
    fn windows_hip_path_without_a_runtime_is_an_error_naming_it() {
        let root = tempfile::tempdir().unwrap();
        touch(&root.path().join("lib"), "libamdhip64.so.6");
        let message = library_candidates(Platform::Windows, Some(root.path()), None)
            .expect_err("no DLL there")
            .to_string();
        assert!(
            message.contains(&format!("HIP_PATH={}", root.path().display()))
                && message.contains("amdhip64_7.dll"),
            "{message}"
        );
    }

    /// hipRTC's DLL carries the release's major and minor: `hiprtc0602.dll` beside HIP 6.2,
    /// `hiprtc0505.dll` beside 5.5, `hiprtc0702.dll` beside 7.2; Linux names only the major.
    #[test]
    fn rtc_names_follow_the_release() {
        assert_eq!(Platform::Windows.rtc_name(60_242_134), "hiprtc0602.dll");
        assert_eq!(Platform::Windows.rtc_name(50_500_000), "hiprtc0505.dll");
        assert_eq!(Platform::Windows.rtc_name(70_200_000), "hiprtc0702.dll");
        assert_eq!(Platform::Linux.rtc_name(60_443_484), "libhiprtc.so.6");
    }

    #[test]
    fn windows_broken_runtime_names_hip_path() {
        let root = tempfile::tempdir().unwrap();
        touch(&root.path().join("bin"), "amdhip64_6.dll");
        let fake = root.path().join("bin").join("amdhip64_6.dll");
        let message = Hip::load_first(Platform::Windows, &[(fake.clone(), 6)])
            .err()
            .expect("a text file is no library")
            .to_string();
        assert!(
            message.contains(&fake.display().to_string()) && message.contains("HIP_PATH"),
            "{message}"
        );
    }

    /// No runtime by name anywhere: the error lists what was tried and what to install.
    #[test]
    fn windows_runtime_not_found_says_what_to_install() {
        let message = Hip::load_first(Platform::Windows, &[("amdhip64_99.dll".into(), 99)])
            .err()
            .expect("no such DLL")
            .to_string();
        assert!(
            message.contains("amdhip64_99.dll")
                && message.contains("HIP SDK")
                && message.contains("HIP_PATH"),
            "{message}"
        );
    }
}
