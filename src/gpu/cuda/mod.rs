//! The CUDA implementation of [`GpuDevice`] with cudarc: driver API, NVRTC, cuBLAS and
//! cuBLASLt, all loaded at run time. A missing library is an error, never a panic: every use is
//! gated by cudarc's `is_culib_present`.

mod lt;
pub mod nvrtc;
mod report;
mod trace;

pub use report::report;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::cublas::result as blas;
use cudarc::cublas::sys as blas_sys;
use cudarc::driver::sys::{
    CUdevice_attribute, CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode,
};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaGraph, CudaSlice, CudaStream, DevicePtr,
    LaunchConfig, PinnedHostSlice, PushKernelArg,
};

use super::gemm::{self, ColumnMajorGemm, Fused};
use super::{
    BatchedProduct, DeviceInfo, GemmPath, GpuBuffer, GpuDevice, GpuError, GpuGraph, GpuResult,
    KernelArg, Launch, Linear,
};

fn call_error(call: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> GpuError {
    move |e| GpuError::Call {
        call,
        detail: format!("{e:?}"),
    }
}

fn blas_error(call: &'static str) -> impl FnOnce(cudarc::cublas::result::CublasError) -> GpuError {
    move |e| GpuError::Call {
        call,
        detail: format!("{e:?}"),
    }
}

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
    cudarc::driver::result::init().map_err(call_error("cuInit"))?;
    let n = cudarc::driver::result::device::get_count().map_err(call_error("cuDeviceGetCount"))?;
    Ok(n.max(0) as usize)
}

/// The CUDA driver's API version, e.g. 13000.
pub fn driver_version() -> GpuResult<i32> {
    require_libraries()?;
    let mut version = 0;
    // SAFETY: cuDriverGetVersion writes one int.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(call_error("cuDriverGetVersion"))?;
    Ok(version)
}

/// A cuBLAS handle, used under the device's mutex only.
struct BlasHandle(blas_sys::cublasHandle_t);
// SAFETY: the handle is only used while holding `CudaDevice::blas`'s mutex, on one stream.
unsafe impl Send for BlasHandle {}

/// A CUDA graph, replayed on the stream it was captured on.
struct Graph(CudaGraph);
// SAFETY: the graph executable is only launched by the backend that owns it, under its lock.
unsafe impl Send for Graph {}

impl GpuGraph for Graph {
    fn launch(&self) -> GpuResult<()> {
        self.0.launch().map_err(call_error("cuGraphLaunch"))
    }
}

/// One CUDA GPU with one stream.
pub struct CudaDevice {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    functions: HashMap<&'static str, CudaFunction>,
    blas: Mutex<BlasHandle>,
    _blas_workspace: CudaSlice<u8>,
    lt: Mutex<lt::LtCache>,
    events: Mutex<Vec<CudaEvent>>,
    /// Pinned host memory that copies go through (pageable copies are several times slower).
    staging: Mutex<Option<PinnedHostSlice<u8>>>,
    info: DeviceInfo,
}

impl CudaDevice {
    /// Opens GPU `ordinal`, compiles the kernels for its architecture and sets up cuBLAS and
    /// cuBLASLt.
    pub fn new(ordinal: usize) -> GpuResult<Self> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(GpuError::NoDevice(format!(
                "CUDA device {ordinal} requested, {count} present"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(call_error("cuCtxCreate"))?;
        // Graph capture needs cudarc's per-buffer event tracking off (gpu-apis.md Part 2 §6).
        // SAFETY: called before any allocation. Each lane's work goes to its own stream; the
        // buffers lanes share (the weights) are written once, before any lane reads them.
        unsafe { ctx.disable_event_tracking() };
        let (major, minor) = ctx
            .compute_capability()
            .map_err(call_error("cuDeviceGetAttribute"))?;
        let arch = format!("sm_{major}{minor}");
        let module = nvrtc::compile_module(&ctx, &arch)?;
        let functions = super::kernels::cuda_kernel_names(major as u32 * 10 + minor as u32)
            .into_iter()
            .map(|name| {
                let f = module
                    .load_function(name)
                    .map_err(call_error("cuModuleGetFunction"))?;
                Ok((name, f))
            })
            .collect::<GpuResult<HashMap<_, _>>>()?;
        let info = DeviceInfo {
            name: ctx.name().map_err(call_error("cuDeviceGetName"))?,
            arch,
            memory_bytes: ctx.total_mem().map_err(call_error("cuDeviceTotalMem"))?,
            multiprocessors: ctx
                .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .map_err(call_error("cuDeviceGetAttribute"))? as u32,
            warp_size: 32,
            runtime: format!("CUDA driver {}", driver_version()?),
        };
        Self::with_stream(ctx, functions, info)
    }

    /// The state of one stream on an opened GPU: the stream, cuBLAS and cuBLASLt handles bound
    /// to it with workspaces of their own, events and staging memory. The context and the
    /// kernels are shared with every other lane of the GPU.
    fn with_stream(
        ctx: Arc<CudaContext>,
        functions: HashMap<&'static str, CudaFunction>,
        info: DeviceInfo,
    ) -> GpuResult<Self> {
        let stream = ctx.new_stream().map_err(call_error("cuStreamCreate"))?;
        let handle = blas::create_handle().map_err(blas_error("cublasCreate"))?;
        // SAFETY: the handle was just created; the stream outlives it (both owned here).
        unsafe { blas::set_stream(handle, stream.cu_stream() as _) }
            .map_err(blas_error("cublasSetStream"))?;
        // A workspace of its own, so that cuBLAS allocates nothing inside captured graphs (it
        // otherwise adds memory alloc/free nodes to them). Zeroed once, as cuBLASLt's (lt.rs).
        let blas_workspace = stream
            .alloc_zeros::<u8>(BLAS_WORKSPACE_BYTES)
            .map_err(call_error("cuMemAlloc"))?;
        // SAFETY: the workspace outlives the handle (both owned by the device; the handle is
        // destroyed first, in `drop`).
        unsafe {
            blas_sys::cublasSetWorkspace_v2(
                handle,
                blas_workspace.device_ptr(&stream).0 as *mut _,
                BLAS_WORKSPACE_BYTES,
            )
        }
        .result()
        .map_err(blas_error("cublasSetWorkspace"))?;
        let lt = lt::LtCache::new(&stream)?;
        Ok(Self {
            ctx,
            stream,
            functions,
            blas: Mutex::new(BlasHandle(handle)),
            _blas_workspace: blas_workspace,
            lt: Mutex::new(lt),
            events: Mutex::new(Vec::new()),
            staging: Mutex::new(None),
            info,
        })
    }

    /// Runs a column-major fp16 GEMM with cuBLAS (`GemmEx`, or `GemmStridedBatchedEx` for
    /// batches).
    fn blas_gemm(&self, g: &ColumnMajorGemm) -> GpuResult<()> {
        let handle = self.blas.lock().unwrap_or_else(|e| e.into_inner());
        let beta = 0.0f32;
        let op = |t: bool| {
            if t {
                blas_sys::cublasOperation_t::CUBLAS_OP_T
            } else {
                blas_sys::cublasOperation_t::CUBLAS_OP_N
            }
        };
        let f16 = blas_sys::cudaDataType_t::CUDA_R_16F;
        let compute = blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F;
        let algo = blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT;
        let (alpha, beta) = (
            (&g.alpha as *const f32).cast(),
            (&beta as *const f32).cast(),
        );
        let (m, n, k) = (g.m as i32, g.n as i32, g.k as i32);
        let (op_a, op_b) = (op(g.transpose_a), op(g.transpose_b));
        if g.batch == 1 {
            // SAFETY: the addresses are device buffers the caller sized for these shapes.
            return unsafe {
                blas::gemm_ex(
                    handle.0,
                    op_a,
                    op_b,
                    m,
                    n,
                    k,
                    alpha,
                    g.a as *const _,
                    f16,
                    g.lda as i32,
                    g.b as *const _,
                    f16,
                    g.ldb as i32,
                    beta,
                    g.c as *mut _,
                    f16,
                    g.ldc as i32,
                    compute,
                    algo,
                )
            }
            .map_err(blas_error("cublasGemmEx"));
        }
        // SAFETY: as above, for every batch entry at its stride.
        unsafe {
            blas::gemm_strided_batched_ex(
                handle.0,
                op_a,
                op_b,
                m,
                n,
                k,
                alpha,
                g.a as *const _,
                f16,
                g.lda as i32,
                g.stride_a as i64,
                g.b as *const _,
                f16,
                g.ldb as i32,
                g.stride_b as i64,
                beta,
                g.c as *mut _,
                f16,
                g.ldc as i32,
                g.stride_c as i64,
                g.batch as i32,
                compute,
                algo,
            )
        }
        .map_err(blas_error("cublasGemmStridedBatchedEx"))
    }
}

/// cuBLAS' workspace (NVIDIA recommends 32 MiB on Hopper).
const BLAS_WORKSPACE_BYTES: usize = 32 << 20;

/// Copies smaller than this go straight from pageable memory.
const STAGING_THRESHOLD: usize = 64 << 10;
/// Downloads come back in pieces of this size (a multiple of 4, so f32 results split evenly).
const DOWNLOAD_PIECE: usize = 1 << 20;

impl CudaDevice {
    /// The pinned staging buffer, grown to at least `bytes`.
    fn staging(
        &self,
        bytes: usize,
    ) -> GpuResult<std::sync::MutexGuard<'_, Option<PinnedHostSlice<u8>>>> {
        let mut staging = self.staging.lock().unwrap_or_else(|e| e.into_inner());
        if staging.as_ref().is_none_or(|s| s.len() < bytes) {
            *staging = None;
            // SAFETY: plain (not write-combined) pinned memory, read and written by the host
            // only between synchronised copies.
            let pinned = unsafe {
                self.ctx
                    .alloc_pinned_with_flags::<u8>(bytes.next_power_of_two(), 0)
            }
            .map_err(call_error("cuMemHostAlloc"))?;
            *staging = Some(pinned);
        }
        Ok(staging)
    }
}

impl GpuDevice for CudaDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&self, bytes: usize) -> GpuResult<GpuBuffer> {
        // SAFETY: uninitialised device memory; callers write before they read.
        let slice: CudaSlice<u8> =
            unsafe { self.stream.alloc::<u8>(bytes.max(1)) }.map_err(call_error("cuMemAlloc"))?;
        let ptr = slice.device_ptr(&self.stream).0;
        Ok(GpuBuffer::new(ptr, bytes, Box::new(slice)))
    }

    fn upload_with(
        &self,
        dst: u64,
        bytes: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> GpuResult<()> {
        // Each call of the backend starts with an upload, maybe on a thread that has not used
        // the GPU yet: the raw driver calls below and after need the context current.
        self.ctx
            .bind_to_thread()
            .map_err(call_error("cuCtxSetCurrent"))?;
        if bytes < STAGING_THRESHOLD {
            let mut src = vec![0u8; bytes];
            fill(&mut src);
            // SAFETY: dst is a device buffer of at least `bytes` bytes (checked by callers);
            // the driver copies pageable sources before returning.
            return unsafe {
                cudarc::driver::result::memcpy_htod_async(dst, &src, self.stream.cu_stream())
            }
            .map_err(call_error("cuMemcpyHtoDAsync"));
        }
        let mut staging = self.staging(bytes)?;
        let pinned = &mut staging
            .as_mut()
            .expect("staging sized above")
            .as_mut_slice()
            .map_err(call_error("cuEventSynchronize"))?[..bytes];
        fill(pinned);
        // SAFETY: dst is a device buffer of at least `bytes` bytes; the staging memory is
        // not reused before the copy completes (we wait for it below).
        unsafe { cudarc::driver::result::memcpy_htod_async(dst, pinned, self.stream.cu_stream()) }
            .map_err(call_error("cuMemcpyHtoDAsync"))?;
        self.synchronize()
    }

    fn download_with(&self, src: u64, bytes: usize, read: &mut dyn FnMut(&[u8])) -> GpuResult<()> {
        self.ctx
            .bind_to_thread()
            .map_err(call_error("cuCtxSetCurrent"))?;
        let mut staging = self.staging(bytes)?;
        let pinned = &mut staging
            .as_mut()
            .expect("staging sized above")
            .as_mut_slice()
            .map_err(call_error("cuEventSynchronize"))?[..bytes];
        // In pieces, each followed by an event: the host reads one piece while the next ones
        // are still being copied (at batch 1024 the policy is 7.6 MB).
        let mut copied = Vec::new();
        for start in (0..bytes).step_by(DOWNLOAD_PIECE) {
            let end = (start + DOWNLOAD_PIECE).min(bytes);
            // SAFETY: src is a device buffer of at least `bytes` bytes; each piece of the
            // staging memory is read only after its event says the copy has landed.
            unsafe {
                cudarc::driver::result::memcpy_dtoh_async(
                    &mut pinned[start..end],
                    src + start as u64,
                    self.stream.cu_stream(),
                )
            }
            .map_err(call_error("cuMemcpyDtoHAsync"))?;
            let landed = self
                .stream
                .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
                .map_err(call_error("cuEventRecord"))?;
            copied.push((start..end, landed));
        }
        for (piece, landed) in copied {
            landed
                .synchronize()
                .map_err(call_error("cuEventSynchronize"))?;
            read(&pinned[piece]);
        }
        Ok(())
    }

    fn fill(&self, dst: u64, bytes: usize, value: u8) -> GpuResult<()> {
        // SAFETY: dst is a device buffer of at least `bytes` bytes.
        unsafe {
            cudarc::driver::result::memset_d8_async(dst, value, bytes, self.stream.cu_stream())
        }
        .map_err(call_error("cuMemsetD8Async"))
    }

    fn launch(&self, kernel: &str, launch: Launch, args: &[KernelArg]) -> GpuResult<()> {
        let f = self
            .functions
            .get(kernel)
            .ok_or_else(|| GpuError::UnknownKernel(kernel.to_owned()))?;
        let mut builder = self.stream.launch_builder(f);
        for arg in args {
            match arg {
                KernelArg::Ptr(p) => builder.arg(p),
                KernelArg::I32(v) => builder.arg(v),
                KernelArg::I64(v) => builder.arg(v),
                KernelArg::F32(v) => builder.arg(v),
            };
        }
        let cfg = LaunchConfig {
            grid_dim: (launch.grid[0], launch.grid[1], launch.grid[2]),
            block_dim: (launch.block[0], launch.block[1], launch.block[2]),
            shared_mem_bytes: launch.shared_bytes,
        };
        // SAFETY: the argument list matches the kernel's signature in hip/kernels.hip (the
        // executor is the only caller and is tested against the CPU).
        unsafe { builder.launch(cfg) }
            .map(|_| ())
            .map_err(call_error("cuLaunchKernel"))
    }

    fn memory(&self) -> GpuResult<(usize, usize)> {
        self.ctx
            .bind_to_thread()
            .map_err(call_error("cuCtxSetCurrent"))?;
        let (free, total) =
            cudarc::driver::result::mem_get_info().map_err(call_error("cuMemGetInfo"))?;
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
        )?))
    }

    fn linear(&self, path: GemmPath, op: &Linear) -> GpuResult<()> {
        let fused = match path {
            GemmPath::Lt => self.lt.lock().unwrap_or_else(|e| e.into_inner()).linear(
                &self.ctx,
                &self.stream,
                op,
            )?,
            GemmPath::Blas => {
                self.blas_gemm(&ColumnMajorGemm::from(op))?;
                Fused::Nothing
            }
        };
        gemm::finish_with_kernel(self, op, fused)
    }

    fn batched_product(&self, op: &BatchedProduct) -> GpuResult<()> {
        self.blas_gemm(&ColumnMajorGemm::from(op))
    }

    fn synchronize(&self) -> GpuResult<()> {
        self.stream
            .synchronize()
            .map_err(call_error("cuStreamSynchronize"))
    }

    fn begin_capture(&self) -> GpuResult<()> {
        self.stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(call_error("cuStreamBeginCapture"))
    }

    fn end_capture(&self) -> GpuResult<Box<dyn GpuGraph>> {
        let graph = self
            .stream
            .end_capture(CUgraphInstantiate_flags(0))
            .map_err(call_error("cuStreamEndCapture"))?
            .ok_or_else(|| GpuError::Call {
                call: "cuStreamEndCapture",
                detail: "nothing was captured".to_owned(),
            })?;
        graph.upload().map_err(call_error("cuGraphUpload"))?;
        Ok(Box::new(Graph(graph)))
    }

    fn record_event(&self) -> GpuResult<usize> {
        let event = self
            .ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(call_error("cuEventCreate"))?;
        let capturing = self
            .stream
            .capture_status()
            .map_err(call_error("cuStreamIsCapturing"))?
            != cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        if capturing {
            // An "external" record is a real timing point inside a capture (an event-record node
            // of the graph), not only a capture-internal dependency; the flag is invalid outside.
            let external =
                cudarc::driver::sys::CUevent_record_flags::CU_EVENT_RECORD_EXTERNAL as u32;
            // SAFETY: a valid event and stream of this context.
            unsafe {
                cudarc::driver::sys::cuEventRecordWithFlags(
                    event.cu_event(),
                    self.stream.cu_stream(),
                    external,
                )
            }
            .result()
            .map_err(call_error("cuEventRecordWithFlags"))?;
        } else {
            event
                .record(&self.stream)
                .map_err(call_error("cuEventRecord"))?;
        }
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        events.push(event);
        Ok(events.len() - 1)
    }

    fn elapsed_ms(&self, start: usize, end: usize) -> GpuResult<f32> {
        let events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let (a, b) = (&events[start], &events[end]);
        a.elapsed_ms(b).map_err(call_error("cuEventElapsedTime"))
    }

    fn clear_events(&self) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    fn can_trace(&self) -> bool {
        trace::available()
    }

    fn captured_work(&self) -> GpuResult<usize> {
        use cudarc::driver::sys as d;
        let mut status = d::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        let (mut id, mut graph) = (0u64, std::ptr::null_mut());
        let (mut deps, mut edges, mut count) = (std::ptr::null(), std::ptr::null(), 0usize);
        // SAFETY: a live stream; every out-pointer is valid for one value.
        unsafe {
            d::cuStreamGetCaptureInfo_v3(
                self.stream.cu_stream(),
                &mut status,
                &mut id,
                &mut graph,
                &mut deps,
                &mut edges,
                &mut count,
            )
        }
        .result()
        .map_err(call_error("cuStreamGetCaptureInfo"))?;
        if status != d::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE || graph.is_null() {
            return Err(GpuError::Call {
                call: "cuStreamGetCaptureInfo",
                detail: "the stream is not capturing".to_owned(),
            });
        }
        let mut count = 0usize;
        // SAFETY: the capture's graph, alive while the capture is; a null array asks for the count.
        unsafe { d::cuGraphGetNodes(graph, std::ptr::null_mut(), &mut count) }
            .result()
            .map_err(call_error("cuGraphGetNodes"))?;
        if count == 0 {
            return Ok(0);
        }
        let mut nodes = vec![std::ptr::null_mut(); count];
        // SAFETY: `nodes` has room for `count` handles.
        unsafe { d::cuGraphGetNodes(graph, nodes.as_mut_ptr(), &mut count) }
            .result()
            .map_err(call_error("cuGraphGetNodes"))?;
        // Only nodes that run work show up in the activity trace (not empty, event or wait nodes).
        let mut traced = 0;
        for &node in &nodes[..count] {
            let mut kind = d::CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
            // SAFETY: a node of the live capture graph.
            unsafe { d::cuGraphNodeGetType(node, &mut kind) }
                .result()
                .map_err(call_error("cuGraphNodeGetType"))?;
            use d::CUgraphNodeType as T;
            if matches!(
                kind,
                T::CU_GRAPH_NODE_TYPE_KERNEL
                    | T::CU_GRAPH_NODE_TYPE_MEMCPY
                    | T::CU_GRAPH_NODE_TYPE_MEMSET
            ) {
                traced += 1;
            } else {
                tracing::trace!(?kind, "captured node without traced work");
            }
        }
        Ok(traced)
    }

    fn trace(&self, work: &mut dyn FnMut() -> GpuResult<()>) -> GpuResult<Vec<super::Activity>> {
        trace::trace(work, &|| self.synchronize())
    }
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        let handle = self.blas.get_mut().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the handle was created in `new` and is not used after this.
        let _ = unsafe { blas::destroy_handle(handle.0) };
    }
}
