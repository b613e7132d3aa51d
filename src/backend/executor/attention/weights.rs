//! The network's weights on the GPU in fp16, laid out for the executor: Q, K and V weights
//! concatenated so QKV is one GEMM, and the policy's query and key likewise.

use crate::backend::executor::dense::{DenseGpu, dense, stacked, upload_f16};
use crate::backend::executor::policy::PolicyGpu;
use crate::chess::policy_index::positional_encoding;
use crate::gpu::{GpuBuffer, GpuDevice, GpuResult};
use crate::weights::network::{Dense, LayerNorm, Network};

pub struct NormGpu {
    pub gamma: GpuBuffer,
    pub beta: GpuBuffer,
    pub eps: f32,
}

pub struct SmolgenGpu {
    pub compress: DenseGpu,
    pub dense1: DenseGpu,
    pub ln1: NormGpu,
    pub dense2: DenseGpu,
    pub ln2: NormGpu,
}

pub struct EncoderGpu {
    /// `[3·D][E]`: q, k, v.
    pub qkv: DenseGpu,
    pub out: DenseGpu,
    pub smolgen: Option<SmolgenGpu>,
    pub ln1: NormGpu,
    pub ffn1: DenseGpu,
    pub ffn2: DenseGpu,
    pub ln2: NormGpu,
}

pub struct PeDenseGpu {
    pub preprocess: DenseGpu,
    pub ln: NormGpu,
    pub ffn1: DenseGpu,
    pub ffn2: DenseGpu,
    pub ffn_ln: NormGpu,
}

pub struct HeadGpu {
    pub embedding: DenseGpu,
    pub hidden: DenseGpu,
    pub output: DenseGpu,
}

/// lc0's gating tensors `[E][64]` (channel-major) as `[64][E]`, the order the embedding's
/// output is in, so that the gating kernel reads all three in order.
fn square_major(channel_major: &[f32]) -> Vec<f32> {
    let channels = channel_major.len() / 64;
    (0..64)
        .flat_map(|s| (0..channels).map(move |c| channel_major[c * 64 + s]))
        .collect()
}

/// Everything the executor reads, uploaded once.
pub struct NetworkGpu {
    pub embedding: DenseGpu,
    pub gating: Option<(GpuBuffer, GpuBuffer)>,
    pub pe_dense: Option<PeDenseGpu>,
    pub encoders: Vec<EncoderGpu>,
    pub smolgen_weight_gen: Option<DenseGpu>,
    pub policy: PolicyGpu,
    pub value: HeadGpu,
    pub moves_left: Option<HeadGpu>,
    pub positional_encoding: GpuBuffer,
}

fn norm(device: &dyn GpuDevice, ln: &LayerNorm) -> GpuResult<NormGpu> {
    Ok(NormGpu {
        gamma: upload_f16(device, &ln.gammas)?,
        beta: upload_f16(device, &ln.betas)?,
        eps: ln.eps,
    })
}

impl NetworkGpu {
    pub fn upload(device: &dyn GpuDevice, net: &Network) -> GpuResult<Self> {
        let emb = &net.embedding;
        let encoders = net
            .encoders
            .iter()
            .map(|l| {
                Ok(EncoderGpu {
                    qkv: stacked(device, &[&l.q, &l.k, &l.v])?,
                    out: dense(device, &l.out)?,
                    smolgen: l
                        .smolgen
                        .as_ref()
                        .map(|s| -> GpuResult<SmolgenGpu> {
                            Ok(SmolgenGpu {
                                compress: dense(device, &s.compress)?,
                                dense1: dense(device, &s.dense1)?,
                                ln1: norm(device, &s.ln1)?,
                                dense2: dense(device, &s.dense2)?,
                                ln2: norm(device, &s.ln2)?,
                            })
                        })
                        .transpose()?,
                    ln1: norm(device, &l.ln1)?,
                    ffn1: dense(device, &l.ffn.dense1)?,
                    ffn2: dense(device, &l.ffn.dense2)?,
                    ln2: norm(device, &l.ln2)?,
                })
            })
            .collect::<GpuResult<Vec<_>>>()?;
        let head = |h: (&Dense, &Dense, &Dense)| -> GpuResult<HeadGpu> {
            Ok(HeadGpu {
                embedding: dense(device, h.0)?,
                hidden: dense(device, h.1)?,
                output: dense(device, h.2)?,
            })
        };
        let v = net.value();
        Ok(Self {
            embedding: dense(device, &emb.dense)?,
            gating: emb
                .gating
                .as_ref()
                .map(|g| -> GpuResult<_> {
                    Ok((
                        upload_f16(device, &square_major(&g.mult))?,
                        upload_f16(device, &square_major(&g.add))?,
                    ))
                })
                .transpose()?,
            pe_dense: emb
                .pe_dense
                .as_ref()
                .map(|pd| -> GpuResult<PeDenseGpu> {
                    Ok(PeDenseGpu {
                        preprocess: dense(device, &pd.preprocess)?,
                        ln: norm(device, &pd.ln)?,
                        ffn1: dense(device, &pd.ffn.dense1)?,
                        ffn2: dense(device, &pd.ffn.dense2)?,
                        ffn_ln: norm(device, &pd.ffn_ln)?,
                    })
                })
                .transpose()?,
            encoders,
            smolgen_weight_gen: net
                .smolgen_weight_gen
                .as_ref()
                .map(|g| dense(device, g))
                .transpose()?,
            policy: PolicyGpu::upload(device, net.policy())?,
            value: head((&v.embedding, &v.hidden, &v.output))?,
            moves_left: net
                .moves_left
                .as_ref()
                .map(|m| head((&m.embedding, &m.hidden, &m.output)))
                .transpose()?,
            positional_encoding: upload_f16(device, positional_encoding())?,
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn gating_tensors_become_square_major() {
        // Channel c, square s holds 100·c + s.
        let channel_major: Vec<f32> = (0..3)
            .flat_map(|c| (0..64).map(move |s| (100 * c + s) as f32))
            .collect();
        let square_major = super::square_major(&channel_major);
        assert_eq!(&square_major[..6], &[0.0, 100.0, 200.0, 1.0, 101.0, 201.0]);
        assert_eq!(square_major[63 * 3 + 2], 263.0);
    }
}
