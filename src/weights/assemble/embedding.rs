//! The input embedding: the dense layer over the input planes (with the PE_MAP positional
//! encoding or the PE_DENSE preprocessing), and the optional input gating.

use super::EPS_1E3;
use super::reader::{Reader, join};
use crate::board::{INPUT_PLANES, SQUARES};
use crate::weights::error::WeightsError;
use crate::weights::format::{InputEmbedding, NetFormat};
use crate::weights::network::{DenseEmbeddingParts, Embedding, InputGating};
use crate::weights::proto::Weights;

/// Planes of the current board that PE_DENSE preprocesses (our 6 and their 6 piece planes).
const PE_DENSE_PLANES: usize = 12;

impl Reader<'_> {
    pub(super) fn embedding(
        &self,
        w: &Weights,
        format: &NetFormat,
    ) -> Result<Embedding, WeightsError> {
        const B: &str = "weights";
        let e = self.len("weights.ip_emb_b", w.ip_emb_b.as_ref())?;
        let pe_dense = match format.input_embedding {
            InputEmbedding::PeMap => None,
            InputEmbedding::PeDense => Some(self.pe_dense_parts(w, e)?),
        };
        let extra = match &pe_dense {
            None => SQUARES,
            Some(parts) => parts.preprocess.outputs / SQUARES,
        };
        let dense = self.dense(
            B,
            ("ip_emb_w", w.ip_emb_w.as_ref()),
            ("ip_emb_b", w.ip_emb_b.as_ref()),
            e,
            INPUT_PLANES + extra,
        )?;
        let gating = match (&w.ip_mult_gate, &w.ip_add_gate) {
            (None, None) => None,
            (mult, add) => Some(InputGating {
                mult: self.matrix("weights.ip_mult_gate", mult.as_ref(), e, SQUARES)?,
                add: self.matrix("weights.ip_add_gate", add.as_ref(), e, SQUARES)?,
            }),
        };
        Ok(Embedding {
            dense,
            gating,
            pe_dense,
        })
    }

    fn pe_dense_parts(&self, w: &Weights, e: usize) -> Result<DenseEmbeddingParts, WeightsError> {
        const B: &str = "weights";
        let pre_len = self.len("weights.ip_emb_preproc_b", w.ip_emb_preproc_b.as_ref())?;
        if pre_len % SQUARES != 0 {
            return Err(self.field_error(
                "weights.ip_emb_preproc_b",
                format!("length {pre_len} is not a multiple of {SQUARES}"),
            ));
        }
        let preprocess = self.dense(
            B,
            ("ip_emb_preproc_w", w.ip_emb_preproc_w.as_ref()),
            ("ip_emb_preproc_b", w.ip_emb_preproc_b.as_ref()),
            pre_len,
            SQUARES * PE_DENSE_PLANES,
        )?;
        let ffn_base = "weights.ip_emb_ffn";
        let ffn_weights = w.ip_emb_ffn.as_ref();
        let dff = self.len(
            &join(ffn_base, "dense1_b"),
            ffn_weights.and_then(|f| f.dense1_b.as_ref()),
        )?;
        Ok(DenseEmbeddingParts {
            preprocess,
            ln: self.layer_norm(
                B,
                ("ip_emb_ln_gammas", w.ip_emb_ln_gammas.as_ref()),
                ("ip_emb_ln_betas", w.ip_emb_ln_betas.as_ref()),
                e,
                EPS_1E3,
            )?,
            ffn: self.ffn(ffn_base, ffn_weights, e, dff)?,
            ffn_ln: self.layer_norm(
                B,
                ("ip_emb_ffn_ln_gammas", w.ip_emb_ffn_ln_gammas.as_ref()),
                ("ip_emb_ffn_ln_betas", w.ip_emb_ffn_ln_betas.as_ref()),
                e,
                EPS_1E3,
            )?,
        })
    }
}
