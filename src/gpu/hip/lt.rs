//! hipBLASLt calls for the shared Lt plan logic (`crate::gpu::lt_plan`): per GEMM shape one
//! matmul descriptor, three layouts and the fastest of the heuristic's candidates. An epilogue
//! without kernels for this GPU shows as a heuristic with no algorithm, and the next plainer
//! one is tried (bias+SiLU exists from hipBLASLt 1.0).

use std::collections::HashMap;
use std::sync::Arc;

use ::hip::Hip;
use ::hip::safe::{DeviceMemory, Event, Stream};
use ::hipblaslt::result::{self as lt, Matmul};
use ::hipblaslt::safe::{Desc, Handle, Layout};
use ::hipblaslt::{
    COMPUTE_32F, DESC_BIAS_DATA_TYPE, DESC_BIAS_POINTER, DESC_EPILOGUE, DESC_TRANSA, DESC_TRANSB,
    EPILOGUE_BIAS, EPILOGUE_DEFAULT, EPILOGUE_RELU, EPILOGUE_RELU_BIAS, EPILOGUE_SWISH_BIAS_EXT,
    EPILOGUE_SWISH_EXT, HIP_R_16F, HIP_R_32F, HipblasLt, MatmulAlgo, OP_N, OP_T,
};

use crate::gpu::gemm::Fused;
use crate::gpu::lt_plan::{
    self, CANDIDATES, LtEpilogue, PlanKey, Stopwatch, WORKSPACE_BYTES, first_plan,
};
use crate::gpu::{GpuError, GpuResult, Linear};

/// One GEMM shape's plan.
type Plan = lt_plan::Plan<Desc, Layout, MatmulAlgo>;

/// hipBLASLt's code for an epilogue.
pub(crate) fn epilogue_code(epilogue: LtEpilogue) -> u32 {
    match epilogue {
        LtEpilogue::Default => EPILOGUE_DEFAULT,
        LtEpilogue::Relu => EPILOGUE_RELU,
        LtEpilogue::Bias => EPILOGUE_BIAS,
        LtEpilogue::ReluBias => EPILOGUE_RELU_BIAS,
        LtEpilogue::Swish => EPILOGUE_SWISH_EXT,
        LtEpilogue::SwishBias => EPILOGUE_SWISH_BIAS_EXT,
    }
}

/// hipBLASLt on one stream, with its workspace and the plans made so far.
pub struct LtCache {
    /// Dropped first: descriptors and layouts before the handle and the workspace.
    plans: HashMap<PlanKey, Plan>,
    library: Library,
}

/// The handle, its workspace and the stream it runs on.
struct Library {
    handle: Handle,
    workspace: DeviceMemory,
    /// Whether this hipBLASLt has the SWISH epilogues (1.0+: ROCm 7, Debian beside HIP 6.4).
    swish: bool,
    stream: Arc<Stream>,
    hip: Arc<Hip>,
    /// Time the heuristic's candidates on the real buffers (`gemm_timing`), or take its first.
    time_candidates: bool,
}

impl LtCache {
    /// A handle and workspace on the current device for `stream`, once hipBLASLt's own version
    /// (whatever soname it came under) is one lc0rs reads.
    pub fn new(
        hip: &Arc<Hip>,
        lib: &Arc<HipblasLt>,
        stream: &Arc<Stream>,
        time_candidates: bool,
    ) -> GpuResult<Self> {
        let handle = Handle::new(lib)?;
        let version = handle.version()?;
        ::hipblaslt::check_version(version)
            .map_err(|why| GpuError::Unsupported(format!("{}: {why}", lib.library.display())))?;
        Ok(Self {
            plans: HashMap::new(),
            library: Library {
                handle,
                workspace: DeviceMemory::alloc(hip, WORKSPACE_BYTES)?,
                swish: ::hipblaslt::has_swish_bias_epilogue(version),
                stream: stream.clone(),
                hip: hip.clone(),
                time_candidates,
            },
        })
    }

    /// `Y = X·Wᵀ (+ bias)` in fp16 with fp32 accumulation, with as much of the epilogue as
    /// hipBLASLt does here (the returned [`Fused`]).
    pub fn linear(&mut self, op: &Linear) -> GpuResult<Fused> {
        let library = &self.library;
        let plan = lt_plan::cached(&mut self.plans, PlanKey::of(op), || library.make_plan(op))?;
        library.matmul(&plan.desc, &plan.layouts, &plan.algo, op)?;
        Ok(plan.fused)
    }
}

impl Library {
    /// Runs `op` with a descriptor, layouts and algorithm (the bias pointer set first).
    fn matmul(
        &self,
        desc: &Desc,
        layouts: &[Layout; 3],
        algo: &MatmulAlgo,
        op: &Linear,
    ) -> GpuResult<()> {
        if let Some(bias) = op.bias {
            // SAFETY: BIAS_POINTER takes a device pointer; the bias outlives the call.
            unsafe { desc.set(DESC_BIAS_POINTER, bias.raw()) }?;
        }
        let [w, x, y] = layouts;
        let matmul = Matmul {
            desc: desc.raw(),
            a: (op.w.raw(), w.raw()),
            b: (op.x.raw(), x.raw()),
            d: (op.y.raw(), y.raw()),
            alpha: 1.0,
            beta: 0.0,
            workspace: self.workspace.address(),
            workspace_bytes: WORKSPACE_BYTES,
        };
        // SAFETY: the layouts describe the caller's buffers for this op; the workspace and
        // stream are live.
        unsafe {
            lt::matmul(
                &self.handle.lib,
                self.handle.raw(),
                &matmul,
                algo,
                self.stream.handle(),
            )
        }?;
        Ok(())
    }

    fn make_plan(&self, op: &Linear) -> GpuResult<Plan> {
        let lib = &self.handle.lib;
        let key = PlanKey::of(op);
        first_plan("hipBLASLt", op, self.swish, |epilogue, fused| {
            let desc = Desc::new(lib, COMPUTE_32F, HIP_R_32F)?;
            // SAFETY: each value has its attribute's C type (TRANSA/TRANSB and the bias data
            // type are int32, EPILOGUE a uint32).
            unsafe {
                desc.set(DESC_TRANSA, OP_T)?;
                desc.set(DESC_TRANSB, OP_N)?;
                desc.set(DESC_EPILOGUE, epilogue_code(epilogue))?;
                if key.bias {
                    desc.set(DESC_BIAS_DATA_TYPE, HIP_R_16F)?;
                }
            }
            let layout = |l: crate::gpu::gemm::MatrixLayout| {
                Layout::new(lib, HIP_R_16F, l.rows, l.cols, l.ld)
            };
            let [w, x, y] = key.layouts;
            let layouts = [layout(w)?, layout(x)?, layout(y)?];
            let raw = [layouts[0].raw(), layouts[1].raw(), layouts[2].raw()];
            // SAFETY: live handle, descriptor and layouts.
            let candidates = unsafe {
                lt::algo_get_heuristic(
                    lib,
                    self.handle.raw(),
                    desc.raw(),
                    raw,
                    WORKSPACE_BYTES as u64,
                    CANDIDATES,
                )
            }?;
            let algos: Vec<MatmulAlgo> = candidates.iter().map(|c| c.algo).collect();
            lt_plan::plan_with(
                (desc, layouts, fused),
                &algos,
                self.time_candidates && !self.stream.is_capturing()?,
                self,
                |desc, layouts, algo| self.matmul(desc, layouts, &algo, op),
            )
        })
    }
}

impl Stopwatch for Library {
    type Mark = Event;

    fn mark(&self) -> GpuResult<Event> {
        let event = Event::new(&self.hip)?;
        event.record(&self.stream)?;
        Ok(event)
    }

    fn elapsed_ms(&self, start: &Event, end: &Event) -> GpuResult<f32> {
        Ok(start.elapsed_ms(end)?)
    }
}
