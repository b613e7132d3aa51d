//! `lc0rs devices` for NVIDIA: the CUDA libraries found, their versions, and the GPUs or why
//! there are none.

use super::{CudaDevice, device_count, driver_version, libraries_present};
use crate::gpu::GpuDevice;

/// Lines for `lc0rs devices`: each library found or not, the versions of those that load, and
/// one line per GPU (or why there is none).
pub fn report() -> Vec<String> {
    let mut lines: Vec<String> = libraries_present()
        .into_iter()
        .map(|(library, present)| {
            format!("{library}: {}", if present { "found" } else { "not found" })
        })
        .collect();
    lines.extend(
        library_versions()
            .into_iter()
            .map(|(library, version)| format!("{library} {version}")),
    );
    match device_count() {
        Err(e) => lines.push(format!("no GPUs: {e}")),
        Ok(0) => lines.push("no GPUs: the driver reports none".to_owned()),
        Ok(count) => lines.extend((0..count).map(describe_gpu)),
    }
    lines
}

/// One GPU in words: name, arch, memory, SMs and runtime, or why it is unusable.
fn describe_gpu(ordinal: usize) -> String {
    match CudaDevice::new(ordinal, true) {
        Ok(device) => {
            let info = device.info();
            format!(
                "gpu {ordinal}: {} ({}), {:.1} GiB, {} SMs, {}",
                info.name,
                info.arch,
                info.memory_bytes as f64 / (1u64 << 30) as f64,
                info.multiprocessors,
                info.runtime
            )
        }
        Err(e) => format!("gpu {ordinal}: unusable: {e}"),
    }
}

/// Versions of the CUDA libraries, for `lc0rs devices` (each only if the library loads).
fn library_versions() -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let present = libraries_present();
    if present[0].1
        && let Ok(v) = driver_version()
    {
        out.push(("CUDA driver API", format!("{}.{}", v / 1000, v % 1000 / 10)));
    }
    if present[1].1 {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: nvrtcVersion writes two ints.
        if unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }
            == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS
        {
            out.push(("NVRTC", format!("{major}.{minor}")));
        }
    }
    if present[2].1 {
        let mut version = [0i32; 3];
        for (slot, property) in version.iter_mut().zip([
            cudarc::cublas::sys::libraryPropertyType::MAJOR_VERSION,
            cudarc::cublas::sys::libraryPropertyType::MINOR_VERSION,
            cudarc::cublas::sys::libraryPropertyType::PATCH_LEVEL,
        ]) {
            // SAFETY: cublasGetProperty writes one int.
            let _ = unsafe { cudarc::cublas::sys::cublasGetProperty(property, slot) };
        }
        out.push((
            "cuBLAS",
            format!("{}.{}.{}", version[0], version[1], version[2]),
        ));
    }
    if present[3].1 {
        // SAFETY: returns a number.
        let v = unsafe { cudarc::cublaslt::sys::cublasLtGetVersion() };
        out.push((
            "cuBLASLt",
            format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100),
        ));
    }
    out
}
