//! Backends by name, like lc0's `-b`.

use super::cpu::CpuBackend;
use super::{Backend, BackendError, BackendOptions};
use crate::weights::Model;

/// The backends this build can create. `rocm` and lc0's names for its AMD backend (`hip`,
/// `hip-fp16`, `hip-auto`, which users coming from lc0 type) are the same fp16 ROCm backend as
/// `rocm-fp16`: lc0rs builds no fp32 GPU path, so there is nothing for "auto" to choose between.
/// `hip-emu` runs that backend's executor and kernels on an emulated AMD GPU (on the CPU).
/// `random` is lc0's backend of that name: outputs drawn from each position's planes, for
/// measuring the search alone.
pub const BACKEND_NAMES: [&str; 9] = [
    "cpu",
    "cuda-fp16",
    "rocm-fp16",
    "rocm",
    "hip",
    "hip-fp16",
    "hip-auto",
    "hip-emu",
    "random",
];

/// The best backend this machine can run: `cuda-fp16` with a usable NVIDIA GPU, else
/// `rocm-fp16` with an AMD GPU the HIP runtime reports, else `cpu`.
pub fn best_backend_name() -> &'static str {
    if matches!(crate::gpu::cuda::device_count(), Ok(n) if n > 0) {
        "cuda-fp16"
    } else if crate::gpu::hip::device_count() > 0 {
        "rocm-fp16"
    } else {
        "cpu"
    }
}

/// Creates backend `name` for `network` with lc0-style `options` (`key=value,...`).
pub fn create_backend(
    name: &str,
    network: impl Into<Model>,
    options: &str,
) -> Result<Box<dyn Backend>, BackendError> {
    let options = BackendOptions::parse(options)?;
    let network = network.into();
    let backend: Box<dyn Backend> = match name {
        "cpu" => Box::new(CpuBackend::new(network, &options)?),
        "cuda-fp16" => super::executor::create_cuda(name, network, &options)?,
        "rocm-fp16" | "rocm" | "hip" | "hip-fp16" | "hip-auto" => {
            super::executor::create_rocm(name, network, &options)?
        }
        "hip-emu" => super::executor::create_hip_emu(name, network, &options)?,
        "random" => Box::new(super::random::RandomBackend::new(&network, &options)?),
        _ => {
            return Err(BackendError::UnknownBackend {
                name: name.to_owned(),
                available: BACKEND_NAMES.join(", "),
            });
        }
    };
    options.finish(name)?;
    Ok(backend)
}
