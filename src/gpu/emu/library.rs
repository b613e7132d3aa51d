//! Building and loading the emulator's kernel library: `hip/` (prelude and kernels) plus C entry
//! points ([`ENTRY_POINTS`]), compiled by the system g++ against HIP-CPU into a shared library,
//! cached by source hash and wave size in lc0rs' cache directory. Wave32 builds use a copy of
//! HIP-CPU with `warpSize{32}`, made in the cache directory (HIP-CPU itself says 64).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use crate::gpu::{GpuError, GpuResult, KernelArg, Launch, kernels};

/// The C++ side of the launches: unpacking argument slots and calling HIP-CPU.
const ENTRY_POINTS: &str = include_str!("entry.h");

/// AMD's matrix instructions (WMMA at wave32, MFMA at wave64) under the builtins' names, compiled
/// between the prelude and the kernels.
const MATRIX_INSTRUCTIONS: &str = include_str!("matrix.h");

/// The environment variable naming HIP-CPU's checkout (the directory holding `include/hip`).
pub const HIP_CPU_ENV: &str = "LC0RS_HIP_CPU";

/// Where HIP-CPU is looked for without [`HIP_CPU_ENV`]: beside the repository checkout.
const DEFAULT_HIP_CPU: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/third_party/HIP-CPU");

/// The compiler the kernels are built with.
const COMPILER: &str = "g++";

/// HIP-CPU's wave size line and the wave32 copy's.
const WAVE64_LINE: &str = "inline constexpr int warpSize{64};";
const WAVE32_LINE: &str = "inline constexpr int warpSize{32};";

/// What a build of the kernel library depends on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BuildConfig {
    /// 64 (CDNA) or 32 (RDNA).
    pub wave: u32,
    /// HIP-CPU's directory.
    pub hip_cpu: PathBuf,
    /// The control build whose shuffles return the lane's own value (must fail the tests).
    pub broken_shuffle: bool,
    /// A wave32 build whose matrix-core kernels take RDNA4's (gfx12) WMMA layout instead of
    /// RDNA3's (gfx11), so that both layouts of the attention run.
    pub gfx12: bool,
}

impl BuildConfig {
    /// A build for wave size `wave` with HIP-CPU from [`HIP_CPU_ENV`] or the default place.
    pub fn new(wave: u32) -> GpuResult<Self> {
        if wave != 32 && wave != 64 {
            return Err(GpuError::Unsupported(format!(
                "hip-emu wave size {wave}: expected 64 or 32"
            )));
        }
        Ok(Self {
            wave,
            hip_cpu: hip_cpu_dir(),
            broken_shuffle: false,
            gfx12: false,
        })
    }
}

/// HIP-CPU's directory: `$LC0RS_HIP_CPU`, else `shared/third_party/HIP-CPU` beside the checkout.
pub fn hip_cpu_dir() -> PathBuf {
    std::env::var_os(HIP_CPU_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_HIP_CPU))
}

/// The C signature of every generated entry point.
type EntryPoint = unsafe extern "C" fn(*const u32, *const u32, u32, *const u64, i32) -> i32;

/// The loaded kernel library of one build, one per process (the dynamic loader hands out one
/// copy of a file, with one HIP-CPU runtime and one set of barrier counts, whoever opens it).
pub struct KernelLibrary {
    entries: HashMap<&'static str, EntryPoint>,
    /// Launches through the library's runtime, one at a time.
    launches: Mutex<()>,
    pub path: PathBuf,
    /// Kept loaded as long as the entry points are used.
    _library: libloading::Library,
}

impl KernelLibrary {
    /// The library for `config`: the one this process loaded already, else built (or found in
    /// the cache) and loaded now.
    pub fn open(config: &BuildConfig) -> GpuResult<Arc<Self>> {
        static LOADED: Mutex<Vec<(BuildConfig, Arc<KernelLibrary>)>> = Mutex::new(Vec::new());
        let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, library)) = loaded.iter().find(|(c, _)| c == config) {
            return Ok(library.clone());
        }
        let library = Arc::new(Self::load(config)?);
        loaded.push((config.clone(), library.clone()));
        Ok(library)
    }

    fn load(config: &BuildConfig) -> GpuResult<Self> {
        let path = build(config)?;
        // SAFETY: the library is ours, built from hip/ and entry.h; its initialisers only set up
        // HIP-CPU's runtime.
        let library =
            unsafe { libloading::Library::new(&path) }.map_err(|e| load_error(&path, e))?;
        let entries = kernels::shared_kernel_names()
            .chain(kernels::matrix_kernel_names())
            .map(|name| {
                let symbol = format!("lc0rs_launch_{name}\0");
                // SAFETY: every entry point has the EntryPoint signature (LC0RS_ENTRY in entry.h).
                let entry = unsafe { library.get::<EntryPoint>(symbol.as_bytes()) }
                    .map_err(|e| load_error(&path, e))?;
                Ok((name, *entry))
            })
            .collect::<GpuResult<_>>()?;
        Ok(Self {
            entries,
            launches: Mutex::new(()),
            path,
            _library: library,
        })
    }

    pub fn has_kernel(&self, kernel: &str) -> bool {
        self.entries.contains_key(kernel)
    }

    /// Runs `kernel` to completion.
    ///
    /// # Safety
    /// [`GpuDevice::launch`](crate::gpu::GpuDevice::launch)'s: the device-memory contract for
    /// every pointer of `args` (host memory here).
    pub unsafe fn launch(&self, kernel: &str, launch: Launch, args: &[KernelArg]) -> GpuResult<()> {
        let entry = self
            .entries
            .get(kernel)
            .ok_or_else(|| GpuError::UnknownKernel(kernel.to_owned()))?;
        let slots: Vec<u64> = args.iter().map(|a| a.slot()).collect();
        let _serial = self.launches.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the arrays outlive the call; the entry point checks the argument count and
        // unpacks each slot by the kernel's parameter type; the pointers keep the device-memory
        // contract (the caller's promise).
        let status = unsafe {
            entry(
                launch.grid.as_ptr(),
                launch.block.as_ptr(),
                launch.shared_bytes,
                slots.as_ptr(),
                slots.len() as i32,
            )
        };
        match status {
            0 => Ok(()),
            -1 => Err(GpuError::Call {
                call: "hipLaunchKernel (emulated)",
                detail: format!("{kernel}: wrong number of arguments ({})", args.len()),
            }),
            missed if missed <= -1000 => Err(GpuError::Call {
                call: "hipLaunchKernel (emulated)",
                detail: format!(
                    "{kernel}: a thread of the block did not reach the __syncthreads() on line {} of {}",
                    -missed - 1000,
                    self.path.with_extension("cpp").display()
                ),
            }),
            other => Err(GpuError::Call {
                call: "hipLaunchKernel (emulated)",
                detail: format!("{kernel}: HIP-CPU reported failure {other}"),
            }),
        }
    }
}

fn load_error(path: &Path, e: libloading::Error) -> GpuError {
    GpuError::LibraryMissing {
        library: "the hip-emu kernel library",
        detail: format!("{}: {e}", path.display()),
    }
}

/// The translation unit: the kernels (with the emulated matrix instructions after the prelude),
/// then one entry point per shared and matrix-core kernel.
fn source() -> String {
    let entries: String = kernels::shared_kernel_names()
        .chain(kernels::matrix_kernel_names())
        .map(|name| format!("LC0RS_ENTRY({name})\n"))
        .collect();
    let kernels = kernels::source_with(MATRIX_INSTRUCTIONS);
    format!("{kernels}\n{ENTRY_POINTS}\n{entries}")
}

/// The cached library for `config`, compiled first if the cache lacks it. One build at a time
/// per process; another process building the same file at once only costs time (the file is
/// renamed into place whole).
fn build(config: &BuildConfig) -> GpuResult<PathBuf> {
    static BUILDS: Mutex<()> = Mutex::new(());
    let _one_at_a_time = BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    let include = include_dir(config)?;
    let source = source();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (&source, config, &include).hash(&mut hasher);
    let dir = emu_cache_dir();
    let library = dir.join(format!(
        "kernels-wave{}-{:016x}.so",
        config.wave,
        hasher.finish()
    ));
    if library.is_file() {
        return Ok(library);
    }
    let io = |what: &str, source: std::io::Error| GpuError::Io {
        call: "building the hip-emu kernels",
        path: what.to_owned(),
        source,
    };
    std::fs::create_dir_all(&dir).map_err(|e| io(&dir.display().to_string(), e))?;
    let work = tempfile::tempdir_in(&dir).map_err(|e| io("a build directory", e))?;
    let cpp = work.path().join("kernels.cpp");
    std::fs::write(&cpp, &source).map_err(|e| io("the source", e))?;
    let built = work.path().join("kernels.so");
    compile(config, &include, &cpp, &built)?;
    // The source stays beside the library: launch errors name its lines.
    std::fs::rename(&cpp, library.with_extension("cpp"))
        .map_err(|e| io(&library.display().to_string(), e))?;
    std::fs::rename(&built, &library).map_err(|e| io(&library.display().to_string(), e))?;
    Ok(library)
}

/// g++ on the translation unit. `-fvisibility=hidden` and `-fno-gnu-unique` keep two libraries
/// (wave64 and wave32) in one process from sharing HIP-CPU's runtime objects.
fn compile(config: &BuildConfig, include: &Path, cpp: &Path, out: &Path) -> GpuResult<()> {
    let started = std::time::Instant::now();
    let mut command = Command::new(COMPILER);
    command
        .args(["-std=c++17", "-O2", "-fPIC", "-shared", "-w"])
        .args(["-fvisibility=hidden", "-fno-gnu-unique"])
        .arg(format!("-DWARP_SIZE={}", config.wave))
        .arg("-DLC0RS_HIP_CPU=1")
        .arg("-I")
        .arg(include);
    if config.broken_shuffle {
        command.arg("-DLC0RS_BROKEN_SHUFFLE=1");
    }
    if config.gfx12 {
        command.arg("-DLC0RS_EMU_GFX12=1");
    }
    command.arg(cpp).arg("-o").arg(out).arg("-ltbb");
    let output = command.output().map_err(|e| GpuError::LibraryMissing {
        library: "g++ (the hip-emu kernel compiler)",
        detail: format!("{e}; install it (apt-get install g++ libtbb-dev)"),
    })?;
    if !output.status.success() {
        let log = String::from_utf8_lossy(&output.stderr);
        let hint = if log.contains("tbb") {
            "\n(the C++17 parallel algorithms need Intel TBB: apt-get install libtbb-dev)"
        } else {
            ""
        };
        return Err(GpuError::Compile {
            arch: format!("hip-emu wave{}", config.wave),
            log: format!("{log}{hint}"),
        });
    }
    tracing::info!(
        wave = config.wave,
        seconds = started.elapsed().as_secs_f64(),
        "compiled the kernels for hip-emu with g++"
    );
    Ok(())
}

/// The cache directory of the emulator's builds.
pub fn emu_cache_dir() -> PathBuf {
    crate::netsource::cache_dir().join("hip-emu")
}

/// The include directory for `config`: HIP-CPU's own for wave64; for wave32 a copy of HIP-CPU
/// in the cache whose `warpSize` is 32.
fn include_dir(config: &BuildConfig) -> GpuResult<PathBuf> {
    let header = config.hip_cpu.join("include/hip/hip_runtime.h");
    if !header.is_file() {
        return Err(GpuError::LibraryMissing {
            library: "HIP-CPU",
            detail: format!(
                "{} not found; point {HIP_CPU_ENV} at a HIP-CPU checkout (github.com/ROCm/HIP-CPU)",
                header.display()
            ),
        });
    }
    if config.wave == 64 {
        return Ok(config.hip_cpu.join("include"));
    }
    wave32_copy(&config.hip_cpu).map(|dir| dir.join("include"))
}

/// A copy of HIP-CPU with `warpSize{32}`, made once per HIP-CPU directory.
fn wave32_copy(hip_cpu: &Path) -> GpuResult<PathBuf> {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    hip_cpu.hash(&mut hasher);
    let dir = emu_cache_dir().join(format!("hip-cpu-wave32-{:016x}", hasher.finish()));
    if dir.join("include/hip/hip_constants.h").is_file() {
        return Ok(dir);
    }
    let io = |what: &Path, source: std::io::Error| GpuError::Io {
        call: "copying HIP-CPU for wave32",
        path: what.display().to_string(),
        source,
    };
    let parent = emu_cache_dir();
    std::fs::create_dir_all(&parent).map_err(|e| io(&parent, e))?;
    let work = tempfile::tempdir_in(&parent).map_err(|e| io(&parent, e))?;
    copy_tree(hip_cpu, work.path()).map_err(|e| io(hip_cpu, e))?;
    let constants = work.path().join("include/hip/hip_constants.h");
    let text = std::fs::read_to_string(&constants).map_err(|e| io(&constants, e))?;
    if text.matches(WAVE64_LINE).count() != 1 {
        return Err(GpuError::Unsupported(format!(
            "{}: expected one `{WAVE64_LINE}` to make a wave32 copy of HIP-CPU",
            constants.display()
        )));
    }
    std::fs::write(&constants, text.replace(WAVE64_LINE, WAVE32_LINE))
        .map_err(|e| io(&constants, e))?;
    let made = work.keep();
    if std::fs::rename(&made, &dir).is_err() && !dir.is_dir() {
        return Err(io(
            &dir,
            std::io::Error::other("could not move the copy into place"),
        ));
    }
    let _ = std::fs::remove_dir_all(&made); // another process moved its copy in first
    Ok(dir)
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// The compiler's first version line, or why it cannot run.
pub fn compiler_version() -> Result<String, String> {
    let output = Command::new(COMPILER)
        .arg("--version")
        .output()
        .map_err(|e| format!("{COMPILER} not found: {e} (apt-get install g++ libtbb-dev)"))?;
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shared_kernel_gets_an_entry_point() {
        let src = source();
        for name in kernels::shared_kernel_names().chain(kernels::matrix_kernel_names()) {
            assert!(src.contains(&format!("\nLC0RS_ENTRY({name})\n")), "{name}");
        }
        assert!(!src.contains("LC0RS_ENTRY(attention_mma_"));
    }

    #[test]
    fn wave_sizes_other_than_32_and_64_are_refused() {
        assert!(BuildConfig::new(16).is_err());
        assert_eq!(BuildConfig::new(32).unwrap().wave, 32);
    }

    #[test]
    fn a_missing_hip_cpu_is_named() {
        let config = BuildConfig {
            wave: 64,
            hip_cpu: PathBuf::from("/nonexistent/HIP-CPU"),
            broken_shuffle: false,
            gfx12: false,
        };
        let e = include_dir(&config).unwrap_err().to_string();
        assert!(
            e.contains("HIP-CPU") && e.contains("/nonexistent/HIP-CPU") && e.contains(HIP_CPU_ENV),
            "{e}"
        );
    }
}
