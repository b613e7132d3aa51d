//! Residual-tower networks written straight into lc0's message, batch norm unfolded, with
//! seeded random weights: what the tower tests load and compare against.

use lc0rs::weights::codec::{LayerEncoding, encode_layer};
use lc0rs::weights::container::version_for_writing;
use lc0rs::weights::proto::network_format::{
    DefaultActivation, InputFormat, MovesLeftFormat, NetworkStructure, PolicyFormat, ValueFormat,
};
use lc0rs::weights::proto::weights::{ConvBlock, Layer, Residual, SEunit};
use lc0rs::weights::proto::{EngineVersion, Format, Net, NetworkFormat, Weights};

/// xorshift64 values in [−scale, scale).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn uniform(&mut self, scale: f64) -> f32 {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32 * scale as f32
    }

    pub fn values(&mut self, len: usize, scale: f64) -> Vec<f32> {
        (0..len).map(|_| self.uniform(scale)).collect()
    }
}

/// A convolution as the file stores it: `w[out][in][k][k]`, optional bias, optional batch norm.
#[derive(Clone)]
pub struct RawConv {
    pub inputs: usize,
    pub outputs: usize,
    pub kernel: usize,
    pub w: Vec<f32>,
    pub b: Option<Vec<f32>>,
    pub bn: Option<RawBatchNorm>,
}

/// (means, variances, gammas, betas); gammas and betas may be absent (old files).
pub type RawBatchNorm = (Vec<f32>, Vec<f32>, Option<Vec<f32>>, Option<Vec<f32>>);

/// A dense layer `w[out][in]`, `b[out]`.
#[derive(Clone)]
pub struct RawDense {
    pub inputs: usize,
    pub outputs: usize,
    pub w: Vec<f32>,
    pub b: Vec<f32>,
}

#[derive(Clone)]
pub struct RawBlock {
    pub conv1: RawConv,
    pub conv2: RawConv,
    pub se: Option<(RawDense, RawDense)>,
}

#[derive(Clone)]
pub enum RawPolicy {
    Classical(RawConv, RawDense),
    Convolution(RawConv, RawConv),
    /// Embedding, wq, wk, ppo `[4][Dp]`.
    Attention(RawDense, RawDense, RawDense, Vec<f32>),
}

/// A whole tower network, as stored.
#[derive(Clone)]
pub struct RawTower {
    pub mish: bool,
    pub wdl: bool,
    pub input: RawConv,
    pub blocks: Vec<RawBlock>,
    pub policy: RawPolicy,
    pub value: (RawConv, RawDense, RawDense),
    pub moves_left: Option<(RawConv, RawDense, RawDense)>,
}

/// What to build.
#[derive(Clone, Copy)]
pub struct TowerSpec {
    pub filters: usize,
    pub blocks: usize,
    pub se_channels: Option<usize>,
    pub policy: PolicyFormat,
    pub wdl: bool,
    pub moves_left: bool,
    pub mish: bool,
    /// Batch norm without gammas/betas and convolutions without biases (old files).
    pub old_batch_norm: bool,
}

pub fn dense(rng: &mut Rng, inputs: usize, outputs: usize) -> RawDense {
    let scale = 1.0 / (inputs as f64).sqrt();
    RawDense {
        inputs,
        outputs,
        w: rng.values(inputs * outputs, 2.0 * scale),
        b: rng.values(outputs, 0.2),
    }
}

pub fn conv(
    rng: &mut Rng,
    spec: &TowerSpec,
    io: (usize, usize),
    kernel: usize,
    bn: bool,
) -> RawConv {
    let (inputs, outputs) = io;
    let scale = 1.0 / ((inputs * kernel * kernel) as f64).sqrt();
    let w = rng.values(outputs * inputs * kernel * kernel, 2.0 * scale);
    let old = spec.old_batch_norm;
    let b = (!old || !bn).then(|| rng.values(outputs, 0.2));
    let bn = bn.then(|| {
        let means = rng.values(outputs, 0.3);
        let variances = (0..outputs).map(|_| 0.5 + rng.uniform(0.4)).collect();
        let gammas = (!old).then(|| (0..outputs).map(|_| 1.0 + rng.uniform(0.3)).collect());
        let betas = (!old).then(|| rng.values(outputs, 0.2));
        (means, variances, gammas, betas)
    });
    RawConv {
        inputs,
        outputs,
        kernel,
        w,
        b,
        bn,
    }
}

pub fn raw_tower(spec: &TowerSpec, seed: u64) -> RawTower {
    let rng = &mut Rng(seed | 1);
    let c = spec.filters;
    let input = conv(rng, spec, (112, c), 3, true);
    let blocks = (0..spec.blocks)
        .map(|_| RawBlock {
            conv1: conv(rng, spec, (c, c), 3, true),
            conv2: conv(rng, spec, (c, c), 3, true),
            se: spec
                .se_channels
                .map(|s| (dense(rng, c, s), dense(rng, s, 2 * c))),
        })
        .collect();
    let policy = match spec.policy {
        PolicyFormat::PolicyClassical => {
            let p = conv(rng, spec, (c, 6), 1, true);
            RawPolicy::Classical(p, dense(rng, 6 * 64, 1858))
        }
        PolicyFormat::PolicyConvolution => RawPolicy::Convolution(
            conv(rng, spec, (c, c), 3, true),
            conv(rng, spec, (c, 80), 3, false),
        ),
        _ => RawPolicy::Attention(
            dense(rng, c, 12),
            dense(rng, 12, 10),
            dense(rng, 12, 10),
            rng.values(40, 0.5),
        ),
    };
    let head = |rng: &mut Rng, planes: usize, outputs: usize| {
        (
            conv(rng, spec, (c, planes), 1, true),
            dense(rng, planes * 64, 16),
            dense(rng, 16, outputs),
        )
    };
    let value = head(rng, 4, if spec.wdl { 3 } else { 1 });
    let moves_left = spec.moves_left.then(|| head(rng, 2, 1));
    RawTower {
        mish: spec.mish,
        wdl: spec.wdl,
        input,
        blocks,
        policy,
        value,
        moves_left,
    }
}

fn layer(values: &[f32]) -> Option<Layer> {
    Some(encode_layer(values, LayerEncoding::Float32, &[]))
}

pub fn conv_block(c: &RawConv) -> ConvBlock {
    let bn = c.bn.as_ref();
    ConvBlock {
        weights: layer(&c.w),
        biases: c.b.as_deref().and_then(layer),
        bn_means: bn.and_then(|b| layer(&b.0)),
        bn_stddivs: bn.and_then(|b| layer(&b.1)),
        bn_gammas: bn.and_then(|b| b.2.as_deref()).and_then(layer),
        bn_betas: bn.and_then(|b| b.3.as_deref()).and_then(layer),
    }
}

/// The message lc0 would read, `network` given as the file states it (before fix-ups).
pub fn to_net(t: &RawTower, network: NetworkStructure) -> Net {
    let mut w = Weights {
        input: Some(conv_block(&t.input)),
        residual: t
            .blocks
            .iter()
            .map(|b| Residual {
                conv1: Some(conv_block(&b.conv1)),
                conv2: Some(conv_block(&b.conv2)),
                se: b.se.as_ref().map(|(f1, f2)| SEunit {
                    w1: layer(&f1.w),
                    b1: layer(&f1.b),
                    w2: layer(&f2.w),
                    b2: layer(&f2.b),
                }),
            })
            .collect(),
        value: Some(conv_block(&t.value.0)),
        ip1_val_w: layer(&t.value.1.w),
        ip1_val_b: layer(&t.value.1.b),
        ip2_val_w: layer(&t.value.2.w),
        ip2_val_b: layer(&t.value.2.b),
        ..Default::default()
    };
    if let Some((conv, hidden, out)) = &t.moves_left {
        w.moves_left = Some(conv_block(conv));
        w.ip1_mov_w = layer(&hidden.w);
        w.ip1_mov_b = layer(&hidden.b);
        w.ip2_mov_w = layer(&out.w);
        w.ip2_mov_b = layer(&out.b);
    }
    let policy = match &t.policy {
        RawPolicy::Classical(conv, fc) => {
            w.policy = Some(conv_block(conv));
            w.ip_pol_w = layer(&fc.w);
            w.ip_pol_b = layer(&fc.b);
            PolicyFormat::PolicyClassical
        }
        RawPolicy::Convolution(conv1, conv2) => {
            w.policy1 = Some(conv_block(conv1));
            w.policy = Some(conv_block(conv2));
            PolicyFormat::PolicyConvolution
        }
        RawPolicy::Attention(emb, q, k, ppo) => {
            w.ip_pol_w = layer(&emb.w);
            w.ip_pol_b = layer(&emb.b);
            w.ip2_pol_w = layer(&q.w);
            w.ip2_pol_b = layer(&q.b);
            w.ip3_pol_w = layer(&k.w);
            w.ip3_pol_b = layer(&k.b);
            w.ip4_pol_w = layer(ppo);
            PolicyFormat::PolicyAttention
        }
    };
    let version = version_for_writing(true);
    let value = if t.wdl {
        ValueFormat::ValueWdl
    } else {
        ValueFormat::ValueClassical
    };
    let activation = if t.mish {
        DefaultActivation::Mish
    } else {
        DefaultActivation::Relu
    };
    Net {
        magic: Some(0x1c0),
        min_version: Some(EngineVersion {
            major: Some(version.major),
            minor: Some(version.minor),
            patch: Some(version.patch),
        }),
        format: Some(Format {
            weights_encoding: Some(1),
            network_format: Some(NetworkFormat {
                input: Some(InputFormat::InputClassical112Plane as i32),
                network: Some(network as i32),
                policy: Some(policy as i32),
                value: Some(value as i32),
                moves_left: Some(if t.moves_left.is_some() {
                    MovesLeftFormat::MovesLeftV1
                } else {
                    MovesLeftFormat::MovesLeftNone
                } as i32),
                default_activation: Some(activation as i32),
                ..Default::default()
            }),
        }),
        weights: Some(w),
        ..Default::default()
    }
}

fn decoded(layer: &Option<Layer>) -> Option<Vec<f32>> {
    layer
        .as_ref()
        .filter(|l| l.params.as_ref().is_some_and(|p| !p.is_empty()))
        .map(|l| lc0rs::weights::codec::decode_layer(l).unwrap())
}

fn raw_conv(block: &ConvBlock, inputs: usize, kernel: usize) -> RawConv {
    let w = decoded(&block.weights).unwrap();
    let means = decoded(&block.bn_means);
    let b = decoded(&block.biases);
    let outputs = b.as_ref().or(means.as_ref()).unwrap().len();
    assert_eq!(w.len(), outputs * inputs * kernel * kernel);
    RawConv {
        inputs,
        outputs,
        kernel,
        w,
        b,
        bn: means.map(|m| {
            (
                m,
                decoded(&block.bn_stddivs).unwrap(),
                decoded(&block.bn_gammas),
                decoded(&block.bn_betas),
            )
        }),
    }
}

fn raw_dense(w: &Option<Layer>, b: &Option<Layer>) -> RawDense {
    let (w, b) = (decoded(w).unwrap(), decoded(b).unwrap());
    RawDense {
        inputs: w.len() / b.len(),
        outputs: b.len(),
        w,
        b,
    }
}

/// A real file's tower as stored (SE or classical blocks, classical or convolution policy),
/// read with nothing but the layer decoder; `wdl` and `mish` as its format says.
pub fn from_net(net: &Net) -> RawTower {
    let nf = net
        .format
        .as_ref()
        .unwrap()
        .network_format
        .as_ref()
        .unwrap();
    let w = net.weights.as_ref().unwrap();
    let input = raw_conv(w.input.as_ref().unwrap(), 112, 3);
    let c = input.outputs;
    let blocks = w
        .residual
        .iter()
        .map(|r| RawBlock {
            conv1: raw_conv(r.conv1.as_ref().unwrap(), c, 3),
            conv2: raw_conv(r.conv2.as_ref().unwrap(), c, 3),
            se: r
                .se
                .as_ref()
                .map(|se| (raw_dense(&se.w1, &se.b1), raw_dense(&se.w2, &se.b2))),
        })
        .collect();
    let policy = if nf.policy == Some(PolicyFormat::PolicyConvolution as i32) {
        RawPolicy::Convolution(
            raw_conv(w.policy1.as_ref().unwrap(), c, 3),
            raw_conv(w.policy.as_ref().unwrap(), c, 3),
        )
    } else {
        RawPolicy::Classical(
            raw_conv(w.policy.as_ref().unwrap(), c, 1),
            raw_dense(&w.ip_pol_w, &w.ip_pol_b),
        )
    };
    let value = (
        raw_conv(w.value.as_ref().unwrap(), c, 1),
        raw_dense(&w.ip1_val_w, &w.ip1_val_b),
        raw_dense(&w.ip2_val_w, &w.ip2_val_b),
    );
    let moves_left = (nf.moves_left == Some(MovesLeftFormat::MovesLeftV1 as i32)).then(|| {
        (
            raw_conv(w.moves_left.as_ref().unwrap(), c, 1),
            raw_dense(&w.ip1_mov_w, &w.ip1_mov_b),
            raw_dense(&w.ip2_mov_w, &w.ip2_mov_b),
        )
    });
    RawTower {
        mish: nf.default_activation == Some(DefaultActivation::Mish as i32),
        wdl: nf.value == Some(ValueFormat::ValueWdl as i32),
        input,
        blocks,
        policy,
        value,
        moves_left,
    }
}

/// A tower as lc0 stores it (batch norm unfolded), loaded as the file would be.
pub fn load_tower(raw: &RawTower, structure: NetworkStructure) -> lc0rs::weights::Model {
    use lc0rs::weights::{LoadOptions, Model, load_model_bytes};
    use prost::Message;
    let net = to_net(raw, structure);
    let model = load_model_bytes(net.encode_to_vec(), "tower.pb", &LoadOptions::default())
        .unwrap()
        .0;
    assert!(matches!(model, Model::Residual(_)));
    model
}

/// An 8-filter, 2-block SE tower with the convolution policy, WDL, moves left and mish; the
/// GPU tests vary it.
pub const SMALL_SE_TOWER: TowerSpec = TowerSpec {
    filters: 8,
    blocks: 2,
    se_channels: Some(4),
    policy: PolicyFormat::PolicyConvolution,
    wdl: true,
    moves_left: true,
    mish: true,
    old_batch_norm: false,
};

/// The GPU tests' classical tower (no SE, ReLU, classical policy, tanh value, no moves left)
/// and attention-policy tower (SE, mish), with the structure each is stored as.
pub fn gpu_test_towers() -> [(&'static str, lc0rs::weights::Model); 2] {
    let classical = TowerSpec {
        se_channels: None,
        policy: PolicyFormat::PolicyClassical,
        wdl: false,
        moves_left: false,
        mish: false,
        ..SMALL_SE_TOWER
    };
    let attention = TowerSpec {
        policy: PolicyFormat::PolicyAttention,
        ..SMALL_SE_TOWER
    };
    // This random head's logits span so wide a range that fp16's relative error (logits
    // rel-L2 1.5e-3 on an H200) moved the most probable move's probability by up to 6.8e-3,
    // beyond selftest's 5e-3; a quarter of its query weights keeps the check about the pass.
    let mut attention = raw_tower(&attention, 32);
    if let RawPolicy::Attention(_, query, _, _) = &mut attention.policy {
        query.w.iter_mut().for_each(|w| *w *= 0.25);
    }
    [
        (
            "classical",
            load_tower(
                &raw_tower(&classical, 31),
                NetworkStructure::NetworkClassicalWithHeadformat,
            ),
        ),
        (
            "attention policy",
            load_tower(&attention, NetworkStructure::NetworkSeWithHeadformat),
        ),
    ]
}
