//! Deterministic random residual-tower networks (`gen-net --preset tiny-se | t78`). Filters
//! are ~N(0, 1/fan_in) with small biases (batch norm is already folded: files are written
//! without it); the residual stream is kept bounded by scaling each block's second
//! convolution down, as trained towers are.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{Generator, MLH_CENTRE, MLH_SPREAD};
use crate::board::{CONV_POLICY_PLANES, INPUT_PLANES, SQUARES};
use crate::weights::format::{Activation, HeadLayout, InputEmbedding, InputFormat, NetFormat};
use crate::weights::tower::{
    Conv, ConvHead, ResidualBlock, SqueezeExcitation, TowerNetwork, TowerPolicy,
};

/// The residual-tower presets `gen-net` and `-w preset:` accept.
pub const TOWER_PRESET_NAMES: [&str; 2] = ["tiny-se", "t78"];

/// Scale of each block's second convolution, so that 40 blocks of residual adds stay finite.
const BLOCK_OUTPUT_SCALE: f32 = 0.3;

/// Everything that decides a tower's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct TowerArchitecture {
    pub format: NetFormat,
    pub blocks: usize,
    pub filters: usize,
    pub se_channels: Option<usize>,
    /// Planes of the value and moves-left 1×1 convolutions, and their hidden widths.
    pub value_channels: usize,
    pub value_hidden: usize,
    pub mlh_channels: usize,
    pub mlh_hidden: usize,
}

fn tower_format(activation: Activation) -> NetFormat {
    NetFormat {
        input: InputFormat::Classical112,
        head_layout: HeadLayout::Single,
        input_embedding: InputEmbedding::PeMap,
        wdl: true,
        moves_left: true,
        default_activation: activation,
        smolgen_activation: activation,
        ffn_activation: activation,
    }
}

/// A tower preset: `tiny-se` (2 × 16, SE 4, mish, every head, for tests) or `t78` (T78's
/// 40 × 512 SE shape with SE 32, mish, convolution policy, WDL, moves left, for benchmarks).
pub fn tower_preset(name: &str) -> Option<TowerArchitecture> {
    let t78 = TowerArchitecture {
        format: tower_format(Activation::Mish),
        blocks: 40,
        filters: 512,
        se_channels: Some(32),
        value_channels: 32,
        value_hidden: 128,
        mlh_channels: 8,
        mlh_hidden: 128,
    };
    match name {
        "t78" => Some(t78),
        "tiny-se" => Some(TowerArchitecture {
            blocks: 2,
            filters: 16,
            se_channels: Some(4),
            value_channels: 4,
            value_hidden: 16,
            mlh_channels: 2,
            mlh_hidden: 8,
            ..t78
        }),
        _ => None,
    }
}

/// Generates a tower of `arch` with a convolution policy; values depend only on `seed`.
pub fn generate_tower(arch: &TowerArchitecture, seed: u64) -> TowerNetwork {
    let mut g = Generator {
        rng: ChaCha8Rng::seed_from_u64(seed),
    };
    let c = arch.filters;
    let input = g.conv(INPUT_PLANES, c, 3);
    let blocks = (0..arch.blocks)
        .map(|_| {
            let conv1 = g.conv(c, c, 3);
            let mut conv2 = g.conv(c, c, 3);
            conv2
                .weights
                .iter_mut()
                .for_each(|w| *w *= BLOCK_OUTPUT_SCALE);
            let se = arch.se_channels.map(|s| SqueezeExcitation {
                fc1: g.dense(c, s),
                fc2: g.dense(s, 2 * c),
            });
            ResidualBlock { conv1, conv2, se }
        })
        .collect();
    let policy = TowerPolicy::Convolution {
        conv1: g.conv(c, c, 3),
        conv2: g.conv(c, CONV_POLICY_PLANES, 3),
    };
    let value = ConvHead {
        conv: g.conv(c, arch.value_channels, 1),
        hidden: g.dense(arch.value_channels * SQUARES, arch.value_hidden),
        output: g.dense(arch.value_hidden, 3),
    };
    let moves_left = arch.format.moves_left.then(|| {
        // Centred on MLH_CENTRE plies, like the attention presets, so the final ReLU keeps it.
        let mut output = g.dense_without_bias(arch.mlh_hidden, 1);
        output.weights.iter_mut().for_each(|w| *w *= MLH_SPREAD);
        output.biases = Some(vec![MLH_CENTRE]);
        ConvHead {
            conv: g.conv(c, arch.mlh_channels, 1),
            hidden: g.dense(arch.mlh_channels * SQUARES, arch.mlh_hidden),
            output,
        }
    });
    TowerNetwork {
        format: arch.format.clone(),
        input,
        blocks,
        policy,
        value,
        moves_left,
    }
}

impl Generator {
    fn conv(&mut self, inputs: usize, outputs: usize, kernel: usize) -> Conv {
        let fan_in = inputs * kernel * kernel;
        let d = self.dense(fan_in, outputs);
        Conv {
            inputs,
            outputs,
            kernel,
            weights: d.weights,
            biases: d.biases.unwrap_or_default(),
        }
    }
}
