//! cuBLASLt with cached plans: per GEMM shape one matmul descriptor, three layouts and an
//! algorithm chosen once by timing the heuristic's top candidates. The bias epilogue carries
//! the layer's bias; the bias pointer is set on the cached descriptor before each call. cuBLASLt
//! has no SiLU epilogue: that activation is left to the caller's kernel.

use std::collections::HashMap;
use std::ffi::c_void;
use std::mem::size_of;
use std::sync::Arc;

use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys;
use cudarc::driver::sys::{CUevent_flags, CUstreamCaptureStatus};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};

use crate::gpu::gemm::{ColumnMajorGemm, Fused};
use crate::gpu::{Epilogue, GpuError, GpuResult, Linear};

/// cuBLASLt's workspace on Hopper-class GPUs (cudarc uses the same).
const WORKSPACE_BYTES: usize = 32 << 20;
/// How many of the heuristic's candidates are timed.
const CANDIDATES: usize = 8;
/// Timed runs per candidate (after one warm-up).
const TIMED_RUNS: usize = 3;

fn lt_error(call: &'static str) -> impl FnOnce(lt::CublasError) -> GpuError {
    move |e| GpuError::Call {
        call,
        detail: format!("{e:?}"),
    }
}

fn driver_error(call: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> GpuError {
    move |e| GpuError::Call {
        call,
        detail: format!("{e:?}"),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct PlanKey {
    m: usize,
    n: usize,
    k: usize,
    ldx: usize,
    ldy: usize,
    bias: bool,
    epilogue: Epilogue,
}

struct Plan {
    desc: sys::cublasLtMatmulDesc_t,
    w_layout: sys::cublasLtMatrixLayout_t,
    x_layout: sys::cublasLtMatrixLayout_t,
    y_layout: sys::cublasLtMatrixLayout_t,
    algo: sys::cublasLtMatmulAlgo_t,
    fused: Fused,
}

/// The cuBLASLt handle, its workspace and the plans made so far.
pub struct LtCache {
    handle: sys::cublasLtHandle_t,
    workspace: CudaSlice<u8>,
    workspace_ptr: u64,
    plans: HashMap<PlanKey, Plan>,
}

// SAFETY: used only under `CudaDevice::lt`'s mutex, on the device's one stream.
unsafe impl Send for LtCache {}

impl LtCache {
    pub fn new(stream: &Arc<CudaStream>) -> GpuResult<Self> {
        let handle = lt::create_handle().map_err(lt_error("cublasLtCreate"))?;
        // Zeroed once: cuBLASLt's split-K kernels write partial sums here and its reduction
        // kernel reads them, and compute-sanitizer's initcheck sees neither library write, so
        // uninitialised scratch would make every split-K GEMM a false report.
        let workspace = stream
            .alloc_zeros::<u8>(WORKSPACE_BYTES)
            .map_err(driver_error("cuMemAlloc"))?;
        let workspace_ptr = workspace.device_ptr(stream).0;
        Ok(Self {
            handle,
            workspace,
            workspace_ptr,
            plans: HashMap::new(),
        })
    }

    /// `Y = X·Wᵀ (+ bias)` in fp16 with fp32 accumulation, with as much of the epilogue as
    /// cuBLASLt does (the returned [`Fused`]).
    pub fn linear(
        &mut self,
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        op: &Linear,
    ) -> GpuResult<Fused> {
        let key = PlanKey {
            m: op.m,
            n: op.n,
            k: op.k,
            ldx: op.ldx,
            ldy: op.ldy,
            bias: op.bias.is_some(),
            epilogue: op.epilogue,
        };
        if !self.plans.contains_key(&key) {
            let plan = self.make_plan(ctx, stream, key, op)?;
            self.plans.insert(key, plan);
        }
        let plan = &self.plans[&key];
        self.run(plan, stream, op)?;
        Ok(plan.fused)
    }

    fn run(&self, plan: &Plan, stream: &Arc<CudaStream>, op: &Linear) -> GpuResult<()> {
        if let Some(bias) = op.bias {
            // SAFETY: sets a pointer-valued attribute on a descriptor we own.
            unsafe {
                lt::set_matmul_desc_attribute(
                    plan.desc,
                    sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                    (&bias as *const u64).cast(),
                    size_of::<u64>(),
                )
            }
            .map_err(lt_error("cublasLtMatmulDescSetAttribute(BIAS_POINTER)"))?;
        }
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: device pointers and layouts describe buffers the caller sized for this op.
        unsafe {
            lt::matmul(
                self.handle,
                plan.desc,
                (&alpha as *const f32).cast(),
                (&beta as *const f32).cast(),
                op.w as *const c_void,
                plan.w_layout,
                op.x as *const c_void,
                plan.x_layout,
                op.y as *const c_void,
                plan.y_layout,
                op.y as *mut c_void,
                plan.y_layout,
                &plan.algo,
                self.workspace_ptr as *mut c_void,
                WORKSPACE_BYTES,
                stream.cu_stream() as _,
            )
        }
        .map_err(lt_error("cublasLtMatmul"))
    }

    fn make_plan(
        &self,
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        key: PlanKey,
        op: &Linear,
    ) -> GpuResult<Plan> {
        let f16 = sys::cudaDataType_t::CUDA_R_16F;
        let desc = lt::create_matmul_desc(
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            sys::cudaDataType_t::CUDA_R_32F,
        )
        .map_err(lt_error("cublasLtMatmulDescCreate"))?;
        let set = |attr, value: *const c_void, size| {
            // SAFETY: `value` points at `size` bytes of the attribute's type.
            unsafe { lt::set_matmul_desc_attribute(desc, attr, value, size) }
                .map_err(lt_error("cublasLtMatmulDescSetAttribute"))
        };
        let transpose = cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_T as i32;
        set(
            sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
            (&transpose as *const i32).cast(),
            size_of::<i32>(),
        )?;
        use sys::cublasLtEpilogue_t as E;
        let (epilogue, fused) = match (key.bias, key.epilogue) {
            (false, Epilogue::None) => (E::CUBLASLT_EPILOGUE_DEFAULT, Fused::Everything),
            (false, Epilogue::Relu) => (E::CUBLASLT_EPILOGUE_RELU, Fused::Everything),
            (false, Epilogue::Silu) => (E::CUBLASLT_EPILOGUE_DEFAULT, Fused::Nothing),
            (true, Epilogue::None) => (E::CUBLASLT_EPILOGUE_BIAS, Fused::Everything),
            (true, Epilogue::Relu) => (E::CUBLASLT_EPILOGUE_RELU_BIAS, Fused::Everything),
            (true, Epilogue::Silu) => (E::CUBLASLT_EPILOGUE_BIAS, Fused::Bias),
        };
        let epilogue = epilogue as u32;
        set(
            sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_EPILOGUE,
            (&epilogue as *const u32).cast(),
            size_of::<u32>(),
        )?;
        if key.bias {
            let bias_type = f16 as i32;
            set(
                sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                (&bias_type as *const i32).cast(),
                size_of::<i32>(),
            )?;
        }
        let layout = |l: crate::gpu::gemm::MatrixLayout| {
            lt::create_matrix_layout(f16, l.rows as u64, l.cols as u64, l.ld as i64)
                .map_err(lt_error("cublasLtMatrixLayoutCreate"))
        };
        let [w, x, y] = ColumnMajorGemm::from(op).layouts();
        let (w_layout, x_layout, y_layout) = (layout(w)?, layout(x)?, layout(y)?);
        let candidates = self.heuristics(desc, w_layout, x_layout, y_layout)?;
        let mut plan = Plan {
            desc,
            w_layout,
            x_layout,
            y_layout,
            algo: candidates[0],
            fused,
        };
        let capturing = stream
            .capture_status()
            .map_err(driver_error("cuStreamIsCapturing"))?
            != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        if candidates.len() > 1 && !capturing {
            plan.algo = self.fastest(ctx, stream, &mut plan, &candidates, op)?;
        }
        Ok(plan)
    }

    fn heuristics(
        &self,
        desc: sys::cublasLtMatmulDesc_t,
        w: sys::cublasLtMatrixLayout_t,
        x: sys::cublasLtMatrixLayout_t,
        y: sys::cublasLtMatrixLayout_t,
    ) -> GpuResult<Vec<sys::cublasLtMatmulAlgo_t>> {
        let pref = lt::create_matmul_pref().map_err(lt_error("cublasLtMatmulPreferenceCreate"))?;
        let workspace = WORKSPACE_BYTES as u64;
        let mut results: Vec<sys::cublasLtMatmulHeuristicResult_t> = Vec::with_capacity(CANDIDATES);
        let mut count = 0i32;
        // SAFETY: `results` has room for CANDIDATES entries; cuBLASLt writes `count` of them.
        let status = unsafe {
            lt::set_matmul_pref_attribute(
                pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&workspace as *const u64).cast(),
                size_of::<u64>(),
            )
            .map_err(lt_error("cublasLtMatmulPreferenceSetAttribute"))?;
            let status = sys::cublasLtMatmulAlgoGetHeuristic(
                self.handle,
                desc,
                w,
                x,
                y,
                y,
                pref,
                CANDIDATES as i32,
                results.as_mut_ptr(),
                &mut count,
            );
            results.set_len(count.max(0) as usize);
            let _ = lt::destroy_matmul_pref(pref);
            status
        };
        status
            .result()
            .map_err(lt_error("cublasLtMatmulAlgoGetHeuristic"))?;
        let algos: Vec<_> = results
            .iter()
            .filter(|r| r.state == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS)
            .map(|r| r.algo)
            .collect();
        if algos.is_empty() {
            return Err(GpuError::Unsupported(
                "cuBLASLt has no algorithm for this GEMM".to_owned(),
            ));
        }
        Ok(algos)
    }

    /// Times each candidate on the real buffers (before any capture) and keeps the fastest.
    fn fastest(
        &self,
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        plan: &mut Plan,
        candidates: &[sys::cublasLtMatmulAlgo_t],
        op: &Linear,
    ) -> GpuResult<sys::cublasLtMatmulAlgo_t> {
        let event = || {
            ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(driver_error("cuEventCreate"))
        };
        let mut best = (f32::INFINITY, candidates[0]);
        for &algo in candidates {
            plan.algo = algo;
            if self.run(plan, stream, op).is_err() {
                continue;
            }
            let (start, end) = (event()?, event()?);
            start
                .record(stream)
                .map_err(driver_error("cuEventRecord"))?;
            for _ in 0..TIMED_RUNS {
                self.run(plan, stream, op)?;
            }
            end.record(stream).map_err(driver_error("cuEventRecord"))?;
            let ms = start
                .elapsed_ms(&end)
                .map_err(driver_error("cuEventElapsedTime"))?;
            if ms < best.0 {
                best = (ms, algo);
            }
        }
        Ok(best.1)
    }
}

impl Drop for LtCache {
    fn drop(&mut self) {
        for plan in self.plans.values() {
            // SAFETY: each object was created by us and is destroyed once.
            unsafe {
                let _ = lt::destroy_matrix_layout(plan.w_layout);
                let _ = lt::destroy_matrix_layout(plan.x_layout);
                let _ = lt::destroy_matrix_layout(plan.y_layout);
                let _ = lt::destroy_matmul_desc(plan.desc);
            }
        }
        // SAFETY: the handle was created in `new`.
        let _ = unsafe { lt::destroy_handle(self.handle) };
        let _ = &self.workspace;
    }
}
