//! The cpu backend against a deliberately naive f64 forward pass written only for this test:
//! plain loops, its own positional encoding, policy map and activations; only the weights and
//! the input planes are shared.

// Index loops are the point of a naive reference: they mirror the maths term by term.
#![allow(clippy::needless_range_loop)]

use std::collections::HashMap;

use lc0rs::backend::{BatchOutput, create_backend};
use lc0rs::chess::{HistoryFill, InputPlanes, PositionHistory, encode_position};
use lc0rs::netsource::NetSource;
use lc0rs::weights::LoadOptions;
use lc0rs::weights::format::Activation;
use lc0rs::weights::network::{Dense, LayerNorm, Network};

fn act(a: Activation, x: f64) -> f64 {
    match a {
        Activation::Identity => x,
        Activation::Relu => x.max(0.0),
        Activation::Relu2 => x.max(0.0).powi(2),
        Activation::Mish => x * (1.0 + x.exp()).ln().tanh(),
        Activation::Swish => x * (1.0 / (1.0 + (-x).exp())),
        Activation::Selu => {
            if x > 0.0 {
                1.05070098 * x
            } else {
                1.05070098 * 1.67326324 * (x.exp() - 1.0)
            }
        }
        Activation::Tanh => x.tanh(),
        Activation::Sigmoid => 1.0 / (1.0 + (-x).exp()),
    }
}

/// y = W x + b for one vector.
fn linear(d: &Dense, x: &[f64]) -> Vec<f64> {
    assert_eq!(x.len(), d.inputs);
    (0..d.outputs)
        .map(|o| {
            let mut s = d.biases.as_ref().map_or(0.0, |b| b[o] as f64);
            for i in 0..d.inputs {
                s += d.weights[o * d.inputs + i] as f64 * x[i];
            }
            s
        })
        .collect()
}

fn norm(ln: &LayerNorm, x: &[f64]) -> Vec<f64> {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    x.iter()
        .enumerate()
        .map(|(i, v)| {
            (v - mean) / (var + ln.eps as f64).sqrt() * ln.gammas[i] as f64 + ln.betas[i] as f64
        })
        .collect()
}

fn softmax(x: &[f64]) -> Vec<f64> {
    let m = x.iter().cloned().fold(f64::MIN, f64::max);
    let e: Vec<f64> = x.iter().map(|v| (v - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

/// Direction-walking version of "queen line or knight move".
fn reachable(from: i32, to: i32) -> bool {
    let (fr, ff) = (from / 8, from % 8);
    let dirs = [
        (0, 1),
        (1, 0),
        (0, -1),
        (-1, 0),
        (1, 1),
        (1, -1),
        (-1, 1),
        (-1, -1),
    ];
    for (dr, df) in dirs {
        let (mut r, mut f) = (fr + dr, ff + df);
        while (0..8).contains(&r) && (0..8).contains(&f) {
            if r * 8 + f == to {
                return true;
            }
            r += dr;
            f += df;
        }
    }
    let jumps = [
        (1, 2),
        (2, 1),
        (-1, 2),
        (-2, 1),
        (1, -2),
        (2, -1),
        (-1, -2),
        (-2, -1),
    ];
    jumps.iter().any(|(dr, df)| {
        let (r, f) = (fr + dr, ff + df);
        (0..8).contains(&r) && (0..8).contains(&f) && r * 8 + f == to
    })
}

/// The 1858 move list as text keys ("a2a4", "a7a8q"), in lc0's order.
fn move_keys() -> HashMap<String, usize> {
    let name = |s: i32| format!("{}{}", (b'a' + (s % 8) as u8) as char, s / 8 + 1);
    let mut keys = Vec::new();
    for from in 0..64 {
        for to in 0..64 {
            if from != to && reachable(from, to) {
                keys.push(format!("{}{}", name(from), name(to)));
            }
        }
    }
    for f in 0..8 {
        for t in (f - 1).max(0)..=(f + 1).min(7) {
            for piece in ["q", "r", "b"] {
                keys.push(format!("{}{}{piece}", name(48 + f), name(56 + t)));
            }
        }
    }
    keys.into_iter().enumerate().map(|(i, k)| (k, i)).collect()
}

struct Naive {
    q: f64,
    d: f64,
    m: f64,
    policy: Vec<f64>,
}

fn naive_forward(net: &Network, planes: &InputPlanes, keys: &HashMap<String, usize>) -> Naive {
    let fmt = &net.format;
    let e_size = net.embedding.dense.outputs;
    let plane = |c: usize, s: usize| {
        if planes[c].mask >> s & 1 == 1 {
            planes[c].value as f64
        } else {
            0.0
        }
    };
    // Embedding.
    let pre: Option<Vec<f64>> = net.embedding.pe_dense.as_ref().map(|p| {
        let mut input = vec![0.0; 768];
        for s in 0..64 {
            for c in 0..12 {
                input[s * 12 + c] = plane(c, s);
            }
        }
        linear(&p.preprocess, &input)
    });
    let mut x: Vec<Vec<f64>> = (0..64)
        .map(|s| {
            let mut tok: Vec<f64> = (0..112).map(|c| plane(c, s)).collect();
            match &pre {
                None => tok.extend((0..64).map(|j| {
                    if j == s {
                        -1.0
                    } else if reachable(s as i32, j as i32) {
                        1.0
                    } else {
                        0.0
                    }
                })),
                Some(pre) => {
                    let ds = pre.len() / 64;
                    tok.extend_from_slice(&pre[s * ds..(s + 1) * ds]);
                }
            }
            linear(&net.embedding.dense, &tok)
                .into_iter()
                .map(|v| act(fmt.default_activation, v))
                .collect()
        })
        .collect();
    if let Some(p) = &net.embedding.pe_dense {
        x = x.iter().map(|t| norm(&p.ln, t)).collect();
    }
    if let Some(g) = &net.embedding.gating {
        for s in 0..64 {
            for c in 0..e_size {
                x[s][c] = x[s][c] * g.mult[c * 64 + s] as f64 + g.add[c * 64 + s] as f64;
            }
        }
    }
    let alpha = (2.0 * net.encoders.len() as f64).powf(-0.25);
    let residual = |x: &[f64], f: &[f64], ln: &LayerNorm| -> Vec<f64> {
        let sum: Vec<f64> = x.iter().zip(f).map(|(a, b)| a + alpha * b).collect();
        norm(ln, &sum)
    };
    if let Some(p) = &net.embedding.pe_dense {
        x = x
            .iter()
            .map(|t| {
                let h: Vec<f64> = linear(&p.ffn.dense1, t)
                    .into_iter()
                    .map(|v| act(fmt.ffn_activation, v))
                    .collect();
                residual(t, &linear(&p.ffn.dense2, &h), &p.ffn_ln)
            })
            .collect();
    }
    // Encoders.
    let heads = net.dims.heads;
    for layer in &net.encoders {
        let d_model = layer.q.outputs;
        let depth = d_model / heads;
        let bias: Option<Vec<f64>> = layer.smolgen.as_ref().map(|sg| {
            let flat: Vec<f64> = x.iter().flat_map(|t| linear(&sg.compress, t)).collect();
            let h1 = norm(
                &sg.ln1,
                &linear(&sg.dense1, &flat)
                    .into_iter()
                    .map(|v| act(fmt.smolgen_activation, v))
                    .collect::<Vec<_>>(),
            );
            let h2 = norm(
                &sg.ln2,
                &linear(&sg.dense2, &h1)
                    .into_iter()
                    .map(|v| act(fmt.smolgen_activation, v))
                    .collect::<Vec<_>>(),
            );
            let gen_size = h2.len() / heads;
            let weight_gen = net.smolgen_weight_gen.as_ref().unwrap();
            (0..heads)
                .flat_map(|h| linear(weight_gen, &h2[h * gen_size..(h + 1) * gen_size]))
                .collect()
        });
        let q: Vec<Vec<f64>> = x.iter().map(|t| linear(&layer.q, t)).collect();
        let k: Vec<Vec<f64>> = x.iter().map(|t| linear(&layer.k, t)).collect();
        let v: Vec<Vec<f64>> = x.iter().map(|t| linear(&layer.v, t)).collect();
        let mut ctx = vec![vec![0.0; d_model]; 64];
        for h in 0..heads {
            for qi in 0..64 {
                let logits: Vec<f64> = (0..64)
                    .map(|ki| {
                        let dot: f64 = (0..depth)
                            .map(|j| q[qi][h * depth + j] * k[ki][h * depth + j])
                            .sum();
                        dot / (depth as f64).sqrt()
                            + bias.as_ref().map_or(0.0, |b| b[h * 4096 + qi * 64 + ki])
                    })
                    .collect();
                let p = softmax(&logits);
                for j in 0..depth {
                    ctx[qi][h * depth + j] = (0..64).map(|ki| p[ki] * v[ki][h * depth + j]).sum();
                }
            }
        }
        x = (0..64)
            .map(|s| {
                let x1 = residual(&x[s], &linear(&layer.out, &ctx[s]), &layer.ln1);
                let h: Vec<f64> = linear(&layer.ffn.dense1, &x1)
                    .into_iter()
                    .map(|v| act(fmt.ffn_activation, v))
                    .collect();
                residual(&x1, &linear(&layer.ffn.dense2, &h), &layer.ln2)
            })
            .collect();
    }
    // Policy.
    let ph = net.policy();
    let pe: Vec<Vec<f64>> = x
        .iter()
        .map(|t| {
            linear(&ph.embedding, t)
                .into_iter()
                .map(|v| act(fmt.default_activation, v))
                .collect()
        })
        .collect();
    let pq: Vec<Vec<f64>> = pe.iter().map(|t| linear(&ph.query, t)).collect();
    let pk: Vec<Vec<f64>> = pe.iter().map(|t| linear(&ph.key, t)).collect();
    let dp = ph.query.outputs;
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let name = |s: usize| format!("{}{}", (b'a' + (s % 8) as u8) as char, s / 8 + 1);
    let mut policy = vec![f64::NAN; 1858];
    for from in 0..64 {
        for to in 0..64 {
            if let Some(&i) = keys.get(&format!("{}{}", name(from), name(to))) {
                policy[i] = dot(&pq[from], &pk[to]) / (dp as f64).sqrt();
            }
        }
    }
    let ppo = |c: usize| -> Vec<f64> {
        ph.promotion[c * dp..(c + 1) * dp]
            .iter()
            .map(|&v| v as f64)
            .collect()
    };
    for f in 0..8 {
        for t in 0..8 {
            for (c, piece) in ["q", "r", "b"].iter().enumerate() {
                if let Some(&i) = keys.get(&format!("{}{}{piece}", name(48 + f), name(56 + t))) {
                    let base = dot(&pq[48 + f], &pk[56 + t]) / (dp as f64).sqrt();
                    policy[i] = base + dot(&pk[56 + t], &ppo(c)) + dot(&pk[56 + t], &ppo(3));
                }
            }
        }
    }
    // Value and moves left.
    let flat_head = |emb: &Dense, hidden: &Dense, out: &Dense| -> Vec<f64> {
        let flat: Vec<f64> = x
            .iter()
            .flat_map(|t| {
                linear(emb, t)
                    .into_iter()
                    .map(|v| act(fmt.default_activation, v))
            })
            .collect();
        let h: Vec<f64> = linear(hidden, &flat)
            .into_iter()
            .map(|v| act(fmt.default_activation, v))
            .collect();
        linear(out, &h)
    };
    let vh = net.value();
    let out = flat_head(&vh.embedding, &vh.hidden, &vh.output);
    let (q, d) = if fmt.wdl {
        let p = softmax(&out);
        (p[0] - p[2], p[1])
    } else {
        (out[0].tanh(), 0.0)
    };
    let m = net.moves_left.as_ref().map_or(0.0, |h| {
        flat_head(&h.embedding, &h.hidden, &h.output)[0].max(0.0)
    });
    Naive { q, d, m, policy }
}

/// Positions from seeded random games: both colours, opening to endgame.
fn random_positions(
    count: usize,
    seed: u64,
    format: lc0rs::weights::format::InputFormat,
) -> Vec<InputPlanes> {
    let mut state = seed;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out = Vec::new();
    while out.len() < count {
        let mut history = PositionHistory::startpos();
        let plies = (next() % 120) as usize;
        for _ in 0..plies {
            let legal = history.last().legal_moves();
            if legal.is_empty() {
                break;
            }
            history.play(legal[(next() % legal.len() as u64) as usize]);
        }
        out.push(encode_position(&history, format, HistoryFill::FenOnly).planes);
    }
    out
}

fn compare(net_name: &str, options: &str, policy_head: &str, value_head: &str) {
    let (net, _) = NetSource::parse(Some(net_name))
        .unwrap()
        .load(&LoadOptions::default(), &mut |_, _| {})
        .unwrap();
    let net = net.into_attention().expect("an attention-body network");
    compare_network(net, net_name, options, policy_head, value_head);
}

fn compare_network(
    mut net: Network,
    net_name: &str,
    options: &str,
    policy_head: &str,
    value_head: &str,
) {
    let backend = create_backend("cpu", net.clone(), options).unwrap();
    net.select_heads(policy_head, value_head).unwrap();
    let inputs = random_positions(12, 0x9e37_79b9 ^ net_name.len() as u64, net.format.input);
    let out: BatchOutput = backend.evaluate(&inputs).unwrap();
    let keys = move_keys();
    let mut worst = 0.0f64;
    for (i, planes) in inputs.iter().enumerate() {
        let want = naive_forward(&net, planes, &keys);
        let diffs = [
            (out.q[i] as f64 - want.q).abs(),
            (out.d[i] as f64 - want.d).abs(),
            (out.m[i] as f64 - want.m).abs(),
        ];
        let policy_diff = out
            .policy_of(i)
            .iter()
            .zip(&want.policy)
            .map(|(a, b)| (*a as f64 - b).abs())
            .fold(0.0, f64::max);
        let max = diffs.into_iter().chain([policy_diff]).fold(0.0, f64::max);
        assert!(
            max < 1e-4,
            "{net_name} position {i}: q/d/m diffs {diffs:?}, policy {policy_diff}"
        );
        assert!(
            want.policy.iter().all(|v| v.is_finite()),
            "every index written"
        );
        worst = worst.max(max);
    }
    // The outputs are not degenerate: Q varies, M is positive, logits spread out.
    assert!(
        out.q.iter().any(|&q| (q - out.q[0]).abs() > 1e-3),
        "{:?}",
        out.q
    );
    if net.moves_left.is_some() {
        assert!(out.m.iter().all(|&m| m > 0.0), "{:?}", out.m);
    }
    eprintln!("{net_name} {policy_head}/{value_head}: max abs difference {worst:.2e}");
}

#[test]
fn tiny_matches_the_naive_f64_forward_pass() {
    compare("bundled:tiny", "", "vanilla", "winner");
}

#[test]
fn tiny_dense_matches_with_every_head() {
    compare("bundled:tiny-dense", "", "vanilla", "winner");
    compare(
        "bundled:tiny-dense",
        "policy_head=soft,value_head=q",
        "soft",
        "q",
    );
    compare(
        "bundled:tiny-dense",
        "policy_head=optimistic,value_head=st,threads=1",
        "optimistic",
        "st",
    );
}

/// The activations and heads the bundled nets do not use: ReLU default, SELU FFN, tanh and
/// sigmoid smolgen, a scalar (non-WDL) value head, no moves-left head, no gating; and a
/// net whose FFN and smolgen activations are "none" and swish with a ReLU default.
#[test]
fn other_activations_and_scalar_value_match() {
    use lc0rs::netgen::{generate, preset};
    use lc0rs::weights::format::InputFormat;
    let variants = [
        (
            Activation::Relu,
            Activation::Tanh,
            Activation::Selu,
            InputFormat::CanonicalHectoplies,
        ),
        (
            Activation::Relu,
            Activation::Sigmoid,
            Activation::Identity,
            InputFormat::With112CastlingPlane,
        ),
    ];
    for (i, (default, smolgen, ffn, input)) in variants.into_iter().enumerate() {
        let mut arch = preset("tiny").unwrap();
        arch.format.default_activation = default;
        arch.format.smolgen_activation = smolgen;
        arch.format.ffn_activation = ffn;
        arch.format.input = input;
        arch.format.wdl = false;
        arch.format.moves_left = false;
        arch.gating = false;
        let net = generate(&arch, 11 + i as u64);
        assert_eq!(net.value().output.outputs, 1);
        compare_network(net, &format!("variant {i}"), "", "vanilla", "winner");
    }
}

/// Weights far outside any trained range overflow inside the layer that holds them: the pass
/// is an error naming that layer, never NaN or infinite outputs.
#[test]
fn an_overflowing_layer_is_named_instead_of_returning_nan() {
    let (model, _) = NetSource::parse(None)
        .unwrap()
        .load(&LoadOptions::default(), &mut |_, _| {})
        .unwrap();
    let mut net = model.into_attention().expect("an attention-body network");
    // 1e30 times activations of order 1 exceeds f32's range (3.4e38) once squared or summed.
    net.encoders[1].ffn.dense1.weights.fill(1e30);
    let backend = create_backend("cpu", net, "threads=1").unwrap();
    let batch = random_positions(3, 7, backend.input_format());
    let message = backend.evaluate(&batch).unwrap_err().to_string();
    assert!(message.contains("encoder[1]"), "{message}");
    assert!(message.contains("non-finite"), "{message}");
}
