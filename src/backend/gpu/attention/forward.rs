//! The attention body's forward pass, enqueued on the lane's stream with no host
//! synchronisation until the outputs are copied back.

use super::weights::{HeadGpu, NetworkGpu, NormGpu};
use super::{Buffers, Shapes};
use crate::backend::gpu::ops::{
    Cost, HALF, IoBuffers, Ops, ROW_THREADS, SQUARES, finish_value, linear_cost, pass_cost,
};
use crate::gpu::kernels::{
    AttentionKernel, activation_code, attention_launch, layer_norm_warp_kernel,
};
use crate::gpu::{DevicePtr, GpuResult, KernelArg, Launch};
use crate::weights::format::{Activation, NetFormat};

/// Threads of the block-per-row LayerNorm for rows wider than this (smolgen's 6144-wide rows).
const WIDE_ROW: usize = 2048;

/// Threads per block of the block-per-row LayerNorm: more for wide rows, which come in few
/// rows (one per position), so that each block has enough parallel work.
fn block_threads_for_row(cols: usize) -> u32 {
    if cols > WIDE_ROW { 1024 } else { ROW_THREADS }
}

/// Enqueues one forward pass of `n` positions whose inputs are already on the device.
pub struct Forward<'a> {
    pub ops: Ops<'a>,
    pub net: &'a NetworkGpu,
    pub format: &'a NetFormat,
    pub shapes: &'a Shapes,
    pub buffers: &'a Buffers,
    pub io: &'a IoBuffers,
    pub alpha: f32,
    /// The attention kernel (tensor-core or portable) for the head depth.
    pub attention: AttentionKernel,
}

impl Forward<'_> {
    fn op(
        &self,
        op: &'static str,
        layer: Option<usize>,
        cost: Cost,
        work: impl FnOnce() -> GpuResult<()>,
    ) -> GpuResult<()> {
        self.ops.op(op, layer, cost, work)
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
        let warp_kernel =
            layer_norm_warp_kernel(cols, self.ops.device.info().warp_size as usize, act);
        if let (Some(kernel), true) = (warp_kernel, cols.is_multiple_of(8)) {
            // One warp per row.
            let rows_per_block = (ROW_THREADS / self.ops.device.info().warp_size) as usize;
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
            return self.ops.device.launch(kernel, launch, &args);
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
        self.ops.device.launch("layer_norm", launch, &args)
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
        let (net, rows) = (self.net, n * SQUARES);
        let embedding =
            linear_cost(&net.embedding, rows) + pass_cost(rows * self.shapes.input_width, 0);
        self.op("embedding", None, embedding, || self.embed(n))?;
        for layer in 0..net.encoders.len() {
            self.encoder(layer, n)?;
        }
        let p = &net.policy;
        let (b, act) = (self.buffers, self.format.default_activation);
        self.op("policy head", None, p.cost(n), || {
            p.enqueue(
                &self.ops,
                (b.x.ptr(), act),
                &b.policy,
                self.io.policy_out.ptr(),
                n,
            )
        })?;
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
        let (masks, values) = self.io.inputs(n);
        let inputs = [KernelArg::Ptr(masks), KernelArg::Ptr(values)];
        let (extra, extra_width, extra_stride) =
            match (&net.pe_dense, &b.pe_dense_in, &b.pe_dense_out) {
                (Some(pd), Some(pre_in), Some(pre_out)) => {
                    self.ops.device.launch(
                        "pe_dense_input",
                        Launch::elements(n * SQUARES * 12),
                        &[
                            inputs[0],
                            inputs[1],
                            KernelArg::Ptr(pre_in.ptr()),
                            KernelArg::I32(n as i32),
                        ],
                    )?;
                    self.ops
                        .linear(&pd.preprocess, pre_in.ptr(), pre_out.ptr(), n, true)?;
                    (pre_out.ptr(), s.dense_size, SQUARES * s.dense_size)
                }
                _ => (net.positional_encoding.ptr(), SQUARES, 0),
            };
        self.ops.device.launch(
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
            None => self
                .ops
                .dense_act(&net.embedding, b.tokens.ptr(), x, rows, act)?,
            Some(pd) => {
                self.ops
                    .linear(&net.embedding, b.tokens.ptr(), x, rows, false)?;
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
            self.ops.device.launch(
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
            self.ops.dense_act(
                &pd.ffn1,
                x,
                b.hidden.ptr(),
                rows,
                self.format.ffn_activation,
            )?;
            self.ops
                .linear(&pd.ffn2, b.hidden.ptr(), b.tmp.ptr(), rows, false)?;
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
                    || {
                        self.ops
                            .linear(&sg.compress, x, compressed.ptr(), rows, false)
                    },
                )?;
                let dense = linear_cost(&sg.dense1, n) + linear_cost(&sg.dense2, n);
                let norms =
                    pass_cost(n * sg.dense1.outputs, 1) + pass_cost(n * sg.dense2.outputs, 1);
                self.op("smolgen dense1/2+ln", l, dense + norms, || {
                    self.ops
                        .linear(&sg.dense1, compressed.ptr(), h1.ptr(), n, false)?;
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
                    self.ops.linear(&sg.dense2, h1.ptr(), h2.ptr(), n, false)?;
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
                    || {
                        self.ops
                            .linear(weight_gen, h2.ptr(), bias.ptr(), n * s.heads, false)
                    },
                )?;
                bias.ptr()
            }
            _ => 0,
        };
        let l = Some(index);
        self.op("qkv", l, linear_cost(&layer.qkv, rows), || {
            self.ops.linear(&layer.qkv, x, b.qkv.ptr(), rows, true)
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
                    self.ops.device.info().multiprocessors as usize,
                );
                let mut args = vec![
                    KernelArg::Ptr(b.qkv.ptr()),
                    KernelArg::Ptr(bias),
                    KernelArg::Ptr(b.ctx.ptr()),
                    KernelArg::I32(s.heads as i32),
                ];
                args.extend(how.heads_per_block.map(KernelArg::I32));
                self.ops
                    .device
                    .launch(self.attention.name(), how.launch, &args)
            },
        )?;
        self.op("out proj", l, linear_cost(&layer.out, rows), || {
            self.ops
                .linear(&layer.out, b.ctx.ptr(), b.tmp.ptr(), rows, false)
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
                self.ops.dense_act(
                    &layer.ffn1,
                    x,
                    b.hidden.ptr(),
                    rows,
                    self.format.ffn_activation,
                )
            },
        )?;
        self.op("ffn2", l, linear_cost(&layer.ffn2, rows), || {
            self.ops
                .linear(&layer.ffn2, b.hidden.ptr(), b.tmp.ptr(), rows, false)
        })?;
        self.op("residual+ln2", l, pass_cost(rows * s.embedding, 2), || {
            self.residual_norm(layer.ffn2.bias(), &layer.ln2, rows)
        })
    }

    fn value_and_moves_left(&self, n: usize) -> GpuResult<()> {
        let b = self.buffers;
        let act = self.format.default_activation;
        let head = |h: &HeadGpu, out: DevicePtr| -> GpuResult<()> {
            self.ops.dense_act(
                &h.embedding,
                b.x.ptr(),
                b.head_embedding.ptr(),
                n * SQUARES,
                act,
            )?;
            self.ops.dense_act(
                &h.hidden,
                b.head_embedding.ptr(),
                b.head_hidden.ptr(),
                n,
                act,
            )?;
            self.ops
                .linear(&h.output, b.head_hidden.ptr(), out, n, true)
        };
        head(&self.net.value, b.value_out.ptr())?;
        let mlh = match &self.net.moves_left {
            Some(h) => {
                head(h, b.mlh_out.ptr())?;
                b.mlh_out.ptr()
            }
            None => 0,
        };
        finish_value(
            &self.ops,
            (b.value_out.ptr(), self.format.wdl),
            mlh,
            self.io.finished.ptr(),
            n,
        )
    }
}
