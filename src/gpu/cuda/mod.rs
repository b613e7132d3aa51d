//! The CUDA implementation of [`GpuDevice`] with cudarc: driver API, NVRTC, cuBLAS and
//! cuBLASLt, all loaded at run time. A missing library is an error, never a panic: every use is
//! gated by cudarc's `is_culib_present`.

mod blas;
mod capture;
mod launch;
mod lt;
pub mod nvrtc;
mod owned;
mod report;
mod trace;

pub use report::report;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtr as _, LaunchConfig,
    PinnedHostSlice, PushKernelArg,
};

use super::events::EventLog;
use super::gemm::{self, ColumnMajorGemm};
use super::staging::{PinnedBuffer, Staging};
use super::{
    BatchedProduct, DeviceInfo, DevicePtr, GemmPath, GpuBuffer, GpuDevice, GpuError, GpuGraph,
    GpuResult, KernelArg, Launch, Linear, MemorySpace, library_error,
};

/// The names of the CUDA libraries lc0rs loads (driver, NVRTC, cuBLAS, cuBLASLt) as this
/// platform calls them; cudarc finds CUDA 13's Windows DLLs by these stems
/// (`nvrtc64_130_0.dll`, `cublas64_13.dll`, ...; docs/windows.md).
const LIBRARY_NAMES: [&str; 4] = if cfg!(windows) {
    [
        "nvcuda.dll (driver)",
        "nvrtc64_130_0.dll",
        "cublas64_13.dll",
        "cublasLt64_13.dll",
    ]
} else {
    ["libcuda (driver)", "libnvrtc", "libcublas", "libcublasLt"]
};

/// The CUDA libraries lc0rs loads, and whether each can be found.
pub fn libraries_present() -> [(&'static str, bool); 4] {
    let [driver, nvrtc, cublas, cublas_lt] = LIBRARY_NAMES;
    // SAFETY: these only try to load the libraries; they do not call into them.
    unsafe {
        [
            (driver, cudarc::driver::sys::is_culib_present()),
            (nvrtc, cudarc::nvrtc::sys::is_culib_present()),
            (cublas, cudarc::cublas::sys::is_culib_present()),
            (cublas_lt, cudarc::cublaslt::sys::is_culib_present()),
        ]
    }
}

/// The variable of the run-time library search path cudarc's loads by name go through.
const SEARCH_PATH_VARIABLE: &str = if cfg!(windows) {
    "PATH"
} else {
    "LD_LIBRARY_PATH"
};

/// Fails with a clear message unless every CUDA library is present.
pub fn require_libraries() -> GpuResult<()> {
    match libraries_present()
        .into_iter()
        .find(|(_, present)| !present)
    {
        None => Ok(()),
        Some((library, _)) => {
            let [_, nvrtc, cublas, cublas_lt] = LIBRARY_NAMES;
            Err(GpuError::LibraryMissing {
                library,
                detail: format!(
                    "install the NVIDIA driver and the CUDA 13 runtime libraries ({nvrtc}, {cublas}, {cublas_lt}), \
                     or put them on {SEARCH_PATH_VARIABLE}"
                ),
            })
        }
    }
}

/// The number of CUDA devices (0 when the driver finds none).
pub fn device_count() -> GpuResult<usize> {
    require_libraries()?;
    cudarc::driver::result::init().map_err(library_error("CUDA driver", "cuInit"))?;
    let n = cudarc::driver::result::device::get_count()
        .map_err(library_error("CUDA driver", "cuDeviceGetCount"))?;
    Ok(n.max(0) as usize)
}

/// The CUDA driver's API version, e.g. 13000.
pub fn driver_version() -> GpuResult<i32> {
    require_libraries()?;
    let mut version = 0;
    // SAFETY: cuDriverGetVersion writes one int.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(library_error("CUDA driver", "cuDriverGetVersion"))?;
    Ok(version)
}

/// One CUDA GPU with one stream.
pub struct CudaDevice {
    /// Dropped first: the library handles before the stream and context they use.
    blas: Mutex<blas::Blas>,
    lt: Mutex<lt::LtCache>,
    events: EventLog<CudaEvent>,
    /// Pinned host memory that copies go through (pageable copies are several times slower).
    staging: Staging<PinnedHostSlice<u8>>,
    functions: HashMap<&'static str, CudaFunction>,
    stream: Arc<CudaStream>,
    ctx: Arc<CudaContext>,
    info: DeviceInfo,
    /// Whether cuBLASLt's candidate algorithms are timed (see [`CudaDevice::new`]).
    time_gemm_candidates: bool,
    /// Whether the GPU has programmatic dependent launch (sm_90 and newer, where the kernels
    /// wait for the previous one in `PRIOR_KERNELS_DONE()`; elsewhere that wait compiles to
    /// nothing, so the launches stay plain).
    programmatic_capable: bool,
    /// Whether kernels launch with programmatic dependent launch now (see
    /// [`GpuDevice::set_programmatic_launch`]).
    programmatic_launch: AtomicBool,
}

/// Uploads smaller than this go straight from pageable memory.
const STAGING_THRESHOLD: usize = 64 << 10;

impl PinnedBuffer for PinnedHostSlice<u8> {
    fn capacity(&self) -> usize {
        PinnedHostSlice::len(self)
    }

    fn host_bytes(&mut self) -> GpuResult<&mut [u8]> {
        self.as_mut_slice()
            .map_err(library_error("CUDA driver", "cuEventSynchronize"))
    }
}

impl CudaDevice {
    /// Opens GPU `ordinal`, compiles the kernels for its architecture and sets up cuBLAS and
    /// cuBLASLt, which picks each GEMM's algorithm by timing the heuristic's candidates when
    /// `time_gemm_candidates` is set, else takes the heuristic's first.
    pub fn new(ordinal: usize, time_gemm_candidates: bool) -> GpuResult<Self> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(GpuError::NoDevice(format!(
                "CUDA device {ordinal} requested, {count} present"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(library_error("CUDA driver", "cuCtxCreate"))?;
        // Graph capture needs cudarc's per-buffer event tracking off (docs/gpu-apis.md §5.2).
        // SAFETY: called before any allocation. Each lane's work goes to its own stream; the
        // buffers lanes share (the weights) are written once, before any lane reads them.
        unsafe { ctx.disable_event_tracking() };
        let (major, minor) = ctx
            .compute_capability()
            .map_err(library_error("CUDA driver", "cuDeviceGetAttribute"))?;
        let arch = format!("sm_{major}{minor}");
        let module = nvrtc::compile_module(&ctx, &arch)?;
        let functions = super::kernels::cuda_kernel_names(major as u32 * 10 + minor as u32)
            .into_iter()
            .map(|name| {
                let f = module
                    .load_function(name)
                    .map_err(library_error("CUDA driver", "cuModuleGetFunction"))?;
                Ok((name, f))
            })
            .collect::<GpuResult<HashMap<_, _>>>()?;
        let info = DeviceInfo {
            name: ctx
                .name()
                .map_err(library_error("CUDA driver", "cuDeviceGetName"))?,
            arch,
            memory_bytes: ctx
                .total_mem()
                .map_err(library_error("CUDA driver", "cuDeviceTotalMem"))?,
            multiprocessors: ctx
                .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .map_err(library_error("CUDA driver", "cuDeviceGetAttribute"))?
                as u32,
            warp_size: 32,
            runtime: format!("CUDA driver {}", driver_version()?),
        };
        Self::with_stream(ctx, functions, info, time_gemm_candidates)
    }

    /// The state of one stream on an opened GPU: the stream, cuBLAS and cuBLASLt handles bound
    /// to it with workspaces of their own, events and staging memory. The context and the
    /// kernels are shared with every other lane of the GPU.
    fn with_stream(
        ctx: Arc<CudaContext>,
        functions: HashMap<&'static str, CudaFunction>,
        info: DeviceInfo,
        time_gemm_candidates: bool,
    ) -> GpuResult<Self> {
        let stream = ctx
            .new_stream()
            .map_err(library_error("CUDA driver", "cuStreamCreate"))?;
        let sm = info.arch.trim_start_matches("sm_").parse::<u32>();
        Ok(Self {
            blas: Mutex::new(blas::Blas::new(&stream)?),
            lt: Mutex::new(lt::LtCache::new(&ctx, &stream, time_gemm_candidates)?),
            events: EventLog::default(),
            staging: Staging::default(),
            functions,
            stream,
            ctx,
            info,
            programmatic_capable: sm.is_ok_and(|sm| sm >= 90),
            time_gemm_candidates,
            programmatic_launch: AtomicBool::new(false),
        })
    }

    /// Makes the context current on the calling thread: each call of the backend may come
    /// from a thread that has not used the GPU yet, and the raw driver calls need it.
    fn bind(&self) -> GpuResult<()> {
        self.ctx
            .bind_to_thread()
            .map_err(library_error("CUDA driver", "cuCtxSetCurrent"))
    }

    /// A new pinned staging buffer of `bytes`.
    fn pinned(&self, bytes: usize) -> GpuResult<PinnedHostSlice<u8>> {
        // SAFETY: plain (not write-combined) pinned memory, read and written by the host only
        // between synchronised copies.
        unsafe { self.ctx.alloc_pinned_with_flags::<u8>(bytes, 0) }
            .map_err(library_error("CUDA driver", "cuMemHostAlloc"))
    }

    fn blas_gemm(&self, g: &ColumnMajorGemm) -> GpuResult<()> {
        self.blas.lock().unwrap_or_else(|e| e.into_inner()).gemm(g)
    }
}

impl GpuDevice for CudaDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn memory_space(&self) -> MemorySpace {
        // One context per GPU, shared by its lanes.
        MemorySpace(self.ctx.cu_ctx() as usize)
    }

    fn alloc(&self, bytes: usize) -> GpuResult<GpuBuffer> {
        // SAFETY: uninitialised device memory; callers write before they read.
        let slice: CudaSlice<u8> = unsafe { self.stream.alloc::<u8>(bytes.max(1)) }
            .map_err(library_error("CUDA driver", "cuMemAlloc"))?;
        // SAFETY: the address of the allocation (of at least `bytes` bytes in this context)
        // the buffer owns.
        Ok(unsafe {
            let ptr = DevicePtr::from_raw(slice.device_ptr(&self.stream).0);
            GpuBuffer::new(self.memory_space(), ptr, bytes, Box::new(slice))
        })
    }

    unsafe fn upload_with(
        &self,
        dst: DevicePtr,
        bytes: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> GpuResult<()> {
        self.bind()?;
        if bytes < STAGING_THRESHOLD {
            let mut src = vec![0u8; bytes];
            fill(&mut src);
            // SAFETY: dst holds at least `bytes` bytes (the caller's promise, the contract);
            // the driver copies pageable sources before returning.
            return unsafe {
                cudarc::driver::result::memcpy_htod_async(dst.raw(), &src, self.stream.cu_stream())
            }
            .map_err(library_error("CUDA driver", "cuMemcpyHtoDAsync"));
        }
        self.staging.upload(
            bytes,
            |len| self.pinned(len),
            fill,
            |staged| {
                // SAFETY: dst holds at least `bytes` bytes (the contract); the staging memory
                // is not reused before the copy completes (`upload` waits for it).
                unsafe {
                    cudarc::driver::result::memcpy_htod_async(
                        dst.raw(),
                        staged,
                        self.stream.cu_stream(),
                    )
                }
                .map_err(library_error("CUDA driver", "cuMemcpyHtoDAsync"))
            },
            || self.synchronize(),
        )
    }

    unsafe fn download_with(
        &self,
        src: DevicePtr,
        bytes: usize,
        read: &mut dyn FnMut(&[u8]),
    ) -> GpuResult<()> {
        self.bind()?;
        self.staging.download(
            bytes,
            |len| self.pinned(len),
            |range, piece| {
                // SAFETY: src holds at least `bytes` bytes (the contract); the piece is read
                // only after its event says the copy has landed.
                unsafe {
                    cudarc::driver::result::memcpy_dtoh_async(
                        piece,
                        src.raw() + range.start as u64,
                        self.stream.cu_stream(),
                    )
                }
                .map_err(library_error("CUDA driver", "cuMemcpyDtoHAsync"))?;
                self.stream
                    .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
                    .map_err(library_error("CUDA driver", "cuEventRecord"))
            },
            |landed| {
                landed
                    .synchronize()
                    .map_err(library_error("CUDA driver", "cuEventSynchronize"))
            },
            read,
        )
    }

    unsafe fn fill(&self, dst: DevicePtr, bytes: usize, value: u8) -> GpuResult<()> {
        // SAFETY: dst is a device buffer of at least `bytes` bytes (the caller's promise).
        unsafe {
            cudarc::driver::result::memset_d8_async(
                dst.raw(),
                value,
                bytes,
                self.stream.cu_stream(),
            )
        }
        .map_err(library_error("CUDA driver", "cuMemsetD8Async"))
    }

    unsafe fn launch(&self, kernel: &str, launch: Launch, args: &[KernelArg]) -> GpuResult<()> {
        let f = self
            .functions
            .get(kernel)
            .ok_or_else(|| GpuError::UnknownKernel(kernel.to_owned()))?;
        // Each argument in an 8-byte slot: the driver reads as many of its first bytes as the
        // kernel's parameter has.
        let mut slots: Vec<u64> = args.iter().map(|a| a.slot()).collect();
        if self.programmatic_launch.load(Ordering::Relaxed) {
            return launch::launch_programmatic(&self.stream, f, launch, &mut slots);
        }
        let mut builder = self.stream.launch_builder(f);
        for slot in &slots {
            builder.arg(slot);
        }
        let cfg = LaunchConfig {
            grid_dim: (launch.grid[0], launch.grid[1], launch.grid[2]),
            block_dim: (launch.block[0], launch.block[1], launch.block[2]),
            shared_mem_bytes: launch.shared_bytes,
        };
        // SAFETY: the argument list matches the kernel's signature in hip/ (the typed
        // launchers are the only callers; a test checks them against the kernel sources);
        // its pointers keep the device-memory contract (the caller's promise).
        unsafe { builder.launch(cfg) }
            .map(|_| ())
            .map_err(library_error("CUDA driver", "cuLaunchKernel"))
    }

    fn memory(&self) -> GpuResult<(usize, usize)> {
        self.bind()?;
        let (free, total) = cudarc::driver::result::mem_get_info()
            .map_err(library_error("CUDA driver", "cuMemGetInfo"))?;
        Ok((total - free, total))
    }

    fn has_kernel(&self, kernel: &str) -> bool {
        self.functions.contains_key(kernel)
    }

    fn new_lane(&self) -> GpuResult<Arc<dyn GpuDevice>> {
        Ok(Arc::new(Self::with_stream(
            self.ctx.clone(),
            self.functions.clone(),
            self.info.clone(),
            self.time_gemm_candidates,
        )?))
    }

    fn set_programmatic_launch(&self, on: bool) {
        self.programmatic_launch
            .store(on && self.programmatic_capable, Ordering::Relaxed);
    }

    fn has_programmatic_launch(&self) -> bool {
        self.programmatic_capable
    }

    unsafe fn linear(&self, path: GemmPath, op: &Linear) -> GpuResult<()> {
        // SAFETY: `op` keeps the device-memory contract (the caller's promise).
        unsafe {
            gemm::linear_on(
                self,
                path,
                op,
                |op| self.lt.lock().unwrap_or_else(|e| e.into_inner()).linear(op),
                |g| self.blas_gemm(g),
            )
        }
    }

    unsafe fn batched_product(&self, op: &BatchedProduct) -> GpuResult<()> {
        self.blas_gemm(&ColumnMajorGemm::from(op))
    }

    fn synchronize(&self) -> GpuResult<()> {
        self.stream
            .synchronize()
            .map_err(library_error("CUDA driver", "cuStreamSynchronize"))
    }

    fn begin_capture(&self) -> GpuResult<()> {
        capture::begin(&self.stream)
    }

    fn end_capture(&self) -> GpuResult<Box<dyn GpuGraph>> {
        capture::end(&self.stream)
    }

    fn record_event(&self) -> GpuResult<usize> {
        Ok(self
            .events
            .push(capture::timing_event(&self.ctx, &self.stream)?))
    }

    fn elapsed_ms(&self, start: usize, end: usize) -> GpuResult<f32> {
        self.events.between(start, end, |a, b| {
            a.elapsed_ms(b)
                .map_err(library_error("CUDA driver", "cuEventElapsedTime"))
        })
    }

    fn clear_events(&self) {
        self.events.clear();
    }

    fn can_trace(&self) -> bool {
        trace::available()
    }

    fn captured_work(&self) -> GpuResult<usize> {
        capture::captured_work(&self.stream)
    }

    fn trace(&self, work: &mut dyn FnMut() -> GpuResult<()>) -> GpuResult<Vec<super::Activity>> {
        let stream = (self.ctx.cu_ctx(), self.stream.cu_stream());
        trace::trace(stream, work, &|| self.synchronize())
    }
}
