//! Compiling `hip/` with NVRTC. NVRTC has no built-in `cuda_fp16.h`: the include directory is
//! taken from `$CUDA_HOME`/`$CUDA_PATH`, `/usr/local/cuda`, or a pip `nvidia` package
//! (docs/gpu-apis.md §2.2).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaModule};
use cudarc::nvrtc::{CompileOptions, Ptx};

use crate::gpu::{GpuError, GpuResult, kernels};

/// Directories that hold `cuda_fp16.h`, most specific first.
pub fn include_dirs() -> Vec<PathBuf> {
    let mut candidates: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|root| Path::new(&root).join("include"))
        .collect();
    candidates.push(PathBuf::from("/usr/local/cuda/include"));
    if let Ok(extra) = std::env::var("LC0RS_CUDA_INCLUDE") {
        candidates.insert(0, PathBuf::from(extra));
    }
    candidates
        .into_iter()
        .filter(|d| d.join("cuda_fp16.h").is_file())
        .collect()
}

/// Compiles every kernel for `arch` (e.g. `sm_90`) to PTX; needs libnvrtc, not a GPU.
pub fn compile(arch: &str) -> GpuResult<Ptx> {
    // SAFETY: only checks that the library can be loaded.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(GpuError::LibraryMissing {
            library: "libnvrtc",
            detail: "install the CUDA 13 NVRTC library".to_owned(),
        });
    }
    let include = include_dirs();
    if include.is_empty() {
        return Err(GpuError::LibraryMissing {
            library: "cuda_fp16.h",
            detail: "set CUDA_HOME (or LC0RS_CUDA_INCLUDE) to a CUDA toolkit include directory"
                .to_owned(),
        });
    }
    let arch: &'static str = Box::leak(arch.to_owned().into_boxed_str());
    let options = CompileOptions {
        include_paths: include.iter().map(|p| p.display().to_string()).collect(),
        arch: Some(arch),
        name: Some("lc0rs_kernels.cu".to_owned()),
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(kernels::source(), options).map_err(|e| {
        GpuError::Compile {
            arch: arch.to_owned(),
            log: format!("{e:?}"),
        }
    })
}

/// Compiles the kernels for the device's architecture and loads them.
pub fn compile_module(ctx: &Arc<CudaContext>, arch: &str) -> GpuResult<Arc<CudaModule>> {
    let ptx = compile(arch)?;
    ctx.load_module(ptx)
        .map_err(crate::gpu::library_error("CUDA driver", "cuModuleLoadData"))
}
