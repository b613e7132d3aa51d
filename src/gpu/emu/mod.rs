//! `hip-emu`: the ROCm executor's GPU emulated on the CPU. The kernels of `hip/` run through
//! HIP-CPU (each GPU thread a fiber, shuffles per wave of 64 or 32 lanes) from a library g++
//! builds at first use ([`library`]); device memory is host memory ([`memory`]); rocBLAS and
//! hipBLASLt run on the CPU from the same column-major arguments and epilogue choices the ROCm
//! device gives the libraries ([`blas`]). Work is done when it is enqueued; graph capture records
//! it and a replay runs it again. Not emulated: timing (events, kernel traces), asynchrony,
//! graphs as such, the GPU's fp16 arithmetic and math library, memory faults inside kernels
//! (but every pointer a kernel is handed must lie inside a live buffer, and every copy, fill
//! and GEMM inside one: a use after free is an error here, not a silent write).

mod blas;
pub mod library;
mod memory;

use std::sync::{Arc, Mutex};

use blas::{EpilogueOnCpu, LtMatmul};
use library::{BuildConfig, KernelLibrary};
use memory::Allocations;

use super::gemm::{self, ColumnMajorGemm};
use super::hip::lt::epilogue_code;
use super::lt_plan::epilogue_choices;
use super::{
    BatchedProduct, DeviceInfo, DevicePtr, GemmPath, GpuBuffer, GpuDevice, GpuError, GpuGraph,
    GpuResult, KernelArg, Launch, Linear, MemorySpace,
};

/// What `lc0rs devices`, the profile and timing errors say the emulator does not do.
pub const NOT_EMULATED: &str = "timing (events, kernel traces, profile), asynchrony (every call \
    completes before it returns), graphs (captured work is recorded and replayed call by call), \
    the GPU's fp16 arithmetic and math library (host libm), memory faults inside kernels";

/// Which hipBLASLt release's epilogues are emulated: ROCm 7 fuses bias+SiLU (SWISH_BIAS),
/// ROCm 6 leaves SiLU to the `bias_activation` kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LtRelease {
    Rocm6,
    Rocm7,
}

/// One piece of work, as recorded during capture.
#[derive(Debug, Clone)]
enum Work {
    Kernel {
        name: String,
        launch: Launch,
        args: Vec<KernelArg>,
    },
    Fill {
        dst: DevicePtr,
        bytes: usize,
        value: u8,
    },
    Rocblas(ColumnMajorGemm),
    Lt(LtMatmul),
}

/// The state every lane of one emulated GPU shares.
struct Shared {
    kernels: Arc<KernelLibrary>,
    memory: Arc<Allocations>,
    lt: LtRelease,
}

/// An emulated AMD GPU (one lane of it).
pub struct EmuDevice {
    shared: Arc<Shared>,
    /// The work recorded since `begin_capture`, if capturing.
    capture: Mutex<Option<Vec<Work>>>,
    info: DeviceInfo,
}

/// A captured sequence, replayed call by call on the device's state.
struct RecordedGraph {
    shared: Arc<Shared>,
    work: Vec<Work>,
}

impl GpuGraph for RecordedGraph {
    fn launch(&self) -> GpuResult<()> {
        self.work.iter().try_for_each(|w| run(&self.shared, w))
    }
}

impl EmuDevice {
    /// An emulated GPU of wave size `config.wave`, its kernels built (or taken from the cache)
    /// for that wave size, with hipBLASLt's epilogues of `lt`.
    pub fn new(config: &BuildConfig, lt: LtRelease) -> GpuResult<Self> {
        let kernels = KernelLibrary::open(config)?;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        let info = DeviceInfo {
            name: format!("hip-emu (HIP-CPU, wave{})", config.wave),
            arch: emulated_arch(config).to_owned(),
            memory_bytes: host_memory_bytes(),
            multiprocessors: threads,
            warp_size: config.wave,
            runtime: format!(
                "HIP-CPU {} ({})",
                config.hip_cpu.display(),
                kernels.path.display()
            ),
        };
        Ok(Self {
            shared: Arc::new(Shared {
                kernels,
                memory: Arc::new(Allocations::default()),
                lt,
            }),
            capture: Mutex::new(None),
            info,
        })
    }

    /// Runs `work` now, or records it while capturing.
    fn submit(&self, work: Work) -> GpuResult<()> {
        if let Some(recorded) = self.capture().as_mut() {
            recorded.push(work);
            return Ok(());
        }
        run(&self.shared, &work)
    }

    fn capture(&self) -> std::sync::MutexGuard<'_, Option<Vec<Work>>> {
        self.capture.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Host memory at an emulated device address, refused while capturing (a synchronous copy
    /// cannot be captured on a GPU either) and outside the live buffers.
    fn host_bytes(&self, at: DevicePtr, bytes: usize, call: &'static str) -> GpuResult<*mut u8> {
        if self.capture().is_some() {
            return Err(GpuError::Call {
                call,
                detail: "a synchronous copy during graph capture".to_owned(),
            });
        }
        if bytes > 0 && !self.shared.memory.contains(at.raw(), bytes) {
            return Err(GpuError::Call {
                call,
                detail: format!("{bytes} bytes at {at:#x} are not inside one live buffer"),
            });
        }
        Ok(at.raw() as *mut u8)
    }
}

/// The arch a build emulates, which decides the matrix-core kernels' form as on a GPU: wave32
/// as RDNA3 (gfx1100, WMMA) or, where asked, RDNA4 (gfx1201), wave64 as CDNA3 (gfx942, MFMA).
pub fn emulated_arch(config: &BuildConfig) -> &'static str {
    match (config.wave, config.gfx12) {
        (32, false) => "gfx1100 (emulated, wave32, WMMA)",
        (32, true) => "gfx1201 (emulated, wave32, WMMA)",
        _ => "gfx942 (emulated, wave64, MFMA)",
    }
}

/// Does one piece of work.
fn run(shared: &Shared, work: &Work) -> GpuResult<()> {
    match work {
        Work::Kernel { name, launch, args } => {
            check_pointers(&shared.memory, name, args)?;
            // SAFETY: recorded from `GpuDevice::launch`, whose caller promised the contract
            // for as long as the work, or the graph recording it, may run; every pointer is
            // checked above to lie inside a live buffer.
            unsafe { shared.kernels.launch(name, *launch, args) }
        }
        Work::Fill { dst, bytes, value } => {
            if !shared.memory.contains(dst.raw(), *bytes) {
                return Err(GpuError::Call {
                    call: "hipMemsetAsync (emulated)",
                    detail: format!("{bytes} bytes at {dst:#x} are not inside one live buffer"),
                });
            }
            // SAFETY: checked to lie inside a live allocation.
            unsafe { std::ptr::write_bytes(dst.raw() as *mut u8, *value, *bytes) };
            Ok(())
        }
        Work::Rocblas(g) => blas::rocblas_gemm(&shared.memory, g),
        Work::Lt(op) => blas::lt_matmul(&shared.memory, op),
    }
}

/// Refuses a kernel launch with a pointer argument outside every live buffer (one freed, or
/// never allocated): the kernel would read or write host memory the device does not own. How
/// far from the pointer the kernel reaches is not known here; copies, fills and GEMMs check
/// their whole range.
fn check_pointers(memory: &Allocations, kernel: &str, args: &[KernelArg]) -> GpuResult<()> {
    for (index, arg) in args.iter().enumerate() {
        if let KernelArg::Ptr(Some(ptr)) = arg
            && !memory.contains(ptr.raw(), 0)
        {
            return Err(GpuError::Call {
                call: "hipLaunchKernel (emulated)",
                detail: format!(
                    "{kernel}: argument {index} ({ptr:#x}) is not inside a live buffer"
                ),
            });
        }
    }
    Ok(())
}

/// Total host memory (`/proc/meminfo`), the emulated GPU's capacity; 0 where unknown.
fn host_memory_bytes() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(0)
}

fn not_emulated(what: &str) -> GpuError {
    GpuError::Unsupported(format!("{what} is not emulated on hip-emu"))
}

impl GpuDevice for EmuDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn memory_space(&self) -> MemorySpace {
        self.shared.memory.space()
    }

    fn alloc(&self, bytes: usize) -> GpuResult<GpuBuffer> {
        self.shared.memory.alloc(bytes)
    }

    unsafe fn upload_with(
        &self,
        dst: DevicePtr,
        bytes: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> GpuResult<()> {
        let at = self.host_bytes(dst, bytes, "hipMemcpyAsync (emulated upload)")?;
        // SAFETY: `bytes` inside a live allocation (checked); nothing else runs on it during
        // the call (the emulator does all work synchronously; the caller's promise, point 3).
        let device = unsafe { std::slice::from_raw_parts_mut(at, bytes) };
        fill(device);
        Ok(())
    }

    unsafe fn download_with(
        &self,
        src: DevicePtr,
        bytes: usize,
        read: &mut dyn FnMut(&[u8]),
    ) -> GpuResult<()> {
        let at = self.host_bytes(src, bytes, "hipMemcpyAsync (emulated download)")?;
        // SAFETY: as for upload_with.
        read(unsafe { std::slice::from_raw_parts(at, bytes) });
        Ok(())
    }

    unsafe fn fill(&self, dst: DevicePtr, bytes: usize, value: u8) -> GpuResult<()> {
        self.submit(Work::Fill { dst, bytes, value })
    }

    unsafe fn launch(&self, kernel: &str, launch: Launch, args: &[KernelArg]) -> GpuResult<()> {
        if !self.shared.kernels.has_kernel(kernel) {
            return Err(GpuError::UnknownKernel(kernel.to_owned()));
        }
        self.submit(Work::Kernel {
            name: kernel.to_owned(),
            launch,
            args: args.to_vec(),
        })
    }

    fn memory(&self) -> GpuResult<(usize, usize)> {
        Ok((self.shared.memory.used(), self.info.memory_bytes))
    }

    fn has_kernel(&self, kernel: &str) -> bool {
        self.shared.kernels.has_kernel(kernel)
    }

    fn new_lane(&self) -> GpuResult<Arc<dyn GpuDevice>> {
        Ok(Arc::new(Self {
            shared: self.shared.clone(),
            capture: Mutex::new(None),
            info: self.info.clone(),
        }))
    }

    unsafe fn linear(&self, path: GemmPath, op: &Linear) -> GpuResult<()> {
        // SAFETY: `op` keeps the device-memory contract (the caller's promise); the emulated
        // GEMMs check their ranges too.
        unsafe {
            gemm::linear_on(
                self,
                path,
                op,
                |op| {
                    // As the ROCm device asks hipBLASLt: W transposed, X not, the most fused
                    // epilogue this release has (the emulated heuristic always finds an algorithm).
                    let swish = self.shared.lt == LtRelease::Rocm7;
                    let (epilogue, fused) =
                        epilogue_choices(op.bias.is_some(), op.epilogue, swish)[0];
                    self.submit(Work::Lt(LtMatmul {
                        transpose_a: true,
                        transpose_b: false,
                        layouts: ColumnMajorGemm::from(op).layouts(),
                        a: op.w,
                        b: op.x,
                        d: op.y,
                        epilogue: EpilogueOnCpu::from_lt(epilogue_code(epilogue), op.bias)?,
                    }))?;
                    Ok(fused)
                },
                |g| self.submit(Work::Rocblas(*g)),
            )
        }
    }

    unsafe fn batched_product(&self, op: &BatchedProduct) -> GpuResult<()> {
        self.submit(Work::Rocblas(ColumnMajorGemm::from(op)))
    }

    fn synchronize(&self) -> GpuResult<()> {
        Ok(())
    }

    fn begin_capture(&self) -> GpuResult<()> {
        let mut capture = self.capture();
        if capture.is_some() {
            return Err(GpuError::Call {
                call: "hipStreamBeginCapture (emulated)",
                detail: "the stream is already capturing".to_owned(),
            });
        }
        *capture = Some(Vec::new());
        Ok(())
    }

    fn end_capture(&self) -> GpuResult<Box<dyn GpuGraph>> {
        let work = self.capture().take().ok_or_else(|| GpuError::Call {
            call: "hipStreamEndCapture (emulated)",
            detail: "the stream is not capturing".to_owned(),
        })?;
        Ok(Box::new(RecordedGraph {
            shared: self.shared.clone(),
            work,
        }))
    }

    fn record_event(&self) -> GpuResult<usize> {
        Err(not_emulated("timing (events)"))
    }

    fn elapsed_ms(&self, _start: usize, _end: usize) -> GpuResult<f32> {
        Err(not_emulated("timing (events)"))
    }

    fn clear_events(&self) {}
}

/// Lines for `lc0rs devices`: what the emulator needs, where it was found, and what it does not
/// emulate.
pub fn report() -> Vec<String> {
    let hip_cpu = library::hip_cpu_dir();
    let found = hip_cpu.join("include/hip/hip_runtime.h").is_file();
    vec![
        format!(
            "HIP-CPU {} ({}; set {} to change)",
            hip_cpu.display(),
            if found { "found" } else { "NOT FOUND" },
            library::HIP_CPU_ENV
        ),
        match library::compiler_version() {
            Ok(version) => format!("compiler: {version} (needs libtbb-dev)"),
            Err(e) => format!("compiler: {e}"),
        },
        format!(
            "kernel cache: {} (built at first use per wave size)",
            library::emu_cache_dir().display()
        ),
        "backend hip-emu, options wave=64|32 (default 64), lt_release=7|6 (default 7), emulated_gpus=N (default 1)".to_owned(),
        format!("not emulated: {NOT_EMULATED}"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_argument_outside_every_live_buffer_is_refused() {
        let memory = Arc::new(memory::Allocations::default());
        let buffer = memory.alloc(1024).unwrap();
        let (start, end) = (buffer.ptr(), buffer.at(1024));
        let args = |p| [KernelArg::I32(3), KernelArg::Ptr(p), KernelArg::Ptr(None)];
        assert!(check_pointers(&memory, "k", &args(Some(start))).is_ok());
        assert!(check_pointers(&memory, "k", &args(Some(end))).is_ok());
        drop(buffer);
        // A graph replayed after its buffer was freed: its recorded address is refused.
        let error = check_pointers(&memory, "k", &args(Some(start))).unwrap_err();
        assert!(
            error.to_string().contains("k: argument 1") && error.to_string().contains("live"),
            "{error}"
        );
    }
}
