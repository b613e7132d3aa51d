//! The network's declared formats, as lc0rs' own types: what the backends and the input encoder
//! switch on. Converted from the protobuf enums after lc0's load-time fix-ups.

use serde::Serialize;

use super::proto::network_format as pf;

/// How positions are encoded into the 112 input planes (`NetworkFormat.input`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InputFormat {
    Classical112,
    With112CastlingPlane,
    Canonical,
    CanonicalHectoplies,
    CanonicalV2,
    CanonicalHectopliesArmageddon,
    CanonicalV2Armageddon,
}

impl InputFormat {
    pub fn from_proto(value: pf::InputFormat) -> Option<Self> {
        use pf::InputFormat as P;
        Some(match value {
            P::InputUnknown => return None,
            P::InputClassical112Plane => Self::Classical112,
            P::Input112WithCastlingPlane => Self::With112CastlingPlane,
            P::Input112WithCanonicalization => Self::Canonical,
            P::Input112WithCanonicalizationHectoplies => Self::CanonicalHectoplies,
            P::Input112WithCanonicalizationV2 => Self::CanonicalV2,
            P::Input112WithCanonicalizationHectopliesArmageddon => {
                Self::CanonicalHectopliesArmageddon
            }
            P::Input112WithCanonicalizationV2Armageddon => Self::CanonicalV2Armageddon,
        })
    }

    pub fn to_proto(self) -> pf::InputFormat {
        use pf::InputFormat as P;
        match self {
            Self::Classical112 => P::InputClassical112Plane,
            Self::With112CastlingPlane => P::Input112WithCastlingPlane,
            Self::Canonical => P::Input112WithCanonicalization,
            Self::CanonicalHectoplies => P::Input112WithCanonicalizationHectoplies,
            Self::CanonicalV2 => P::Input112WithCanonicalizationV2,
            Self::CanonicalHectopliesArmageddon => {
                P::Input112WithCanonicalizationHectopliesArmageddon
            }
            Self::CanonicalV2Armageddon => P::Input112WithCanonicalizationV2Armageddon,
        }
    }

    /// lc0's enum value (1..5, 132, 133).
    pub fn lc0_id(self) -> i32 {
        self.to_proto() as i32
    }
}

/// An elementwise activation function (docs/lc0-format.md §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    Identity,
    Relu,
    /// `max(x, 0)²`, lc0's "sqrrelu" (`ACTIVATION_RELU_2`).
    Relu2,
    Mish,
    Swish,
    Selu,
    Tanh,
    Sigmoid,
}

impl Activation {
    /// Resolves a `NetworkFormat.ActivationFunction`; `ACTIVATION_DEFAULT` means `default`.
    /// Softmax is no elementwise activation and yields `None`.
    pub fn from_proto(value: pf::ActivationFunction, default: Activation) -> Option<Self> {
        use pf::ActivationFunction as P;
        Some(match value {
            P::ActivationDefault => default,
            P::ActivationMish => Self::Mish,
            P::ActivationRelu => Self::Relu,
            P::ActivationNone => Self::Identity,
            P::ActivationTanh => Self::Tanh,
            P::ActivationSigmoid => Self::Sigmoid,
            P::ActivationSelu => Self::Selu,
            P::ActivationSwish => Self::Swish,
            P::ActivationRelu2 => Self::Relu2,
            P::ActivationSoftmax => return None,
        })
    }

    pub fn to_proto(self) -> pf::ActivationFunction {
        use pf::ActivationFunction as P;
        match self {
            Self::Identity => P::ActivationNone,
            Self::Relu => P::ActivationRelu,
            Self::Relu2 => P::ActivationRelu2,
            Self::Mish => P::ActivationMish,
            Self::Swish => P::ActivationSwish,
            Self::Selu => P::ActivationSelu,
            Self::Tanh => P::ActivationTanh,
            Self::Sigmoid => P::ActivationSigmoid,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Identity => "none",
            Self::Relu => "relu",
            Self::Relu2 => "relu2",
            Self::Mish => "mish",
            Self::Swish => "swish",
            Self::Selu => "selu",
            Self::Tanh => "tanh",
            Self::Sigmoid => "sigmoid",
        }
    }
}

/// How the 112 planes become tokens (`NetworkFormat.input_embedding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InputEmbedding {
    /// 64 positional-encoding channels appended to each square's 112 planes (also used for
    /// `INPUT_EMBEDDING_NONE`, as in lc0).
    PeMap,
    /// A dense layer over the current board's 12 piece planes appended instead (BT3/BT4).
    PeDense,
}

/// Whether the file has lc0's single-head or multi-head layout for policy and value heads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeadLayout {
    Single,
    Multi,
}

/// Every format decision a backend needs, resolved (activations are never "default").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetFormat {
    pub input: InputFormat,
    pub head_layout: HeadLayout,
    pub input_embedding: InputEmbedding,
    /// Value head gives win/draw/loss logits (`VALUE_WDL`) rather than one tanh value.
    pub wdl: bool,
    pub moves_left: bool,
    pub default_activation: Activation,
    pub smolgen_activation: Activation,
    pub ffn_activation: Activation,
}
