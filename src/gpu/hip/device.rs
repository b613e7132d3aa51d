//! The ROCm implementation of [`GpuDevice`] through lc0rs' own bindings: the HIP runtime
//! (memory, one stream, events, graph capture), the `hip/` kernels compiled by hipRTC for the
//! GPU's arch and wave size, rocBLAS for `gemm=blas` and the batched products, hipBLASLt for
//! `gemm=lt` where the ROCm release has it (6.0+).

use std::collections::HashMap;
use std::ffi::c_void;
use std::path::Path;
use std::sync::{Arc, Mutex};

use ::hip::Hip;
use ::hip::result::{self as hip, version_text};
use ::hip::safe::{self as owned, DeviceMemory, Event, Function, Module, PinnedMemory, Stream};
use ::hip::sys::{
    HIP_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, HIP_DEVICE_ATTRIBUTE_WARP_SIZE,
    MEMCPY_DEVICE_TO_HOST, MEMCPY_HOST_TO_DEVICE,
};
use ::hipblaslt::HipblasLt;
use ::rocblas::Rocblas;
use ::rocblas::result::HalfGemm;
use ::rocblas::safe::Handle as RocblasHandle;

use super::lt::LtCache;
use crate::gpu::events::EventLog;
use crate::gpu::gemm::{self, ColumnMajorGemm};
use crate::gpu::staging::{PinnedBuffer, Staging};
use crate::gpu::{
    BatchedProduct, DeviceInfo, DevicePtr, GemmPath, GpuBuffer, GpuDevice, GpuError, GpuGraph,
    GpuResult, KernelArg, Launch, Linear, MemorySpace, kernels,
};

/// rocBLAS' workspace, set once so that no GEMM allocates during graph capture (docs/gpu-apis.md §3.2).
const ROCBLAS_WORKSPACE_BYTES: usize = 32 << 20;

// Kernel arguments are passed as 8-byte slots whose first bytes hold the value.
const _: () = assert!(cfg!(target_endian = "little"));

/// rocBLAS bound to the device's stream, with its workspace.
struct Blas {
    handle: RocblasHandle,
    _workspace: DeviceMemory,
}

/// hipBLASLt, or why `gemm=lt` cannot run here.
enum Lt {
    Ready(Box<LtCache>),
    Missing(String),
}

/// A captured graph with the stream it replays on.
struct Graph {
    graph: owned::Graph,
    stream: Arc<Stream>,
}

impl GpuGraph for Graph {
    fn launch(&self) -> GpuResult<()> {
        self.graph.launch(&self.stream).map_err(GpuError::from)
    }
}

/// One AMD GPU with one stream.
pub struct HipDevice {
    blas: Mutex<Blas>,
    lt: Mutex<Lt>,
    events: EventLog<Event>,
    /// Pinned host memory that copies go through.
    staging: Staging<PinnedMemory>,
    functions: HashMap<&'static str, Function>,
    /// Shared by every lane of the GPU; the functions live as long as it.
    module: Arc<Module>,
    stream: Arc<Stream>,
    hip: Arc<Hip>,
    ordinal: usize,
    info: DeviceInfo,
    /// Whether hipBLASLt's candidate algorithms are timed (see [`HipDevice::new`]).
    time_gemm_candidates: bool,
}

impl HipDevice {
    /// Opens AMD GPU `ordinal`: compiles the kernels for its arch with hipRTC, loads them, and
    /// sets up rocBLAS (required) and hipBLASLt (where the release has it), which picks each
    /// GEMM's algorithm by timing the heuristic's candidates when `time_gemm_candidates` is
    /// set, else takes the heuristic's first.
    pub fn new(ordinal: usize, time_gemm_candidates: bool) -> GpuResult<Self> {
        let hip = Arc::new(Hip::load()?);
        let count = hip::device_count(&hip).map_err(GpuError::from)?;
        if ordinal >= count {
            return Err(GpuError::NoDevice(format!(
                "AMD GPU {ordinal} requested, the HIP runtime {} reports {count}",
                hip.runtime_library.display()
            )));
        }
        hip::set_device(&hip, ordinal).map_err(GpuError::from)?;
        let info = device_info(&hip, ordinal)?;
        let code = compile_for(&hip, &info.arch, info.warp_size)?;
        let module = Arc::new(Module::load(&hip, &code).map_err(GpuError::from)?);
        let matrix = kernels::amd_matrix_form(&info.arch).is_some();
        let functions = kernels::shared_kernel_names()
            .chain(kernels::matrix_kernel_names().filter(|_| matrix))
            .map(|name| Ok((name, module.function(name).map_err(GpuError::from)?)))
            .collect::<GpuResult<HashMap<_, _>>>()?;
        Self::with_stream(hip, ordinal, info, module, functions, time_gemm_candidates)
    }

    /// The state of one stream on an opened GPU: the stream, the rocBLAS handle (and
    /// hipBLASLt's, where it loads) bound to it with workspaces of their own, events and staging
    /// memory. The runtime, the module and its kernels are shared with every lane of the GPU.
    fn with_stream(
        hip: Arc<Hip>,
        ordinal: usize,
        info: DeviceInfo,
        module: Arc<Module>,
        functions: HashMap<&'static str, Function>,
        time_gemm_candidates: bool,
    ) -> GpuResult<Self> {
        let stream = Arc::new(Stream::new(&hip).map_err(GpuError::from)?);
        let version = hip::runtime_version(&hip).map_err(GpuError::from)?;
        let dir = hip
            .runtime_library
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .map(Path::to_path_buf);
        let blas = open_rocblas(&hip, dir.as_deref(), version, &stream)?;
        // hipBLASLt is optional: a release without it, or a GPU it cannot serve, leaves gemm=blas.
        let lt = match HipblasLt::load(dir.as_deref(), version)
            .map_err(|e| e.to_string())
            .and_then(|lib| {
                LtCache::new(&hip, &Arc::new(lib), &stream, time_gemm_candidates)
                    .map_err(|e| e.to_string())
            }) {
            Ok(cache) => Lt::Ready(Box::new(cache)),
            Err(why) => Lt::Missing(why),
        };
        Ok(Self {
            blas: Mutex::new(blas),
            lt: Mutex::new(lt),
            events: EventLog::default(),
            staging: Staging::default(),
            functions,
            module,
            stream,
            hip,
            ordinal,
            info,
            time_gemm_candidates,
        })
    }

    /// Makes this GPU current for the calling thread (HIP's current device is per thread, and
    /// the engine's search thread is not the one that opened the device). Every call that enqueues
    /// work or allocates binds first.
    fn bind(&self) -> GpuResult<()> {
        // Only when it differs, so that nothing but a query runs while the stream is capturing.
        if hip::current_device(&self.hip).map_err(GpuError::from)? == self.ordinal {
            return Ok(());
        }
        hip::set_device(&self.hip, self.ordinal).map_err(GpuError::from)
    }

    fn rocblas_gemm(&self, g: &ColumnMajorGemm) -> GpuResult<()> {
        let blas = self.blas.lock().unwrap_or_else(|e| e.into_inner());
        let half = HalfGemm {
            transpose_a: g.transpose_a,
            transpose_b: g.transpose_b,
            m: g.m as i32,
            n: g.n as i32,
            k: g.k as i32,
            alpha: g.alpha,
            beta: 0.0,
            a: g.a.raw(),
            lda: g.lda as i32,
            stride_a: g.stride_a as i64,
            b: g.b.raw(),
            ldb: g.ldb as i32,
            stride_b: g.stride_b as i64,
            c: g.c.raw(),
            ldc: g.ldc as i32,
            stride_c: g.stride_c as i64,
            batch: g.batch as i32,
        };
        // SAFETY: the addresses are device buffers the caller sized for these shapes.
        unsafe { blas.handle.half_gemm(&half) }.map_err(GpuError::from)
    }
}

impl PinnedBuffer for PinnedMemory {
    fn capacity(&self) -> usize {
        PinnedMemory::len(self)
    }

    fn host_bytes(&mut self) -> GpuResult<&mut [u8]> {
        Ok(self.as_mut_slice())
    }
}

/// A new pinned staging buffer of `bytes`.
fn pinned(hip: &Arc<Hip>, bytes: usize) -> GpuResult<PinnedMemory> {
    PinnedMemory::alloc(hip, bytes).map_err(GpuError::from)
}

/// Name, arch, memory, compute units and wave size of GPU `ordinal`.
fn device_info(hip: &Hip, ordinal: usize) -> GpuResult<DeviceInfo> {
    let attribute = |a| hip::device_attribute(hip, a, ordinal).map_err(GpuError::from);
    Ok(DeviceInfo {
        name: hip::device_name(hip, ordinal).map_err(GpuError::from)?,
        arch: hip::arch_name(hip, ordinal).map_err(GpuError::from)?,
        memory_bytes: hip::total_memory(hip, ordinal).map_err(GpuError::from)?,
        multiprocessors: attribute(HIP_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
        warp_size: attribute(HIP_DEVICE_ATTRIBUTE_WARP_SIZE)? as u32,
        runtime: format!(
            "HIP runtime {}",
            version_text(hip::runtime_version(hip).map_err(GpuError::from)?)
        ),
    })
}

/// Compiles `hip/` for `arch` with the GPU's own wave size.
fn compile_for(hip: &Hip, arch: &str, wave: u32) -> GpuResult<Vec<u8>> {
    let started = std::time::Instant::now();
    let code = super::compile_source(hip, arch, wave)?;
    tracing::info!(
        arch,
        wave,
        seconds = started.elapsed().as_secs_f64(),
        bytes = code.len(),
        "compiled the kernels with hipRTC"
    );
    Ok(code)
}

/// rocBLAS of the runtime's release, on `stream`, with a preallocated workspace.
fn open_rocblas(
    hip: &Arc<Hip>,
    dir: Option<&Path>,
    version: i32,
    stream: &Stream,
) -> GpuResult<Blas> {
    let lib = Rocblas::load(dir, version).map_err(|e| GpuError::LibraryMissing {
        library: "rocBLAS",
        detail: format!("{e} (install the rocblas package of this ROCm release)"),
    })?;
    let workspace = DeviceMemory::alloc(hip, ROCBLAS_WORKSPACE_BYTES).map_err(GpuError::from)?;
    // SAFETY: the stream and the workspace outlive the handle (all owned by the device, the
    // handle dropped first).
    let handle = unsafe {
        RocblasHandle::new(
            &Arc::new(lib),
            stream.handle(),
            workspace.address(),
            ROCBLAS_WORKSPACE_BYTES,
        )
    }
    .map_err(GpuError::from)?;
    Ok(Blas {
        handle,
        _workspace: workspace,
    })
}

/// Each argument's value in an 8-byte slot (little-endian: the value's bytes come first).
fn argument_slots(args: &[KernelArg]) -> Vec<u64> {
    args.iter().map(|a| a.slot()).collect()
}

impl GpuDevice for HipDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn memory_space(&self) -> MemorySpace {
        // One module per GPU, shared by its lanes.
        MemorySpace(Arc::as_ptr(&self.module) as usize)
    }

    fn alloc(&self, bytes: usize) -> GpuResult<GpuBuffer> {
        self.bind()?;
        let memory = DeviceMemory::alloc(&self.hip, bytes).map_err(GpuError::from)?;
        // SAFETY: the address of the allocation (of `bytes` bytes on this GPU) the buffer owns.
        Ok(unsafe {
            let ptr = DevicePtr::from_raw(memory.address());
            GpuBuffer::new(self.memory_space(), ptr, bytes, Box::new(memory))
        })
    }

    unsafe fn upload_with(
        &self,
        dst: DevicePtr,
        bytes: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> GpuResult<()> {
        self.bind()?;
        self.staging.upload(
            bytes,
            |len| pinned(&self.hip, len),
            fill,
            |staged| {
                // SAFETY: dst holds at least `bytes` bytes (the contract); the staging memory
                // is not touched again before the copy completes (`upload` waits for it).
                unsafe {
                    hip::memcpy_async(
                        &self.hip,
                        dst.raw() as *mut c_void,
                        staged.as_ptr().cast(),
                        staged.len(),
                        MEMCPY_HOST_TO_DEVICE,
                        self.stream.handle(),
                    )
                }
                .map_err(GpuError::from)
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
            |len| pinned(&self.hip, len),
            |range, piece| {
                // SAFETY: src holds at least `bytes` bytes (the contract); the piece is read
                // only after its event says the copy has landed.
                unsafe {
                    hip::memcpy_async(
                        &self.hip,
                        piece.as_mut_ptr().cast(),
                        (src.raw() + range.start as u64) as *const c_void,
                        piece.len(),
                        MEMCPY_DEVICE_TO_HOST,
                        self.stream.handle(),
                    )
                }
                .map_err(GpuError::from)?;
                let landed = Event::new(&self.hip)?;
                landed.record(&self.stream)?;
                Ok(landed)
            },
            |landed| Ok(landed.synchronize()?),
            read,
        )
    }

    unsafe fn fill(&self, dst: DevicePtr, bytes: usize, value: u8) -> GpuResult<()> {
        self.bind()?;
        // SAFETY: dst holds at least `bytes` bytes (the caller's promise, the contract).
        unsafe {
            hip::memset_async(
                &self.hip,
                dst.raw() as *mut c_void,
                value,
                bytes,
                self.stream.handle(),
            )
        }
        .map_err(GpuError::from)
    }

    unsafe fn launch(&self, kernel: &str, launch: Launch, args: &[KernelArg]) -> GpuResult<()> {
        self.bind()?;
        let function = *self
            .functions
            .get(kernel)
            .ok_or_else(|| GpuError::UnknownKernel(kernel.to_owned()))?;
        let mut slots = argument_slots(args);
        let mut params: Vec<*mut c_void> = slots
            .iter_mut()
            .map(|slot| (slot as *mut u64).cast())
            .collect();
        // SAFETY: the argument list matches the kernel's signature in hip/kernels.hip (the
        // typed launchers are the only callers; a test checks them against the sources), its
        // pointers keep the device-memory contract (the caller's promise); `slots` outlives
        // the call, which copies the values.
        unsafe {
            self.module.launch(
                function,
                launch.grid,
                launch.block,
                launch.shared_bytes,
                &self.stream,
                &mut params,
            )
        }
        .map_err(GpuError::from)
    }

    fn memory(&self) -> GpuResult<(usize, usize)> {
        self.bind()?;
        let (free, total) = hip::memory_info(&self.hip).map_err(GpuError::from)?;
        Ok((total - free, total))
    }

    fn has_kernel(&self, kernel: &str) -> bool {
        self.functions.contains_key(kernel)
    }

    fn new_lane(&self) -> GpuResult<Arc<dyn GpuDevice>> {
        self.bind()?;
        Ok(Arc::new(Self::with_stream(
            self.hip.clone(),
            self.ordinal,
            self.info.clone(),
            self.module.clone(),
            self.functions.clone(),
            self.time_gemm_candidates,
        )?))
    }

    fn gemm_path_unavailable(&self, path: GemmPath) -> Option<String> {
        match (path, &*self.lt.lock().unwrap_or_else(|e| e.into_inner())) {
            (GemmPath::Lt, Lt::Missing(why)) => Some(why.clone()),
            _ => None,
        }
    }

    unsafe fn linear(&self, path: GemmPath, op: &Linear) -> GpuResult<()> {
        self.bind()?;
        // SAFETY: `op` keeps the device-memory contract (the caller's promise).
        unsafe {
            gemm::linear_on(
                self,
                path,
                op,
                |op| match &mut *self.lt.lock().unwrap_or_else(|e| e.into_inner()) {
                    Lt::Ready(cache) => cache.linear(op),
                    Lt::Missing(why) => Err(GpuError::LibraryMissing {
                        library: "hipBLASLt",
                        detail: format!("{why}; use -o gemm=blas"),
                    }),
                },
                |g| self.rocblas_gemm(g),
            )
        }
    }

    unsafe fn batched_product(&self, op: &BatchedProduct) -> GpuResult<()> {
        self.bind()?;
        self.rocblas_gemm(&ColumnMajorGemm::from(op))
    }

    fn synchronize(&self) -> GpuResult<()> {
        self.stream.synchronize().map_err(GpuError::from)
    }

    fn begin_capture(&self) -> GpuResult<()> {
        self.bind()?;
        self.stream.begin_capture().map_err(GpuError::from)
    }

    fn end_capture(&self) -> GpuResult<Box<dyn GpuGraph>> {
        let graph = self
            .stream
            .end_capture()
            .map_err(|error| {
                if error.is_capture_invalidated() {
                    GpuError::CaptureInvalidated {
                        call: "hipStreamEndCapture",
                    }
                } else {
                    GpuError::from(error)
                }
            })?
            .ok_or_else(|| GpuError::Call {
                call: "hipStreamEndCapture",
                detail: "nothing was captured".to_owned(),
            })?;
        Ok(Box::new(Graph {
            graph,
            stream: self.stream.clone(),
        }))
    }

    fn record_event(&self) -> GpuResult<usize> {
        let event = Event::new(&self.hip)?;
        event.record(&self.stream)?;
        Ok(self.events.push(event))
    }

    fn elapsed_ms(&self, start: usize, end: usize) -> GpuResult<f32> {
        self.events.between(start, end, |a, b| Ok(a.elapsed_ms(b)?))
    }

    fn clear_events(&self) {
        self.events.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_arguments_sit_at_the_start_of_their_slots() {
        let slots = argument_slots(&[
            // SAFETY: only turned into an argument slot, never used on a device.
            KernelArg::Ptr(Some(unsafe { DevicePtr::from_raw(0x7f00_1234_5678) })),
            KernelArg::I32(-2),
            KernelArg::I64(-3),
            KernelArg::F32(1.5),
        ]);
        let bytes = |i: usize| slots[i].to_ne_bytes();
        assert_eq!(u64::from_ne_bytes(bytes(0)), 0x7f00_1234_5678);
        assert_eq!(i32::from_ne_bytes(bytes(1)[..4].try_into().unwrap()), -2);
        assert_eq!(i64::from_ne_bytes(bytes(2)), -3);
        assert_eq!(f32::from_ne_bytes(bytes(3)[..4].try_into().unwrap()), 1.5);
    }
}
