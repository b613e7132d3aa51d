//! The encoder executor: buffers sized for the maximum batch, and the whole forward pass
//! enqueued on the device's stream with no host synchronisation until the outputs are copied
//! back. Written once against [`GpuDevice`]; both vendors run it.

use std::mem::size_of;

use half::f16;

use super::weights::{DenseGpu, NetworkGpu, NormGpu};
use crate::chess::InputPlanes;
use crate::chess::policy_index::POLICY_SIZE;
use crate::gpu::kernels::{
    DENSE_ROWS_MAX, activation_code, attention_kernel, attention_launch, dense_rows_splits,
    layer_norm_warp_kernel,
};
use crate::gpu::{
    BatchedProduct, DevicePtr, Epilogue, GemmPath, GpuBuffer, GpuDevice, GpuError, GpuResult,
    KernelArg, Launch, Linear,
};
use crate::weights::format::{Activation, NetFormat};
use crate::weights::network::Network;

const SQUARES: usize = 64;
const PLANES: usize = 112;
const HALF: usize = size_of::<f16>();
/// Bytes of one input plane on the device: its u64 mask and its f32 value.
const INPUT_PLANE_BYTES: usize = size_of::<u64>() + size_of::<f32>();
/// Threads per block of the row kernels (layer norm, policy finish).
const ROW_THREADS: u32 = 256;
/// Raw attention-policy values per position (64·64 moves plus 8·24 promotion entries) that
/// `policy_finish` maps to the 1858 outputs.
const POLICY_RAW: u32 = 4288;
/// Threads of the block-per-row LayerNorm for rows wider than this (smolgen's 6144-wide rows).
const WIDE_ROW: usize = 2048;

/// Threads per block of the block-per-row LayerNorm: more for wide rows, which come in few
/// rows (one per position), so that each block has enough parallel work.
fn block_threads_for_row(cols: usize) -> u32 {
    if cols > WIDE_ROW { 1024 } else { ROW_THREADS }
}
/// The largest row the layer-norm kernel keeps in shared memory (floats).
const MAX_NORM_COLS: usize = 11 * 1024;

/// Shapes the executor needs, derived from the network.
#[derive(Debug, Clone)]
pub struct Shapes {
    pub embedding: usize,
    pub d_model: usize,
    pub heads: usize,
    pub depth: usize,
    pub dff: usize,
    pub input_width: usize,
    pub dense_size: usize,
    pub embedding_dff: usize,
    pub smolgen: Option<(usize, usize, usize)>,
    pub policy_embedding: usize,
    pub policy_d: usize,
    pub value: (usize, usize, usize),
    pub mlh: Option<(usize, usize)>,
}

impl Shapes {
    pub fn of(n: &Network) -> Self {
        let p = n.policy();
        let v = n.value();
        Self {
            embedding: n.dims.embedding,
            d_model: n.dims.d_model,
            heads: n.dims.heads,
            depth: n.dims.head_depth,
            dff: n.dims.dff,
            input_width: n.dims.input_width,
            dense_size: n.dims.dense_size,
            embedding_dff: n
                .embedding
                .pe_dense
                .as_ref()
                .map_or(0, |p| p.ffn.dense1.outputs),
            smolgen: n
                .dims
                .smolgen
                .map(|s| (s.hidden_channels, s.hidden_size, s.gen_size)),
            policy_embedding: p.embedding.outputs,
            policy_d: p.query.outputs,
            value: (v.embedding.outputs, v.hidden.outputs, v.output.outputs),
            mlh: n
                .moves_left
                .as_ref()
                .map(|m| (m.embedding.outputs, m.hidden.outputs)),
        }
    }

    /// Checks the limits of the kernels (attention head depths, layer-norm row width).
    pub fn check_supported(&self) -> GpuResult<()> {
        if !self.d_model.is_multiple_of(8) || !self.embedding.is_multiple_of(2) {
            return Err(GpuError::Unsupported(format!(
                "model width {} / embedding {} (the kernels need multiples of 8 / 2)",
                self.d_model, self.embedding
            )));
        }
        if attention_kernel(self.depth, false).is_none() {
            return Err(GpuError::Unsupported(format!(
                "head depth {} (the attention kernel has 16, 32 and 64)",
                self.depth
            )));
        }
        let widest = [
            self.embedding,
            self.smolgen.map_or(0, |s| s.1.max(s.2 * self.heads)),
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        if widest > MAX_NORM_COLS {
            return Err(GpuError::Unsupported(format!(
                "a layer-norm row of {widest} values (limit {MAX_NORM_COLS})"
            )));
        }
        Ok(())
    }
}

/// Activation buffers for up to `max_batch` positions.
pub struct Buffers {
    /// A batch's input planes, uploaded in one copy: the n·112 masks (u64), then the n·112
    /// values (f32) right after them (see [`Buffers::inputs`]).
    inputs: GpuBuffer,
    pe_dense_in: Option<GpuBuffer>,
    pe_dense_out: Option<GpuBuffer>,
    tokens: GpuBuffer,
    pub x: GpuBuffer,
    qkv: GpuBuffer,
    ctx: GpuBuffer,
    tmp: GpuBuffer,
    hidden: GpuBuffer,
    smolgen: Option<[GpuBuffer; 4]>,
    policy_embedding: GpuBuffer,
    policy_qk: GpuBuffer,
    policy_logits: GpuBuffer,
    pub policy_out: GpuBuffer,
    head_embedding: GpuBuffer,
    head_hidden: GpuBuffer,
    value_out: GpuBuffer,
    mlh_out: GpuBuffer,
    pub finished: GpuBuffer,
}

impl Buffers {
    pub fn new(device: &dyn GpuDevice, s: &Shapes, max_batch: usize) -> GpuResult<Self> {
        let rows = max_batch * SQUARES;
        let half = |elements: usize| device.alloc(elements * HALF);
        let head_width = s.value.0.max(s.mlh.map_or(0, |m| m.0));
        let head_hidden = s.value.1.max(s.mlh.map_or(0, |m| m.1));
        Ok(Self {
            inputs: device.alloc(max_batch * PLANES * INPUT_PLANE_BYTES)?,
            pe_dense_in: (s.dense_size > 0)
                .then(|| half(max_batch * SQUARES * 12))
                .transpose()?,
            pe_dense_out: (s.dense_size > 0)
                .then(|| half(rows * s.dense_size))
                .transpose()?,
            tokens: half(rows * s.input_width)?,
            x: half(rows * s.embedding)?,
            qkv: half(rows * 3 * s.d_model)?,
            ctx: half(rows * s.d_model)?,
            tmp: half(rows * s.embedding)?,
            hidden: half(rows * s.dff.max(s.embedding_dff))?,
            smolgen: s
                .smolgen
                .map(|(hc, hs, gs)| -> GpuResult<[GpuBuffer; 4]> {
                    Ok([
                        half(rows * hc)?,
                        half(max_batch * hs)?,
                        half(max_batch * s.heads * gs)?,
                        half(max_batch * s.heads * SQUARES * SQUARES)?,
                    ])
                })
                .transpose()?,
            policy_embedding: half(rows * s.policy_embedding)?,
            policy_qk: half(rows * 2 * s.policy_d)?,
            policy_logits: half(max_batch * SQUARES * SQUARES)?,
            policy_out: device.alloc(max_batch * POLICY_SIZE * size_of::<f32>())?,
            head_embedding: half(rows * head_width)?,
            head_hidden: half(max_batch * head_hidden)?,
            value_out: half(max_batch * s.value.2)?,
            mlh_out: half(max_batch)?,
            finished: device.alloc(max_batch * 3 * size_of::<f32>())?,
        })
    }

    /// Where the masks and the values of an `n`-position batch lie in `inputs`.
    fn inputs(&self, n: usize) -> (DevicePtr, DevicePtr) {
        let masks = self.inputs.ptr();
        (masks, masks + (n * PLANES * size_of::<u64>()) as DevicePtr)
    }

    /// Every buffer, for filling and counting.
    fn all(&self) -> impl Iterator<Item = &GpuBuffer> {
        [
            &self.inputs,
            &self.tokens,
            &self.x,
            &self.qkv,
            &self.ctx,
            &self.tmp,
            &self.hidden,
            &self.policy_embedding,
            &self.policy_qk,
            &self.policy_logits,
            &self.policy_out,
            &self.head_embedding,
            &self.head_hidden,
            &self.value_out,
            &self.mlh_out,
            &self.finished,
        ]
        .into_iter()
        .chain(self.pe_dense_in.iter())
        .chain(self.pe_dense_out.iter())
        .chain(self.smolgen.iter().flatten())
    }

    /// Device memory held by these buffers.
    pub fn bytes(&self) -> usize {
        self.all().map(GpuBuffer::bytes).sum()
    }

    /// Fills every buffer with `byte` (stream-ordered). Buffers are filled once, when made:
    /// with zeros, so that no pass can ever see another process's leftovers and so that
    /// compute-sanitizer's initcheck, which does not see the writes of cuBLAS/cuBLASLt GEMMs
    /// (docs/validation.md), can check the rest; or with 0xFF (NaN in fp16 and f32) under
    /// `poison=true`, so that any value read before the pass wrote it turns the outputs NaN.
    pub fn fill(&self, device: &dyn GpuDevice, byte: u8) -> GpuResult<()> {
        self.all()
            .try_for_each(|b| device.fill(b.ptr(), b.bytes(), byte))
    }
}

/// Copies a batch's 112 (mask, value) pairs to the device, as lc0 sends them.
pub fn upload_inputs(
    device: &dyn GpuDevice,
    buffers: &Buffers,
    batch: &[InputPlanes],
) -> GpuResult<()> {
    // Little-endian u64 masks, then f32 values, as the kernels read them: one copy, written
    // straight into the staging memory.
    let planes = batch.len() * PLANES;
    device.upload_with(
        buffers.inputs.ptr(),
        planes * INPUT_PLANE_BYTES,
        &mut |staged| {
            let (masks, values) = staged.split_at_mut(planes * size_of::<u64>());
            let planes = || batch.iter().flatten();
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
fn linear_cost(layer: &DenseGpu, rows: usize) -> Cost {
    let (i, o, r) = (layer.inputs as u64, layer.outputs as u64, rows as u64);
    Cost {
        flops: 2 * r * i * o,
        bytes: HALF as u64 * (r * i + i * o + r * o),
    }
}

/// A pass over `elements` fp16 values that reads `reads` and writes one tensor of that size.
fn pass_cost(elements: usize, reads: u64) -> Cost {
    Cost {
        flops: 8 * elements as u64,
        bytes: HALF as u64 * elements as u64 * (reads + 1),
    }
}

/// Enqueues one forward pass of `n` positions whose inputs are already on the device.
pub struct Forward<'a> {
    pub device: &'a dyn GpuDevice,
    pub net: &'a NetworkGpu,
    pub format: &'a NetFormat,
    pub shapes: &'a Shapes,
    pub buffers: &'a Buffers,
    pub gemm: GemmPath,
    pub alpha: f32,
    /// The attention kernel (tensor-core or portable) for the head depth.
    pub attention: &'static str,
    /// With `Some`, every operation is bracketed by marks.
    pub profile: Option<&'a OpEvents>,
}

impl Forward<'_> {
    /// Runs one named operation, timed when profiling; a `tracing` span marks its enqueue.
    fn op(
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

    fn linear(
        &self,
        layer: &DenseGpu,
        x: DevicePtr,
        y: DevicePtr,
        rows: usize,
        bias: bool,
    ) -> GpuResult<()> {
        self.linear_with(layer, x, y, rows, bias, Epilogue::None)
    }

    fn linear_with(
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
        if self.dense_rows(layer, x, y, rows, bias, act)? {
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
    fn dense_act(
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
        if self.dense_rows(layer, x, y, rows, true, act)? {
            return Ok(());
        }
        let fused_bias = self.gemm == GemmPath::Lt;
        self.linear(layer, x, y, rows, fused_bias)?;
        let bias = if fused_bias {
            0
        } else {
            layer.bias().unwrap_or(0)
        };
        self.device.launch(
            "bias_activation",
            Launch::elements(rows * layer.outputs / 8),
            &[
                KernelArg::Ptr(y),
                KernelArg::Ptr(bias),
                KernelArg::I64(rows as i64),
                KernelArg::I32(layer.outputs as i32),
                KernelArg::I32(activation_code(act)),
            ],
        )
    }

    /// `y = act(x·Wᵀ (+ b))` in our `dense_rows` kernel, bias and activation included, where
    /// there are at most [`DENSE_ROWS_MAX`] rows of a width it takes (a multiple of 8): the
    /// per-position layers at batch ≤ 4, which a library GEMM runs as one long K loop on a few
    /// blocks. Returns whether it ran.
    fn dense_rows(
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
        self.device.launch(
            "dense_rows",
            Launch {
                grid: [
                    layer.outputs.div_ceil(warps_per_block / splits) as u32,
                    1,
                    1,
                ],
                block: [ROW_THREADS, 1, 1],
                shared_bytes: 0,
            },
            &[
                KernelArg::Ptr(x),
                KernelArg::I32(layer.inputs as i32),
                KernelArg::Ptr(layer.w.ptr()),
                KernelArg::Ptr(if bias { layer.bias().unwrap_or(0) } else { 0 }),
                KernelArg::Ptr(y),
                KernelArg::I32(layer.outputs as i32),
                KernelArg::I32(rows as i32),
                KernelArg::I32(layer.outputs as i32),
                KernelArg::I32(layer.inputs as i32),
                KernelArg::I32(activation_code(act)),
                KernelArg::I32(splits as i32),
            ],
        )?;
        Ok(true)
    }

    /// `out = LN(act(input + bias)·alpha + skip)` row by row.
    #[allow(clippy::too_many_arguments)]
    fn layer_norm(
        &self,
        out: DevicePtr,
        input: DevicePtr,
        bias: Option<DevicePtr>,
        act: Activation,
        alpha: f32,
        skip: Option<DevicePtr>,
        ln: &NormGpu,
        rows: usize,
        cols: usize,
    ) -> GpuResult<()> {
        let (gamma, beta) = (
            KernelArg::Ptr(ln.gamma.ptr()),
            KernelArg::Ptr(ln.beta.ptr()),
        );
        let (bias, skip) = (
            KernelArg::Ptr(bias.unwrap_or(0)),
            KernelArg::Ptr(skip.unwrap_or(0)),
        );
        let warp_kernel = layer_norm_warp_kernel(cols, self.device.info().warp_size as usize, act);
        if let (Some(kernel), true) = (warp_kernel, cols.is_multiple_of(8)) {
            // One warp per row.
            let rows_per_block = (ROW_THREADS / self.device.info().warp_size) as usize;
            let launch = Launch {
                grid: [rows.div_ceil(rows_per_block) as u32, 1, 1],
                block: [ROW_THREADS, 1, 1],
                shared_bytes: 0,
            };
            let args = [
                KernelArg::Ptr(out),
                KernelArg::Ptr(input),
                bias,
                KernelArg::F32(alpha),
                skip,
                gamma,
                beta,
                KernelArg::F32(ln.eps),
                KernelArg::I32(rows as i32),
                KernelArg::I32(cols as i32),
            ];
            return self.device.launch(kernel, launch, &args);
        }
        let launch = Launch {
            grid: [rows as u32, 1, 1],
            block: [block_threads_for_row(cols), 1, 1],
            shared_bytes: (cols * size_of::<f32>()) as u32,
        };
        let args = [
            KernelArg::Ptr(out),
            KernelArg::Ptr(input),
            bias,
            KernelArg::I32(activation_code(act)),
            KernelArg::F32(alpha),
            skip,
            gamma,
            beta,
            KernelArg::F32(ln.eps),
            KernelArg::I32(cols as i32),
        ];
        self.device.launch("layer_norm", launch, &args)
    }

    /// `x = LN(x + alpha·(tmp + bias))` over the residual stream: the residual connection after
    /// the out-projection, the FFN and PE_DENSE's embedding FFN.
    fn residual_norm(&self, bias: Option<DevicePtr>, ln: &NormGpu, rows: usize) -> GpuResult<()> {
        let (x, tmp) = (self.buffers.x.ptr(), self.buffers.tmp.ptr());
        self.layer_norm(
            x,
            tmp,
            bias,
            Activation::Identity,
            self.alpha,
            Some(x),
            ln,
            rows,
            self.shapes.embedding,
        )
    }

    pub fn enqueue(&self, n: usize) -> GpuResult<()> {
        let _span = tracing::trace_span!("forward", batch = n).entered();
        let (net, rows) = (self.net, n * SQUARES);
        let embedding =
            linear_cost(&net.embedding, rows) + pass_cost(rows * self.shapes.input_width, 0);
        self.op("embedding", None, embedding, || self.embed(n))?;
        for layer in 0..net.encoders.len() {
            self.encoder(layer, n)?;
        }
        let p = &net.policy;
        let logits = Cost {
            flops: 2 * (n * SQUARES * SQUARES * p.dp) as u64,
            bytes: (HALF * n * SQUARES * SQUARES) as u64,
        };
        let policy = linear_cost(&p.embedding, rows) + linear_cost(&p.query_key, rows) + logits;
        self.op("policy head", None, policy, || self.policy(n))?;
        let v = &net.value;
        let value =
            linear_cost(&v.embedding, rows) + linear_cost(&v.hidden, n) + linear_cost(&v.output, n);
        self.op("value+mlh heads", None, value, || {
            self.value_and_moves_left(n)
        })
    }

    pub fn embed(&self, n: usize) -> GpuResult<()> {
        let (b, s, net) = (self.buffers, self.shapes, self.net);
        let rows = n * SQUARES;
        let (masks, values) = b.inputs(n);
        let inputs = [KernelArg::Ptr(masks), KernelArg::Ptr(values)];
        let (extra, extra_width, extra_stride) =
            match (&net.pe_dense, &b.pe_dense_in, &b.pe_dense_out) {
                (Some(pd), Some(pre_in), Some(pre_out)) => {
                    self.device.launch(
                        "pe_dense_input",
                        Launch::elements(n * SQUARES * 12),
                        &[
                            inputs[0],
                            inputs[1],
                            KernelArg::Ptr(pre_in.ptr()),
                            KernelArg::I32(n as i32),
                        ],
                    )?;
                    self.linear(&pd.preprocess, pre_in.ptr(), pre_out.ptr(), n, true)?;
                    (pre_out.ptr(), s.dense_size, SQUARES * s.dense_size)
                }
                _ => (net.positional_encoding.ptr(), SQUARES, 0),
            };
        self.device.launch(
            "expand_tokens",
            Launch::elements(rows * s.input_width),
            &[
                inputs[0],
                inputs[1],
                KernelArg::Ptr(extra),
                KernelArg::I32(extra_width as i32),
                KernelArg::I32(extra_stride as i32),
                KernelArg::Ptr(b.tokens.ptr()),
                KernelArg::I32(n as i32),
            ],
        )?;
        let x = b.x.ptr();
        let act = self.format.default_activation;
        match &net.pe_dense {
            None => self.dense_act(&net.embedding, b.tokens.ptr(), x, rows, act)?,
            Some(pd) => {
                self.linear(&net.embedding, b.tokens.ptr(), x, rows, false)?;
                self.layer_norm(
                    x,
                    x,
                    net.embedding.bias(),
                    act,
                    1.0,
                    None,
                    &pd.ln,
                    rows,
                    s.embedding,
                )?;
            }
        }
        if let Some((mult, add)) = &net.gating {
            self.device.launch(
                "input_gating",
                // The kernel goes 8 values at a time (a grid-stride loop covers any rest).
                Launch::elements((rows * s.embedding).div_ceil(8)),
                &[
                    KernelArg::Ptr(x),
                    KernelArg::Ptr(mult.ptr()),
                    KernelArg::Ptr(add.ptr()),
                    KernelArg::I64(rows as i64),
                    KernelArg::I32(s.embedding as i32),
                ],
            )?;
        }
        if let Some(pd) = &net.pe_dense {
            self.dense_act(
                &pd.ffn1,
                x,
                b.hidden.ptr(),
                rows,
                self.format.ffn_activation,
            )?;
            self.linear(&pd.ffn2, b.hidden.ptr(), b.tmp.ptr(), rows, false)?;
            self.residual_norm(pd.ffn2.bias(), &pd.ffn_ln, rows)?;
        }
        Ok(())
    }

    pub fn encoder(&self, index: usize, n: usize) -> GpuResult<()> {
        let (b, s) = (self.buffers, self.shapes);
        let layer = &self.net.encoders[index];
        let rows = n * SQUARES;
        let x = b.x.ptr();
        let bias = match (&layer.smolgen, &b.smolgen, &self.net.smolgen_weight_gen) {
            (Some(sg), Some([compressed, h1, h2, bias]), Some(weight_gen)) => {
                let act = self.format.smolgen_activation;
                let l = Some(index);
                self.op(
                    "smolgen compress",
                    l,
                    linear_cost(&sg.compress, rows),
                    || self.linear(&sg.compress, x, compressed.ptr(), rows, false),
                )?;
                let dense = linear_cost(&sg.dense1, n) + linear_cost(&sg.dense2, n);
                let norms =
                    pass_cost(n * sg.dense1.outputs, 1) + pass_cost(n * sg.dense2.outputs, 1);
                self.op("smolgen dense1/2+ln", l, dense + norms, || {
                    self.linear(&sg.dense1, compressed.ptr(), h1.ptr(), n, false)?;
                    self.layer_norm(
                        h1.ptr(),
                        h1.ptr(),
                        sg.dense1.bias(),
                        act,
                        1.0,
                        None,
                        &sg.ln1,
                        n,
                        sg.dense1.outputs,
                    )?;
                    self.linear(&sg.dense2, h1.ptr(), h2.ptr(), n, false)?;
                    self.layer_norm(
                        h2.ptr(),
                        h2.ptr(),
                        sg.dense2.bias(),
                        act,
                        1.0,
                        None,
                        &sg.ln2,
                        n,
                        sg.dense2.outputs,
                    )
                })?;
                self.op(
                    "smolgen weight gen",
                    l,
                    linear_cost(weight_gen, n * s.heads),
                    || self.linear(weight_gen, h2.ptr(), bias.ptr(), n * s.heads, false),
                )?;
                bias.ptr()
            }
            _ => 0,
        };
        let l = Some(index);
        self.op("qkv", l, linear_cost(&layer.qkv, rows), || {
            self.linear(&layer.qkv, x, b.qkv.ptr(), rows, true)
        })?;
        let products = 4 * (n * s.heads * SQUARES * SQUARES * s.depth) as u64;
        let bias_bytes = if bias == 0 {
            0
        } else {
            n * s.heads * SQUARES * SQUARES
        };
        let traffic = HALF * (rows * 3 * s.d_model + bias_bytes + rows * s.d_model);
        self.op(
            "attention",
            l,
            Cost {
                flops: products,
                bytes: traffic as u64,
            },
            || {
                let how = attention_launch(
                    self.attention,
                    s.heads,
                    n,
                    self.device.info().multiprocessors as usize,
                );
                let mut args = vec![
                    KernelArg::Ptr(b.qkv.ptr()),
                    KernelArg::Ptr(bias),
                    KernelArg::Ptr(b.ctx.ptr()),
                    KernelArg::I32(s.heads as i32),
                ];
                args.extend(how.heads_per_block.map(KernelArg::I32));
                self.device.launch(self.attention, how.launch, &args)
            },
        )?;
        self.op("out proj", l, linear_cost(&layer.out, rows), || {
            self.linear(&layer.out, b.ctx.ptr(), b.tmp.ptr(), rows, false)
        })?;
        self.op("residual+ln1", l, pass_cost(rows * s.embedding, 2), || {
            self.residual_norm(layer.out.bias(), &layer.ln1, rows)
        })?;
        let act_pass = match self.format.ffn_activation {
            Activation::Identity | Activation::Relu => Cost::default(),
            _ => pass_cost(rows * s.dff, 1),
        };
        self.op(
            "ffn1+act",
            l,
            linear_cost(&layer.ffn1, rows) + act_pass,
            || {
                self.dense_act(
                    &layer.ffn1,
                    x,
                    b.hidden.ptr(),
                    rows,
                    self.format.ffn_activation,
                )
            },
        )?;
        self.op("ffn2", l, linear_cost(&layer.ffn2, rows), || {
            self.linear(&layer.ffn2, b.hidden.ptr(), b.tmp.ptr(), rows, false)
        })?;
        self.op("residual+ln2", l, pass_cost(rows * s.embedding, 2), || {
            self.residual_norm(layer.ffn2.bias(), &layer.ln2, rows)
        })
    }

    fn policy(&self, n: usize) -> GpuResult<()> {
        let (b, p) = (self.buffers, &self.net.policy);
        let rows = n * SQUARES;
        self.dense_act(
            &p.embedding,
            b.x.ptr(),
            b.policy_embedding.ptr(),
            rows,
            self.format.default_activation,
        )?;
        self.linear(
            &p.query_key,
            b.policy_embedding.ptr(),
            b.policy_qk.ptr(),
            rows,
            true,
        )?;
        let dp = p.dp;
        let keys = b.policy_qk.at(dp * HALF);
        self.device.batched_product(&BatchedProduct {
            batch: n,
            m: SQUARES,
            n: SQUARES,
            k: dp,
            alpha: 1.0 / (dp as f32).sqrt(),
            a: b.policy_qk.ptr(),
            lda: 2 * dp,
            stride_a: SQUARES * 2 * dp,
            b: keys,
            ldb: 2 * dp,
            stride_b: SQUARES * 2 * dp,
            c: b.policy_logits.ptr(),
            ldc: SQUARES,
            stride_c: SQUARES * SQUARES,
        })?;
        self.device.launch(
            "policy_finish",
            Launch {
                grid: [n as u32, POLICY_RAW.div_ceil(ROW_THREADS), 1],
                block: [ROW_THREADS, 1, 1],
                shared_bytes: 0,
            },
            &[
                KernelArg::Ptr(b.policy_logits.ptr()),
                KernelArg::Ptr(keys),
                KernelArg::I32((2 * dp) as i32),
                KernelArg::Ptr(p.promotion.ptr()),
                KernelArg::I32(dp as i32),
                KernelArg::Ptr(self.net.policy_map.ptr()),
                KernelArg::Ptr(b.policy_out.ptr()),
            ],
        )
    }

    fn value_and_moves_left(&self, n: usize) -> GpuResult<()> {
        let b = self.buffers;
        let act = self.format.default_activation;
        let head = |h: &super::weights::HeadGpu, out: DevicePtr| -> GpuResult<()> {
            self.dense_act(
                &h.embedding,
                b.x.ptr(),
                b.head_embedding.ptr(),
                n * SQUARES,
                act,
            )?;
            self.dense_act(
                &h.hidden,
                b.head_embedding.ptr(),
                b.head_hidden.ptr(),
                n,
                act,
            )?;
            self.linear(&h.output, b.head_hidden.ptr(), out, n, true)
        };
        head(&self.net.value, b.value_out.ptr())?;
        let mlh = match &self.net.moves_left {
            Some(h) => {
                head(h, b.mlh_out.ptr())?;
                b.mlh_out.ptr()
            }
            None => 0,
        };
        self.device.launch(
            "value_finish",
            Launch {
                grid: [n.div_ceil(128) as u32, 1, 1],
                block: [128, 1, 1],
                shared_bytes: 0,
            },
            &[
                KernelArg::Ptr(b.value_out.ptr()),
                KernelArg::I32(self.format.wdl as i32),
                KernelArg::Ptr(mlh),
                KernelArg::Ptr(b.finished.ptr()),
                KernelArg::I32(n as i32),
            ],
        )
    }
}
