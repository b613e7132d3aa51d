//! What both network passes build on: the batch's input and output buffers, the upload of
//! its input planes, dense layers on the device (GEMM with the library's epilogues, or our
//! `dense_rows` kernel for a few rows) and the marks a profiled pass brackets its operations
//! with.

use std::mem::size_of;

use half::f16;

use crate::chess::InputPlanes;
use crate::chess::policy_index::POLICY_SIZE;
use crate::gpu::kernels::{
    DENSE_ROWS_MAX, activation_code, dense_mma_launch, dense_rows_splits, launchers,
};
use crate::gpu::{DevicePtr, Epilogue, GemmPath, GpuBuffer, GpuDevice, GpuResult, Launch, Linear};
use crate::weights::format::Activation;

use super::dense::DenseGpu;

pub const SQUARES: usize = 64;
pub const PLANES: usize = 112;
pub const HALF: usize = size_of::<f16>();
/// Bytes of one input plane on the device: its u64 mask and its f32 value.
const INPUT_PLANE_BYTES: usize = size_of::<u64>() + size_of::<f32>();
/// Threads per block of the row kernels (layer norm, policy finish, dense rows).
pub const ROW_THREADS: u32 = 256;

/// The buffers every pass shares the shape of: a batch's input planes and its outputs.
pub struct IoBuffers {
    /// A batch's input planes, uploaded in one copy: the n·112 masks (u64), then the n·112
    /// values (f32) right after them (see [`IoBuffers::inputs`]).
    pub inputs: GpuBuffer,
    /// The outputs of a pass over n positions, together so that one copy brings them back:
    /// `[n][3]` f32 (Q, D, M), then `[n][1858]` f32 policy logits (see
    /// [`IoBuffers::finished`], [`IoBuffers::policy`]).
    pub outputs: GpuBuffer,
}

/// Bytes of one position's Q, D and M.
pub const FINISHED_BYTES: usize = 3 * size_of::<f32>();
/// Bytes of one position's policy logits.
pub const POLICY_BYTES: usize = POLICY_SIZE * size_of::<f32>();

impl IoBuffers {
    pub fn new(device: &dyn GpuDevice, max_batch: usize) -> GpuResult<Self> {
        Ok(Self {
            inputs: device.alloc(max_batch * PLANES * INPUT_PLANE_BYTES)?,
            outputs: device.alloc(max_batch * (FINISHED_BYTES + POLICY_BYTES))?,
        })
    }

    /// Where the masks and the values of a pass over `batch` positions lie in `inputs`.
    pub fn inputs(&self, batch: usize) -> (DevicePtr, DevicePtr) {
        let masks = self.inputs.ptr();
        (masks, self.inputs.at(batch * PLANES * size_of::<u64>()))
    }

    /// Where a pass writes its Q, D and M: first in `outputs`, whatever its size.
    pub fn finished(&self) -> DevicePtr {
        self.outputs.ptr()
    }

    /// Where a pass over `size` positions writes its policy logits: right after its Q, D, M.
    pub fn policy(&self, size: usize) -> DevicePtr {
        self.outputs.at(size * FINISHED_BYTES)
    }

    pub fn all(&self) -> [&GpuBuffer; 2] {
        [&self.inputs, &self.outputs]
    }
}

/// Copies a batch's 112 (mask, value) pairs to the device, as lc0 sends them, laid out for a
/// pass over `size ≥ batch.len()` positions: the positions past the batch get empty masks
/// (all-zero input planes), so that a pass padded to a prepared batch size computes them
/// from defined inputs.
pub fn upload_inputs(
    device: &dyn GpuDevice,
    buffers: &IoBuffers,
    batch: &[InputPlanes],
    size: usize,
) -> GpuResult<()> {
    debug_assert!(
        size >= batch.len(),
        "a pass of {size} for {} positions",
        batch.len()
    );
    // One copy: every mask of the padded pass, then the batch's values, written by `fill`
    // straight into the staging memory.
    let mask_bytes = size * PLANES * size_of::<u64>();
    let value_bytes = batch.len() * PLANES * size_of::<f32>();
    device.upload_with(
        buffers.inputs.ptr(),
        mask_bytes + value_bytes,
        &mut |staged| {
            let (masks, values) = staged.split_at_mut(mask_bytes);
            let planes = || batch.iter().flatten();
            masks[batch.len() * PLANES * size_of::<u64>()..].fill(0);
            for (slot, plane) in masks.chunks_exact_mut(size_of::<u64>()).zip(planes()) {
                slot.copy_from_slice(&plane.mask.to_le_bytes());
            }
            for (slot, plane) in values.chunks_exact_mut(size_of::<f32>()).zip(planes()) {
                slot.copy_from_slice(&plane.value.to_le_bytes());
            }
        },
    )
}

/// An operation of a profiled pass between two marks.
#[derive(Debug, Clone, Copy)]
pub struct OpEvent {
    pub op: &'static str,
    pub layer: Option<usize>,
    pub cost: Cost,
    pub start: usize,
    pub end: usize,
}

/// How a profiled pass marks where its operations begin and end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// A timing event on the stream (inside a capture: an event-record node); the mark is the
    /// event's index.
    Event,
    /// The number of graph nodes captured so far; kernel timestamps are matched to the nodes
    /// after a replay.
    CapturedWork,
}

/// The marked operations of a profiled pass.
#[derive(Debug)]
pub struct OpEvents {
    pub marker: Marker,
    pub ops: std::sync::Mutex<Vec<OpEvent>>,
}

impl OpEvents {
    pub fn new(marker: Marker) -> Self {
        Self {
            marker,
            ops: Default::default(),
        }
    }

    pub fn mark(&self, device: &dyn GpuDevice) -> GpuResult<usize> {
        match self.marker {
            Marker::Event => device.record_event(),
            Marker::CapturedWork => device.captured_work(),
        }
    }
}

/// FLOPs and compulsory bytes of an operation (for the profile's rates).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    pub flops: u64,
    pub bytes: u64,
}

impl std::ops::Add for Cost {
    type Output = Cost;
    fn add(self, o: Cost) -> Cost {
        Cost {
            flops: self.flops + o.flops,
            bytes: self.bytes + o.bytes,
        }
    }
}

/// A dense layer on `rows` fp16 rows: 2·rows·in·out FLOPs; input, weights, output bytes.
pub fn linear_cost(layer: &DenseGpu, rows: usize) -> Cost {
    let (i, o, r) = (layer.inputs as u64, layer.outputs as u64, rows as u64);
    Cost {
        flops: 2 * r * i * o,
        bytes: HALF as u64 * (r * i + i * o + r * o),
    }
}

/// A pass over `elements` fp16 values that reads `reads` and writes one tensor of that size.
pub fn pass_cost(elements: usize, reads: u64) -> Cost {
    Cost {
        flops: 8 * elements as u64,
        bytes: HALF as u64 * elements as u64 * (reads + 1),
    }
}

/// Enqueues operations of a pass on one lane's device: dense layers and profile marks.
#[derive(Clone, Copy)]
pub struct Ops<'a> {
    pub device: &'a dyn GpuDevice,
    pub gemm: GemmPath,
    /// Whether dense layers run in our `dense_mma` kernel where it fits (passes of at most
    /// `dense_mma=N` positions).
    pub dense_mma: bool,
    /// Whether this pass launches its kernels with programmatic dependent launch (set on the
    /// device for the pass; see [`Ops::launched_plainly`]).
    pub programmatic_launch: bool,
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
            .set_programmatic_launch(self.programmatic_launch);
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

    pub fn linear(
        &self,
        layer: &DenseGpu,
        x: DevicePtr,
        y: DevicePtr,
        rows: usize,
        bias: bool,
    ) -> GpuResult<()> {
        self.linear_with(layer, x, y, rows, bias, Epilogue::None)
    }

    pub fn linear_with(
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
        if self.own_kernel(layer, x, y, rows, bias, act)? {
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
        self.device.linear(self.gemm, &op)
    }

    /// `y = act(x·Wᵀ + b)`. ReLU and SiLU (and the bias) are GEMM epilogues, which the device
    /// fuses where its library can; other activations are a pass over `y` (with the bias on the
    /// BLAS path, which has no epilogue).
    pub fn dense_act(
        &self,
        layer: &DenseGpu,
        x: DevicePtr,
        y: DevicePtr,
        rows: usize,
        act: Activation,
    ) -> GpuResult<()> {
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

    /// `y = act(x·Wᵀ (+ b))` in one of our kernels where one takes the shape: `dense_rows` for
    /// at most [`DENSE_ROWS_MAX`] rows, `dense_mma` in the passes that take it. Returns
    /// whether one ran.
    fn own_kernel(
        &self,
        layer: &DenseGpu,
        x: DevicePtr,
        y: DevicePtr,
        rows: usize,
        bias: bool,
        act: Activation,
    ) -> GpuResult<bool> {
        Ok(self.dense_rows(layer, x, y, rows, bias, act)?
            || self.dense_mma(layer, x, y, rows, bias, act)?)
    }

    /// `y = act(x·Wᵀ (+ b))` in our `dense_mma` kernel (NVIDIA tensor cores), in a pass that
    /// takes it and for a shape it takes. Returns whether it ran.
    fn dense_mma(
        &self,
        layer: &DenseGpu,
        x: DevicePtr,
        y: DevicePtr,
        rows: usize,
        bias: bool,
        act: Activation,
    ) -> GpuResult<bool> {
        if !self.dense_mma {
            return Ok(false);
        }
        let Some((kernel, launch)) = dense_mma_launch(rows, layer.outputs, layer.inputs)
            .filter(|(kernel, _)| self.device.has_kernel(kernel.name()))
        else {
            return Ok(false);
        };
        launchers::dense_mma(
            self.device,
            kernel,
            launch,
            x,
            layer.w.ptr(),
            if bias { layer.bias() } else { None },
            activation_code(act),
            y,
            rows as i32,
            layer.outputs as i32,
        )?;
        Ok(true)
    }

    /// `y = act(x·Wᵀ (+ b))` in our `dense_rows` kernel, bias and activation included, where
    /// there are at most [`DENSE_ROWS_MAX`] rows of a width it takes (a multiple of 8): the
    /// per-position layers at batch ≤ 4, which a library GEMM runs as one long K loop on a few
    /// blocks. Returns whether it ran.
    pub fn dense_rows(
        &self,
        layer: &DenseGpu,
        x: DevicePtr,
        y: DevicePtr,
        rows: usize,
        bias: bool,
        act: Activation,
    ) -> GpuResult<bool> {
        if rows > DENSE_ROWS_MAX || !layer.inputs.is_multiple_of(8) {
            return Ok(false);
        }
        let warps_per_block = (ROW_THREADS / self.device.info().warp_size) as usize;
        let splits = dense_rows_splits(layer.inputs, self.device.info().warp_size as usize)
            .min(warps_per_block);
        let launch = Launch {
            grid: [
                layer.outputs.div_ceil(warps_per_block / splits) as u32,
                1,
                1,
            ],
            block: [ROW_THREADS, 1, 1],
            shared_bytes: 0,
        };
        let (inputs, outputs) = (layer.inputs as i32, layer.outputs as i32);
        launchers::dense_rows(
            self.device,
            launch,
            x,
            inputs,
            layer.w.ptr(),
            if bias { layer.bias() } else { None },
            y,
            outputs,
            rows as i32,
            outputs,
            inputs,
            activation_code(act),
            splits as i32,
        )?;
        Ok(true)
    }
}

/// `(Q, D, M)` per position into `out` (`[batch][3]` f32) from the value head's output (3 WDL
/// logits, or one value for tanh) and the moves-left head's (`mlh`; none: M = 0).
pub fn finish_value(
    ops: &Ops<'_>,
    (value, wdl): (DevicePtr, bool),
    mlh: Option<DevicePtr>,
    out: DevicePtr,
    batch: usize,
) -> GpuResult<()> {
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
