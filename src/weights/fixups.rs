//! lc0's load-time format fix-ups (`FixOlderWeightsFile`, docs/lc0-format.md §1.3), applied to the
//! decoded message before any code path is chosen.

use super::proto::network_format::{
    ActivationFunction, InputEmbeddingFormat, InputFormat, NetworkStructure, OutputFormat,
    PolicyFormat, ValueFormat,
};
use super::proto::{Net, NetworkFormat};

/// Rewrites `net.format.network_format` the way lc0 does for files written by older trainers.
pub fn fix_older_weights_file(net: &mut Net) {
    let weights = net.weights.clone().unwrap_or_default();
    let format = net.format.get_or_insert_with(Default::default);
    let nf = format.network_format.get_or_insert_with(|| NetworkFormat {
        input: Some(InputFormat::InputClassical112Plane as i32),
        output: Some(OutputFormat::OutputClassical as i32),
        network: Some(NetworkStructure::NetworkClassicalWithHeadformat as i32),
        value: Some(ValueFormat::ValueClassical as i32),
        policy: Some(PolicyFormat::PolicyClassical as i32),
        ..Default::default()
    });
    let set_classical_heads = |nf: &mut NetworkFormat| {
        nf.value = Some(ValueFormat::ValueClassical as i32);
        nf.policy = Some(PolicyFormat::PolicyClassical as i32);
    };
    match nf.network() {
        NetworkStructure::NetworkClassical => {
            nf.network = Some(NetworkStructure::NetworkClassicalWithHeadformat as i32);
            set_classical_heads(nf);
        }
        NetworkStructure::NetworkSe => {
            nf.network = Some(NetworkStructure::NetworkSeWithHeadformat as i32);
            set_classical_heads(nf);
        }
        NetworkStructure::NetworkSeWithHeadformat if !weights.encoder.is_empty() => {
            // An attention-body net written with an older protobuf.
            nf.network = Some(NetworkStructure::NetworkAttentionbodyWithHeadformat as i32);
            if weights.smolgen_w.is_some() {
                nf.ffn_activation = Some(ActivationFunction::ActivationRelu2 as i32);
                nf.smolgen_activation = Some(ActivationFunction::ActivationSwish as i32);
            }
        }
        NetworkStructure::NetworkAbLegacyWithMultiheadformat => {
            nf.network = Some(NetworkStructure::NetworkAttentionbodyWithMultiheadformat as i32);
        }
        _ => {}
    }
    if nf.network() == NetworkStructure::NetworkAttentionbodyWithHeadformat {
        if weights.policy_heads.is_some() && weights.value_heads.is_some() {
            nf.network = Some(NetworkStructure::NetworkAttentionbodyWithMultiheadformat as i32);
            nf.input_embedding = Some(InputEmbeddingFormat::InputEmbeddingPeDense as i32);
        }
        if nf.input_embedding.is_none() {
            nf.input_embedding = Some(InputEmbeddingFormat::InputEmbeddingPeMap as i32);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weights::proto::{Format, Weights, weights::EncoderLayer, weights::Layer};

    fn net_with(network: NetworkStructure, weights: Weights) -> Net {
        Net {
            format: Some(Format {
                network_format: Some(NetworkFormat {
                    network: Some(network as i32),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            weights: Some(weights),
            ..Default::default()
        }
    }

    fn network_format(net: &Net) -> &NetworkFormat {
        net.format
            .as_ref()
            .unwrap()
            .network_format
            .as_ref()
            .unwrap()
    }

    #[test]
    fn missing_format_becomes_classical() {
        let mut net = Net::default();
        fix_older_weights_file(&mut net);
        let nf = network_format(&net);
        assert_eq!(
            nf.network(),
            NetworkStructure::NetworkClassicalWithHeadformat
        );
        assert_eq!(nf.input(), InputFormat::InputClassical112Plane);
        assert_eq!(nf.policy(), PolicyFormat::PolicyClassical);
    }

    #[test]
    fn old_protobuf_attention_net_with_smolgen() {
        let weights = Weights {
            encoder: vec![EncoderLayer::default()],
            smolgen_w: Some(Layer::default()),
            ..Default::default()
        };
        let mut net = net_with(NetworkStructure::NetworkSeWithHeadformat, weights);
        fix_older_weights_file(&mut net);
        let nf = network_format(&net);
        assert_eq!(
            nf.network(),
            NetworkStructure::NetworkAttentionbodyWithHeadformat
        );
        assert_eq!(nf.ffn_activation(), ActivationFunction::ActivationRelu2);
        assert_eq!(nf.smolgen_activation(), ActivationFunction::ActivationSwish);
        assert_eq!(
            nf.input_embedding(),
            InputEmbeddingFormat::InputEmbeddingPeMap
        );
    }

    #[test]
    fn single_head_format_with_head_maps_becomes_multihead_pe_dense() {
        let weights = Weights {
            policy_heads: Some(Default::default()),
            value_heads: Some(Default::default()),
            ..Default::default()
        };
        let mut net = net_with(
            NetworkStructure::NetworkAttentionbodyWithHeadformat,
            weights,
        );
        fix_older_weights_file(&mut net);
        let nf = network_format(&net);
        assert_eq!(
            nf.network(),
            NetworkStructure::NetworkAttentionbodyWithMultiheadformat
        );
        assert_eq!(
            nf.input_embedding(),
            InputEmbeddingFormat::InputEmbeddingPeDense
        );
    }

    #[test]
    fn legacy_multihead_is_renamed() {
        let mut net = net_with(
            NetworkStructure::NetworkAbLegacyWithMultiheadformat,
            Weights::default(),
        );
        fix_older_weights_file(&mut net);
        assert_eq!(
            network_format(&net).network(),
            NetworkStructure::NetworkAttentionbodyWithMultiheadformat
        );
    }
}
