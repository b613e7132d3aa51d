//! The encoder stack: every layer's attention (QKV, out-projection, smolgen), LayerNorms and
//! FFN, all checked against the first layer's shape, and smolgen's shared weight generator.

use super::EPS_1E3;
use super::reader::{Reader, join};
use crate::board::SQUARES;
use crate::weights::error::WeightsError;
use crate::weights::format::{InputEmbedding, NetFormat};
use crate::weights::network::{Dense, EncoderLayer, Smolgen, SmolgenDims};
use crate::weights::proto::Weights;
use crate::weights::proto::weights as pw;

/// LayerNorm eps of the encoders for PE_MAP nets.
const EPS_1E6: f32 = 1e-6;

impl Reader<'_> {
    /// The encoder stack and, with smolgen, the global weight generator.
    pub(super) fn encoders(
        &self,
        w: &Weights,
        format: &NetFormat,
        e: usize,
    ) -> Result<(Vec<EncoderLayer>, Option<Dense>), WeightsError> {
        let heads = w.headcount() as usize;
        let first = &w.encoder[0];
        let first_mha = first.mha.as_ref();
        let d = self.len(
            "weights.encoder[0].mha.q_b",
            first_mha.and_then(|m| m.q_b.as_ref()),
        )?;
        if heads == 0 || d % heads != 0 {
            return Err(self.field_error(
                "weights.headcount",
                format!("{heads} heads do not divide the model width {d}"),
            ));
        }
        let dff = self.len(
            "weights.encoder[0].ffn.dense1_b",
            first.ffn.as_ref().and_then(|f| f.dense1_b.as_ref()),
        )?;
        let smolgen_dims = match first_mha.and_then(|m| m.smolgen.as_ref()) {
            None => None,
            Some(sg) => Some(self.smolgen_dims("weights.encoder[0].mha.smolgen", sg, e, heads)?),
        };
        let eps = match format.input_embedding {
            InputEmbedding::PeDense => EPS_1E3,
            InputEmbedding::PeMap => EPS_1E6,
        };
        let shape = LayerShape {
            e,
            d,
            dff,
            eps,
            smolgen: smolgen_dims,
            heads,
        };
        let layers = self.encoder_layers_in_parallel(&w.encoder, &shape)?;
        let weight_gen = match smolgen_dims {
            None => None,
            Some(sg) => Some(Dense {
                inputs: sg.gen_size,
                outputs: SQUARES * SQUARES,
                weights: self.matrix(
                    "weights.smolgen_w",
                    w.smolgen_w.as_ref(),
                    SQUARES * SQUARES,
                    sg.gen_size,
                )?,
                biases: None,
            }),
        };
        Ok((layers, weight_gen))
    }

    /// Decodes the encoder layers (about 96 % of T82's values) on all cores, in contiguous
    /// chunks so that the first error reported is the lowest-numbered layer's.
    fn encoder_layers_in_parallel(
        &self,
        layers: &[pw::EncoderLayer],
        shape: &LayerShape,
    ) -> Result<Vec<EncoderLayer>, WeightsError> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let chunk = layers.len().div_ceil(threads).max(1);
        let decode_chunk = |start: usize, part: &[pw::EncoderLayer]| {
            part.iter()
                .enumerate()
                .map(|(i, layer)| {
                    self.encoder_layer(&format!("weights.encoder[{}]", start + i), layer, shape)
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let results: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = layers
                .chunks(chunk)
                .enumerate()
                .map(|(c, part)| scope.spawn(move || decode_chunk(c * chunk, part)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("decoding threads do not panic"))
                .collect()
        });
        let mut out = Vec::with_capacity(layers.len());
        for result in results {
            out.extend(result?);
        }
        Ok(out)
    }

    fn smolgen_dims(
        &self,
        base: &str,
        sg: &pw::Smolgen,
        e: usize,
        heads: usize,
    ) -> Result<SmolgenDims, WeightsError> {
        let compress = self.len(&join(base, "compress"), sg.compress.as_ref())?;
        let gen_total = self.len(&join(base, "dense2_b"), sg.dense2_b.as_ref())?;
        if compress % e != 0 {
            return Err(self.field_error(
                &join(base, "compress"),
                format!("length {compress} is not a multiple of the embedding size {e}"),
            ));
        }
        if gen_total % heads != 0 {
            return Err(self.field_error(
                &join(base, "dense2_b"),
                format!("length {gen_total} is not a multiple of the {heads} heads"),
            ));
        }
        Ok(SmolgenDims {
            hidden_channels: compress / e,
            hidden_size: self.len(&join(base, "dense1_b"), sg.dense1_b.as_ref())?,
            gen_size: gen_total / heads,
        })
    }

    fn encoder_layer(
        &self,
        base: &str,
        layer: &pw::EncoderLayer,
        s: &LayerShape,
    ) -> Result<EncoderLayer, WeightsError> {
        let mha_base = join(base, "mha");
        let mha = layer
            .mha
            .as_ref()
            .ok_or_else(|| self.field_error(&mha_base, "missing"))?;
        let (e, d) = (s.e, s.d);
        let smolgen = match (s.smolgen, mha.smolgen.as_ref()) {
            (None, None) => None,
            (Some(dims), Some(sg)) => {
                Some(self.smolgen(&join(&mha_base, "smolgen"), sg, dims, s)?)
            }
            (expected, _) => {
                return Err(self.field_error(
                    &join(&mha_base, "smolgen"),
                    format!(
                        "is {} here but {} in encoder[0]; every layer must match",
                        presence(expected.is_none()),
                        presence(expected.is_some())
                    ),
                ));
            }
        };
        Ok(EncoderLayer {
            q: self.dense(
                &mha_base,
                ("q_w", mha.q_w.as_ref()),
                ("q_b", mha.q_b.as_ref()),
                d,
                e,
            )?,
            k: self.dense(
                &mha_base,
                ("k_w", mha.k_w.as_ref()),
                ("k_b", mha.k_b.as_ref()),
                d,
                e,
            )?,
            v: self.dense(
                &mha_base,
                ("v_w", mha.v_w.as_ref()),
                ("v_b", mha.v_b.as_ref()),
                d,
                e,
            )?,
            out: self.dense(
                &mha_base,
                ("dense_w", mha.dense_w.as_ref()),
                ("dense_b", mha.dense_b.as_ref()),
                e,
                d,
            )?,
            smolgen,
            ln1: self.layer_norm(
                base,
                ("ln1_gammas", layer.ln1_gammas.as_ref()),
                ("ln1_betas", layer.ln1_betas.as_ref()),
                e,
                s.eps,
            )?,
            ffn: self.ffn(&join(base, "ffn"), layer.ffn.as_ref(), e, s.dff)?,
            ln2: self.layer_norm(
                base,
                ("ln2_gammas", layer.ln2_gammas.as_ref()),
                ("ln2_betas", layer.ln2_betas.as_ref()),
                e,
                s.eps,
            )?,
        })
    }

    fn smolgen(
        &self,
        base: &str,
        sg: &pw::Smolgen,
        dims: SmolgenDims,
        s: &LayerShape,
    ) -> Result<Smolgen, WeightsError> {
        let hc = dims.hidden_channels;
        let hs = dims.hidden_size;
        let gen_total = dims.gen_size * s.heads;
        Ok(Smolgen {
            compress: Dense {
                inputs: s.e,
                outputs: hc,
                weights: self.matrix(&join(base, "compress"), sg.compress.as_ref(), hc, s.e)?,
                biases: None,
            },
            dense1: self.dense(
                base,
                ("dense1_w", sg.dense1_w.as_ref()),
                ("dense1_b", sg.dense1_b.as_ref()),
                hs,
                SQUARES * hc,
            )?,
            ln1: self.layer_norm(
                base,
                ("ln1_gammas", sg.ln1_gammas.as_ref()),
                ("ln1_betas", sg.ln1_betas.as_ref()),
                hs,
                EPS_1E3,
            )?,
            dense2: self.dense(
                base,
                ("dense2_w", sg.dense2_w.as_ref()),
                ("dense2_b", sg.dense2_b.as_ref()),
                gen_total,
                hs,
            )?,
            ln2: self.layer_norm(
                base,
                ("ln2_gammas", sg.ln2_gammas.as_ref()),
                ("ln2_betas", sg.ln2_betas.as_ref()),
                gen_total,
                EPS_1E3,
            )?,
        })
    }
}

fn presence(present: bool) -> &'static str {
    if present { "present" } else { "absent" }
}

/// The sizes every encoder layer must share.
struct LayerShape {
    e: usize,
    d: usize,
    dff: usize,
    eps: f32,
    heads: usize,
    smolgen: Option<SmolgenDims>,
}
