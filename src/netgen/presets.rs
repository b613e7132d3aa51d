//! Architectures `gen-net` can write. `t82` is exactly T82's shape (docs/lc0-format.md §4);
//! `bt4` is BT4's published shape; `tiny` and `tiny-dense` keep every feature at a size that
//! tests run in milliseconds.

use crate::weights::format::{Activation, HeadLayout, InputEmbedding, InputFormat, NetFormat};
use crate::weights::network::SmolgenDims;

/// Everything that decides a network's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Architecture {
    pub format: NetFormat,
    pub embedding: usize,
    pub encoders: usize,
    pub heads: usize,
    pub dff: usize,
    pub smolgen: Option<SmolgenDims>,
    /// PE_DENSE only: per-square width of the preprocessing layer, and the embedding FFN width.
    pub dense_size: usize,
    pub embedding_dff: usize,
    pub gating: bool,
    /// Policy embedding and query/key width (Ep = Dp).
    pub policy_d: usize,
    pub value_embedding: usize,
    pub value_hidden: usize,
    pub mlh_embedding: usize,
    pub mlh_hidden: usize,
    pub policy_heads: &'static [&'static str],
    pub value_heads: &'static [&'static str],
}

/// The names `--preset` accepts.
pub const PRESET_NAMES: [&str; 4] = ["tiny", "tiny-dense", "t82", "bt4"];

const SINGLE_POLICY: &[&str] = &["vanilla"];
const SINGLE_VALUE: &[&str] = &["winner"];
const MULTI_POLICY: &[&str] = &["vanilla", "optimistic", "soft"];
const MULTI_VALUE: &[&str] = &["winner", "q", "st"];

fn t82_format() -> NetFormat {
    NetFormat {
        input: InputFormat::Classical112,
        head_layout: HeadLayout::Single,
        input_embedding: InputEmbedding::PeMap,
        wdl: true,
        moves_left: true,
        default_activation: Activation::Mish,
        smolgen_activation: Activation::Swish,
        ffn_activation: Activation::Relu2,
    }
}

/// The architecture of a preset, or `None` for an unknown name.
pub fn preset(name: &str) -> Option<Architecture> {
    let t82 = Architecture {
        format: t82_format(),
        embedding: 768,
        encoders: 15,
        heads: 24,
        dff: 1024,
        smolgen: Some(SmolgenDims {
            hidden_channels: 32,
            hidden_size: 256,
            gen_size: 256,
        }),
        dense_size: 0,
        embedding_dff: 0,
        gating: true,
        policy_d: 768,
        value_embedding: 32,
        value_hidden: 128,
        mlh_embedding: 8,
        mlh_hidden: 128,
        policy_heads: SINGLE_POLICY,
        value_heads: SINGLE_VALUE,
    };
    let tiny = Architecture {
        embedding: 64,
        encoders: 2,
        heads: 2,
        dff: 96,
        smolgen: Some(SmolgenDims {
            hidden_channels: 8,
            hidden_size: 32,
            gen_size: 32,
        }),
        policy_d: 64,
        value_embedding: 16,
        value_hidden: 32,
        mlh_embedding: 8,
        mlh_hidden: 32,
        ..t82.clone()
    };
    let dense_format = NetFormat {
        head_layout: HeadLayout::Multi,
        input_embedding: InputEmbedding::PeDense,
        ffn_activation: Activation::Mish,
        ..t82_format()
    };
    Some(match name {
        "t82" => t82,
        "tiny" => tiny,
        // Canonical V2 input so that the transform code paths run on a bundled net.
        "tiny-dense" => Architecture {
            format: NetFormat {
                input: InputFormat::CanonicalV2,
                ..dense_format
            },
            dense_size: 4,
            embedding_dff: 96,
            policy_heads: MULTI_POLICY,
            value_heads: MULTI_VALUE,
            ..tiny
        },
        // BT4 (1024x15x32h): dff 1536, mish FFN, PE_DENSE, value embedding 128, MLH 32.
        // Its PE_DENSE width is not published; 32 per square is our choice.
        "bt4" => Architecture {
            format: dense_format,
            embedding: 1024,
            heads: 32,
            dff: 1536,
            dense_size: 32,
            embedding_dff: 1536,
            policy_d: 1024,
            value_embedding: 128,
            mlh_embedding: 32,
            policy_heads: MULTI_POLICY,
            value_heads: MULTI_VALUE,
            ..t82
        },
        _ => return None,
    })
}
