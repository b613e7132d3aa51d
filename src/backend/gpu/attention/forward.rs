//! The attention body's forward pass, enqueued on the lane's stream with no host
//! synchronisation until the outputs are copied back.

use super::weights::{HeadGpu, NetworkGpu, NormGpu};
use super::{Buffers, Shapes};
use crate::backend::gpu::dense::DenseGpu;
use crate::backend::gpu::ops::{
    Cost, HALF, IoBuffers, Ops, ROW_THREADS, SQUARES, finish_value, linear_cost, pass_cost,
};
use crate::gpu::kernels::launchers::NormDense;
use crate::gpu::kernels::{
    AttentionKernel, activation_code, attention_launch, launchers, layer_norm_warp_kernel,
    norm_dense_launch,
};
use crate::gpu::{DevicePtr, GpuResult, Launch};
use crate::weights::format::{Activation, NetFormat};

/// Threads of the block-per-row LayerNorm for rows wider than this (smolgen's 6144-wide rows).
const WIDE_ROW: usize = 2048;

/// Threads per block of the block-per-row LayerNorm: more for wide rows, which come in few
/// rows (one per position), so that each block has enough parallel work.
fn block_threads_for_row(cols: usize) -> u32 {
    if cols > WIDE_ROW { 1024 } else { ROW_THREADS }
}

/// A residual LayerNorm, `LN(skip + alpha·(tmp + bias))`, as the fused LayerNorm + dense kernel
/// takes it: the one after the attention (with FFN1), or the one that ends a layer, left to the
/// next layer's smolgen compression (at small batches `layer_norm_dense_mma` normalises the rows,
/// writes them to `x` and compresses them, one kernel instead of two).
#[derive(Clone, Copy)]
struct ResidualNorm<'w> {
    bias: Option<DevicePtr>,
    ln: &'w NormGpu,
    skip: DevicePtr,
}

/// A layer's last LayerNorm left to the next layer, with the fused kernel and launch that the
/// next layer's smolgen compression runs it with (decided once, by the layer that leaves it).
#[derive(Clone, Copy)]
struct PendingNorm<'w> {
    norm: ResidualNorm<'w>,
    fused: (NormDense, Launch),
}

/// Enqueues one forward pass of `batch` positions whose inputs are already on the device.
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
    /// The largest batch whose LayerNorm after the attention runs fused with the FFN's first
    /// layer (`layer_norm_dense_mma`, where the device has it).
    pub norm_dense_max_batch: usize,
}

impl<'a> Forward<'a> {
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
        let device = self.ops.device;
        let (gamma, beta) = (ln.gamma.ptr(), ln.beta.ptr());
        let info = device.info();
        // One warp per row; gamma and beta load early where every block has an SM of its own.
        let blocks = rows.div_ceil((ROW_THREADS / info.warp_size) as usize);
        let early = blocks <= info.multiprocessors as usize;
        let warp_kernel = layer_norm_warp_kernel(cols, info.warp_size as usize, act, early);
        if let (Some(kernel), true) = (warp_kernel, cols.is_multiple_of(8)) {
            let launch = Launch {
                grid: [blocks as u32, 1, 1],
                block: [ROW_THREADS, 1, 1],
                shared_bytes: 0,
            };
            return launchers::layer_norm_warp(
                device,
                kernel,
                launch,
                out,
                input,
                bias,
                alpha,
                skip,
                gamma,
                beta,
                ln.eps,
                rows as i32,
                cols as i32,
            );
        }
        let launch = Launch {
            grid: [rows as u32, 1, 1],
            block: [block_threads_for_row(cols), 1, 1],
            shared_bytes: (cols * size_of::<f32>()) as u32,
        };
        launchers::layer_norm(
            device,
            launch,
            out,
            input,
            bias,
            activation_code(act),
            alpha,
            skip,
            gamma,
            beta,
            ln.eps,
            cols as i32,
        )
    }

    /// `x = LN(skip + alpha·(tmp + bias))` over the residual stream: the residual connection
    /// after the out-projection, the FFN and PE_DENSE's embedding FFN. `skip` is `x` itself,
    /// except after the fused LayerNorm + FFN1, which left the stream in another buffer.
    fn residual_norm(
        &self,
        bias: Option<DevicePtr>,
        ln: &NormGpu,
        skip: DevicePtr,
        rows: usize,
    ) -> GpuResult<()> {
        let (x, tmp) = (self.buffers.x.ptr(), self.buffers.tmp.ptr());
        self.layer_norm(
            x,
            tmp,
            bias,
            Activation::Identity,
            self.alpha,
            Some(skip),
            ln,
            rows,
            self.shapes.embedding,
        )
    }

    pub fn enqueue(&self, batch: usize) -> GpuResult<()> {
        let (net, rows) = (self.net, batch * SQUARES);
        let embedding =
            linear_cost(&net.embedding, rows) + pass_cost(rows * self.shapes.input_width, 0);
        self.op("embedding", None, embedding, || self.embed(batch))?;
        let mut ln2 = None;
        for layer in 0..net.encoders.len() {
            ln2 = self.encoder_then(layer, batch, ln2, true)?;
        }
        debug_assert!(
            ln2.is_none(),
            "no layer after the last to take its LayerNorm"
        );
        let p = &net.policy;
        let (b, act) = (self.buffers, self.format.default_activation);
        self.op("policy head", None, p.cost(batch), || {
            p.enqueue(
                &self.ops,
                (b.x.ptr(), act),
                &b.policy,
                self.io.policy(batch),
                batch,
            )
        })?;
        let v = &net.value;
        let value = linear_cost(&v.embedding, rows)
            + linear_cost(&v.hidden, batch)
            + linear_cost(&v.output, batch);
        self.op("value+mlh heads", None, value, || {
            self.value_and_moves_left(batch)
        })
    }

    pub fn embed(&self, batch: usize) -> GpuResult<()> {
        let (b, s, net) = (self.buffers, self.shapes, self.net);
        let rows = batch * SQUARES;
        let (masks, values) = self.io.inputs(batch);
        let (extra, extra_width, extra_stride) =
            match (&net.pe_dense, &b.pe_dense_in, &b.pe_dense_out) {
                (Some(pd), Some(pre_in), Some(pre_out)) => {
                    launchers::pe_dense_input(
                        self.ops.device,
                        Launch::elements(batch * SQUARES * 12),
                        masks,
                        values,
                        pre_in.ptr(),
                        batch as i32,
                    )?;
                    self.ops
                        .linear(&pd.preprocess, pre_in.ptr(), pre_out.ptr(), batch, true)?;
                    (pre_out.ptr(), s.dense_size, SQUARES * s.dense_size)
                }
                _ => (net.positional_encoding.ptr(), SQUARES, 0),
            };
        launchers::expand_tokens(
            self.ops.device,
            Launch::elements(rows * s.input_width),
            masks,
            values,
            Some(extra),
            extra_width as i32,
            extra_stride as i32,
            b.tokens.ptr(),
            batch as i32,
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
            launchers::input_gating(
                self.ops.device,
                // The kernel goes 8 values at a time (a grid-stride loop covers any rest).
                Launch::elements((rows * s.embedding).div_ceil(8)),
                x,
                mult.ptr(),
                add.ptr(),
                rows as i64,
                s.embedding as i32,
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
            self.residual_norm(pd.ffn2.bias(), &pd.ffn_ln, x, rows)?;
        }
        Ok(())
    }

    /// Encoder layer `index`, its residual stream complete in `x` when it returns.
    pub fn encoder(&self, index: usize, batch: usize) -> GpuResult<()> {
        self.encoder_then(index, batch, None, false).map(|_| ())
    }

    /// Encoder layer `index`, first finishing the previous layer's `ln2` where that layer left
    /// it to this one. With `defer_ln2` this layer leaves its own last LayerNorm to the next
    /// layer where that one can take it (and returns it); otherwise it runs it.
    fn encoder_then(
        &self,
        index: usize,
        batch: usize,
        ln2: Option<PendingNorm<'a>>,
        defer_ln2: bool,
    ) -> GpuResult<Option<PendingNorm<'a>>> {
        let (b, s) = (self.buffers, self.shapes);
        let layer = &self.net.encoders[index];
        let rows = batch * SQUARES;
        let x = b.x.ptr();
        let l = Some(index);
        let next_compress = defer_ln2
            .then(|| self.norm_compress_launch(index + 1, batch))
            .flatten();
        let bias = match (&layer.smolgen, &b.smolgen, &self.net.smolgen_weight_gen) {
            (Some(sg), Some([compressed, h1, h2, bias]), Some(weight_gen)) => {
                let act = self.format.smolgen_activation;
                match ln2 {
                    Some(PendingNorm { norm, fused }) => {
                        let cost =
                            pass_cost(rows * s.embedding, 3) + linear_cost(&sg.compress, rows);
                        self.op("ln2+smolgen compress", l, cost, || {
                            // No bias: the compression has none (the unfused `linear` below leaves it out too).
                            self.norm_then_dense(
                                fused,
                                norm,
                                x,
                                (&sg.compress, None, Activation::Identity),
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
                let dense = linear_cost(&sg.dense1, batch) + linear_cost(&sg.dense2, batch);
                let norms = pass_cost(batch * sg.dense1.outputs, 1)
                    + pass_cost(batch * sg.dense2.outputs, 1);
                self.op("smolgen dense1/2+ln", l, dense + norms, || {
                    self.ops
                        .linear(&sg.dense1, compressed.ptr(), h1.ptr(), batch, false)?;
                    self.layer_norm(
                        h1.ptr(),
                        h1.ptr(),
                        sg.dense1.bias(),
                        act,
                        1.0,
                        None,
                        &sg.ln1,
                        batch,
                        sg.dense1.outputs,
                    )?;
                    self.ops
                        .linear(&sg.dense2, h1.ptr(), h2.ptr(), batch, false)?;
                    self.layer_norm(
                        h2.ptr(),
                        h2.ptr(),
                        sg.dense2.bias(),
                        act,
                        1.0,
                        None,
                        &sg.ln2,
                        batch,
                        sg.dense2.outputs,
                    )
                })?;
                self.op(
                    "smolgen weight gen",
                    l,
                    linear_cost(weight_gen, batch * s.heads),
                    || {
                        self.ops
                            .linear(weight_gen, h2.ptr(), bias.ptr(), batch * s.heads, false)
                    },
                )?;
                Some(bias.ptr())
            }
            _ => {
                debug_assert!(
                    ln2.is_none(),
                    "a pending LayerNorm needs smolgen to take it"
                );
                None
            }
        };
        // The portable attention adds the QKV bias as it loads Q, K and V: on the BLAS path
        // (no bias epilogue) that saves a pass over the QKV output, and on Lt it costs nothing.
        let bias_in_attention = matches!(self.attention, AttentionKernel::Portable(_));
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
                    batch,
                    self.ops.device.info().multiprocessors as usize,
                );
                let (device, heads) = (self.ops.device, s.heads as i32);
                let (qkv, ctx) = (b.qkv.ptr(), b.ctx.ptr());
                // One block per head at batch 1: launched early, they would share the
                // multiprocessors that the QKV kernel's blocks hold (BT4's portable attention
                // then took 14.4 µs after its wait instead of 5.2).
                self.ops
                    .launched_plainly(|| match (self.attention, how.heads_per_block) {
                        (AttentionKernel::Portable(kernel), _) => launchers::attention(
                            device, kernel, how.launch, qkv, qkv_bias, bias, ctx, heads,
                        ),
                        (AttentionKernel::TensorCores(kernel), heads_per_block) => {
                            launchers::attention_mma(
                                device,
                                kernel,
                                how.launch,
                                qkv,
                                bias,
                                ctx,
                                heads,
                                heads_per_block.unwrap_or(1),
                            )
                        }
                    })
            },
        )?;
        self.op("out proj", l, linear_cost(&layer.out, rows), || {
            self.ops
                .linear(&layer.out, b.ctx.ptr(), b.tmp.ptr(), rows, false)
        })?;
        let normed = match self.norm_dense_launch(batch) {
            Some(fused) => {
                let cost = pass_cost(rows * s.embedding, 3) + linear_cost(&layer.ffn1, rows);
                self.op("ln1+ffn1+act", l, cost, || {
                    let ln1 = ResidualNorm {
                        bias: layer.out.bias(),
                        ln: &layer.ln1,
                        skip: x,
                    };
                    let ffn1 = (&layer.ffn1, layer.ffn1.bias(), self.format.ffn_activation);
                    self.norm_then_dense(fused, ln1, b.qkv.ptr(), ffn1, b.hidden.ptr())
                })?;
                b.qkv.ptr()
            }
            None => {
                // Where the next layer's compression will take this layer's last LayerNorm
                // (which writes x), the stream continues from the QKV buffer, free until then.
                let into_qkv = next_compress.is_some() && 3 * s.d_model >= s.embedding;
                let normed = if into_qkv { b.qkv.ptr() } else { x };
                self.op("residual+ln1", l, pass_cost(rows * s.embedding, 2), || {
                    self.layer_norm(
                        normed,
                        b.tmp.ptr(),
                        layer.out.bias(),
                        Activation::Identity,
                        self.alpha,
                        Some(x),
                        &layer.ln1,
                        rows,
                        s.embedding,
                    )
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
                            normed,
                            b.hidden.ptr(),
                            rows,
                            self.format.ffn_activation,
                        )
                    },
                )?;
                normed
            }
        };
        self.op("ffn2", l, linear_cost(&layer.ffn2, rows), || {
            self.ops
                .linear(&layer.ffn2, b.hidden.ptr(), b.tmp.ptr(), rows, false)
        })?;
        let ln2 = ResidualNorm {
            bias: layer.ffn2.bias(),
            ln: &layer.ln2,
            skip: normed,
        };
        // The fused kernel writes `x`, so it can take the norm only where the stream is elsewhere.
        if let Some(fused) = next_compress.filter(|_| normed != x) {
            return Ok(Some(PendingNorm { norm: ln2, fused }));
        }
        self.op("residual+ln2", l, pass_cost(rows * s.embedding, 2), || {
            self.residual_norm(ln2.bias, ln2.ln, ln2.skip, rows)
        })?;
        Ok(None)
    }

    /// The fused LayerNorm + dense kernel and its launch for layer `index`'s smolgen compression
    /// taking the previous layer's last LayerNorm, where it runs: a layer with smolgen, and the
    /// batch and shapes the fused kernel takes. The previous layer must also have left its
    /// residual stream in a buffer other than `x`, which the kernel writes.
    fn norm_compress_launch(&self, index: usize, batch: usize) -> Option<(NormDense, Launch)> {
        let compress = &self.net.encoders.get(index)?.smolgen.as_ref()?.compress;
        let usable = batch <= self.norm_dense_max_batch
            && self.buffers.smolgen.is_some()
            && self.net.smolgen_weight_gen.is_some();
        norm_dense_launch(batch * SQUARES, compress.outputs, self.shapes.embedding)
            .filter(|(kernel, _)| usable && self.ops.device.has_kernel(kernel.name()))
    }

    /// The fused LayerNorm + FFN1 kernel and its launch for `batch` positions, where it runs:
    /// a batch of at most `norm_dense_max_batch`, shapes it takes, a device that has it, room
    /// for the normalised rows in the QKV buffer (free between attention and the next layer's
    /// QKV GEMM), and a grid of at most one block per multiprocessor. Its members take more than
    /// 128 registers a thread (one block of 256 threads per multiprocessor): BT4's FFN1 at batch
    /// 1 is 192 blocks, two waves on an H100, and measured slower fused than separate
    /// (docs/performance.md).
    fn norm_dense_launch(&self, batch: usize) -> Option<(NormDense, Launch)> {
        let s = self.shapes;
        if batch > self.norm_dense_max_batch || 3 * s.d_model < s.embedding {
            return None;
        }
        let multiprocessors = self.ops.device.info().multiprocessors;
        norm_dense_launch(batch * SQUARES, s.dff, s.embedding).filter(|(kernel, launch)| {
            launch.grid[0] * launch.grid[1] <= multiprocessors
                && self.ops.device.has_kernel(kernel.name())
        })
    }

    /// `normed = LN(skip + alpha·(tmp + bias))` and `y = act(normed·Wᵀ + b)` in one kernel
    /// (`layer_norm_dense_mma`); `normed` must be neither `tmp` nor the norm's skip. After the
    /// attention the stream continues from `normed` (the LayerNorm after the FFN reads it as its
    /// skip); at the start of a layer `normed` is `x`.
    fn norm_then_dense(
        &self,
        (kernel, launch): (NormDense, Launch),
        norm: ResidualNorm<'_>,
        normed: DevicePtr,
        (dense, bias, act): (&DenseGpu, Option<DevicePtr>, Activation),
        y: DevicePtr,
    ) -> GpuResult<()> {
        launchers::layer_norm_dense_mma(
            self.ops.device,
            kernel,
            launch,
            normed,
            self.buffers.tmp.ptr(),
            norm.bias,
            self.alpha,
            norm.skip,
            norm.ln.gamma.ptr(),
            norm.ln.beta.ptr(),
            norm.ln.eps,
            dense.w.ptr(),
            bias,
            activation_code(act),
            y,
            dense.outputs as i32,
        )
    }

    fn value_and_moves_left(&self, batch: usize) -> GpuResult<()> {
        let b = self.buffers;
        let act = self.format.default_activation;
        let head = |h: &HeadGpu, out: DevicePtr| -> GpuResult<()> {
            self.ops.dense_act(
                &h.embedding,
                b.x.ptr(),
                b.head_embedding.ptr(),
                batch * SQUARES,
                act,
            )?;
            self.ops.dense_act(
                &h.hidden,
                b.head_embedding.ptr(),
                b.head_hidden.ptr(),
                batch,
                act,
            )?;
            self.ops
                .linear(&h.output, b.head_hidden.ptr(), out, batch, true)
        };
        head(&self.net.value, b.value_out.ptr())?;
        let mlh = match &self.net.moves_left {
            Some(h) => {
                head(h, b.mlh_out.ptr())?;
                Some(b.mlh_out.ptr())
            }
            None => None,
        };
        finish_value(
            &self.ops,
            (b.value_out.ptr(), self.format.wdl),
            mlh,
            self.io.finished(),
            batch,
        )
    }
}
