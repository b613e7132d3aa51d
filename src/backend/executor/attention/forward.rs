//! The attention body's forward pass as the network computes it (embedding; per encoder layer
//! smolgen, attention, FFN with their LayerNorms; policy, value and moves-left heads), enqueued
//! on the lane's stream with no host synchronisation until the outputs are copied back. Which
//! kernel each step runs on, and which LayerNorm runs fused into the kernel after it, is the
//! pass's [`BodyPlan`]'s to say.

use super::plan::{BodyPlan, Stream};
use super::weights::{HeadGpu, NetworkGpu, NormGpu};
use super::{Buffers, Shapes};
use crate::backend::executor::dense::DenseGpu;
use crate::backend::executor::io::IoBuffers;
use crate::backend::executor::marks::{Cost, linear_cost, pass_cost};
use crate::backend::executor::ops::{Ops, finish_value};
use crate::backend::executor::plan::NormKernel;
use crate::board::SQUARES;
use crate::gpu::kernels::launchers::NormDense;
use crate::gpu::kernels::{activation_code, launchers};
use crate::gpu::{DevicePtr, GpuResult, Launch};
use crate::weights::format::{Activation, NetFormat};

/// A residual LayerNorm, `LN(skip + alpha·(tmp + bias))`, as the fused LayerNorm + dense kernel
/// takes it: the one after the attention (with FFN1), or the one that ends a layer, left to the
/// next layer's smolgen compression.
#[derive(Clone, Copy)]
pub(super) struct ResidualNorm<'w> {
    pub bias: Option<DevicePtr>,
    pub ln: &'w NormGpu,
    pub skip: DevicePtr,
}

/// Enqueues one forward pass, as its plan says, whose inputs are already on the device.
///
/// Its invariant, which makes its launches keep the
/// [device-memory contract](crate::gpu#the-device-memory-contract) (made `unsafe` by
/// `AttentionPass::forward`, the one place that builds it): `buffers` and `io` are one lane's,
/// made on `ops.device`'s GPU by `Buffers::new` and `IoBuffers::new` for at least
/// `plan.batch()` positions, so each holds its tensor for the plan's rows (`batch × 64`
/// squares); `net` is the pass's weights, each buffer sized by its layer's shape (`shapes`);
/// all outlive the work (and any graph capturing it), and no other work uses the lane's
/// buffers meanwhile.
pub struct Forward<'a> {
    pub ops: Ops<'a>,
    pub plan: &'a BodyPlan,
    pub net: &'a NetworkGpu,
    pub format: &'a NetFormat,
    pub shapes: &'a Shapes,
    pub buffers: &'a Buffers,
    pub io: &'a IoBuffers,
    pub alpha: f32,
}

impl Forward<'_> {
    pub(super) fn op(
        &self,
        op: &'static str,
        layer: Option<usize>,
        cost: Cost,
        work: impl FnOnce() -> GpuResult<()>,
    ) -> GpuResult<()> {
        self.ops.op(op, layer, cost, work)
    }

    /// The pass: the embedding, every encoder layer, the policy head, the value and
    /// moves-left heads.
    pub fn enqueue(&self) -> GpuResult<()> {
        let (net, batch) = (self.net, self.plan.batch());
        let rows = batch * SQUARES;
        let embedding =
            linear_cost(&net.embedding, rows) + pass_cost(rows * self.shapes.input_width, 0);
        self.op("embedding", None, embedding, || self.embed())?;
        for layer in 0..net.encoders.len() {
            self.encoder(layer)?;
        }
        let p = &net.policy;
        let (b, act) = (self.buffers, self.format.default_activation);
        self.op("policy head", None, p.cost(batch), || {
            // SAFETY: the stream `x` (`batch × 64` rows), the lane's policy buffers and the
            // outputs' policy part for `batch`, all made for at least `batch` positions.
            unsafe {
                p.enqueue(
                    &self.ops,
                    (b.x.ptr(), act),
                    &b.policy,
                    self.io.policy(batch),
                    batch,
                )
            }
        })?;
        let v = &net.value;
        let value = linear_cost(&v.embedding, rows)
            + linear_cost(&v.hidden, batch)
            + linear_cost(&v.output, batch);
        self.op("value+mlh heads", None, value, || {
            self.value_and_moves_left()
        })
    }

    /// `out = LN(act(input + bias)·alpha + skip)` row by row, on the plan's `kernel` for rows
    /// of this width.
    ///
    /// # Safety
    /// The device-memory contract for `out`, `input` and `skip` (`rows × cols` halves each)
    /// and `bias` (`cols`); `ln` holds `cols` values.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn layer_norm(
        &self,
        kernel: NormKernel,
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
        // SAFETY: the caller's promise for the tensors; gamma and beta are `ln`'s `cols` values.
        unsafe {
            let device = self.ops.device;
            let (gamma, beta) = (ln.gamma.ptr(), ln.beta.ptr());
            match kernel {
                NormKernel::Warp(kernel, launch) => launchers::layer_norm_warp(
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
                ),
                NormKernel::Block(launch) => launchers::layer_norm(
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
                ),
            }
        }
    }

    /// `x = LN(skip + alpha·(tmp + bias))` over the residual stream: the residual connection
    /// after the out-projection, the FFN and PE_DENSE's embedding FFN. `skip` is `x` itself,
    /// except where the plan left the stream in the QKV buffer.
    ///
    /// # Safety
    /// `skip` holds the plan's rows of the embedding width (the stream's buffers, `x` and
    /// `qkv`, do) and `bias` the embedding width, under the device-memory contract.
    pub(super) unsafe fn residual_norm(
        &self,
        bias: Option<DevicePtr>,
        ln: &NormGpu,
        skip: DevicePtr,
    ) -> GpuResult<()> {
        // SAFETY: `x` and `tmp` hold the plan's rows of the embedding width (the invariant);
        // `skip` and `bias` the caller's promise.
        unsafe {
            let (x, tmp) = (self.buffers.x.ptr(), self.buffers.tmp.ptr());
            self.layer_norm(
                self.plan.stream_norm,
                x,
                tmp,
                bias,
                Activation::Identity,
                self.alpha,
                Some(skip),
                ln,
                self.plan.batch() * SQUARES,
                self.shapes.embedding,
            )
        }
    }

    /// The buffer the plan has the residual stream in.
    pub(super) fn stream(&self, stream: Stream) -> DevicePtr {
        match stream {
            Stream::X => self.buffers.x.ptr(),
            Stream::Qkv => self.buffers.qkv.ptr(),
        }
    }

    /// The input embedding into `x`: tokens from the input planes (and PE_DENSE's
    /// preprocessed positions, or the positional encoding), the dense layer, gating, and
    /// PE_DENSE's FFN.
    pub fn embed(&self) -> GpuResult<()> {
        // SAFETY: the inputs of `io` for `batch` positions; `tokens` (`batch × 64` rows of the
        // input width), `x`, `hidden` and `tmp`, PE_DENSE's buffers (`batch` rows) from the lane's
        // buffers made for at least `batch` positions; the layers' weights and the positional
        // encoding from `net` (Forward's invariant).
        unsafe {
            let (b, s, net, batch) = (self.buffers, self.shapes, self.net, self.plan.batch());
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
                        self.ops.linear(
                            &pd.preprocess,
                            pre_in.ptr(),
                            pre_out.ptr(),
                            batch,
                            true,
                        )?;
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
                        self.plan.embedding_norm,
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
                self.residual_norm(pd.ffn2.bias(), &pd.ffn_ln, x)?;
            }
            Ok(())
        }
    }

    /// `normed = LN(skip + alpha·(tmp + bias))` and `y = act(normed·Wᵀ + b)` in one kernel
    /// (`layer_norm_dense_mma`); `normed` must be neither `tmp` nor the norm's skip. After the
    /// attention the stream continues from `normed` (the LayerNorm after the FFN reads it as its
    /// skip); at the start of a layer `normed` is `x`.
    ///
    /// # Safety
    /// The device-memory contract for `normed` and the norm's skip (the plan's rows of the
    /// embedding width), `y` (those rows of `dense.outputs`) and the biases.
    pub(super) unsafe fn norm_then_dense(
        &self,
        (kernel, launch): (NormDense, Launch),
        norm: ResidualNorm<'_>,
        normed: DevicePtr,
        (dense, bias, act): (&DenseGpu, Option<DevicePtr>, Activation),
        y: DevicePtr,
    ) -> GpuResult<()> {
        // SAFETY: `tmp` holds the plan's rows of the embedding width (the invariant); the
        // LayerNorm's and dense layer's weights are `net`'s; the rest the caller's promise.
        unsafe {
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
    }

    fn value_and_moves_left(&self) -> GpuResult<()> {
        // SAFETY: `x`, `head_embedding` (`batch × 64` rows), `head_hidden`, `value_out` and
        // `mlh_out` (`batch` rows) are the lane's buffers made for at least `batch` positions; the
        // heads' weights are `net`'s; (Q, D, M) go to the outputs' first `batch × 3` values.
        unsafe {
            let (b, batch) = (self.buffers, self.plan.batch());
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
}
