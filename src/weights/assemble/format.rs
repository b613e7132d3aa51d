//! The network's formats: which body, input, heads and activations the file declares, and
//! the attention-body features lc0rs refuses with a reason.

use super::reader::{Reader, join};
use crate::weights::error::WeightsError;
use crate::weights::format::{Activation, HeadLayout, InputEmbedding, InputFormat, NetFormat};
use crate::weights::proto::network_format::{
    ActivationFunction, DefaultActivation, InputEmbeddingFormat, InputFormat as ProtoInput,
    MovesLeftFormat, NetworkStructure, PolicyFormat, ValueFormat,
};
use crate::weights::proto::{NetworkFormat, Weights};
impl Reader<'_> {
    pub(super) fn net_format(&self, nf: &NetworkFormat) -> Result<NetFormat, WeightsError> {
        const F: &str = "format.network_format";
        let structure: NetworkStructure = self.enum_value(&join(F, "network"), nf.network)?;
        let head_layout = match structure {
            NetworkStructure::NetworkAttentionbodyWithHeadformat => HeadLayout::Single,
            NetworkStructure::NetworkAttentionbodyWithMultiheadformat => HeadLayout::Multi,
            NetworkStructure::NetworkOnnx => {
                return Err(self.unsupported("ONNX networks; lc0rs reads lc0's own weights format"));
            }
            NetworkStructure::NetworkClassicalWithHeadformat
            | NetworkStructure::NetworkSeWithHeadformat => HeadLayout::Single,
            other => {
                return Err(self.unsupported(format!("network structure {}", other.as_str_name())));
            }
        };
        let input: ProtoInput = self.enum_value(&join(F, "input"), nf.input)?;
        let input = InputFormat::from_proto(input)
            .ok_or_else(|| self.field_error(&join(F, "input"), "input format is unknown (0)"))?;
        let wdl = match self.enum_value(&join(F, "value"), nf.value)? {
            ValueFormat::ValueWdl => true,
            ValueFormat::ValueClassical => false,
            other => {
                return Err(self.unsupported(format!("value format {}", other.as_str_name())));
            }
        };
        let moves_left = self
            .enum_value::<MovesLeftFormat>(&join(F, "moves_left"), nf.moves_left)?
            == MovesLeftFormat::MovesLeftV1;
        let default_activation =
            match self.enum_value(&join(F, "default_activation"), nf.default_activation)? {
                DefaultActivation::Relu => Activation::Relu,
                DefaultActivation::Mish => Activation::Mish,
            };
        let activation = |name: &str, raw: Option<i32>| -> Result<Activation, WeightsError> {
            let field = join(F, name);
            let value: ActivationFunction = self.enum_value(&field, raw)?;
            Activation::from_proto(value, default_activation)
                .ok_or_else(|| self.unsupported(format!("{field} = {}", value.as_str_name())))
        };
        let input_embedding =
            match self.enum_value(&join(F, "input_embedding"), nf.input_embedding)? {
                InputEmbeddingFormat::InputEmbeddingPeDense => InputEmbedding::PeDense,
                InputEmbeddingFormat::InputEmbeddingPeMap
                | InputEmbeddingFormat::InputEmbeddingNone => InputEmbedding::PeMap,
            };
        Ok(NetFormat {
            input,
            head_layout,
            input_embedding,
            wdl,
            moves_left,
            default_activation,
            smolgen_activation: activation("smolgen_activation", nf.smolgen_activation)?,
            ffn_activation: activation("ffn_activation", nf.ffn_activation)?,
        })
    }

    pub(super) fn check_supported_body(
        &self,
        nf: &NetworkFormat,
        weights: &Weights,
    ) -> Result<(), WeightsError> {
        let policy: PolicyFormat = self.enum_value("format.network_format.policy", nf.policy)?;
        if policy != PolicyFormat::PolicyAttention {
            return Err(self.unsupported(format!(
                "policy format {} over an attention body; lc0 runs attention policy only there",
                policy.as_str_name()
            )));
        }
        if !weights.residual.is_empty() {
            return Err(self.unsupported(format!(
                "a residual tower ({} blocks in weights.residual); lc0rs runs attention bodies without one",
                weights.residual.len()
            )));
        }
        if weights.encoder.is_empty() {
            return Err(self.unsupported("an attention-body network without encoder layers"));
        }
        for (i, layer) in weights.encoder.iter().enumerate() {
            let mha = layer.mha.as_ref();
            if mha.is_some_and(|m| m.rpe_q.is_some() || m.rpe_k.is_some() || m.rpe_v.is_some()) {
                return Err(self.unsupported(format!(
                    "RPE attention (weights.encoder[{i}].mha.rpe_*), which lc0 does not support either"
                )));
            }
        }
        Ok(())
    }
}
