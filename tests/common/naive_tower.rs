//! A naive f64 forward pass of a residual tower, written only for the tests: plain loops over
//! the stored (unfolded) batch norm, its own 3×3 convolution, squeeze-excitation, heads and
//! policy maps; only the file's values and the input planes are shared with lc0rs.

// Index loops are the point of a naive reference: they mirror the maths term by term.
#![allow(clippy::needless_range_loop)]

use std::collections::HashMap;

use lc0rs::chess::InputPlanes;

use super::tower::{RawConv, RawDense, RawPolicy, RawTower};

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
pub fn move_keys() -> HashMap<String, usize> {
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

pub struct Naive {
    pub q: f64,
    pub d: f64,
    pub m: f64,
    pub policy: Vec<f64>,
}

pub fn naive_forward(t: &RawTower, planes: &InputPlanes, keys: &HashMap<String, usize>) -> Naive {
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
