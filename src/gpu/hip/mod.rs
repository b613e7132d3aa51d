//! ROCm through lc0rs' own bindings: what `lc0rs devices` reports, compiling the kernels of
//! `hip/` with hipRTC (no GPU needed), and the ROCm implementation of `GpuDevice`
//! ([`device::HipDevice`]: HIP runtime, rocBLAS, hipBLASLt).

mod arch;
pub mod device;
mod error;
pub(crate) mod lt;

use std::path::{Path, PathBuf};

use ::hip::comgr::Comgr;
use ::hip::result::{
    arch_name, device_attribute, device_count as device_count_of, device_name, runtime_version,
    version_text,
};
use ::hip::safe::{compile, rtc_version};
use ::hip::sys::{HIP_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, HIP_DEVICE_ATTRIBUTE_WARP_SIZE};
use ::hip::{Hip, LoadError};
use ::hipblaslt::HipblasLt;
use ::rocblas::Rocblas;

use super::{GpuError, kernels};

impl From<LoadError> for GpuError {
    fn from(e: LoadError) -> Self {
        GpuError::LibraryMissing {
            library: "the HIP runtime",
            detail: e.to_string(),
        }
    }
}

/// The wave size of an AMD architecture: 64 on GCN/CDNA (gfx9xx), 32 on RDNA.
pub fn wave_size(arch: &str) -> u32 {
    if arch.starts_with("gfx9") { 64 } else { 32 }
}

/// Lines for `lc0rs devices`: the runtime and hipRTC found, and the GPUs or why there are none.
pub fn report() -> Vec<String> {
    let hip = match Hip::load() {
        Ok(hip) => hip,
        Err(e) => return vec![format!("not available: {e}")],
    };
    let mut lines = vec![format!(
        "HIP runtime {} (major {})",
        hip.runtime_library.display(),
        hip.major
    )];
    match runtime_version(&hip) {
        Ok(v) => {
            lines.push(format!("HIP runtime version {}", version_text(v)));
            lines.extend(blas_report(&hip, v));
        }
        Err(e) => lines.push(format!("HIP runtime version unknown: {e}")),
    }
    match rtc_version(&hip) {
        Ok((major, minor)) => lines.push(format!(
            "hipRTC {major}.{minor} ({})",
            hip.rtc_library.display()
        )),
        Err(e) => lines.push(format!("hipRTC unusable: {e}")),
    }
    lines.push(match comgr_isas(&hip) {
        Ok((library, isas)) => {
            let names: Vec<&str> = isas.iter().map(|isa| arch::processor(isa)).collect();
            format!(
                "comgr {}: {} ISAs: {}",
                library.display(),
                names.len(),
                names.join(" ")
            )
        }
        Err(e) => format!("comgr unusable: {e}"),
    });
    match device_count_of(&hip) {
        Err(e) => lines.push(format!("no GPUs: {e}")),
        Ok(0) => lines.push("no GPUs: the HIP runtime reports none (hipErrorNoDevice)".to_owned()),
        Ok(n) => {
            lines.extend((0..n).map(|i| format!("gpu {i}: {}", describe_gpu(&hip, i))));
        }
    }
    lines
}

/// The number of AMD GPUs the HIP runtime reports, or why it cannot tell (no runtime).
pub fn gpu_count() -> Result<usize, GpuError> {
    let hip = Hip::load()?;
    Ok(device_count_of(&hip)?)
}

/// The number of AMD GPUs the HIP runtime reports (0 without a runtime).
pub fn device_count() -> usize {
    Hip::load()
        .ok()
        .and_then(|hip| device_count_of(&hip).ok())
        .unwrap_or(0)
}

/// One GPU in words: name, arch, compute units, wave size (unreadable fields say why).
fn describe_gpu(hip: &Hip, ordinal: usize) -> String {
    let name = device_name(hip, ordinal).unwrap_or_else(|e| e.to_string());
    let arch = arch_name(hip, ordinal).unwrap_or_else(|e| e.to_string());
    let cus = device_attribute(hip, HIP_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ordinal)
        .map_or_else(|e| e.to_string(), |n| n.to_string());
    let wave = device_attribute(hip, HIP_DEVICE_ATTRIBUTE_WARP_SIZE, ordinal)
        .map_or_else(|e| e.to_string(), |n| n.to_string());
    format!("{name} ({arch}), {cus} compute units, wave {wave}")
}

/// The directory the HIP runtime was loaded from; `None` where it came by soname from the system
/// search path (its companions are then looked up the same way).
fn runtime_dir(hip: &Hip) -> Option<&Path> {
    hip.runtime_library
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
}

/// comgr of the runtime's install and the ISA names it knows.
fn comgr_isas(hip: &Hip) -> Result<(PathBuf, Vec<String>), GpuError> {
    let version = runtime_version(hip).map_err(GpuError::from)?;
    let comgr = Comgr::load(runtime_dir(hip), version).map_err(|e| GpuError::LibraryMissing {
        library: "comgr (the code object manager hipRTC compiles through)",
        detail: e.to_string(),
    })?;
    let isas = comgr.isa_names()?;
    Ok((comgr.library, isas))
}

/// Whether rocBLAS and hipBLASLt of the runtime's release load (and resolve every function
/// lc0rs calls) from the runtime's directory.
fn blas_report(hip: &Hip, version: i32) -> [String; 2] {
    let dir = runtime_dir(hip);
    let rocblas = match Rocblas::load(dir, version) {
        Ok(lib) => format!("rocBLAS {}", lib.library.display()),
        Err(e) => format!("rocBLAS not available: {e}"),
    };
    let hipblaslt = match HipblasLt::load(dir, version) {
        Ok(lib) => format!(
            "hipBLASLt {} (its own version is checked once a GPU opens it)",
            lib.library.display()
        ),
        Err(e) => format!("hipBLASLt not available: {e}"),
    };
    [rocblas, hipblaslt]
}

/// Compiles every kernel of `hip/` for `arch` (e.g. gfx90a) with hipRTC; returns the code
/// object after checking that each kernel every vendor has is in it.
pub fn compile_kernels(arch: &str) -> Result<Vec<u8>, GpuError> {
    compile_source(&Hip::load()?, arch, wave_size(arch))
}

/// Compiles `hip/` for `arch` and wave size `wave` and checks that every shared kernel, and
/// where the arch has matrix cores every matrix-core kernel, is in the code object. An arch comgr does not know is refused first (hipRTC would abort on it).
fn compile_source(hip: &Hip, arch: &str, wave: u32) -> Result<Vec<u8>, GpuError> {
    let (comgr, isas) = comgr_isas(hip)?;
    arch::check_known(arch, &isas).map_err(|why| GpuError::Compile {
        arch: arch.to_owned(),
        log: format!("{why} ({})", comgr.display()),
    })?;
    let warp = format!("-DWARP_SIZE={wave}");
    let code = compile(
        hip,
        &kernels::source(),
        "lc0rs_kernels.hip",
        arch,
        &[&warp, "-std=c++17"],
    )
    .map_err(|e| GpuError::Compile {
        arch: arch.to_owned(),
        log: e.to_string(),
    })?;
    // The matrix-core kernels exist where the arch has a matrix form (hip/prelude.h).
    let matrix = kernels::amd_matrix_form(arch).is_some();
    for name in
        kernels::shared_kernel_names().chain(kernels::matrix_kernel_names().filter(|_| matrix))
    {
        if !code
            .windows(name.len() + 1)
            .any(|w| &w[..name.len()] == name.as_bytes() && w[name.len()] == 0)
        {
            return Err(GpuError::Compile {
                arch: arch.to_owned(),
                log: format!("kernel {name} is missing from the code object"),
            });
        }
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    #[test]
    fn wave_sizes() {
        assert_eq!(super::wave_size("gfx90a"), 64);
        assert_eq!(super::wave_size("gfx942"), 64);
        assert_eq!(super::wave_size("gfx1030"), 32);
        assert_eq!(super::wave_size("gfx1151"), 32);
    }
}
