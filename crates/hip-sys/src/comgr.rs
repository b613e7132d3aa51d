//! The code object manager (comgr), which hipRTC compiles through, loaded beside the HIP runtime
//! only to list the ISAs it knows: hipRTC of ROCm 5.2 and 6.4 aborts the whole process
//! (`free(): invalid pointer`) inside `hiprtcCompileProgram` for a processor it does not know,
//! so callers check the name against this list first. The raw table and loading come first,
//! then the one call as a `Result`.

use std::ffi::{CStr, c_char, c_int};
use std::path::{Path, PathBuf};

use libloading::Library;

use crate::loader::{LoadError, Platform, describe, major_minor, symbol};

/// comgr's sonames, newest first: `.so.3` from comgr 3.0 (ROCm 7, and Debian's build beside HIP
/// 6.4), `.so.2` before (ROCm 5.x and AMD's 6.x). The HIP runtime opens it by soname at run time.
pub const SONAMES: [&str; 2] = ["libamd_comgr.so.3", "libamd_comgr.so.2"];

/// comgr's DLL names in AMD's HIP SDK for Windows for runtime version `runtime_version`, newest
/// scheme first: `amd_comgr_3.dll` (from 7.1.1), `amd_comgr_2.dll`, then the release-numbered
/// `amd_comgr<MM><mm>.dll` of the earlier SDKs (`amd_comgr0505.dll`, `amd_comgr0604.dll`).
pub fn windows_names(runtime_version: i32) -> [String; 3] {
    let (major, minor) = major_minor(runtime_version);
    [
        "amd_comgr_3.dll".to_owned(),
        "amd_comgr_2.dll".to_owned(),
        format!("amd_comgr{major:02}{minor:02}.dll"),
    ]
}

/// `amd_comgr_status_t`: a 4-byte C enum.
pub type ComgrStatus = c_int;
pub const COMGR_STATUS_SUCCESS: ComgrStatus = 0;

/// The comgr functions lc0rs calls (both from comgr 2.0 on).
#[derive(Clone, Copy)]
pub struct ComgrFns {
    /// `amd_comgr_get_isa_count(size_t *count)`.
    pub get_isa_count: unsafe extern "C" fn(*mut usize) -> ComgrStatus,
    /// `amd_comgr_get_isa_name(size_t index, const char **isa_name)`: the name is comgr's own,
    /// NUL-terminated and static.
    pub get_isa_name: unsafe extern "C" fn(usize, *mut *const c_char) -> ComgrStatus,
}

/// Where comgr is looked for: each of its names on `platform` ([`SONAMES`], [`windows_names`])
/// in `dir` (the HIP runtime's directory), then each by name on the system search path.
pub fn candidates(platform: Platform, dir: Option<&Path>, runtime_version: i32) -> Vec<PathBuf> {
    let names: Vec<String> = match platform {
        Platform::Linux => SONAMES.map(str::to_owned).to_vec(),
        Platform::Windows => windows_names(runtime_version).to_vec(),
    };
    let in_dir = dir
        .into_iter()
        .flat_map(|d| names.iter().map(move |name| d.join(name)));
    in_dir.chain(names.iter().map(PathBuf::from)).collect()
}

/// A failed comgr call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call} failed: amd_comgr_status_t {status}")]
pub struct ComgrError {
    pub call: &'static str,
    pub status: ComgrStatus,
}

fn check(call: &'static str, status: ComgrStatus) -> Result<(), ComgrError> {
    if status == COMGR_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(ComgrError { call, status })
    }
}

/// Opens comgr at `path` for good: its LLVM registers command-line options when loaded, and a
/// comgr unloaded and loaded again in one process (ours dropped, then hipRTC's own) aborts with
/// "LLVM ERROR: inconsistency in registered CommandLine options", as seen with ROCm 6.4.
#[cfg(unix)]
fn open_for_good(path: &Path) -> Result<Library, LoadError> {
    let flags = libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_NODELETE;
    // SAFETY: loading comgr runs its initialisers, which are sound to run.
    unsafe { libloading::os::unix::Library::open(Some(path), flags) }
        .map(Library::from)
        .map_err(|e| open_error(path, &e))
}

/// Opens comgr at `path` for good (see the Unix version for why). Windows has no "never unload"
/// flag for `LoadLibrary`; a second handle that is never freed keeps the reference count above
/// zero, so dropping [`Comgr`] never unloads the DLL.
#[cfg(not(unix))]
fn open_for_good(path: &Path) -> Result<Library, LoadError> {
    // SAFETY: loading comgr runs its initialisers, which are sound to run.
    let open = || unsafe { Library::new(path) }.map_err(|e| open_error(path, &e));
    let library = open()?;
    std::mem::forget(open()?);
    Ok(library)
}

fn open_error(path: &Path, e: &libloading::Error) -> LoadError {
    LoadError::Open {
        library: path.display().to_string(),
        detail: describe(e),
    }
}

/// Loaded comgr.
pub struct Comgr {
    pub fns: ComgrFns,
    pub library: PathBuf,
    _lib: Library,
}

impl Comgr {
    /// Loads the first of [`candidates`] for this platform and runtime version that opens.
    pub fn load(dir: Option<&Path>, runtime_version: i32) -> Result<Self, LoadError> {
        Self::load_first(&candidates(Platform::HOST, dir, runtime_version))
    }

    /// Loads the first of `paths` (paths or sonames) that opens.
    pub fn load_first(paths: &[PathBuf]) -> Result<Self, LoadError> {
        let mut failures = Vec::new();
        for path in paths {
            match open_for_good(path) {
                Ok(lib) => {
                    return Ok(Self {
                        fns: ComgrFns {
                            get_isa_count: symbol(&lib, path, "amd_comgr_get_isa_count")?,
                            get_isa_name: symbol(&lib, path, "amd_comgr_get_isa_name")?,
                        },
                        library: path.clone(),
                        _lib: lib,
                    });
                }
                Err(e) => failures.push(e.to_string()),
            }
        }
        Err(LoadError::Open {
            library: "comgr".to_owned(),
            detail: failures.join("; "),
        })
    }

    /// Every ISA comgr knows, e.g. `amdgcn-amd-amdhsa--gfx90a` (some releases add target
    /// features: `amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-`).
    pub fn isa_names(&self) -> Result<Vec<String>, ComgrError> {
        let mut count = 0usize;
        // SAFETY: writes one size_t.
        check("amd_comgr_get_isa_count", unsafe {
            (self.fns.get_isa_count)(&mut count)
        })?;
        (0..count)
            .map(|index| {
                let mut name: *const c_char = std::ptr::null();
                // SAFETY: `index` < count; writes one pointer.
                check("amd_comgr_get_isa_name", unsafe {
                    (self.fns.get_isa_name)(index, &mut name)
                })?;
                if name.is_null() {
                    return Err(ComgrError {
                        call: "amd_comgr_get_isa_name",
                        status: COMGR_STATUS_SUCCESS,
                    });
                }
                // SAFETY: comgr returned a NUL-terminated string it owns for its lifetime,
                // copied here while the library is loaded.
                Ok(unsafe { CStr::from_ptr(name) }
                    .to_string_lossy()
                    .into_owned())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AMD's HIP SDK for Windows: `amd_comgr_3.dll` from 7.1.1, `amd_comgr0505.dll` in 5.5
    /// (docs/windows.md).
    #[test]
    fn windows_names_come_from_the_sdk_releases() {
        let dir = Path::new("C:/Program Files/AMD/ROCm/5.5/bin");
        let found = candidates(Platform::Windows, Some(dir), 50_500_000);
        assert_eq!(found[0], dir.join("amd_comgr_3.dll"));
        assert_eq!(found[2], dir.join("amd_comgr0505.dll"));
        assert_eq!(found[3], PathBuf::from("amd_comgr_3.dll"));
        assert_eq!(found.len(), 6);
        assert!(
            candidates(Platform::Windows, None, 60_400_000)
                .contains(&PathBuf::from("amd_comgr0604.dll"))
        );
    }

    #[test]
    fn the_runtime_directory_comes_first_newest_soname_first() {
        let dir = Path::new("/opt/rocm-7.1/lib");
        assert_eq!(
            candidates(Platform::Linux, Some(dir), 70_100_000),
            [
                dir.join("libamd_comgr.so.3"),
                dir.join("libamd_comgr.so.2"),
                "libamd_comgr.so.3".into(),
                "libamd_comgr.so.2".into()
            ]
        );
        assert_eq!(
            candidates(Platform::Linux, None, 70_100_000),
            ["libamd_comgr.so.3".into(), "libamd_comgr.so.2".into()] as [PathBuf; 2]
        );
    }

    #[test]
    fn files_that_are_no_libraries_are_each_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let paths = SONAMES.map(|name| dir.path().join(name));
        for path in &paths {
            std::fs::write(path, b"not a library").unwrap();
        }
        let message = Comgr::load_first(&paths)
            .err()
            .expect("text files are no libraries")
            .to_string();
        for path in &paths {
            assert!(message.contains(&path.display().to_string()), "{message}");
        }
    }
}
