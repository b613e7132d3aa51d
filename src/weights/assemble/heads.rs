//! The output heads: attention policy heads, value heads and the moves-left head, by lc0's
//! names, from the multi-head fields or the older top-level ones.

use super::reader::{Reader, join};
use crate::board::SQUARES;
use crate::weights::error::WeightsError;
use crate::weights::network::{MovesLeftHead, Named, PolicyHead, ValueHead};
use crate::weights::proto::Weights;
use crate::weights::proto::weights::{self as pw, Layer};

impl Reader<'_> {
    /// Policy heads by lc0's names: from `weights.policy_heads` if present, else "vanilla" from
    /// the top-level fields. A head without its own embedding uses the shared one.
    pub(super) fn policy_heads(
        &self,
        w: &Weights,
        e: usize,
    ) -> Result<Vec<Named<PolicyHead>>, WeightsError> {
        let Some(heads) = w.policy_heads.as_ref() else {
            let top = top_level_policy(w);
            let head = self.policy_head("weights", &top, (None, None), e)?;
            return Ok(vec![Named {
                name: "vanilla".to_owned(),
                head,
            }]);
        };
        let shared = (
            heads.ip_pol_w.as_ref().or(w.ip_pol_w.as_ref()),
            heads.ip_pol_b.as_ref().or(w.ip_pol_b.as_ref()),
        );
        let entries = [
            ("vanilla", "vanilla", &heads.vanilla),
            ("optimistic", "optimistic_st", &heads.optimistic_st),
            ("soft", "soft", &heads.soft),
            ("opponent", "opponent", &heads.opponent),
        ];
        let list: Vec<_> = entries
            .into_iter()
            .filter_map(|(name, field, head)| head.as_ref().map(|h| (name, field, h)))
            .map(|(name, field, head)| {
                let head =
                    self.policy_head(&format!("weights.policy_heads.{field}"), head, shared, e)?;
                Ok(Named {
                    name: name.to_owned(),
                    head,
                })
            })
            .collect::<Result<_, WeightsError>>()?;
        if list.is_empty() {
            return Err(self.field_error("weights.policy_heads", "holds no policy head"));
        }
        Ok(list)
    }

    pub(super) fn policy_head(
        &self,
        base: &str,
        h: &pw::PolicyHead,
        shared: (Option<&Layer>, Option<&Layer>),
        e: usize,
    ) -> Result<PolicyHead, WeightsError> {
        if !h.pol_encoder.is_empty() {
            return Err(self.unsupported(format!("policy encoder layers ({base}.pol_encoder)")));
        }
        let own = h
            .ip_pol_w
            .as_ref()
            .is_some_and(|l| l.params.as_ref().is_some_and(|p| !p.is_empty()));
        let (emb_base, w, b) = if own || shared.0.is_none() {
            (base, h.ip_pol_w.as_ref(), h.ip_pol_b.as_ref())
        } else {
            ("weights.policy_heads", shared.0, shared.1)
        };
        let embedding = self.dense_sized_by_bias(emb_base, ("ip_pol_w", w), ("ip_pol_b", b), e)?;
        let ep = embedding.outputs;
        let query = self.dense_sized_by_bias(
            base,
            ("ip2_pol_w", h.ip2_pol_w.as_ref()),
            ("ip2_pol_b", h.ip2_pol_b.as_ref()),
            ep,
        )?;
        let dp = query.outputs;
        Ok(PolicyHead {
            embedding,
            key: self.dense(
                base,
                ("ip3_pol_w", h.ip3_pol_w.as_ref()),
                ("ip3_pol_b", h.ip3_pol_b.as_ref()),
                dp,
                ep,
            )?,
            promotion: self.matrix(&join(base, "ip4_pol_w"), h.ip4_pol_w.as_ref(), 4, dp)?,
            query,
        })
    }

    /// Value heads by lc0's names: from `weights.value_heads` if present, else "winner" from
    /// the top-level fields.
    pub(super) fn value_heads(
        &self,
        w: &Weights,
        e: usize,
        wdl: bool,
    ) -> Result<Vec<Named<ValueHead>>, WeightsError> {
        let Some(heads) = w.value_heads.as_ref() else {
            let top = pw::ValueHead {
                ip_val_w: w.ip_val_w.clone(),
                ip_val_b: w.ip_val_b.clone(),
                ip1_val_w: w.ip1_val_w.clone(),
                ip1_val_b: w.ip1_val_b.clone(),
                ip2_val_w: w.ip2_val_w.clone(),
                ip2_val_b: w.ip2_val_b.clone(),
                ..Default::default()
            };
            let head = self.value_head("weights", &top, e, wdl)?;
            return Ok(vec![Named {
                name: "winner".to_owned(),
                head,
            }]);
        };
        let entries = [
            ("winner", &heads.winner),
            ("q", &heads.q),
            ("st", &heads.st),
        ];
        let list: Vec<_> = entries
            .into_iter()
            .filter_map(|(name, head)| head.as_ref().map(|h| (name, h)))
            .map(|(name, head)| {
                let head = self.value_head(&format!("weights.value_heads.{name}"), head, e, wdl)?;
                Ok(Named {
                    name: name.to_owned(),
                    head,
                })
            })
            .collect::<Result<_, WeightsError>>()?;
        if list.is_empty() {
            return Err(self.field_error("weights.value_heads", "holds no value head"));
        }
        Ok(list)
    }

    fn value_head(
        &self,
        base: &str,
        h: &pw::ValueHead,
        e: usize,
        wdl: bool,
    ) -> Result<ValueHead, WeightsError> {
        let embedding = self.dense_sized_by_bias(
            base,
            ("ip_val_w", h.ip_val_w.as_ref()),
            ("ip_val_b", h.ip_val_b.as_ref()),
            e,
        )?;
        let hidden = self.dense_sized_by_bias(
            base,
            ("ip1_val_w", h.ip1_val_w.as_ref()),
            ("ip1_val_b", h.ip1_val_b.as_ref()),
            SQUARES * embedding.outputs,
        )?;
        let outputs = if wdl { 3 } else { 1 };
        let output = self.dense(
            base,
            ("ip2_val_w", h.ip2_val_w.as_ref()),
            ("ip2_val_b", h.ip2_val_b.as_ref()),
            outputs,
            hidden.outputs,
        )?;
        Ok(ValueHead {
            embedding,
            hidden,
            output,
        })
    }

    pub(super) fn moves_left(&self, w: &Weights, e: usize) -> Result<MovesLeftHead, WeightsError> {
        const B: &str = "weights";
        let embedding = self.dense_sized_by_bias(
            B,
            ("ip_mov_w", w.ip_mov_w.as_ref()),
            ("ip_mov_b", w.ip_mov_b.as_ref()),
            e,
        )?;
        let hidden = self.dense_sized_by_bias(
            B,
            ("ip1_mov_w", w.ip1_mov_w.as_ref()),
            ("ip1_mov_b", w.ip1_mov_b.as_ref()),
            SQUARES * embedding.outputs,
        )?;
        let output = self.dense(
            B,
            ("ip2_mov_w", w.ip2_mov_w.as_ref()),
            ("ip2_mov_b", w.ip2_mov_b.as_ref()),
            1,
            hidden.outputs,
        )?;
        Ok(MovesLeftHead {
            embedding,
            hidden,
            output,
        })
    }
}

/// The policy head of a file that keeps it in the top-level fields (older attention nets and
/// attention policy over a convolutional body), as one `PolicyHead` message.
pub(super) fn top_level_policy(w: &Weights) -> pw::PolicyHead {
    pw::PolicyHead {
        ip_pol_w: w.ip_pol_w.clone(),
        ip_pol_b: w.ip_pol_b.clone(),
        ip2_pol_w: w.ip2_pol_w.clone(),
        ip2_pol_b: w.ip2_pol_b.clone(),
        ip3_pol_w: w.ip3_pol_w.clone(),
        ip3_pol_b: w.ip3_pol_b.clone(),
        ip4_pol_w: w.ip4_pol_w.clone(),
        pol_encoder: w.pol_encoder.clone(),
        ..Default::default()
    }
}
