//! Residual-tower networks on the cpu backend against a naive f64 forward pass written only
//! for this test: plain loops over the stored (unfolded) batch norm, its own 3×3 convolution,
//! squeeze-excitation, heads and policy maps; only the file's values and the input planes are
//! shared. Also the loader's field-named errors for broken tower files.

// Index loops are the point of a naive reference: they mirror the maths term by term.
#![allow(clippy::needless_range_loop)]

mod common;

use std::collections::HashMap;

use common::tower::{RawConv, RawDense, RawPolicy, RawTower, TowerSpec, raw_tower, to_net};
use lc0rs::backend::create_backend;
use lc0rs::chess::{HistoryFill, InputPlanes, PositionHistory, encode_position};
use lc0rs::weights::format::InputFormat;
use lc0rs::weights::proto::Net;
use lc0rs::weights::proto::network_format::{NetworkStructure, PolicyFormat};
use lc0rs::weights::{LoadOptions, Model, load_model_bytes};
use prost::Message;

type Planes = Vec<Vec<f64>>;

fn relu(x: f64) -> f64 {
    x.max(0.0)
}

fn mish(x: f64) -> f64 {
    x * (1.0 + x.exp()).ln().tanh()
}

fn selu(x: f64) -> f64 {
    if x > 0.0 {
        1.0507009873554805 * x
    } else {
        1.0507009873554805 * 1.6732632423543772 * (x.exp() - 1.0)
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Convolution (zero padding), bias, then batch norm `γ(y − μ)/sqrt(σ² + 1e-5) + β`.
fn conv_bn(c: &RawConv, x: &Planes) -> Planes {
    let pad = (c.kernel / 2) as i32;
    let mut out = vec![vec![0.0f64; 64]; c.outputs];
    for o in 0..c.outputs {
        for s in 0..64i32 {
            let (rank, file) = (s / 8, s % 8);
            let mut sum = c.b.as_ref().map_or(0.0, |b| b[o] as f64);
            for i in 0..c.inputs {
                for dy in 0..c.kernel as i32 {
                    for dx in 0..c.kernel as i32 {
                        let (r, f) = (rank + dy - pad, file + dx - pad);
                        if (0..8).contains(&r) && (0..8).contains(&f) {
                            let w = c.w[((o * c.inputs + i) * c.kernel + dy as usize) * c.kernel
                                + dx as usize];
                            sum += w as f64 * x[i][(r * 8 + f) as usize];
                        }
                    }
                }
            }
            out[o][s as usize] = match &c.bn {
                None => sum,
                Some((means, vars, gammas, betas)) => {
                    let g = gammas.as_ref().map_or(1.0, |g| g[o] as f64);
                    let b = betas.as_ref().map_or(0.0, |b| b[o] as f64);
                    g * (sum - means[o] as f64) / (vars[o] as f64 + 1e-5).sqrt() + b
                }
            };
        }
    }
    out
}

fn linear(d: &RawDense, x: &[f64]) -> Vec<f64> {
    (0..d.outputs)
        .map(|o| {
            let mut s = d.b[o] as f64;
            for i in 0..d.inputs {
                s += d.w[o * d.inputs + i] as f64 * x[i];
            }
            s
        })
        .collect()
}

fn softmax(x: &[f64]) -> Vec<f64> {
    let m = x.iter().cloned().fold(f64::MIN, f64::max);
    let e: Vec<f64> = x.iter().map(|v| (v - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

fn square_name(s: i32) -> String {
    format!("{}{}", (b'a' + (s % 8) as u8) as char, s / 8 + 1)
}

/// lc0's 1858 moves as text, in index order: queen-line and knight moves by (from, to), then
/// promotions (queen, rook, bishop) from the 7th rank.
fn move_keys() -> HashMap<String, usize> {
    let mut keys = Vec::new();
    for from in 0..64i32 {
        for to in 0..64i32 {
            let (dr, df) = (to / 8 - from / 8, to % 8 - from % 8);
            let line = from != to && (dr == 0 || df == 0 || dr.abs() == df.abs());
            let knight = dr.abs() * df.abs() == 2;
            if line || knight {
                keys.push(format!("{}{}", square_name(from), square_name(to)));
            }
        }
    }
    for f in 0..8 {
        for t in (f - 1).max(0)..=(f + 1).min(7) {
            for p in ["q", "r", "b"] {
                keys.push(format!("{}{}{p}", square_name(48 + f), square_name(56 + t)));
            }
        }
    }
    assert_eq!(keys.len(), 1858);
    keys.into_iter().enumerate().map(|(i, k)| (k, i)).collect()
}

/// The move of convolution-policy plane `p` from square `s`, as lc0's policy map lists them.
fn conv_plane_move(p: usize, s: i32) -> Option<String> {
    let directions = [
        (1, 0),
        (1, 1),
        (0, 1),
        (-1, 1),
        (-1, 0),
        (-1, -1),
        (0, -1),
        (1, -1),
    ];
    let knight = [
        (2, 1),
        (1, 2),
        (-1, 2),
        (-2, 1),
        (-2, -1),
        (-1, -2),
        (1, -2),
        (2, -1),
    ];
    let (dr, df, promo) = if p < 56 {
        let (r, f) = directions[p / 7];
        let d = (p % 7 + 1) as i32;
        (r * d, f * d, "")
    } else if p < 64 {
        let (r, f) = knight[p - 56];
        (r, f, "")
    } else if p < 73 && s / 8 == 6 {
        (1, (p as i32 - 64) / 3 - 1, ["r", "b", "q"][(p - 64) % 3])
    } else {
        return None;
    };
    let (r, f) = (s / 8 + dr, s % 8 + df);
    ((0..8).contains(&r) && (0..8).contains(&f))
        .then(|| format!("{}{}{promo}", square_name(s), square_name(r * 8 + f)))
}

struct Naive {
    q: f64,
    d: f64,
    m: f64,
    policy: Vec<f64>,
}

fn naive_forward(t: &RawTower, planes: &InputPlanes, keys: &HashMap<String, usize>) -> Naive {
    let act = |x: f64| if t.mish { mish(x) } else { relu(x) };
    let act_all = |p: Planes| -> Planes {
        p.into_iter()
            .map(|c| c.into_iter().map(act).collect())
            .collect()
    };
    let x: Planes = planes
        .iter()
        .map(|p| {
            (0..64)
                .map(|s| {
                    if p.mask >> s & 1 == 1 {
                        p.value as f64
                    } else {
                        0.0
                    }
                })
                .collect()
        })
        .collect();
    let mut x = act_all(conv_bn(&t.input, &x));
    for block in &t.blocks {
        let h = act_all(conv_bn(&block.conv1, &x));
        let y = conv_bn(&block.conv2, &h);
        let c = y.len();
        let (scale, shift) = match &block.se {
            None => (vec![1.0; c], vec![0.0; c]),
            Some((fc1, fc2)) => {
                let pooled: Vec<f64> = y.iter().map(|p| p.iter().sum::<f64>() / 64.0).collect();
                let hidden: Vec<f64> = linear(fc1, &pooled).into_iter().map(act).collect();
                let g = linear(fc2, &hidden);
                (
                    g[..c].iter().map(|&v| sigmoid(v)).collect(),
                    g[c..].to_vec(),
                )
            }
        };
        x = (0..c)
            .map(|ch| {
                (0..64)
                    .map(|s| act(scale[ch] * y[ch][s] + shift[ch] + x[ch][s]))
                    .collect()
            })
            .collect();
    }
    let flat_head = |(conv, hidden, out): &(RawConv, RawDense, RawDense)| {
        let planes = act_all(conv_bn(conv, &x));
        let flat: Vec<f64> = planes.concat();
        let h: Vec<f64> = linear(hidden, &flat).into_iter().map(act).collect();
        linear(out, &h)
    };
    let v = flat_head(&t.value);
    let (q, d) = if t.wdl {
        let p = softmax(&v);
        (p[0] - p[2], p[1])
    } else {
        (v[0].tanh(), 0.0)
    };
    let m = t
        .moves_left
        .as_ref()
        .map_or(0.0, |h| flat_head(h)[0].max(0.0));
    let mut policy = vec![0.0f64; 1858];
    match &t.policy {
        RawPolicy::Classical(conv, fc) => {
            let planes = act_all(conv_bn(conv, &x));
            policy = linear(fc, &planes.concat());
        }
        RawPolicy::Convolution(conv1, conv2) => {
            let h = act_all(conv_bn(conv1, &x));
            let out = conv_bn(conv2, &h);
            for p in 0..80 {
                for s in 0..64 {
                    if let Some(mv) = conv_plane_move(p, s as i32) {
                        // A knight promotion is the plain pawn move.
                        policy[keys[&mv]] = out[p][s];
                    }
                }
            }
        }
        RawPolicy::Attention(emb, wq, wk, ppo) => {
            let tokens: Vec<Vec<f64>> = (0..64)
                .map(|s| {
                    let column: Vec<f64> = x.iter().map(|plane| plane[s]).collect();
                    linear(emb, &column).into_iter().map(selu).collect()
                })
                .collect();
            let qs: Vec<Vec<f64>> = tokens.iter().map(|t| linear(wq, t)).collect();
            let ks: Vec<Vec<f64>> = tokens.iter().map(|t| linear(wk, t)).collect();
            let dp = wq.outputs;
            let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
            let logit = |f: usize, t: usize| dot(&qs[f], &ks[t]) / (dp as f64).sqrt();
            for (key, &index) in keys {
                let square = |i: usize| {
                    let b = key.as_bytes();
                    ((b[i + 1] - b'1') * 8 + (b[i] - b'a')) as usize
                };
                let (from, to) = (square(0), square(2));
                policy[index] = match key.len() {
                    4 => logit(from, to),
                    _ => {
                        let c = ["q", "r", "b"]
                            .iter()
                            .position(|p| key.ends_with(p))
                            .unwrap();
                        let row = |r: usize| {
                            ppo[r * dp..(r + 1) * dp]
                                .iter()
                                .map(|&v| v as f64)
                                .collect::<Vec<_>>()
                        };
                        let offset = dot(&ks[to], &row(c)) + dot(&ks[to], &row(3));
                        logit(from, to) + offset
                    }
                };
            }
        }
    }
    Naive { q, d, m, policy }
}

/// Positions from seeded random games: both colours, opening to endgame.
fn random_positions(count: usize, seed: u64) -> Vec<InputPlanes> {
    let mut rng = common::tower::Rng(seed);
    (0..count)
        .map(|_| {
            let mut history = PositionHistory::startpos();
            let plies = rng.next() % 90;
            for _ in 0..plies {
                let legal = history.last().legal_moves();
                if legal.is_empty() {
                    break;
                }
                history.play(legal[(rng.next() % legal.len() as u64) as usize]);
            }
            encode_position(&history, InputFormat::Classical112, HistoryFill::FenOnly).planes
        })
        .collect()
}

fn load(net: &Net) -> Model {
    load_model_bytes(net.encode_to_vec(), "tower.pb", &LoadOptions::default())
        .unwrap()
        .0
}

/// Evaluates `spec` on the cpu backend and compares every output with the naive pass.
fn compare(spec: TowerSpec, structure: NetworkStructure, seed: u64) {
    let raw = raw_tower(&spec, seed);
    let model = load(&to_net(&raw, structure));
    assert!(matches!(model, Model::Residual(_)));
    let backend = create_backend("cpu", model, "threads=2").unwrap();
    let inputs = random_positions(5, seed);
    let out = backend.evaluate(&inputs).unwrap();
    let keys = move_keys();
    for (i, planes) in inputs.iter().enumerate() {
        let want = naive_forward(&raw, planes, &keys);
        let close = |got: f32, want: f64| (got as f64 - want).abs() <= 2e-5 * want.abs().max(1.0);
        assert!(close(out.q[i], want.q), "q {} vs {}", out.q[i], want.q);
        assert!(close(out.d[i], want.d), "d {} vs {}", out.d[i], want.d);
        assert!(close(out.m[i], want.m), "m {} vs {}", out.m[i], want.m);
        for (j, (&got, &w)) in out.policy_of(i).iter().zip(&want.policy).enumerate() {
            assert!(close(got, w), "position {i} policy[{j}]: {got} vs {w}");
        }
    }
}

const SE: TowerSpec = TowerSpec {
    filters: 8,
    blocks: 2,
    se_channels: Some(4),
    policy: PolicyFormat::PolicyConvolution,
    wdl: true,
    moves_left: true,
    mish: false,
    old_batch_norm: false,
};

#[test]
fn se_tower_with_convolution_policy_wdl_and_moves_left() {
    compare(SE, NetworkStructure::NetworkSeWithHeadformat, 11);
}

#[test]
fn mish_se_tower_with_attention_policy() {
    let spec = TowerSpec {
        policy: PolicyFormat::PolicyAttention,
        mish: true,
        ..SE
    };
    compare(spec, NetworkStructure::NetworkSeWithHeadformat, 12);
}

#[test]
fn classical_tower_with_classical_heads_and_old_batch_norm() {
    let spec = TowerSpec {
        se_channels: None,
        policy: PolicyFormat::PolicyClassical,
        wdl: false,
        moves_left: false,
        old_batch_norm: true,
        ..SE
    };
    compare(spec, NetworkStructure::NetworkClassicalWithHeadformat, 13);
}

#[test]
fn old_network_formats_become_classical_heads() {
    // NETWORK_SE (and NETWORK_CLASSICAL) files get classical policy and value heads whatever
    // the file says (lc0's fix-ups): the classical heads are read, the WDL flag is dropped.
    let spec = TowerSpec {
        policy: PolicyFormat::PolicyClassical,
        wdl: false,
        moves_left: false,
        ..SE
    };
    let raw = raw_tower(&spec, 14);
    let mut net = to_net(&raw, NetworkStructure::NetworkSe);
    let nf = net
        .format
        .as_mut()
        .unwrap()
        .network_format
        .as_mut()
        .unwrap();
    nf.policy = Some(PolicyFormat::PolicyConvolution as i32);
    nf.value = Some(2);
    let Model::Residual(tower) = load(&net) else {
        panic!("not a tower")
    };
    assert_eq!(tower.policy.kind(), "classical");
    assert!(!tower.format.wdl);
    assert!(tower.has_se());
}

fn error_of(net: &Net) -> String {
    match load_model_bytes(net.encode_to_vec(), "tower.pb", &LoadOptions::default()) {
        Ok(_) => panic!("a broken tower was accepted"),
        Err(e) => e.to_string(),
    }
}

fn assert_mentions(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(
            message.contains(part),
            "{message:?} does not mention {part:?}"
        );
    }
}

#[test]
fn broken_towers_name_the_field() {
    let good = to_net(
        &raw_tower(&SE, 15),
        NetworkStructure::NetworkSeWithHeadformat,
    );
    let edit = |f: &dyn Fn(&mut lc0rs::weights::proto::Weights)| {
        let mut net = good.clone();
        f(net.weights.as_mut().unwrap());
        error_of(&net)
    };
    assert_mentions(&edit(&|w| w.input = None), &["weights.input", "missing"]);
    assert_mentions(
        &edit(&|w| {
            let conv2 = w.residual[1].conv2.as_mut().unwrap();
            let mut values =
                lc0rs::weights::codec::decode_layer(conv2.weights.as_ref().unwrap()).unwrap();
            values.pop();
            conv2.weights = Some(lc0rs::weights::codec::encode_layer(
                &values,
                lc0rs::weights::codec::LayerEncoding::Float32,
                &[],
            ));
        }),
        &["weights.residual[1].conv2.weights", "[8][8][3][3]"],
    );
    assert_mentions(
        &edit(&|w| {
            let conv1 = w.residual[0].conv1.as_mut().unwrap();
            conv1.bn_stddivs = Some(lc0rs::weights::codec::encode_layer(
                &[-1.0; 8],
                lc0rs::weights::codec::LayerEncoding::Float32,
                &[],
            ));
        }),
        &["weights.residual[0].conv1.bn_stddivs[0]", "variance"],
    );
    assert_mentions(
        &edit(&|w| w.residual[0].se.as_mut().unwrap().w2 = None),
        &["weights.residual[0].se.w2", "missing"],
    );
    assert_mentions(&edit(&|w| w.residual.clear()), &["weights.residual"]);
    assert_mentions(
        &edit(&|w| w.policy1 = None),
        &["weights.policy1", "missing"],
    );
    assert_mentions(
        &edit(&|w| w.ip2_val_b = None),
        &["weights.ip2_val_b", "missing"],
    );
    assert_mentions(
        &edit(&|w| w.moves_left = None),
        &["weights.moves_left", "missing"],
    );
}

#[test]
fn towers_have_only_lc0s_default_head_names() {
    let net = to_net(
        &raw_tower(&SE, 16),
        NetworkStructure::NetworkSeWithHeadformat,
    );
    let options = LoadOptions {
        policy_head: "optimistic".to_owned(),
        ..LoadOptions::default()
    };
    let message = load_model_bytes(net.encode_to_vec(), "tower.pb", &options)
        .unwrap_err()
        .to_string();
    assert_mentions(&message, &["optimistic", "vanilla"]);
    let model = load(&net);
    let error = create_backend("cpu", model, "value_head=q").err().unwrap();
    assert_mentions(&error.to_string(), &["\"q\"", "winner"]);
}
