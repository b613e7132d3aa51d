//! The validated, typed description of a residual-tower (convolutional) network: lc0's
//! `NETWORK_CLASSICAL_WITH_HEADFORMAT` and `NETWORK_SE_WITH_HEADFORMAT` (Maia, T78/T80-era
//! nets). Batch norm is already folded into every convolution. Activations of these nets are
//! channel-major per position (`[channel][square]`, lc0's NCHW), so every flatten of a head's
//! `[C][64]` planes is `index = channel·64 + square`.

use super::format::NetFormat;
use super::network::{Dense, PolicyHead, UnknownHead};

/// A 1×1 or 3×3 convolution over the 8×8 board with zero padding, batch norm folded in:
/// `weights[out][in][k·k]` (row-major kernel, `dy` then `dx`), `biases[out]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Conv {
    pub inputs: usize,
    pub outputs: usize,
    /// 1 or 3.
    pub kernel: usize,
    pub weights: Vec<f32>,
    pub biases: Vec<f32>,
}

/// Squeeze-excitation in lc0's scale-and-bias form: `pool = mean over squares`,
/// `h = act(fc1·pool)`, `[γ; β] = fc2·h`, `out = act(sigmoid(γ)·x + β + residual)`.
#[derive(Debug, Clone, PartialEq)]
pub struct SqueezeExcitation {
    /// `[se_channels][C]`.
    pub fc1: Dense,
    /// `[2C][se_channels]`: the first C outputs scale, the last C add.
    pub fc2: Dense,
}

/// `act(SE(conv2(act(conv1(x)))) + x)`, or `act(conv2(act(conv1(x))) + x)` without SE.
#[derive(Debug, Clone, PartialEq)]
pub struct ResidualBlock {
    pub conv1: Conv,
    pub conv2: Conv,
    pub se: Option<SqueezeExcitation>,
}

/// The policy heads lc0 runs on a convolutional body.
#[derive(Debug, Clone, PartialEq)]
pub enum TowerPolicy {
    /// `POLICY_CLASSICAL`: `act(conv 1×1)`, flatten, dense to 1858 logits.
    Classical { conv: Conv, dense: Dense },
    /// `POLICY_CONVOLUTION`: `act(conv1 3×3)`, then `conv2 3×3` to 80 planes (no activation),
    /// mapped to 1858 logits by lc0's convolution policy map.
    Convolution { conv1: Conv, conv2: Conv },
    /// `POLICY_ATTENTION` over the tower's `[64][C]` output; its embedding activation is SELU,
    /// as lc0 hard-codes for these ("apmish") nets.
    Attention(PolicyHead),
}

impl TowerPolicy {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Classical { .. } => "classical",
            Self::Convolution { .. } => "convolution",
            Self::Attention(_) => "attention",
        }
    }
}

/// The value (3 WDL logits or one tanh value) or moves-left head (one output, ReLU) of a
/// convolutional body: `act(conv 1×1)`, flatten, `act(hidden)`, output.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvHead {
    pub conv: Conv,
    pub hidden: Dense,
    pub output: Dense,
}

/// A validated residual-tower network.
#[derive(Debug, Clone, PartialEq)]
pub struct TowerNetwork {
    pub format: NetFormat,
    /// The 112 → `filters` input convolution (3×3).
    pub input: Conv,
    pub blocks: Vec<ResidualBlock>,
    pub policy: TowerPolicy,
    pub value: ConvHead,
    pub moves_left: Option<ConvHead>,
}

/// The only head names a residual-tower file has (lc0 builds them from the top-level fields).
pub const POLICY_HEAD_NAME: &str = "vanilla";
pub const VALUE_HEAD_NAME: &str = "winner";

impl TowerNetwork {
    /// Channels of the tower.
    pub fn filters(&self) -> usize {
        self.input.outputs
    }

    /// Whether the residual blocks carry squeeze-excitation units.
    pub fn has_se(&self) -> bool {
        self.blocks.iter().any(|b| b.se.is_some())
    }

    /// Checks lc0's head names: these files have "vanilla" and "winner" only.
    pub fn check_heads(policy: &str, value: &str) -> Result<(), UnknownHead> {
        for (kind, name, only) in [
            ("policy", policy, POLICY_HEAD_NAME),
            ("value", value, VALUE_HEAD_NAME),
        ] {
            if name != only {
                return Err(UnknownHead {
                    kind,
                    name: name.to_owned(),
                    available: only.to_owned(),
                });
            }
        }
        Ok(())
    }
}
