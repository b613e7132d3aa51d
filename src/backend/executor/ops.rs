//! Enqueues the operations of a pass on one lane's device: each named operation between the
//! profile's marks, and dense layers on the kernel the pass's plan picks (a library GEMM with
//! its epilogues, or our `dense_rows` / `dense_mma`).

use crate::gpu::kernels::{activation_code, launchers};
use crate::gpu::{DevicePtr, Epilogue, GemmPath, GpuDevice, GpuResult, Launch, Linear};
use crate::weights::format::Activation;

use super::dense::DenseGpu;
use super::marks::{Cost, OpEvent, OpEvents};
use super::plan::{DenseKernel, PassPlan};

/// Enqueues operations of a pass on one lane's device: dense layers and profile marks.
#[derive(Clone, Copy)]
pub struct Ops<'a> {
    pub device: &'a dyn GpuDevice,
    pub gemm: GemmPath,
    /// The pass's plan: which kernel each dense layer runs on, and whether the pass launches
    /// its kernels with programmatic dependent launch (set on the device for the pass; see
    /// [`Ops::launched_plainly`]).
    pub plan: &'a PassPlan,
    /// With `Some`, every operation is bracketed by marks.
    pub profile: Option<&'a OpEvents>,
}

impl Ops<'_> {
    /// Runs `work` with its kernels launched without programmatic dependent launch, so that
    /// they start once the kernel before them has finished, then restores the pass's setting.
    /// For a kernel of few, compute-heavy blocks: launched early, its blocks are placed on the
    /// multiprocessors the previous kernel still holds, several to one, and then run that many
    /// times slower (measured for the attention: docs/performance.md).
    pub fn launched_plainly<T>(&self, work: impl FnOnce() -> GpuResult<T>) -> GpuResult<T> {
        self.device.set_programmatic_launch(false);
        let result = work();
        self.device
            .set_programmatic_launch(self.plan.programmatic_launch);
        result
    }

    /// Runs one named operation, timed when profiling; a `tracing` span marks its enqueue.
    pub fn op(
        &self,
        op: &'static str,
        layer: Option<usize>,
        cost: Cost,
        work: impl FnOnce() -> GpuResult<()>,
    ) -> GpuResult<()> {
        let _span =
            tracing::trace_span!("gpu_op", op, layer, flops = cost.flops, bytes = cost.bytes)
                .entered();
        let Some(events) = self.profile else {
            return work();
        };
        let start = events.mark(self.device)?;
        work()?;
        let end = events.mark(self.device)?;
        events
            .ops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(OpEvent {
                op,
                layer,
                cost,
                start,
                end,
            });
        Ok(())
    }

    /// `y = x·Wᵀ (+ b)` for `rows` rows of `layer`.
    ///
    /// # Safety
    /// The [device-memory contract](crate::gpu#the-device-memory-contract) for `x` (`rows ×
    /// layer.inputs` halves) and `y` (`rows × layer.outputs`), on this lane's GPU; the layer's
    /// own buffers are sized by its shape.
    pub unsafe fn linear(
        &self,
        layer: &DenseGpu,
        x: DevicePtr,
        y: DevicePtr,
        rows: usize,
        bias: bool,
    ) -> GpuResult<()> {
        // SAFETY: the caller's promise.
        unsafe { self.linear_with(layer, x, y, rows, bias, Epilogue::None) }
    }

    /// [`Ops::linear`] followed by `epilogue`.
    ///
    /// # Safety
    /// As for [`Ops::linear`].
    pub unsafe fn linear_with(
        &self,
        layer: &DenseGpu,
        x: DevicePtr,
        y: DevicePtr,
        rows: usize,
        bias: bool,
        epilogue: Epilogue,
    ) -> GpuResult<()> {
        let act = match epilogue {
            Epilogue::None => Activation::Identity,
            Epilogue::Relu => Activation::Relu,
            Epilogue::Silu => Activation::Swish,
        };
        // SAFETY: the caller's promise for `x` and `y`; the layer's weights are its own.
        if unsafe { self.own_kernel(layer, x, y, rows, bias, act)? } {
            return Ok(());
        }
        let op = Linear {
            m: rows,
            n: layer.outputs,
            k: layer.inputs,
            x,
            ldx: layer.inputs,
            w: layer.w.ptr(),
            y,
            ldy: layer.outputs,
            bias: if bias { layer.bias() } else { None },
            epilogue,
        };
        // SAFETY: `x` holds `rows × k`, `y` `rows × n` (the caller's promise); `w` and the bias
        // are the layer's buffers of `n × k` and `n` halves.
        unsafe { self.device.linear(self.gemm, &op) }
    }

    /// `y = act(x·Wᵀ + b)`. ReLU and SiLU (and the bias) are GEMM epilogues, which the device
    /// fuses where its library can; other activations are a pass over `y` (with the bias on the
    /// BLAS path, which has no epilogue).
    ///
    /// # Safety
    /// As for [`Ops::linear`].
    pub unsafe fn dense_act(
        &self,
        layer: &DenseGpu,
        x: DevicePtr,
        y: DevicePtr,
        rows: usize,
        act: Activation,
    ) -> GpuResult<()> {
        // SAFETY: the caller's promise for `x` and `y` (`rows` rows of the layer's inputs and
        // outputs); the bias is the layer's `outputs` halves.
        unsafe {
            let epilogue = match act {
                Activation::Identity => Some(Epilogue::None),
                Activation::Relu => Some(Epilogue::Relu),
                Activation::Swish => Some(Epilogue::Silu),
                _ => None,
            };
            if let Some(epilogue) = epilogue {
                return self.linear_with(layer, x, y, rows, true, epilogue);
            }
            if self.own_kernel(layer, x, y, rows, true, act)? {
                return Ok(());
            }
            let fused_bias = self.gemm == GemmPath::Lt;
            self.linear(layer, x, y, rows, fused_bias)?;
            let bias = if fused_bias { None } else { layer.bias() };
            launchers::bias_activation(
                self.device,
                Launch::elements(rows * layer.outputs / 8),
                y,
                bias,
                rows as i64,
                layer.outputs as i32,
                activation_code(act),
            )
        }
    }

    /// `y = act(x·Wᵀ (+ b))` in one of our kernels where the plan picks one for the shape
    /// (`dense_rows`, `dense_mma`), bias and activation included. Returns whether one ran.
    ///
    /// # Safety
    /// As for [`Ops::linear`].
    unsafe fn own_kernel(
        &self,
        layer: &DenseGpu,
        x: DevicePtr,
        y: DevicePtr,
        rows: usize,
        bias: bool,
        act: Activation,
    ) -> GpuResult<bool> {
        // SAFETY: the caller's promise for `x` and `y`; `w` and the bias are the layer's
        // `outputs × inputs` and `outputs` halves.
        unsafe {
            let bias = if bias { layer.bias() } else { None };
            let (inputs, outputs) = (layer.inputs as i32, layer.outputs as i32);
            match self.plan.dense(rows, layer.inputs, layer.outputs) {
                DenseKernel::Rows { splits, launch } => launchers::dense_rows(
                    self.device,
                    launch,
                    x,
                    inputs,
                    layer.w.ptr(),
                    bias,
                    y,
                    outputs,
                    rows as i32,
                    outputs,
                    inputs,
                    activation_code(act),
                    splits as i32,
                )?,
                DenseKernel::Mma(kernel, launch) => launchers::dense_mma(
                    self.device,
                    kernel,
                    launch,
                    x,
                    layer.w.ptr(),
                    bias,
                    activation_code(act),
                    y,
                    rows as i32,
                    outputs,
                )?,
                DenseKernel::Library => return Ok(false),
            }
            Ok(true)
        }
    }
}

/// `(Q, D, M)` per position into `out` (`[batch][3]` f32) from the value head's output (3 WDL
/// logits, or one value for tanh) and the moves-left head's (`mlh`; none: M = 0).
///
/// # Safety
/// The [device-memory contract](crate::gpu#the-device-memory-contract) for `value` (`batch`
/// rows of 3 halves, or 1 without WDL), `mlh` (`batch` halves) and `out` (`batch × 3` f32).
pub unsafe fn finish_value(
    ops: &Ops<'_>,
    (value, wdl): (DevicePtr, bool),
    mlh: Option<DevicePtr>,
    out: DevicePtr,
    batch: usize,
) -> GpuResult<()> {
    // SAFETY: the caller's promise.
    unsafe {
        let launch = Launch {
            grid: [batch.div_ceil(128) as u32, 1, 1],
            block: [128, 1, 1],
            shared_bytes: 0,
        };
        launchers::value_finish(
            ops.device,
            launch,
            value,
            wdl as i32,
            mlh,
            out,
            batch as i32,
        )
    }
}
