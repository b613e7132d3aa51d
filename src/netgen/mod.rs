//! Deterministic random networks in lc0's format, for tests and benchmarks (`lc0rs gen-net`).
//!
//! Scales keep activations finite and outputs varied: dense weights ~N(0, 1/fan_in), small
//! biases, LayerNorm gammas near 1 and betas near 0, gates near 1 and 0. Gammas, betas and
//! gates get a small jitter rather than exact 1/0 so that a kernel which ignored them would
//! fail its comparison with the CPU. The moves-left output is centred on 40 plies so that its
//! final ReLU does not zero half of the positions.

mod presets;
mod tower;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

pub use presets::{Architecture, PRESET_NAMES, preset};
pub use tower::{TOWER_PRESET_NAMES, TowerArchitecture, generate_tower, tower_preset};

use crate::board::{INPUT_PLANES, SQUARES};
use crate::weights::format::InputEmbedding;
use crate::weights::network::{
    Dense, DenseEmbeddingParts, Dims, Embedding, EncoderLayer, Ffn, InputGating, LayerNorm,
    MovesLeftHead, Named, Network, PolicyHead, Smolgen, ValueHead, residual_alpha,
};

/// Every preset name: the attention bodies, then the residual towers.
pub fn all_preset_names() -> Vec<&'static str> {
    PRESET_NAMES.into_iter().chain(TOWER_PRESET_NAMES).collect()
}

/// Standard deviation of biases and of the jitter on gammas, betas and gates.
const SMALL: f32 = 0.02;
/// Where the moves-left output is centred, and its spread, in plies.
const MLH_CENTRE: f32 = 40.0;
const MLH_SPREAD: f32 = 10.0;
/// Planes PE_DENSE preprocesses (the current board's 12 piece planes).
const PE_DENSE_PLANES: usize = 12;

/// Generates a network of `arch` whose values depend only on `seed`.
pub fn generate(arch: &Architecture, seed: u64) -> Network {
    let mut g = Generator {
        rng: ChaCha8Rng::seed_from_u64(seed),
    };
    let e = arch.embedding;
    let pe_dense = (arch.format.input_embedding == InputEmbedding::PeDense).then(|| {
        let eps = 1e-3;
        DenseEmbeddingParts {
            preprocess: g.dense(SQUARES * PE_DENSE_PLANES, SQUARES * arch.dense_size),
            ln: g.layer_norm(e, eps),
            ffn: g.ffn(e, arch.embedding_dff),
            ffn_ln: g.layer_norm(e, eps),
        }
    });
    let extra = if pe_dense.is_some() {
        arch.dense_size
    } else {
        SQUARES
    };
    let embedding = Embedding {
        dense: g.dense(INPUT_PLANES + extra, e),
        gating: arch.gating.then(|| InputGating {
            mult: g.around(e * SQUARES, 1.0),
            add: g.around(e * SQUARES, 0.0),
        }),
        pe_dense,
    };
    let eps = if arch.format.input_embedding == InputEmbedding::PeDense {
        1e-3
    } else {
        1e-6
    };
    let encoders = (0..arch.encoders)
        .map(|_| g.encoder_layer(arch, eps))
        .collect();
    let smolgen_weight_gen = arch
        .smolgen
        .map(|s| g.dense_without_bias(s.gen_size, SQUARES * SQUARES));
    let policy_heads = arch
        .policy_heads
        .iter()
        .map(|name| Named {
            name: (*name).to_owned(),
            head: g.policy_head(arch),
        })
        .collect();
    let value_heads = arch
        .value_heads
        .iter()
        .map(|name| Named {
            name: (*name).to_owned(),
            head: g.value_head(arch),
        })
        .collect();
    let moves_left = arch.format.moves_left.then(|| g.moves_left_head(arch));
    Network {
        format: arch.format.clone(),
        dims: dims_of(arch),
        embedding,
        encoders,
        smolgen_weight_gen,
        residual_alpha: residual_alpha(arch.encoders),
        policy_heads,
        value_heads,
        moves_left,
        selected_policy: 0,
        selected_value: 0,
    }
}

fn dims_of(arch: &Architecture) -> Dims {
    let pe_dense = arch.format.input_embedding == InputEmbedding::PeDense;
    Dims {
        embedding: arch.embedding,
        d_model: arch.embedding,
        encoders: arch.encoders,
        heads: arch.heads,
        head_depth: arch.embedding / arch.heads,
        dff: arch.dff,
        input_width: INPUT_PLANES + if pe_dense { arch.dense_size } else { SQUARES },
        dense_size: if pe_dense { arch.dense_size } else { 0 },
        smolgen: arch.smolgen,
        mlh_embedding: if arch.format.moves_left {
            arch.mlh_embedding
        } else {
            0
        },
        mlh_hidden: if arch.format.moves_left {
            arch.mlh_hidden
        } else {
            0
        },
    }
}

struct Generator {
    rng: ChaCha8Rng,
}

impl Generator {
    fn normal(&mut self, n: usize, std: f32) -> Vec<f32> {
        (0..n)
            .map(|_| std * self.rng.sample::<f32, _>(StandardNormal))
            .collect()
    }

    fn around(&mut self, n: usize, centre: f32) -> Vec<f32> {
        let mut v = self.normal(n, SMALL);
        v.iter_mut().for_each(|x| *x += centre);
        v
    }

    fn dense_without_bias(&mut self, inputs: usize, outputs: usize) -> Dense {
        Dense {
            inputs,
            outputs,
            weights: self.normal(inputs * outputs, (inputs as f32).sqrt().recip()),
            biases: None,
        }
    }

    fn dense(&mut self, inputs: usize, outputs: usize) -> Dense {
        let mut d = self.dense_without_bias(inputs, outputs);
        d.biases = Some(self.normal(outputs, SMALL));
        d
    }

    fn layer_norm(&mut self, len: usize, eps: f32) -> LayerNorm {
        LayerNorm {
            gammas: self.around(len, 1.0),
            betas: self.around(len, 0.0),
            eps,
        }
    }

    fn ffn(&mut self, width: usize, dff: usize) -> Ffn {
        Ffn {
            dense1: self.dense(width, dff),
            dense2: self.dense(dff, width),
        }
    }

    fn encoder_layer(&mut self, arch: &Architecture, eps: f32) -> EncoderLayer {
        let e = arch.embedding;
        let smolgen = arch.smolgen.map(|s| Smolgen {
            compress: self.dense_without_bias(e, s.hidden_channels),
            dense1: self.dense(SQUARES * s.hidden_channels, s.hidden_size),
            ln1: self.layer_norm(s.hidden_size, 1e-3),
            dense2: self.dense(s.hidden_size, arch.heads * s.gen_size),
            ln2: self.layer_norm(arch.heads * s.gen_size, 1e-3),
        });
        EncoderLayer {
            smolgen,
            q: self.dense(e, e),
            k: self.dense(e, e),
            v: self.dense(e, e),
            out: self.dense(e, e),
            ln1: self.layer_norm(e, eps),
            ffn: self.ffn(e, arch.dff),
            ln2: self.layer_norm(e, eps),
        }
    }

    fn policy_head(&mut self, arch: &Architecture) -> PolicyHead {
        let dp = arch.policy_d;
        PolicyHead {
            embedding: self.dense(arch.embedding, dp),
            query: self.dense(dp, dp),
            key: self.dense(dp, dp),
            promotion: self.normal(4 * dp, (dp as f32).sqrt().recip()),
        }
    }

    fn value_head(&mut self, arch: &Architecture) -> ValueHead {
        ValueHead {
            embedding: self.dense(arch.embedding, arch.value_embedding),
            hidden: self.dense(SQUARES * arch.value_embedding, arch.value_hidden),
            output: self.dense(arch.value_hidden, if arch.format.wdl { 3 } else { 1 }),
        }
    }

    fn moves_left_head(&mut self, arch: &Architecture) -> MovesLeftHead {
        let hidden = arch.mlh_hidden;
        let mut output = self.dense_without_bias(hidden, 1);
        output.weights.iter_mut().for_each(|w| *w *= MLH_SPREAD);
        output.biases = Some(vec![MLH_CENTRE]);
        MovesLeftHead {
            embedding: self.dense(arch.embedding, arch.mlh_embedding),
            hidden: self.dense(SQUARES * arch.mlh_embedding, hidden),
            output,
        }
    }
}
