//! One encoder layer of the forward pass: smolgen's attention bias, the attention with its QKV
//! and output projections, the FFN, and the two residual LayerNorms, each on the kernel the
//! pass's plan picks (a LayerNorm fused into the dense layer after it where the plan says so).

use super::forward::{Forward, ResidualNorm};
use crate::backend::executor::io::HALF;
use crate::backend::executor::marks::{Cost, linear_cost, pass_cost};
use crate::board::SQUARES;
use crate::gpu::kernels::AttentionArgs;
use crate::gpu::{DevicePtr, GpuResult};
use crate::weights::format::Activation;

impl Forward<'_> {
    /// Encoder layer `index`: its residual stream complete in `x` when it returns, unless the
    /// plan leaves its last LayerNorm to the next layer's smolgen compression.
    pub fn encoder(&self, index: usize) -> GpuResult<()> {
        let bias = self.smolgen(index)?;
        // SAFETY: `bias` is smolgen's output buffer of this lane (or none).
        unsafe { self.attention(index, bias)? };
        self.feed_forward(index)
    }

    /// Layer `index`'s last LayerNorm, over the stream where the plan left it after the first.
    fn ln2(&self, index: usize) -> ResidualNorm<'_> {
        let layer = &self.net.encoders[index];
        ResidualNorm {
            bias: layer.ffn2.bias(),
            ln: &layer.ln2,
            skip: self.stream(self.plan.layers[index].stream),
        }
    }

    /// Smolgen's attention bias for layer `index` (`None` for a layer without smolgen): every
    /// square compressed (the previous layer's last LayerNorm first, in the same kernel, where
    /// the plan left it here), two dense layers per position with their LayerNorms, then the
    /// shared weight generator.
    fn smolgen(&self, index: usize) -> GpuResult<Option<DevicePtr>> {
        // SAFETY: `x` and `compressed` hold the plan's rows (`batch × 64`), `h1`, `h2` `batch`
        // rows and `bias` `batch × heads` rows of smolgen's widths: the lane's smolgen buffers, made
        // by `Buffers::new` for at least `batch` positions; the layers are `net`'s (Forward's
        // invariant).
        unsafe {
            let (b, s, plan) = (self.buffers, self.shapes, self.plan);
            let layer = &self.net.encoders[index];
            let parts = (&layer.smolgen, &b.smolgen, &self.net.smolgen_weight_gen);
            let ((Some(sg), Some([compressed, h1, h2, bias]), Some(weight_gen)), Some([n1, n2])) =
                (parts, plan.smolgen_norms)
            else {
                debug_assert!(
                    plan.ln2_from_previous(index).is_none(),
                    "a pending LayerNorm needs smolgen to take it"
                );
                return Ok(None);
            };
            let (batch, l, x) = (plan.batch(), Some(index), b.x.ptr());
            let rows = batch * SQUARES;
            match plan.ln2_from_previous(index) {
                Some((previous, fused)) => {
                    let cost = pass_cost(rows * s.embedding, 3) + linear_cost(&sg.compress, rows);
                    self.op("ln2+smolgen compress", l, cost, || {
                        // No bias: the compression has none (the unfused `linear` below leaves it out too).
                        let compress = (&sg.compress, None, Activation::Identity);
                        self.norm_then_dense(
                            fused,
                            self.ln2(previous),
                            x,
                            compress,
                            compressed.ptr(),
                        )
                    })?
                }
                None => self.op(
                    "smolgen compress",
                    l,
                    linear_cost(&sg.compress, rows),
                    || {
                        self.ops
                            .linear(&sg.compress, x, compressed.ptr(), rows, false)
                    },
                )?,
            }
            let act = self.format.smolgen_activation;
            let dense = linear_cost(&sg.dense1, batch) + linear_cost(&sg.dense2, batch);
            let norms =
                pass_cost(batch * sg.dense1.outputs, 1) + pass_cost(batch * sg.dense2.outputs, 1);
            self.op("smolgen dense1/2+ln", l, dense + norms, || {
                let (d1, d2) = (&sg.dense1, &sg.dense2);
                self.ops
                    .linear(d1, compressed.ptr(), h1.ptr(), batch, false)?;
                let h1 = h1.ptr();
                let (rows, cols) = (batch, d1.outputs);
                self.layer_norm(n1, h1, h1, d1.bias(), act, 1.0, None, &sg.ln1, rows, cols)?;
                self.ops.linear(d2, h1, h2.ptr(), batch, false)?;
                let h2 = h2.ptr();
                let cols = d2.outputs;
                self.layer_norm(n2, h2, h2, d2.bias(), act, 1.0, None, &sg.ln2, rows, cols)
            })?;
            let weight_rows = batch * s.heads;
            self.op(
                "smolgen weight gen",
                l,
                linear_cost(weight_gen, weight_rows),
                || {
                    self.ops
                        .linear(weight_gen, h2.ptr(), bias.ptr(), weight_rows, false)
                },
            )?;
            Ok(Some(bias.ptr()))
        }
    }

    /// The QKV projection, the attention (with smolgen's `bias` where the layer has it) and the
    /// output projection into `tmp`.
    ///
    /// # Safety
    /// `bias`, where given, holds the plan's `batch × heads × 64 × 64` halves under the
    /// device-memory contract (smolgen's output buffer does).
    unsafe fn attention(&self, index: usize, bias: Option<DevicePtr>) -> GpuResult<()> {
        // SAFETY: `x`, `qkv`, `ctx` and `tmp` are the lane's buffers for the plan's rows
        // (`batch × 64`) of the embedding, 3 × d_model and d_model widths; `bias` the caller's
        // promise; the layers are `net`'s (Forward's invariant).
        unsafe {
            let (b, s, plan) = (self.buffers, self.shapes, self.plan);
            let layer = &self.net.encoders[index];
            let (batch, l, x) = (plan.batch(), Some(index), b.x.ptr());
            let rows = batch * SQUARES;
            let bias_in_attention = plan.attention_adds_qkv_bias();
            self.op("qkv", l, linear_cost(&layer.qkv, rows), || {
                self.ops
                    .linear(&layer.qkv, x, b.qkv.ptr(), rows, !bias_in_attention)
            })?;
            let qkv_bias = layer.qkv.bias().filter(|_| bias_in_attention);
            let products = 4 * (batch * s.heads * SQUARES * SQUARES * s.depth) as u64;
            let bias_bytes = if bias.is_some() {
                batch * s.heads * SQUARES * SQUARES
            } else {
                0
            };
            let traffic = HALF * (rows * 3 * s.d_model + bias_bytes + rows * s.d_model);
            let cost = Cost {
                flops: products,
                bytes: traffic as u64,
            };
            self.op("attention", l, cost, || {
                let how = plan.attention_launch;
                let (device, heads) = (self.ops.device, s.heads as i32);
                let (qkv, ctx) = (b.qkv.ptr(), b.ctx.ptr());
                // One block per head at batch 1: launched early, they would share the
                // multiprocessors that the QKV kernel's blocks hold (BT4's portable attention
                // then took 14.4 µs after its wait instead of 5.2).
                let args = AttentionArgs {
                    qkv,
                    qkv_bias,
                    bias,
                    ctx,
                    heads,
                };
                self.ops
                    .launched_plainly(|| plan.attention.launch(device, how, args))
            })?;
            self.op("out proj", l, linear_cost(&layer.out, rows), || {
                self.ops
                    .linear(&layer.out, b.ctx.ptr(), b.tmp.ptr(), rows, false)
            })
        }
    }

    /// The residual LayerNorm after the attention, the FFN, and the layer's last LayerNorm
    /// (unless the plan leaves it to the next layer). The first LayerNorm writes the stream
    /// where the plan keeps it: `x`, or the QKV buffer where a fused kernel needs `x` free.
    fn feed_forward(&self, index: usize) -> GpuResult<()> {
        // SAFETY: `x`, the stream (`x` or `qkv`), `tmp` and `hidden` are the lane's buffers for
        // the plan's rows (`batch × 64`) of the embedding and FFN widths; the layers are `net`'s
        // (Forward's invariant).
        unsafe {
            let (b, s, plan) = (self.buffers, self.shapes, self.plan);
            let layer = &self.net.encoders[index];
            let layer_plan = plan.layers[index];
            let (l, x) = (Some(index), b.x.ptr());
            let rows = plan.batch() * SQUARES;
            let stream = self.stream(layer_plan.stream);
            let ln1 = ResidualNorm {
                bias: layer.out.bias(),
                ln: &layer.ln1,
                skip: x,
            };
            let ffn_act = self.format.ffn_activation;
            match layer_plan.ln1_ffn1 {
                Some(fused) => {
                    let cost = pass_cost(rows * s.embedding, 3) + linear_cost(&layer.ffn1, rows);
                    self.op("ln1+ffn1+act", l, cost, || {
                        let ffn1 = (&layer.ffn1, layer.ffn1.bias(), ffn_act);
                        self.norm_then_dense(fused, ln1, stream, ffn1, b.hidden.ptr())
                    })?;
                }
                None => {
                    self.op("residual+ln1", l, pass_cost(rows * s.embedding, 2), || {
                        self.layer_norm(
                            plan.stream_norm,
                            stream,
                            b.tmp.ptr(),
                            ln1.bias,
                            Activation::Identity,
                            self.alpha,
                            Some(ln1.skip),
                            ln1.ln,
                            rows,
                            s.embedding,
                        )
                    })?;
                    let act_pass = match ffn_act {
                        Activation::Identity | Activation::Relu => Cost::default(),
                        _ => pass_cost(rows * s.dff, 1),
                    };
                    let cost = linear_cost(&layer.ffn1, rows) + act_pass;
                    self.op("ffn1+act", l, cost, || {
                        self.ops
                            .dense_act(&layer.ffn1, stream, b.hidden.ptr(), rows, ffn_act)
                    })?;
                }
            }
            self.op("ffn2", l, linear_cost(&layer.ffn2, rows), || {
                self.ops
                    .linear(&layer.ffn2, b.hidden.ptr(), b.tmp.ptr(), rows, false)
            })?;
            if layer_plan.ln2_to_next.is_some() {
                return Ok(());
            }
            self.op("residual+ln2", l, pass_cost(rows * s.embedding, 2), || {
                let ln2 = self.ln2(index);
                self.residual_norm(ln2.bias, ln2.ln, ln2.skip)
            })
        }
    }
}
