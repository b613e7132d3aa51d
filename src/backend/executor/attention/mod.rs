//! The attention-body network on the GPU: its weights uploaded once ([`weights`]), its
//! activation buffers per lane, and its pass ([`forward`]): embedding, encoder layers,
//! attention policy, value and moves-left heads.

mod encoder;
mod forward;
pub mod plan;
pub mod weights;

use super::io::{HALF, IoBuffers};
use super::ops::Ops;
use super::pass::NetworkPass;
use super::plan::PassPlan;
use super::policy::{PolicyBuffers, PolicyGpu};
use crate::board::SQUARES;
use crate::gpu::kernels::{AttentionFamily, AttentionKernel};
use crate::gpu::{GpuBuffer, GpuDevice, GpuError, GpuResult};
use crate::weights::format::NetFormat;
use crate::weights::network::Network;
use forward::Forward;
use plan::{Body, BodyPlan, Scope};
use weights::NetworkGpu;

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
    pub value: (usize, usize, usize),
    pub mlh: Option<(usize, usize)>,
}

impl Shapes {
    pub fn of(net: &Network) -> Self {
        let v = net.value();
        Self {
            embedding: net.dims.embedding,
            d_model: net.dims.d_model,
            heads: net.dims.heads,
            depth: net.dims.head_depth,
            dff: net.dims.dff,
            input_width: net.dims.input_width,
            dense_size: net.dims.dense_size,
            embedding_dff: net
                .embedding
                .pe_dense
                .as_ref()
                .map_or(0, |p| p.ffn.dense1.outputs),
            smolgen: net
                .dims
                .smolgen
                .map(|s| (s.hidden_channels, s.hidden_size, s.gen_size)),
            value: (v.embedding.outputs, v.hidden.outputs, v.output.outputs),
            mlh: net
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
        if AttentionKernel::for_depth(self.depth, AttentionFamily::Portable).is_none() {
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
    pe_dense_in: Option<GpuBuffer>,
    pe_dense_out: Option<GpuBuffer>,
    tokens: GpuBuffer,
    pub x: GpuBuffer,
    qkv: GpuBuffer,
    ctx: GpuBuffer,
    tmp: GpuBuffer,
    hidden: GpuBuffer,
    smolgen: Option<[GpuBuffer; 4]>,
    policy: PolicyBuffers,
    head_embedding: GpuBuffer,
    head_hidden: GpuBuffer,
    value_out: GpuBuffer,
    mlh_out: GpuBuffer,
}

impl Buffers {
    pub fn new(
        device: &dyn GpuDevice,
        s: &Shapes,
        policy: &PolicyGpu,
        max_batch: usize,
    ) -> GpuResult<Self> {
        let rows = max_batch * SQUARES;
        let half = |elements: usize| device.alloc(elements * HALF);
        let head_width = s.value.0.max(s.mlh.map_or(0, |m| m.0));
        let head_hidden = s.value.1.max(s.mlh.map_or(0, |m| m.1));
        Ok(Self {
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
            policy: PolicyBuffers::new(device, policy, max_batch)?,
            head_embedding: half(rows * head_width)?,
            head_hidden: half(max_batch * head_hidden)?,
            value_out: half(max_batch * s.value.2)?,
            mlh_out: half(max_batch)?,
        })
    }

    /// Every buffer, for filling and counting.
    fn all(&self) -> impl Iterator<Item = &GpuBuffer> {
        [
            &self.tokens,
            &self.x,
            &self.qkv,
            &self.ctx,
            &self.tmp,
            &self.hidden,
            &self.head_embedding,
            &self.head_hidden,
            &self.value_out,
            &self.mlh_out,
        ]
        .into_iter()
        .chain(self.pe_dense_in.iter())
        .chain(self.pe_dense_out.iter())
        .chain(self.smolgen.iter().flatten())
        .chain(self.policy.all())
    }
}

/// An attention-body network on the device.
pub struct AttentionPass {
    net: NetworkGpu,
    format: NetFormat,
    shapes: Shapes,
    alpha: f32,
}

impl AttentionPass {
    /// Checks the kernels' limits and uploads the weights.
    pub fn new(device: &dyn GpuDevice, network: &Network) -> GpuResult<Self> {
        let shapes = Shapes::of(network);
        shapes.check_supported()?;
        Ok(Self {
            net: NetworkGpu::upload(device, network)?,
            format: network.format.clone(),
            shapes,
            alpha: network.residual_alpha,
        })
    }

    /// What of the network its plans depend on.
    fn body(&self) -> Body<'_> {
        let weight_gen = self.net.smolgen_weight_gen.is_some();
        Body {
            shapes: &self.shapes,
            smolgen_layers: (self.net.encoders.iter())
                .map(|layer| layer.smolgen.is_some() && weight_gen)
                .collect(),
            pe_dense: self.net.pe_dense.is_some(),
            default_activation: self.format.default_activation,
            smolgen_activation: self.format.smolgen_activation,
        }
    }

    /// The pass of `plan` over `io` and `buffers`.
    ///
    /// # Safety
    /// [`NetworkPass::enqueue`]'s, which is [`Forward`]'s invariant.
    unsafe fn forward<'a>(
        &'a self,
        ops: &Ops<'a>,
        plan: &'a BodyPlan,
        io: &'a IoBuffers,
        buffers: &'a Buffers,
    ) -> Forward<'a> {
        Forward {
            ops: *ops,
            plan,
            net: &self.net,
            format: &self.format,
            shapes: &self.shapes,
            buffers,
            io,
            alpha: self.alpha,
        }
    }
}

impl NetworkPass for AttentionPass {
    type Buffers = Buffers;
    type Plan = BodyPlan;

    fn plan(&self, pass: PassPlan) -> GpuResult<BodyPlan> {
        BodyPlan::new(pass, &self.body(), Scope::WholePass)
    }

    fn buffers(&self, device: &dyn GpuDevice, max_batch: usize) -> GpuResult<Buffers> {
        Buffers::new(device, &self.shapes, &self.net.policy, max_batch)
    }

    fn each_buffer(buffers: &Buffers) -> Vec<&GpuBuffer> {
        buffers.all().collect()
    }

    unsafe fn enqueue(
        &self,
        ops: &Ops<'_>,
        plan: &BodyPlan,
        io: &IoBuffers,
        buffers: &Buffers,
    ) -> GpuResult<()> {
        // SAFETY: the caller's promise, which `forward` asks for.
        unsafe { self.forward(ops, plan, io, buffers) }.enqueue()
    }

    /// The residual stream after the embedding and after each encoder layer.
    unsafe fn layer_outputs(
        &self,
        ops: &Ops<'_>,
        io: &IoBuffers,
        buffers: &Buffers,
    ) -> GpuResult<Option<Vec<Vec<f32>>>> {
        let plan = BodyPlan::new(ops.plan.clone(), &self.body(), Scope::LayerByLayer)?;
        let batch = plan.batch();
        // SAFETY: the caller's promise for `ops.plan`'s batch, which is `plan`'s.
        let forward = unsafe { self.forward(ops, &plan, io, buffers) };
        let download_x = || -> GpuResult<Vec<f32>> {
            let mut bytes = vec![0u8; batch * SQUARES * self.shapes.embedding * HALF];
            buffers.x.copy_to_host(ops.device, 0, &mut bytes)?;
            Ok(bytes
                .chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect())
        };
        forward.embed()?;
        let mut out = vec![download_x()?];
        for layer in 0..self.net.encoders.len() {
            forward.encoder(layer)?;
            out.push(download_x()?);
        }
        Ok(Some(out))
    }

    fn format(&self) -> &NetFormat {
        &self.format
    }

    fn has_moves_left(&self) -> bool {
        self.net.moves_left.is_some()
    }
}
