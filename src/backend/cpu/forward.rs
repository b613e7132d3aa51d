//! The f32 forward pass of an attention-body network (docs/lc0-format.md §3), batch at a time.
//! Activations are token-major `[batch][64][channels]`.

use std::time::Instant;

use rayon::prelude::*;

use super::math::{
    View, activate, activate_all, dense, layer_norm, matmul_views, residual_layer_norm, softmax,
};
use crate::backend::BatchOutput;
use crate::backend::finite::{NonFinite, check_layer, check_outputs};
use crate::board::{ATTENTION_POLICY_SIZE, INPUT_PLANES, POLICY_SIZE, SQUARES};
use crate::chess::InputPlanes;
use crate::chess::policy_index::{attention_policy_map, positional_encoding};
use crate::profile::{OpTiming, PassProfile, PassTiming};
use crate::weights::format::Activation;
use crate::weights::network::{Dense, EncoderLayer, Network, PolicyHead, Smolgen};

/// Piece planes of the current board, the input of PE_DENSE's preprocessing.
const PE_DENSE_PLANES: usize = 12;

/// Each operation of a pass under a `tracing` span (op, layer, batch, FLOPs, bytes) and, when
/// profiling, timed by the host clock, with the GPU profile's operation names.
pub struct OpRecorder {
    batch: usize,
    origin: Instant,
    timings: Option<Vec<OpTiming>>,
}

impl OpRecorder {
    pub fn new(batch: usize, profile: bool) -> Self {
        Self {
            batch,
            origin: Instant::now(),
            timings: profile.then(Vec::new),
        }
    }

    pub(super) fn run<T>(
        &mut self,
        op: &'static str,
        layer: Option<usize>,
        (flops, bytes): (u64, u64),
        work: impl FnOnce() -> T,
    ) -> T {
        let _span =
            tracing::trace_span!("cpu_op", op, layer, batch = self.batch, flops, bytes).entered();
        let start = Instant::now();
        let out = work();
        if let Some(timings) = &mut self.timings {
            timings.push(OpTiming {
                op,
                layer,
                flops,
                bytes,
                start_ms: (start - self.origin).as_secs_f64() * 1e3,
                ms: start.elapsed().as_secs_f64() * 1e3,
            });
        }
        out
    }

    /// The profile of the pass, when profiling.
    pub fn finish(self) -> Option<PassProfile> {
        let ms = self.origin.elapsed().as_secs_f64() * 1e3;
        self.timings.map(|ops| PassProfile {
            batch: self.batch,
            pass_ms: ms,
            instrumented_ms: ms,
            timing: PassTiming::HostClock,
            ops,
            kernels: Vec::new(),
        })
    }
}

/// FLOPs and f32 bytes (inputs, weights, outputs once) of `rows` through `layers`.
fn dense_cost(rows: usize, layers: &[&Dense]) -> (u64, u64) {
    layers.iter().fold((0, 0), |(flops, bytes), l| {
        let (k, n) = (l.inputs as u64, l.outputs as u64);
        let rows = rows as u64;
        (
            flops + 2 * rows * k * n,
            bytes + 4 * (rows * k + k * n + rows * n),
        )
    })
}

/// Bytes of a pass over `values` f32 read and written `times` times.
fn pass_cost(values: usize, times: u64) -> (u64, u64) {
    (0, 4 * values as u64 * times)
}

/// Evaluates `inputs`; `with_moves_left` false reports M = 0. The residual stream is checked
/// for NaN and infinity after the embedding and after every encoder layer (one read of it,
/// small beside the layer's own work), so the error names the layer where it first appears.
pub fn forward(
    net: &Network,
    inputs: &[InputPlanes],
    with_moves_left: bool,
    ops: &mut OpRecorder,
) -> Result<BatchOutput, NonFinite> {
    let n = inputs.len();
    let _pass = tracing::trace_span!("forward", backend = "cpu", batch = n).entered();
    let per_position = SQUARES * net.dims.embedding;
    let embedding_cost = (0, 4 * (n * INPUT_PLANES * SQUARES) as u64);
    let mut x = ops.run("embedding", None, embedding_cost, || embed(net, inputs));
    check_layer(&x, per_position, "embedding")?;
    for (i, layer) in net.encoders.iter().enumerate() {
        x = encoder_layer(net, layer, x, n, (i, &mut *ops));
        check_layer(&x, per_position, &format!("encoder[{i}]"))?;
    }
    // The heads read the residual stream once each.
    let head_cost = (0, 4 * (n * SQUARES * net.dims.embedding) as u64);
    let (q, d, m) = ops.run("value+mlh heads", None, head_cost, || {
        let (q, d) = value_head(net, &x, n);
        let m = match (&net.moves_left, with_moves_left) {
            (Some(_), true) => moves_left_head(net, &x, n),
            _ => vec![0.0; n],
        };
        (q, d, m)
    });
    let policy = ops.run("policy head", None, head_cost, || policy_head(net, &x, n));
    let out = BatchOutput { q, d, m, policy };
    check_outputs(&out)?;
    Ok(out)
}

/// The residual stream after the embedding and after each encoder layer.
pub fn residual_streams(net: &Network, inputs: &[InputPlanes]) -> Vec<Vec<f32>> {
    let n = inputs.len();
    let mut x = embed(net, inputs);
    let mut out = vec![x.clone()];
    let mut ops = OpRecorder::new(n, false);
    for (i, layer) in net.encoders.iter().enumerate() {
        x = encoder_layer(net, layer, x, n, (i, &mut ops));
        out.push(x.clone());
    }
    out
}

/// `plane[c][s]` of one position.
fn plane_value(planes: &InputPlanes, c: usize, s: usize) -> f32 {
    let p = &planes[c];
    if p.mask >> s & 1 == 1 { p.value } else { 0.0 }
}

/// Tokens, embedding, gating and (PE_DENSE) the embedding FFN: the residual stream `[n·64][E]`.
fn embed(net: &Network, inputs: &[InputPlanes]) -> Vec<f32> {
    let n = inputs.len();
    let emb = &net.embedding;
    let width = emb.dense.inputs;
    let pre = emb.pe_dense.as_ref().map(|parts| {
        let pre_in: Vec<f32> = inputs
            .iter()
            .flat_map(|planes| {
                (0..SQUARES)
                    .flat_map(move |s| (0..PE_DENSE_PLANES).map(move |c| plane_value(planes, c, s)))
            })
            .collect();
        dense(&pre_in, n, &parts.preprocess)
    });
    let extra = width - INPUT_PLANES;
    let mut tokens = vec![0.0f32; n * SQUARES * width];
    tokens
        .par_chunks_mut(SQUARES * width)
        .enumerate()
        .for_each(|(p, tok)| {
            for s in 0..SQUARES {
                let row = &mut tok[s * width..(s + 1) * width];
                for (c, v) in row[..INPUT_PLANES].iter_mut().enumerate() {
                    *v = plane_value(&inputs[p], c, s);
                }
                row[INPUT_PLANES..].copy_from_slice(match &pre {
                    None => &positional_encoding()[s * SQUARES..(s + 1) * SQUARES],
                    Some(pre) => &pre[(p * SQUARES + s) * extra..(p * SQUARES + s + 1) * extra],
                });
            }
        });
    let rows = n * SQUARES;
    let mut x = dense(&tokens, rows, &emb.dense);
    activate_all(net.format.default_activation, &mut x);
    if let Some(parts) = &emb.pe_dense {
        layer_norm(&mut x, &parts.ln);
    }
    let e = emb.dense.outputs;
    if let Some(g) = &emb.gating {
        x.par_chunks_mut(e).enumerate().for_each(|(r, row)| {
            let s = r % SQUARES;
            for (c, v) in row.iter_mut().enumerate() {
                *v = *v * g.mult[c * SQUARES + s] + g.add[c * SQUARES + s];
            }
        });
    }
    if let Some(parts) = &emb.pe_dense {
        let mut hidden = dense(&x, rows, &parts.ffn.dense1);
        activate_all(net.format.ffn_activation, &mut hidden);
        let f = dense(&hidden, rows, &parts.ffn.dense2);
        residual_layer_norm(&mut x, &f, net.residual_alpha, &parts.ffn_ln);
    }
    x
}

fn encoder_layer(
    net: &Network,
    layer: &EncoderLayer,
    mut x: Vec<f32>,
    n: usize,
    (index, ops): (usize, &mut OpRecorder),
) -> Vec<f32> {
    let rows = n * SQUARES;
    let l = Some(index);
    let bias = layer
        .smolgen
        .as_ref()
        .map(|sg| smolgen_bias(net, sg, &x, n, (index, &mut *ops)));
    let qkv_cost = dense_cost(rows, &[&layer.q, &layer.k, &layer.v]);
    let (q, k, v) = ops.run("qkv", l, qkv_cost, || {
        (
            dense(&x, rows, &layer.q),
            dense(&x, rows, &layer.k),
            dense(&x, rows, &layer.v),
        )
    });
    let (heads, depth) = (net.dims.heads, net.dims.head_depth);
    let scores = (n * heads * SQUARES * SQUARES) as u64;
    let attention_cost = (
        4 * scores * depth as u64,
        4 * (4 * (rows * heads * depth) as u64 + scores * u64::from(bias.is_some())),
    );
    let ctx = ops.run("attention", l, attention_cost, || {
        attention(&q, &k, &v, bias.as_deref(), n, heads, depth)
    });
    let o = ops.run("out proj", l, dense_cost(rows, &[&layer.out]), || {
        dense(&ctx, rows, &layer.out)
    });
    let width = net.dims.embedding;
    ops.run("residual+ln1", l, pass_cost(rows * width, 3), || {
        residual_layer_norm(&mut x, &o, net.residual_alpha, &layer.ln1)
    });
    let hidden = ops.run(
        "ffn1+act",
        l,
        dense_cost(rows, &[&layer.ffn.dense1]),
        || {
            let mut hidden = dense(&x, rows, &layer.ffn.dense1);
            activate_all(net.format.ffn_activation, &mut hidden);
            hidden
        },
    );
    let f = ops.run("ffn2", l, dense_cost(rows, &[&layer.ffn.dense2]), || {
        dense(&hidden, rows, &layer.ffn.dense2)
    });
    ops.run("residual+ln2", l, pass_cost(rows * width, 3), || {
        residual_layer_norm(&mut x, &f, net.residual_alpha, &layer.ln2)
    });
    x
}

/// Smolgen's attention biases `[n][heads][64·64]` (query-major).
fn smolgen_bias(
    net: &Network,
    sg: &Smolgen,
    x: &[f32],
    n: usize,
    (index, ops): (usize, &mut OpRecorder),
) -> Vec<f32> {
    let l = Some(index);
    let act = net.format.smolgen_activation;
    let compress_cost = dense_cost(n * SQUARES, &[&sg.compress]);
    let compressed = ops.run("smolgen compress", l, compress_cost, || {
        dense(x, n * SQUARES, &sg.compress)
    });
    let dense_cost_12 = dense_cost(n, &[&sg.dense1, &sg.dense2]);
    let h2 = ops.run("smolgen dense1/2+ln", l, dense_cost_12, || {
        let mut h1 = dense(&compressed, n, &sg.dense1);
        activate_all(act, &mut h1);
        layer_norm(&mut h1, &sg.ln1);
        let mut h2 = dense(&h1, n, &sg.dense2);
        activate_all(act, &mut h2);
        layer_norm(&mut h2, &sg.ln2);
        h2
    });
    let generator = net
        .smolgen_weight_gen
        .as_ref()
        .expect("smolgen networks have a weight generator");
    let rows = n * net.dims.heads;
    ops.run(
        "smolgen weight gen",
        l,
        dense_cost(rows, &[generator]),
        || dense(&h2, rows, generator),
    )
}

/// Scaled dot-product attention per head with the smolgen bias added after scaling:
/// `ctx[n·64][heads·depth]`.
fn attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    bias: Option<&[f32]>,
    n: usize,
    heads: usize,
    depth: usize,
) -> Vec<f32> {
    let d_model = heads * depth;
    let scale = 1.0 / (depth as f32).sqrt();
    let view = |data, p: usize, h: usize| View {
        data,
        offset: p * SQUARES * d_model + h * depth,
        rows: SQUARES,
        cols: depth,
        row_stride: d_model,
        col_stride: 1,
    };
    let per_head: Vec<Vec<f32>> = (0..n * heads)
        .into_par_iter()
        .map(|ph| {
            let (p, h) = (ph / heads, ph % heads);
            let mut scores = match bias {
                Some(b) => b[ph * SQUARES * SQUARES..(ph + 1) * SQUARES * SQUARES].to_vec(),
                None => vec![0.0; SQUARES * SQUARES],
            };
            let kt = View {
                rows: depth,
                cols: SQUARES,
                row_stride: 1,
                col_stride: d_model,
                ..view(k, p, h)
            };
            matmul_views(&mut scores, view(q, p, h), kt, 1.0, scale);
            scores.chunks_mut(SQUARES).for_each(softmax);
            let probs = View {
                data: &scores,
                offset: 0,
                rows: SQUARES,
                cols: SQUARES,
                row_stride: SQUARES,
                col_stride: 1,
            };
            let mut out = vec![0.0; SQUARES * depth];
            matmul_views(&mut out, probs, view(v, p, h), 0.0, 1.0);
            out
        })
        .collect();
    let mut ctx = vec![0.0f32; n * SQUARES * d_model];
    for (ph, out) in per_head.iter().enumerate() {
        let (p, h) = (ph / heads, ph % heads);
        for (s, row) in out.chunks(depth).enumerate() {
            let start = (p * SQUARES + s) * d_model + h * depth;
            ctx[start..start + depth].copy_from_slice(row);
        }
    }
    ctx
}

fn policy_head(net: &Network, x: &[f32], n: usize) -> Vec<f32> {
    attention_policy(net.policy(), net.format.default_activation, x, n)
}

/// The attention policy over tokens `x[n·64][width]`: embedding then `activation`, from-to
/// logits, promotion logits, mapped to lc0's 1858 moves.
pub(super) fn attention_policy(
    head: &PolicyHead,
    activation: Activation,
    x: &[f32],
    n: usize,
) -> Vec<f32> {
    let rows = n * SQUARES;
    let mut p = dense(x, rows, &head.embedding);
    activate_all(activation, &mut p);
    let queries = dense(&p, rows, &head.query);
    let keys = dense(&p, rows, &head.key);
    let dp = head.query.outputs;
    let scale = 1.0 / (dp as f32).sqrt();
    let map = attention_policy_map();
    let mut policy = vec![0.0f32; n * POLICY_SIZE];
    policy
        .par_chunks_mut(POLICY_SIZE)
        .enumerate()
        .for_each(|(b, out)| {
            let view = |data| View {
                data,
                offset: b * SQUARES * dp,
                rows: SQUARES,
                cols: dp,
                row_stride: dp,
                col_stride: 1,
            };
            let mut raw = vec![0.0f32; ATTENTION_POLICY_SIZE];
            let kt = View {
                rows: dp,
                cols: SQUARES,
                row_stride: 1,
                col_stride: dp,
                ..view(&keys)
            };
            matmul_views(
                &mut raw[..SQUARES * SQUARES],
                view(&queries),
                kt,
                0.0,
                scale,
            );
            // Promotion offsets from the keys of the rank-8 squares: off[c][t] = K[56+t]·ppo[c],
            // plus the knight/base row 3 for q, r, b.
            let key_of = |t: usize| &keys[(b * SQUARES + 56 + t) * dp..(b * SQUARES + 57 + t) * dp];
            let offset = |c: usize, t: usize| -> f32 {
                key_of(t)
                    .iter()
                    .zip(&head.promotion[c * dp..(c + 1) * dp])
                    .map(|(a, w)| a * w)
                    .sum()
            };
            for t in 0..8 {
                let base = offset(3, t);
                for c in 0..3 {
                    let off = offset(c, t) + base;
                    for f in 0..8 {
                        raw[SQUARES * SQUARES + f * 24 + t * 3 + c] =
                            raw[(48 + f) * SQUARES + 56 + t] + off;
                    }
                }
            }
            for (&value, &index) in raw.iter().zip(map) {
                if index >= 0 {
                    out[index as usize] = value;
                }
            }
        });
    policy
}

/// `act(flatten(act(x·W_emb)) · W_hidden)` → output layer, for the value and moves-left heads.
fn flattened_head(
    net: &Network,
    x: &[f32],
    n: usize,
    embedding: &crate::weights::network::Dense,
    hidden: &crate::weights::network::Dense,
    output: &crate::weights::network::Dense,
) -> Vec<f32> {
    let act = net.format.default_activation;
    let mut e = dense(x, n * SQUARES, embedding);
    activate_all(act, &mut e);
    let mut h = dense(&e, n, hidden);
    activate_all(act, &mut h);
    dense(&h, n, output)
}

/// (Q, D) per position from the value head.
fn value_head(net: &Network, x: &[f32], n: usize) -> (Vec<f32>, Vec<f32>) {
    let head = net.value();
    let out = flattened_head(net, x, n, &head.embedding, &head.hidden, &head.output);
    q_and_d(&out, net.format.wdl, n)
}

/// (Q, D) per position from a value head's output: softmax over W, D, L logits (Q = W − L),
/// or tanh of one value (D = 0).
pub(super) fn q_and_d(out: &[f32], wdl: bool, n: usize) -> (Vec<f32>, Vec<f32>) {
    if wdl {
        out.chunks(3)
            .map(|wdl| {
                let mut p = wdl.to_vec();
                softmax(&mut p);
                (p[0] - p[2], p[1])
            })
            .unzip()
    } else {
        (out.iter().map(|v| v.tanh()).collect(), vec![0.0; n])
    }
}

fn moves_left_head(net: &Network, x: &[f32], n: usize) -> Vec<f32> {
    let head = net.moves_left.as_ref().expect("checked by the caller");
    let out = flattened_head(net, x, n, &head.embedding, &head.hidden, &head.output);
    out.into_iter()
        .map(|v| activate(Activation::Relu, v))
        .collect()
}
