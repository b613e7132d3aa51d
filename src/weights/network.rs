//! The validated, typed description of an attention-body network: what every backend consumes.
//! All tensors are f32, dense weights `[out][in]` row-major as in the file ("y = W x").

use super::format::NetFormat;

/// A fully connected layer `y = W·x + b`, `W` stored `[outputs][inputs]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Dense {
    pub inputs: usize,
    pub outputs: usize,
    pub weights: Vec<f32>,
    /// `None` for the layers lc0 defines without a bias (smolgen compress, smolgen weight gen).
    pub biases: Option<Vec<f32>>,
}

/// Layer normalisation over the channel axis: `(x − mean)/sqrt(var + eps)·γ + β`.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerNorm {
    pub gammas: Vec<f32>,
    pub betas: Vec<f32>,
    pub eps: f32,
}

/// The feed-forward block `dense2(act(dense1(x)))`.
#[derive(Debug, Clone, PartialEq)]
pub struct Ffn {
    pub dense1: Dense,
    pub dense2: Dense,
}

/// Smolgen: per-position attention biases generated from the layer input.
#[derive(Debug, Clone, PartialEq)]
pub struct Smolgen {
    /// `[hidden_channels][E]`, applied per square, no bias.
    pub compress: Dense,
    /// `[hidden_size][64·hidden_channels]`.
    pub dense1: Dense,
    pub ln1: LayerNorm,
    /// `[heads·gen_size][hidden_size]`.
    pub dense2: Dense,
    pub ln2: LayerNorm,
}

/// One encoder layer (docs/lc0-format.md §3.3).
#[derive(Debug, Clone, PartialEq)]
pub struct EncoderLayer {
    pub q: Dense,
    pub k: Dense,
    pub v: Dense,
    /// The output projection (`mha.dense_w/b`).
    pub out: Dense,
    pub smolgen: Option<Smolgen>,
    pub ln1: LayerNorm,
    pub ffn: Ffn,
    pub ln2: LayerNorm,
}

/// Input gating `e[s][c] = e[s][c]·mult[c·64+s] + add[c·64+s]`; both stored `[E][64]`.
#[derive(Debug, Clone, PartialEq)]
pub struct InputGating {
    pub mult: Vec<f32>,
    pub add: Vec<f32>,
}

/// The extra layers of the PE_DENSE embedding (BT3/BT4).
#[derive(Debug, Clone, PartialEq)]
pub struct DenseEmbeddingParts {
    /// `[64·dense_size][768]` over the 12 current-board planes, square-major.
    pub preprocess: Dense,
    pub ln: LayerNorm,
    pub ffn: Ffn,
    pub ffn_ln: LayerNorm,
}

/// From input planes to the residual stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedding {
    /// `[E][input_width]` with input width 176 (PE_MAP) or 112 + dense size (PE_DENSE).
    pub dense: Dense,
    pub gating: Option<InputGating>,
    /// Present exactly when the input embedding is PE_DENSE.
    pub pe_dense: Option<DenseEmbeddingParts>,
}

/// The attention policy head (docs/lc0-format.md §3.4).
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyHead {
    /// `ip_pol`: `[Ep][E]`, followed by the default activation.
    pub embedding: Dense,
    /// `ip2_pol` ("wq"): `[Dp][Ep]`.
    pub query: Dense,
    /// `ip3_pol` ("wk"): `[Dp][Ep]`.
    pub key: Dense,
    /// `ip4_pol` ("ppo"): `[4][Dp]`, promotion offsets q, r, b, then the knight/base row.
    pub promotion: Vec<f32>,
}

/// The value head: embedding per square, flatten, hidden layer, 3 WDL logits or 1 value.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueHead {
    pub embedding: Dense,
    pub hidden: Dense,
    pub output: Dense,
}

/// The moves-left head: like the value head with one output and a final ReLU.
#[derive(Debug, Clone, PartialEq)]
pub struct MovesLeftHead {
    pub embedding: Dense,
    pub hidden: Dense,
    pub output: Dense,
}

/// A head with the name lc0 gives it ("vanilla", "optimistic", "soft", "opponent"; "winner",
/// "q", "st").
#[derive(Debug, Clone, PartialEq)]
pub struct Named<T> {
    pub name: String,
    pub head: T,
}

/// Sizes of smolgen, derived from the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SmolgenDims {
    pub hidden_channels: usize,
    pub hidden_size: usize,
    pub gen_size: usize,
}

/// Every dimension, derived from the data as lc0 derives it (docs/lc0-format.md §3.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Dims {
    pub embedding: usize,
    pub d_model: usize,
    pub encoders: usize,
    pub heads: usize,
    pub head_depth: usize,
    pub dff: usize,
    pub input_width: usize,
    /// PE_DENSE per-square width (`len(ip_emb_preproc_b)/64`), 0 for PE_MAP.
    pub dense_size: usize,
    pub smolgen: Option<SmolgenDims>,
    pub mlh_embedding: usize,
    pub mlh_hidden: usize,
}

/// A validated attention-body network with all of its heads; `policy()` and `value()` give the
/// ones selected at load time.
#[derive(Debug, Clone, PartialEq)]
pub struct Network {
    pub format: NetFormat,
    pub dims: Dims,
    pub embedding: Embedding,
    pub encoders: Vec<EncoderLayer>,
    /// The global smolgen weight generator `[4096][gen_size]`, no bias; with smolgen only.
    pub smolgen_weight_gen: Option<Dense>,
    /// DeepNorm residual scale `(2L)^(−1/4)`.
    pub residual_alpha: f32,
    pub policy_heads: Vec<Named<PolicyHead>>,
    pub value_heads: Vec<Named<ValueHead>>,
    pub moves_left: Option<MovesLeftHead>,
    pub selected_policy: usize,
    pub selected_value: usize,
}

impl Network {
    pub fn policy(&self) -> &PolicyHead {
        &self.policy_heads[self.selected_policy].head
    }

    pub fn value(&self) -> &ValueHead {
        &self.value_heads[self.selected_value].head
    }

    pub fn policy_head_name(&self) -> &str {
        &self.policy_heads[self.selected_policy].name
    }

    pub fn value_head_name(&self) -> &str {
        &self.value_heads[self.selected_value].name
    }

    /// Selects the policy and value heads to evaluate by lc0's names.
    pub fn select_heads(&mut self, policy: &str, value: &str) -> Result<(), UnknownHead> {
        self.selected_policy = find_head("policy", &self.policy_heads, policy)?;
        self.selected_value = find_head("value", &self.value_heads, value)?;
        Ok(())
    }
}

/// A head name the network does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no {kind} head named {name:?}; the network has: {available}")]
pub struct UnknownHead {
    pub kind: &'static str,
    pub name: String,
    pub available: String,
}

fn find_head<T>(kind: &'static str, heads: &[Named<T>], name: &str) -> Result<usize, UnknownHead> {
    heads
        .iter()
        .position(|h| h.name == name)
        .ok_or_else(|| UnknownHead {
            kind,
            name: name.to_owned(),
            available: heads
                .iter()
                .map(|h| h.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// lc0's DeepNorm residual scale for `layers` encoders.
pub fn residual_alpha(layers: usize) -> f32 {
    (2.0 * layers as f32).powf(-0.25)
}
