//! The attention body's plan at one batch size: on top of the shared [`PassPlan`], the
//! attention kernel and its launch, the LayerNorm kernel of each width the body normalises,
//! which LayerNorm runs fused into which following kernel, and which buffer the residual stream
//! continues in where a fused kernel needs `x` free. [`Forward`](super::forward::Forward) asks
//! it; nothing in the pass tests batch sizes or device kinds itself.

use std::fmt;

use super::Shapes;
use crate::backend::executor::plan::{NormKernel, PassPlan};
use crate::board::SQUARES;
use crate::gpu::kernels::launchers::NormDense;
use crate::gpu::kernels::{AttentionKernel, AttentionLaunch};
use crate::gpu::{GpuError, GpuResult, Launch};
use crate::weights::format::Activation;

/// What of the network a body plan depends on besides the pass's batch and device.
pub struct Body<'n> {
    pub shapes: &'n Shapes,
    /// Per encoder layer, whether it runs smolgen (the layer has it, and so the weight generator).
    pub smolgen_layers: Vec<bool>,
    /// Whether the embedding is PE_DENSE's (a LayerNorm with the default activation after it).
    pub pe_dense: bool,
    pub default_activation: Activation,
    pub smolgen_activation: Activation,
}

/// Which passes the plan is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// A whole pass: a layer may leave its last LayerNorm to the next layer's first kernel.
    WholePass,
    /// Layer by layer, the stream read back after each: every layer completes it in `x`.
    LayerByLayer,
}

/// The buffer the residual stream continues in after a layer's first LayerNorm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    X,
    /// The QKV buffer, free from the attention until the next layer's QKV GEMM: where a fused
    /// kernel writes `x` (the LayerNorm + FFN1 kernel's normalised rows, or the next layer's
    /// compression taking this layer's last LayerNorm) the stream cannot stay there.
    Qkv,
}

/// How one encoder layer's LayerNorms run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerPlan {
    /// The LayerNorm after the attention fused with FFN1 (`layer_norm_dense_mma`), or alone.
    pub ln1_ffn1: Option<(NormDense, Launch)>,
    pub stream: Stream,
    /// The layer's last LayerNorm left to the next layer's smolgen compression, which runs it
    /// fused; `None`: it runs at the end of the layer.
    pub ln2_to_next: Option<(NormDense, Launch)>,
}

/// The attention body's choices at one batch size on one device.
#[derive(Debug, Clone)]
pub struct BodyPlan {
    pub pass: PassPlan,
    pub attention: AttentionKernel,
    pub attention_launch: AttentionLaunch,
    /// LayerNorms over the residual stream (no activation): the two of each layer where not
    /// fused, and the embedding FFN's.
    pub stream_norm: NormKernel,
    /// PE_DENSE's LayerNorm of the embedding (with the default activation).
    pub embedding_norm: NormKernel,
    /// Smolgen's two LayerNorms (a row per position).
    pub smolgen_norms: Option<[NormKernel; 2]>,
    pub layers: Vec<LayerPlan>,
    shapes: Shapes,
    pe_dense: bool,
}

impl BodyPlan {
    pub fn new(pass: PassPlan, body: &Body<'_>, scope: Scope) -> GpuResult<Self> {
        let (s, batch) = (body.shapes, pass.batch);
        let rows = batch * SQUARES;
        let (attention, attention_launch) = pass.attention(s.depth, s.heads).ok_or_else(|| {
            GpuError::Unsupported(format!("attention heads of depth {}", s.depth))
        })?;
        // The fused kernels write the normalised rows to a buffer the stream can continue in.
        let room_in_qkv = 3 * s.d_model >= s.embedding;
        // Its members take more than 128 registers a thread (one block of 256 threads per
        // multiprocessor): a grid of more blocks than multiprocessors (BT4's FFN1 at batch 1,
        // 192 blocks: two waves on an H100) measured slower fused than separate
        // (docs/performance.md).
        let ln1_ffn1 = pass
            .norm_dense(rows, s.dff, s.embedding)
            .filter(|(_, launch)| room_in_qkv && pass.one_wave(launch));
        let compress_outputs = s.smolgen.map(|(channels, _, _)| channels);
        let takes_norm = |layer: usize| {
            let runs_smolgen = body.smolgen_layers.get(layer).copied().unwrap_or(false);
            compress_outputs
                .filter(|_| runs_smolgen && scope == Scope::WholePass)
                .and_then(|outputs| pass.norm_dense(rows, outputs, s.embedding))
        };
        let layers = (0..body.smolgen_layers.len())
            .map(|index| {
                let next = takes_norm(index + 1);
                let stream = if ln1_ffn1.is_some() || (next.is_some() && room_in_qkv) {
                    Stream::Qkv
                } else {
                    Stream::X
                };
                LayerPlan {
                    ln1_ffn1,
                    stream,
                    ln2_to_next: next.filter(|_| stream == Stream::Qkv),
                }
            })
            .collect();
        let sg = body.smolgen_activation;
        Ok(Self {
            stream_norm: pass.layer_norm(rows, s.embedding, Activation::Identity),
            embedding_norm: pass.layer_norm(rows, s.embedding, body.default_activation),
            smolgen_norms: s.smolgen.map(|(_, hidden, gen_size)| {
                [
                    pass.layer_norm(batch, hidden, sg),
                    pass.layer_norm(batch, s.heads * gen_size, sg),
                ]
            }),
            pass,
            attention,
            attention_launch,
            layers,
            shapes: s.clone(),
            pe_dense: body.pe_dense,
        })
    }

    pub fn batch(&self) -> usize {
        self.pass.batch
    }

    /// The previous layer and the fused kernel its last LayerNorm runs in, where layer
    /// `index`'s smolgen compression takes it.
    pub fn ln2_from_previous(&self, index: usize) -> Option<(usize, (NormDense, Launch))> {
        let previous = index.checked_sub(1)?;
        Some((previous, self.layers.get(previous)?.ln2_to_next?))
    }

    /// Whether the attention kernel adds the QKV bias as it loads Q, K and V (the portable and
    /// AMD matrix-core ones: on the BLAS path, which has no bias epilogue, that saves a pass over
    /// the QKV output, and on Lt it costs nothing), so the QKV GEMM runs without it.
    pub fn attention_adds_qkv_bias(&self) -> bool {
        self.attention.adds_qkv_bias()
    }
}

impl AsRef<PassPlan> for BodyPlan {
    fn as_ref(&self) -> &PassPlan {
        &self.pass
    }
}

impl fmt::Display for BodyPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (s, p, batch) = (&self.shapes, &self.pass, self.batch());
        let rows = batch * SQUARES;
        writeln!(f, "{p}")?;
        write!(
            f,
            "  dense: qkv {}, out proj {}, ffn1 {}, ffn2 {}",
            p.dense(rows, s.embedding, 3 * s.d_model),
            p.dense(rows, s.d_model, s.embedding),
            p.dense(rows, s.embedding, s.dff),
            p.dense(rows, s.dff, s.embedding),
        )?;
        if let Some((channels, hidden, gen_size)) = s.smolgen {
            write!(
                f,
                "; smolgen compress {}, dense1 {}, dense2 {}, weight gen {}",
                p.dense(rows, s.embedding, channels),
                p.dense(batch, SQUARES * channels, hidden),
                p.dense(batch, hidden, s.heads * gen_size),
                p.dense(batch * s.heads, gen_size, SQUARES * SQUARES),
            )?;
        }
        let how = &self.attention_launch;
        write!(
            f,
            "\n  attention: {}, {} head(s) a block, grid {}×{}",
            self.attention.name(),
            how.heads_per_block.unwrap_or(1),
            how.launch.grid[0],
            how.launch.grid[1],
        )?;
        if p.programmatic_launch {
            f.write_str(", launched once the QKV GEMM has finished")?;
        }
        write!(f, "\n  LayerNorm: stream {}", self.stream_norm)?;
        if let Some([ln1, ln2]) = &self.smolgen_norms {
            write!(f, ", smolgen {ln1} and {ln2}")?;
        }
        if self.pe_dense {
            write!(f, ", embedding {}", self.embedding_norm)?;
        }
        for (first, last, layer) in runs(&self.layers) {
            if first == last {
                write!(f, "\n  layer {first}: ")?;
            } else {
                write!(f, "\n  layers {first}–{last}: ")?;
            }
            layer.describe(f)?;
        }
        Ok(())
    }
}

impl LayerPlan {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ln1_ffn1 {
            Some((kernel, launch)) => write!(
                f,
                "ln1+ffn1 in {} ({}×{} blocks)",
                kernel.name(),
                launch.grid[0],
                launch.grid[1]
            )?,
            None => f.write_str("ln1, then ffn1")?,
        }
        match self.stream {
            Stream::X => f.write_str("; stream in x")?,
            Stream::Qkv => f.write_str("; stream in the QKV buffer")?,
        }
        match self.ln2_to_next {
            Some((kernel, _)) => write!(f, "; ln2 in the next layer's {}", kernel.name()),
            None => f.write_str("; ln2 alone"),
        }
    }
}

/// Runs of equal layer plans: (first layer, last layer, plan).
fn runs(layers: &[LayerPlan]) -> Vec<(usize, usize, LayerPlan)> {
    let mut runs: Vec<(usize, usize, LayerPlan)> = Vec::new();
    for (index, layer) in layers.iter().enumerate() {
        match runs.last_mut() {
            Some((_, last, plan)) if plan == layer => *last = index,
            _ => runs.push((index, index, *layer)),
        }
    }
    runs
}

#[cfg(test)]
mod tests;
