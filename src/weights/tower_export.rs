//! Writes a residual-tower network as lc0's message: `NETWORK_SE_WITH_HEADFORMAT` (or
//! `NETWORK_CLASSICAL_WITH_HEADFORMAT` without SE), every convolution as weights and biases
//! with no batch norm (lc0 then uses them as they are), dense layers `[out][in]`.

use super::codec::{LayerEncoding, encode_layer};
use super::export::net_message;
use super::format::Activation;
use super::network::Dense;
use super::proto::network_format::{
    DefaultActivation, MovesLeftFormat, NetworkStructure, OutputFormat, PolicyFormat, ValueFormat,
};
use super::proto::weights::{self as pw, ConvBlock, Layer};
use super::proto::{Net, NetworkFormat, Weights};
use super::tower::{Conv, ConvHead, TowerNetwork, TowerPolicy};

/// Converts a tower to lc0's message with every layer in `encoding`.
pub fn tower_to_proto(network: &TowerNetwork, encoding: LayerEncoding) -> Net {
    let enc = Encoder { encoding };
    net_message(encoding, network_format(network), enc.weights(network))
}

fn network_format(n: &TowerNetwork) -> NetworkFormat {
    let f = &n.format;
    let structure = if n.has_se() {
        NetworkStructure::NetworkSeWithHeadformat
    } else {
        NetworkStructure::NetworkClassicalWithHeadformat
    };
    let policy = match n.policy {
        TowerPolicy::Classical { .. } => PolicyFormat::PolicyClassical,
        TowerPolicy::Convolution { .. } => PolicyFormat::PolicyConvolution,
        TowerPolicy::Attention(_) => PolicyFormat::PolicyAttention,
    };
    let (output, value) = if f.wdl {
        (OutputFormat::OutputWdl, ValueFormat::ValueWdl)
    } else {
        (OutputFormat::OutputClassical, ValueFormat::ValueClassical)
    };
    let moves_left = if f.moves_left {
        MovesLeftFormat::MovesLeftV1
    } else {
        MovesLeftFormat::MovesLeftNone
    };
    let activation = if f.default_activation == Activation::Mish {
        DefaultActivation::Mish
    } else {
        DefaultActivation::Relu
    };
    NetworkFormat {
        input: Some(f.input.to_proto() as i32),
        output: Some(output as i32),
        network: Some(structure as i32),
        policy: Some(policy as i32),
        value: Some(value as i32),
        moves_left: Some(moves_left as i32),
        default_activation: Some(activation as i32),
        ..Default::default()
    }
}

struct Encoder {
    encoding: LayerEncoding,
}

impl Encoder {
    fn layer(&self, values: &[f32], dims: &[usize]) -> Option<Layer> {
        Some(encode_layer(values, self.encoding, dims))
    }

    fn conv(&self, c: &Conv) -> Option<ConvBlock> {
        Some(ConvBlock {
            weights: self.layer(&c.weights, &[c.outputs, c.inputs, c.kernel, c.kernel]),
            biases: self.layer(&c.biases, &[c.outputs]),
            ..Default::default()
        })
    }

    fn dense(&self, d: &Dense) -> (Option<Layer>, Option<Layer>) {
        (
            self.layer(&d.weights, &[d.outputs, d.inputs]),
            d.biases
                .as_deref()
                .and_then(|b| self.layer(b, &[d.outputs])),
        )
    }

    fn weights(&self, n: &TowerNetwork) -> Weights {
        let mut w = Weights {
            input: self.conv(&n.input),
            residual: n
                .blocks
                .iter()
                .map(|b| pw::Residual {
                    conv1: self.conv(&b.conv1),
                    conv2: self.conv(&b.conv2),
                    se: b.se.as_ref().map(|se| {
                        let ((w1, b1), (w2, b2)) = (self.dense(&se.fc1), self.dense(&se.fc2));
                        pw::SEunit { w1, b1, w2, b2 }
                    }),
                })
                .collect(),
            ..Default::default()
        };
        self.policy(&mut w, &n.policy);
        self.heads(&mut w, &n.value, n.moves_left.as_ref());
        w
    }

    fn policy(&self, w: &mut Weights, policy: &TowerPolicy) {
        match policy {
            TowerPolicy::Classical { conv, dense } => {
                w.policy = self.conv(conv);
                (w.ip_pol_w, w.ip_pol_b) = self.dense(dense);
            }
            TowerPolicy::Convolution { conv1, conv2 } => {
                w.policy1 = self.conv(conv1);
                w.policy = self.conv(conv2);
            }
            TowerPolicy::Attention(head) => {
                (w.ip_pol_w, w.ip_pol_b) = self.dense(&head.embedding);
                (w.ip2_pol_w, w.ip2_pol_b) = self.dense(&head.query);
                (w.ip3_pol_w, w.ip3_pol_b) = self.dense(&head.key);
                w.ip4_pol_w = self.layer(&head.promotion, &[4, head.query.outputs]);
            }
        }
    }

    fn heads(&self, w: &mut Weights, value: &ConvHead, moves_left: Option<&ConvHead>) {
        w.value = self.conv(&value.conv);
        (w.ip1_val_w, w.ip1_val_b) = self.dense(&value.hidden);
        (w.ip2_val_w, w.ip2_val_b) = self.dense(&value.output);
        if let Some(m) = moves_left {
            w.moves_left = self.conv(&m.conv);
            (w.ip1_mov_w, w.ip1_mov_b) = self.dense(&m.hidden);
            (w.ip2_mov_w, w.ip2_mov_b) = self.dense(&m.output);
        }
    }
}
