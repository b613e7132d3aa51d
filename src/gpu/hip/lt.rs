//! hipBLASLt with cached plans, as the CUDA side does with cuBLASLt: per GEMM shape one matmul
//! descriptor, three layouts and an algorithm chosen once by timing the heuristic's top
//! candidates. Epilogues are tried from the most fused down (bias+SiLU from hipBLASLt 1.0, bias+ReLU,
//! bias alone): an epilogue without kernels for this GPU shows as a heuristic with no algorithm,
//! and what the library cannot fuse is left to the caller's kernel (the returned [`Fused`]).

use std::collections::HashMap;
use std::sync::Arc;

use hip_sys::Hip;
use hip_sys::safe::{DeviceMemory, Event, Stream};
use hipblaslt_sys::result::{self as lt, HipblasLtError, Matmul};
use hipblaslt_sys::safe::{Desc, Handle, Layout};
use hipblaslt_sys::{
    COMPUTE_32F, DESC_BIAS_DATA_TYPE, DESC_BIAS_POINTER, DESC_EPILOGUE, DESC_TRANSA, DESC_TRANSB,
    EPILOGUE_BIAS, EPILOGUE_DEFAULT, EPILOGUE_RELU, EPILOGUE_RELU_BIAS, EPILOGUE_SWISH_BIAS_EXT,
    EPILOGUE_SWISH_EXT, HIP_R_16F, HIP_R_32F, HipblasLt, MatmulAlgo, OP_N, OP_T,
};

use super::hip_error;
use crate::gpu::gemm::{ColumnMajorGemm, Fused, MatrixLayout};
use crate::gpu::{Epilogue, GpuError, GpuResult, Linear};

/// hipBLASLt's workspace (the size hipBLASLt's samples use; gpu-apis.md §4.6).
pub const WORKSPACE_BYTES: usize = 32 << 20;
/// How many of the heuristic's candidates are timed.
const CANDIDATES: usize = 8;
/// Timed runs per candidate (after one warm-up).
const TIMED_RUNS: usize = 3;

fn lt_error(e: HipblasLtError) -> GpuError {
    GpuError::Call {
        call: e.call,
        detail: e.to_string(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct PlanKey {
    layouts: [MatrixLayout; 3],
    bias: bool,
    epilogue: Epilogue,
}

struct Plan {
    desc: Desc,
    layouts: [Layout; 3],
    algo: MatmulAlgo,
    fused: Fused,
}

/// The epilogues to try for a layer, most fused first, with what each leaves to the kernel.
pub(crate) fn epilogue_choices(bias: bool, epilogue: Epilogue, swish: bool) -> Vec<(u32, Fused)> {
    let complete = match (epilogue, bias) {
        (Epilogue::None, true) => Some(EPILOGUE_BIAS),
        (Epilogue::None, false) => Some(EPILOGUE_DEFAULT),
        (Epilogue::Relu, true) => Some(EPILOGUE_RELU_BIAS),
        (Epilogue::Relu, false) => Some(EPILOGUE_RELU),
        (Epilogue::Silu, true) => swish.then_some(EPILOGUE_SWISH_BIAS_EXT),
        (Epilogue::Silu, false) => swish.then_some(EPILOGUE_SWISH_EXT),
    };
    let mut choices: Vec<(u32, Fused)> = complete
        .map(|e| (e, Fused::Everything))
        .into_iter()
        .collect();
    if bias && complete != Some(EPILOGUE_BIAS) {
        choices.push((EPILOGUE_BIAS, Fused::Bias));
    }
    if complete != Some(EPILOGUE_DEFAULT) {
        choices.push((EPILOGUE_DEFAULT, Fused::Nothing));
    }
    choices
}

/// The hipBLASLt handle, its workspace and the plans made so far.
pub struct LtCache {
    /// Dropped first: descriptors and layouts before the handle and the workspace.
    plans: HashMap<PlanKey, Plan>,
    handle: Handle,
    workspace: DeviceMemory,
    /// Whether this hipBLASLt has the SWISH epilogues (1.0+: ROCm 7, Debian beside HIP 6.4).
    swish: bool,
    hip: Arc<Hip>,
}

impl LtCache {
    /// A handle and workspace on the current device, once hipBLASLt's own version (whatever
    /// soname it came under) is one lc0rs reads.
    pub fn new(hip: &Arc<Hip>, lib: &Arc<HipblasLt>) -> GpuResult<Self> {
        let handle = Handle::new(lib).map_err(lt_error)?;
        let version = handle.version().map_err(lt_error)?;
        hipblaslt_sys::check_version(version)
            .map_err(|why| GpuError::Unsupported(format!("{}: {why}", lib.library.display())))?;
        Ok(Self {
            hip: hip.clone(),
            handle,
            workspace: DeviceMemory::alloc(hip, WORKSPACE_BYTES).map_err(hip_error)?,
            swish: hipblaslt_sys::has_swish_bias_epilogue(version),
            plans: HashMap::new(),
        })
    }

    /// `Y = X·Wᵀ (+ bias)` in fp16 with fp32 accumulation on `stream`, with as much of the
    /// epilogue as hipBLASLt does here.
    pub fn linear(&mut self, stream: &Stream, op: &Linear) -> GpuResult<Fused> {
        let gemm = ColumnMajorGemm::from(op);
        let key = PlanKey {
            layouts: gemm.layouts(),
            bias: op.bias.is_some(),
            epilogue: op.epilogue,
        };
        if !self.plans.contains_key(&key) {
            let plan = self.make_plan(stream, key, op)?;
            self.plans.insert(key, plan);
        }
        let plan = &self.plans[&key];
        self.run(plan, stream, op)?;
        Ok(plan.fused)
    }

    fn run(&self, plan: &Plan, stream: &Stream, op: &Linear) -> GpuResult<()> {
        if let Some(bias) = op.bias {
            // SAFETY: BIAS_POINTER takes a device pointer; the bias outlives the call.
            unsafe { plan.desc.set(DESC_BIAS_POINTER, bias) }.map_err(lt_error)?;
        }
        let [w, x, y] = &plan.layouts;
        let matmul = Matmul {
            desc: plan.desc.raw(),
            a: (op.w, w.raw()),
            b: (op.x, x.raw()),
            d: (op.y, y.raw()),
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
                &plan.algo,
                stream.handle(),
            )
        }
        .map_err(lt_error)
    }

    fn make_plan(&self, stream: &Stream, key: PlanKey, op: &Linear) -> GpuResult<Plan> {
        let lib = &self.handle.lib;
        let desc = Desc::new(lib, COMPUTE_32F, HIP_R_32F).map_err(lt_error)?;
        // SAFETY: each value has its attribute's C type (gpu-apis.md §4.4).
        unsafe {
            desc.set(DESC_TRANSA, OP_T).map_err(lt_error)?;
            desc.set(DESC_TRANSB, OP_N).map_err(lt_error)?;
            if key.bias {
                desc.set(DESC_BIAS_DATA_TYPE, HIP_R_16F).map_err(lt_error)?;
            }
        }
        let layout = |l: MatrixLayout| Layout::new(lib, HIP_R_16F, l.rows, l.cols, l.ld);
        let [w, x, y] = key.layouts;
        let layouts = [
            layout(w).map_err(lt_error)?,
            layout(x).map_err(lt_error)?,
            layout(y).map_err(lt_error)?,
        ];
        for (epilogue, fused) in epilogue_choices(key.bias, key.epilogue, self.swish) {
            // SAFETY: EPILOGUE is a uint32.
            unsafe { desc.set(DESC_EPILOGUE, epilogue) }.map_err(lt_error)?;
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
            }
            .map_err(lt_error)?;
            if candidates.is_empty() {
                tracing::debug!(
                    epilogue,
                    m = op.m,
                    n = op.n,
                    k = op.k,
                    "hipBLASLt has no algorithm for this epilogue; trying a plainer one"
                );
                continue;
            }
            let algos: Vec<MatmulAlgo> = candidates.iter().map(|c| c.algo).collect();
            let mut plan = Plan {
                desc,
                layouts,
                algo: algos[0],
                fused,
            };
            if algos.len() > 1 && !stream.is_capturing().map_err(hip_error)? {
                plan.algo = self.fastest(stream, &mut plan, &algos, op)?;
            }
            return Ok(plan);
        }
        Err(GpuError::Unsupported(format!(
            "hipBLASLt has no algorithm for a {}×{}×{} fp16 GEMM on this GPU; use gemm=blas",
            op.m, op.n, op.k
        )))
    }

    /// Times each candidate on the real buffers (before any capture) and keeps the fastest.
    fn fastest(
        &self,
        stream: &Stream,
        plan: &mut Plan,
        candidates: &[MatmulAlgo],
        op: &Linear,
    ) -> GpuResult<MatmulAlgo> {
        let mut best = (f32::INFINITY, candidates[0]);
        for &algo in candidates {
            plan.algo = algo;
            if self.run(plan, stream, op).is_err() {
                continue;
            }
            let start = Event::new(&self.hip).map_err(hip_error)?;
            let end = Event::new(&self.hip).map_err(hip_error)?;
            start.record(stream).map_err(hip_error)?;
            for _ in 0..TIMED_RUNS {
                self.run(plan, stream, op)?;
            }
            end.record(stream).map_err(hip_error)?;
            let ms = start.elapsed_ms(&end).map_err(hip_error)?;
            if ms < best.0 {
                best = (ms, algo);
            }
        }
        Ok(best.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epilogues_are_tried_from_most_fused_to_plain() {
        use Epilogue::*;
        let (bias, plain) = (
            (EPILOGUE_BIAS, Fused::Bias),
            (EPILOGUE_DEFAULT, Fused::Nothing),
        );
        assert_eq!(
            epilogue_choices(true, Silu, true),
            [(EPILOGUE_SWISH_BIAS_EXT, Fused::Everything), bias, plain]
        );
        // Before hipBLASLt 1.0 there is no SiLU epilogue: bias in the GEMM, SiLU by kernel.
        assert_eq!(epilogue_choices(true, Silu, false), [bias, plain]);
        assert_eq!(
            epilogue_choices(false, Silu, true),
            [(EPILOGUE_SWISH_EXT, Fused::Everything), plain]
        );
        assert_eq!(
            epilogue_choices(false, Relu, false),
            [(EPILOGUE_RELU, Fused::Everything), plain]
        );
        assert_eq!(
            epilogue_choices(true, None, true),
            [(EPILOGUE_BIAS, Fused::Everything), plain]
        );
        assert_eq!(
            epilogue_choices(false, None, true),
            [(EPILOGUE_DEFAULT, Fused::Everything)]
        );
    }
}
