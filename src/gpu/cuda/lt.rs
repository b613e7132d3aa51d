//! cuBLASLt calls for the shared Lt plan logic (`crate::gpu::lt_plan`): per GEMM shape one
//! matmul descriptor, three layouts and the fastest of the heuristic's candidates. The bias
//! pointer is set on the cached descriptor before each call. cuBLASLt has no SiLU epilogue:
//! that activation is left to our kernel.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys;
use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr};

use super::owned::{LtHandle, MatmulDesc, MatmulPreference, MatrixLayout};
use crate::gpu::gemm::Fused;
use crate::gpu::lt_plan::{
    self, CANDIDATES, LtEpilogue, PlanKey, Stopwatch, WORKSPACE_BYTES, first_plan,
};
use crate::gpu::{GpuResult, Linear, library_error};

/// One GEMM shape's plan.
type Plan = lt_plan::Plan<MatmulDesc, MatrixLayout, sys::cublasLtMatmulAlgo_t>;

/// cuBLASLt on one stream, with its workspace and the plans made so far.
pub struct LtCache {
    /// Dropped first: descriptors and layouts before the handle and the workspace.
    plans: HashMap<PlanKey, Plan>,
    library: Library,
}

/// The handle, its workspace and the stream it runs on.
struct Library {
    handle: LtHandle,
    /// Owns the memory `workspace_address` points at.
    _workspace: CudaSlice<u8>,
    workspace_address: u64,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// Time the heuristic's candidates on the real buffers (`gemm_timing`), or take its first.
    time_candidates: bool,
    /// Bytes overwritten before each timed run so that the run reads its weights from DRAM as
    /// in a pass (see [`Stopwatch::evict_cache`]): twice the L2 cache.
    flush_bytes: usize,
    /// The buffer for that, held only while a plan is being timed.
    cache_flush: Mutex<Option<CudaSlice<u8>>>,
}

impl LtCache {
    pub fn new(
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        time_candidates: bool,
    ) -> GpuResult<Self> {
        // Zeroed once: cuBLASLt's split-K kernels write partial sums here and its reduction
        // kernel reads them, and compute-sanitizer's initcheck sees neither library write, so
        // uninitialised scratch would make every split-K GEMM a false report.
        let workspace = stream
            .alloc_zeros::<u8>(WORKSPACE_BYTES)
            .map_err(library_error("CUDA driver", "cuMemAlloc"))?;
        let workspace_address = workspace.device_ptr(stream).0;
        let l2 = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
            .map_err(library_error("CUDA driver", "cuDeviceGetAttribute"))?;
        let flush_bytes = 2 * usize::try_from(l2).unwrap_or(0).max(1 << 20);
        Ok(Self {
            plans: HashMap::new(),
            library: Library {
                handle: LtHandle::new()?,
                _workspace: workspace,
                workspace_address,
                ctx: ctx.clone(),
                stream: stream.clone(),
                time_candidates,
                flush_bytes,
                cache_flush: Mutex::new(None),
            },
        })
    }

    /// `Y = X·Wᵀ (+ bias)` in fp16 with fp32 accumulation, with as much of the epilogue as
    /// cuBLASLt does (the returned [`Fused`]).
    pub fn linear(&mut self, op: &Linear) -> GpuResult<Fused> {
        let library = &self.library;
        let plan = lt_plan::cached(&mut self.plans, PlanKey::of(op), || library.make_plan(op))?;
        library.matmul(&plan.desc, &plan.layouts, plan.algo, op)?;
        Ok(plan.fused)
    }
}

/// cuBLASLt's code for an epilogue (it has no SiLU ones).
fn epilogue_code(epilogue: LtEpilogue) -> Option<sys::cublasLtEpilogue_t> {
    use sys::cublasLtEpilogue_t as E;
    match epilogue {
        LtEpilogue::Default => Some(E::CUBLASLT_EPILOGUE_DEFAULT),
        LtEpilogue::Relu => Some(E::CUBLASLT_EPILOGUE_RELU),
        LtEpilogue::Bias => Some(E::CUBLASLT_EPILOGUE_BIAS),
        LtEpilogue::ReluBias => Some(E::CUBLASLT_EPILOGUE_RELU_BIAS),
        LtEpilogue::Swish | LtEpilogue::SwishBias => None,
    }
}

impl Library {
    /// Runs `op` with a descriptor, layouts and algorithm (the bias pointer set first).
    fn matmul(
        &self,
        desc: &MatmulDesc,
        layouts: &[MatrixLayout; 3],
        algo: sys::cublasLtMatmulAlgo_t,
        op: &Linear,
    ) -> GpuResult<()> {
        use sys::cublasLtMatmulDescAttributes_t as A;
        if let Some(bias) = op.bias {
            // SAFETY: BIAS_POINTER takes a device pointer; the bias outlives the call.
            unsafe { desc.set(A::CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias.raw()) }?;
        }
        let (alpha, beta) = (1.0f32, 0.0f32);
        let [w, x, y] = layouts;
        // SAFETY: device pointers and layouts describe buffers the caller sized for this op;
        // the handle, descriptor, workspace and stream are live.
        unsafe {
            lt::matmul(
                self.handle.raw(),
                desc.raw(),
                (&alpha as *const f32).cast(),
                (&beta as *const f32).cast(),
                op.w.raw() as *const c_void,
                w.raw(),
                op.x.raw() as *const c_void,
                x.raw(),
                op.y.raw() as *const c_void,
                y.raw(),
                op.y.raw() as *mut c_void,
                y.raw(),
                &algo,
                self.workspace_address as *mut c_void,
                WORKSPACE_BYTES,
                self.stream.cu_stream() as _,
            )
        }
        .map_err(library_error("cuBLASLt", "cublasLtMatmul"))
    }

    /// The plan for `op`'s shape; the eviction buffer its timing used is freed afterwards.
    fn make_plan(&self, op: &Linear) -> GpuResult<Plan> {
        let plan = self.search_plan(op);
        *self.cache_flush.lock().unwrap_or_else(|e| e.into_inner()) = None;
        plan
    }

    fn search_plan(&self, op: &Linear) -> GpuResult<Plan> {
        use sys::cublasLtMatmulDescAttributes_t as A;
        let key = PlanKey::of(op);
        first_plan("cuBLASLt", op, false, |epilogue, fused| {
            let Some(code) = epilogue_code(epilogue) else {
                return Ok(None);
            };
            let desc = MatmulDesc::new()?;
            let transpose = cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_T as i32;
            // SAFETY: each value has its attribute's C type (int32 for TRANSA and the bias
            // data type, uint32 for the epilogue).
            unsafe {
                desc.set(A::CUBLASLT_MATMUL_DESC_TRANSA, transpose)?;
                desc.set(A::CUBLASLT_MATMUL_DESC_EPILOGUE, code as u32)?;
                if key.bias {
                    let f16 = sys::cudaDataType_t::CUDA_R_16F as i32;
                    desc.set(A::CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, f16)?;
                }
            }
            let [w, x, y] = key.layouts;
            let layouts = [
                MatrixLayout::half(w)?,
                MatrixLayout::half(x)?,
                MatrixLayout::half(y)?,
            ];
            let candidates = self.heuristics(&desc, &layouts)?;
            lt_plan::plan_with(
                (desc, layouts, fused),
                &candidates,
                self.time_candidates && !super::capture::is_capturing(&self.stream)?,
                self,
                |desc, layouts, algo| self.matmul(desc, layouts, algo, op),
            )
        })
    }

    /// The heuristic's best [`CANDIDATES`] algorithms for a descriptor and layouts.
    fn heuristics(
        &self,
        desc: &MatmulDesc,
        layouts: &[MatrixLayout; 3],
    ) -> GpuResult<Vec<sys::cublasLtMatmulAlgo_t>> {
        let pref = MatmulPreference::with_workspace(WORKSPACE_BYTES as u64)?;
        let [w, x, y] = layouts;
        let mut results: Vec<sys::cublasLtMatmulHeuristicResult_t> = Vec::with_capacity(CANDIDATES);
        let mut count = 0i32;
        // SAFETY: live handle, descriptor, layouts and preference; `results` has room for
        // CANDIDATES entries, of which cuBLASLt writes `count`.
        unsafe {
            sys::cublasLtMatmulAlgoGetHeuristic(
                self.handle.raw(),
                desc.raw(),
                w.raw(),
                x.raw(),
                y.raw(),
                y.raw(),
                pref.raw(),
                CANDIDATES as i32,
                results.as_mut_ptr(),
                &mut count,
            )
            .result()
            .map_err(library_error("cuBLASLt", "cublasLtMatmulAlgoGetHeuristic"))?;
            results.set_len(count.clamp(0, CANDIDATES as i32) as usize);
        }
        Ok(results
            .iter()
            .filter(|r| r.state == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS)
            .map(|r| r.algo)
            .collect())
    }
}

impl Stopwatch for Library {
    type Mark = CudaEvent;

    fn mark(&self) -> GpuResult<CudaEvent> {
        let event = self
            .ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(library_error("CUDA driver", "cuEventCreate"))?;
        event
            .record(&self.stream)
            .map_err(library_error("CUDA driver", "cuEventRecord"))?;
        Ok(event)
    }

    fn elapsed_ms(&self, start: &CudaEvent, end: &CudaEvent) -> GpuResult<f32> {
        start
            .elapsed_ms(end)
            .map_err(library_error("CUDA driver", "cuEventElapsedTime"))
    }

    fn evict_cache(&self) -> GpuResult<()> {
        let mut flush = self.cache_flush.lock().unwrap_or_else(|e| e.into_inner());
        match flush.as_mut() {
            Some(buffer) => self
                .stream
                .memset_zeros(buffer)
                .map_err(library_error("CUDA driver", "cuMemsetD8Async")),
            None => {
                // A new buffer is zeroed by a memset too: that is the eviction.
                let buffer = self
                    .stream
                    .alloc_zeros::<u8>(self.flush_bytes)
                    .map_err(library_error("CUDA driver", "cuMemAlloc"))?;
                *flush = Some(buffer);
                Ok(())
            }
        }
    }
}
