//! GPU backends (`cuda-fp16`; `rocm-fp16` with the ROCm layer; `hip-emu`, the ROCm executor on
//! an emulated GPU): one vendor-neutral executor over a [`GpuDevice`] ([`backend`]: lanes, one
//! captured graph per batch size, uploads, outputs, profiling) that runs either network
//! family's pass ([`attention`] bodies, residual [`tower`]s).

mod attention;
mod backend;
mod batch_sizes;
mod capture;
mod dense;
mod io;
mod lanes;
mod marks;
mod ops;
mod outputs;
mod pass;
mod plan;
mod policy;
mod tower;
mod trace;

use std::sync::Arc;

use super::gpus::GpuSelection;
use super::{Backend, BackendError, BackendOptions, MultiGpu};
use crate::gpu::{GemmPath, GpuDevice, GpuError, GpuResult};
use crate::weights::Model;
use attention::AttentionPass;
pub use backend::GpuBackend;
use plan::{
    DEFAULT_DENSE_MMA_MAX_BATCH, DEFAULT_NORM_DENSE_MAX_BATCH, DEFAULT_PDL_MAX_BATCH, PlanOptions,
};
use tower::TowerPass;
use tower::weights::ConvForm;

/// lc0's maximum batch size, the default `max_batch`.
const DEFAULT_MAX_BATCH: usize = 1024;

/// Batches that may run at once by default: two lanes let one call's host work (input
/// encoding and upload, result copies) and small passes overlap another's pass.
const DEFAULT_LANES: usize = 2;

/// Options every GPU backend takes.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuOptions {
    pub gpu: usize,
    pub max_batch: usize,
    /// The GEMM path asked for; `None`: the Lt library where the device has it, else BLAS.
    pub gemm: Option<GemmPath>,
    pub graph: bool,
    /// Time every operation (kernel timestamps where the device can trace, else events).
    pub profile: bool,
    /// The most batches that run at once (`lanes`, default 2): calls from several threads
    /// get a lane each (its own stream and buffers, made when first needed), so their passes
    /// overlap on the GPU; beyond that they wait.
    pub lanes: usize,
    /// Fill the activation buffers with NaN instead of zeros when they are made
    /// (`poison=true`): a validation mode in which any value read before the pass wrote it
    /// makes the outputs NaN, so `selftest` fails.
    pub poison: bool,
    /// Pick each Lt GEMM's algorithm by timing the library heuristic's best candidates on the
    /// real buffers (`gemm_timing=true`, the default), or take the heuristic's first
    /// (`gemm_timing=false`: a faster start, and far fewer distinct library kernels for
    /// compute-sanitizer to instrument).
    pub gemm_timing: bool,
    /// The thresholds and kernel choices each batch size's plan applies (`attention`,
    /// `norm_dense`, `dense_mma`, `pdl`).
    pub plan: PlanOptions,
    /// How a residual tower runs its 3×3 convolutions (`conv=winograd2`, the default,
    /// `winograd4` or `gather`).
    pub conv: ConvForm,
}

impl GpuOptions {
    /// The options for GPU `gpu`: reads `max_batch`, `gemm`, `graph`, ..., and applies
    /// `policy_head`, `value_head` and `mlh` to the network (a residual tower has only lc0's
    /// default heads).
    pub fn take(
        backend: &str,
        options: &BackendOptions,
        network: &mut Model,
        gpu: usize,
    ) -> Result<Self, BackendError> {
        let bad = |key: &str, value: String, reason: &str| BackendError::BadOption {
            backend: backend.to_owned(),
            key: key.to_owned(),
            value,
            reason: reason.to_owned(),
        };
        let gemm = options
            .get::<String>(backend, "gemm")?
            .map(|name| {
                GemmPath::from_name(&name).ok_or_else(|| bad("gemm", name, "expected lt or blas"))
            })
            .transpose()?;
        let max_batch = options
            .get::<usize>(backend, "max_batch")?
            .unwrap_or(DEFAULT_MAX_BATCH);
        if max_batch == 0 {
            return Err(bad("max_batch", "0".to_owned(), "must be at least 1"));
        }
        let lanes = options
            .get::<usize>(backend, "lanes")?
            .unwrap_or(DEFAULT_LANES);
        if lanes == 0 {
            return Err(bad("lanes", "0".to_owned(), "must be at least 1"));
        }
        let mlh = options.get::<bool>(backend, "mlh")?.unwrap_or(true);
        let conv = options
            .get::<String>(backend, "conv")?
            .map(|name| {
                ConvForm::from_name(&name)
                    .ok_or_else(|| bad("conv", name, &format!("expected {}", ConvForm::NAMES)))
            })
            .transpose()?
            .unwrap_or_default();
        match network {
            Model::Attention(network) => {
                options.select_heads(backend, network)?;
                if !mlh {
                    network.moves_left = None;
                }
            }
            Model::Residual(network) => {
                options.check_tower_heads(backend)?;
                if !mlh {
                    network.moves_left = None;
                }
            }
        }
        Ok(Self {
            gpu,
            max_batch,
            gemm,
            graph: options.get::<bool>(backend, "graph")?.unwrap_or(true),
            profile: options.get::<bool>(backend, "profile")?.unwrap_or(false),
            poison: options.get::<bool>(backend, "poison")?.unwrap_or(false),
            gemm_timing: options.get::<bool>(backend, "gemm_timing")?.unwrap_or(true),
            lanes,
            conv,
            plan: PlanOptions {
                norm_dense_max_batch: options
                    .get::<usize>(backend, "norm_dense")?
                    .unwrap_or(DEFAULT_NORM_DENSE_MAX_BATCH),
                dense_mma_max_batch: options
                    .get::<usize>(backend, "dense_mma")?
                    .unwrap_or(DEFAULT_DENSE_MMA_MAX_BATCH),
                programmatic_max_batch: options
                    .get::<usize>(backend, "pdl")?
                    .unwrap_or(DEFAULT_PDL_MAX_BATCH),
                se_board: options.get::<bool>(backend, "se_board")?.unwrap_or(true),
                matrix_attention: match options.get::<String>(backend, "attention")?.as_deref() {
                    None | Some("matrix" | "mma") => true,
                    Some("portable") => false,
                    Some(other) => {
                        return Err(bad(
                            "attention",
                            other.to_owned(),
                            "expected matrix (or mma) or portable",
                        ));
                    }
                },
            },
        })
    }
}

/// Creates `cuda-fp16` on the CUDA GPU chosen by the options.
pub fn create_cuda(
    name: &str,
    network: Model,
    options: &BackendOptions,
) -> Result<Box<dyn Backend>, BackendError> {
    create_on(
        name,
        network,
        options,
        crate::gpu::cuda::device_count,
        |o| {
            Ok(Arc::new(crate::gpu::cuda::CudaDevice::new(
                o.gpu,
                o.gemm_timing,
            )?))
        },
    )
}

/// `rocm-fp16` / `rocm` on the AMD GPU chosen by the options, through lc0rs' own HIP, rocBLAS
/// and hipBLASLt bindings. Without the runtime or a GPU, the error names what is missing.
pub fn create_rocm(
    name: &str,
    network: Model,
    options: &BackendOptions,
) -> Result<Box<dyn Backend>, BackendError> {
    create_on(name, network, options, crate::gpu::hip::gpu_count, |o| {
        Ok(Arc::new(crate::gpu::hip::device::HipDevice::new(
            o.gpu,
            o.gemm_timing,
        )?))
    })
}

/// The device the GPU backend called `name` runs on (`cuda-fp16`; `rocm-fp16` and its other
/// names; `hip-emu` at wave64), GPU `gpu`, for tools that launch kernels themselves (`attnbench`).
pub fn open_device(name: &str, gpu: usize) -> GpuResult<Arc<dyn GpuDevice>> {
    use crate::gpu::emu::{EmuDevice, LtRelease, library::BuildConfig};
    match name {
        "cuda-fp16" => Ok(Arc::new(crate::gpu::cuda::CudaDevice::new(gpu, false)?)),
        "rocm-fp16" | "rocm" | "hip" | "hip-fp16" | "hip-auto" => Ok(Arc::new(
            crate::gpu::hip::device::HipDevice::new(gpu, false)?,
        )),
        "hip-emu" => Ok(Arc::new(EmuDevice::new(
            &BuildConfig::new(64)?,
            LtRelease::Rocm7,
        )?)),
        other => Err(GpuError::Unsupported(format!(
            "backend {other:?} here (GPU backends: cuda-fp16, rocm-fp16, hip-emu)"
        ))),
    }
}

/// `hip-emu`: the `rocm-fp16` executor on an emulated AMD GPU (`crate::gpu::emu`), with
/// `wave=64|32` (default 64: CDNA's waves; 32: RDNA's), `lt_release=7|6` (default 7: which
/// hipBLASLt's epilogues are emulated; 6 leaves bias+SiLU's SiLU to the kernel) and
/// `emulated_gpus=N` (default 1: how many GPUs the emulated machine has, each with memory of
/// its own, for `gpus=`).
pub fn create_hip_emu(
    name: &str,
    network: Model,
    options: &BackendOptions,
) -> Result<Box<dyn Backend>, BackendError> {
    use crate::gpu::emu::{EmuDevice, LtRelease, library::BuildConfig};
    let bad = |key: &str, value: String, reason: &str| BackendError::BadOption {
        backend: name.to_owned(),
        key: key.to_owned(),
        value,
        reason: reason.to_owned(),
    };
    let wave = match options.get::<u32>(name, "wave")?.unwrap_or(64) {
        wave @ (32 | 64) => wave,
        other => return Err(bad("wave", other.to_string(), "expected 64 or 32")),
    };
    let lt = match options.get::<u32>(name, "lt_release")?.unwrap_or(7) {
        7 => LtRelease::Rocm7,
        6 => LtRelease::Rocm6,
        other => return Err(bad("lt_release", other.to_string(), "expected 7 or 6")),
    };
    let emulated_gpus = options.get::<usize>(name, "emulated_gpus")?.unwrap_or(1);
    if emulated_gpus == 0 {
        return Err(bad("emulated_gpus", "0".to_owned(), "must be at least 1"));
    }
    create_on(
        name,
        network,
        options,
        || Ok(emulated_gpus),
        |o| {
            if o.gpu >= emulated_gpus {
                return Err(GpuError::Unsupported(format!(
                    "emulated GPU {} requested, the emulated machine has {emulated_gpus} (emulated_gpus)",
                    o.gpu
                )));
            }
            Ok(Arc::new(EmuDevice::new(&BuildConfig::new(wave)?, lt)?))
        },
    )
}

/// A GPU backend called `name` over the GPUs the options select (`gpu`, `gpus`; `count` says
/// how many the machine has), each device opened by `open` for its options (its ordinal,
/// `gemm_timing`), running `network`'s pass: one GPU's backend, or a [`MultiGpu`] over a
/// backend a GPU, made side by side.
fn create_on(
    name: &str,
    mut network: Model,
    options: &BackendOptions,
    count: impl FnOnce() -> GpuResult<usize>,
    open: impl Fn(&GpuOptions) -> GpuResult<Arc<dyn GpuDevice>> + Sync,
) -> Result<Box<dyn Backend>, BackendError> {
    let selection = GpuSelection::take(name, options)?;
    let gpu_options = GpuOptions::take(name, options, &mut network, 0)?;
    let gpu_error = |error: GpuError| BackendError::Gpu {
        backend: name.to_owned(),
        error,
    };
    let ordinals = selection.ordinals(name, || count().map_err(gpu_error))?;
    let on_gpu = |gpu: usize, name: &str| {
        let options = GpuOptions {
            gpu,
            ..gpu_options.clone()
        };
        one_gpu(name, &network, options, &open)
    };
    if let [gpu] = ordinals[..] {
        return on_gpu(gpu, name);
    }
    let members = std::thread::scope(|scope| {
        let making: Vec<_> = ordinals
            .iter()
            .map(|&gpu| {
                let on_gpu = &on_gpu;
                scope.spawn(move || Ok((gpu, on_gpu(gpu, &format!("{name} GPU {gpu}"))?)))
            })
            .collect();
        making
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect::<Result<Vec<_>, BackendError>>()
    })?;
    Ok(Box::new(MultiGpu::new(name, members, selection.policy)))
}

/// The backend called `name` on the one GPU of `options`, running `network`'s pass.
fn one_gpu(
    name: &str,
    network: &Model,
    options: GpuOptions,
    open: &impl Fn(&GpuOptions) -> GpuResult<Arc<dyn GpuDevice>>,
) -> Result<Box<dyn Backend>, BackendError> {
    let gpu_error = |error: GpuError| BackendError::Gpu {
        backend: name.to_owned(),
        error,
    };
    let device = open(&options).map_err(gpu_error)?;
    let conv = options.conv;
    Ok(match network {
        Model::Attention(network) => Box::new(
            GpuBackend::new(
                name,
                device,
                |device| AttentionPass::new(device, network),
                options,
            )
            .map_err(gpu_error)?,
        ),
        Model::Residual(network) => Box::new(
            GpuBackend::new(
                name,
                device,
                |device| TowerPass::new(device, network, conv),
                options,
            )
            .map_err(gpu_error)?,
        ),
    })
}
