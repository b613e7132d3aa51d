//! Parameter and FLOP counts of a network, as in docs/lc0-format.md §5 (1 MAC = 2 FLOP; softmax,
//! LayerNorm and activations are not counted).

use super::network::{Dense, LayerNorm, Network};
use crate::board;

/// [`board::SQUARES`] in the type the counts are kept in.
const SQUARES: u64 = board::SQUARES as u64;

/// Values in the network that is evaluated: body, the selected policy and value heads, and the
/// moves-left head (other heads in a multi-head file are not counted).
pub fn parameter_count(n: &Network) -> u64 {
    let dense = |d: &Dense| (d.weights.len() + d.biases.as_ref().map_or(0, Vec::len)) as u64;
    let norm = |l: &LayerNorm| (l.gammas.len() + l.betas.len()) as u64;
    let emb = &n.embedding;
    let mut total = dense(&emb.dense);
    if let Some(g) = &emb.gating {
        total += (g.mult.len() + g.add.len()) as u64;
    }
    if let Some(p) = &emb.pe_dense {
        total += dense(&p.preprocess)
            + norm(&p.ln)
            + dense(&p.ffn.dense1)
            + dense(&p.ffn.dense2)
            + norm(&p.ffn_ln);
    }
    for l in &n.encoders {
        total += dense(&l.q) + dense(&l.k) + dense(&l.v) + dense(&l.out);
        total += norm(&l.ln1) + dense(&l.ffn.dense1) + dense(&l.ffn.dense2) + norm(&l.ln2);
        if let Some(s) = &l.smolgen {
            total += dense(&s.compress)
                + dense(&s.dense1)
                + norm(&s.ln1)
                + dense(&s.dense2)
                + norm(&s.ln2);
        }
    }
    total += n.smolgen_weight_gen.as_ref().map_or(0, dense);
    let p = n.policy();
    total += dense(&p.embedding) + dense(&p.query) + dense(&p.key) + p.promotion.len() as u64;
    let v = n.value();
    total += dense(&v.embedding) + dense(&v.hidden) + dense(&v.output);
    if let Some(m) = &n.moves_left {
        total += dense(&m.embedding) + dense(&m.hidden) + dense(&m.output);
    }
    total
}

/// Multiply-accumulates of a dense layer applied to `rows` vectors.
fn macs(d: &Dense, rows: u64) -> u64 {
    rows * (d.inputs * d.outputs) as u64
}

/// Floating-point operations to evaluate one position (2 per multiply-accumulate).
pub fn flops_per_position(n: &Network) -> u64 {
    let dims = &n.dims;
    let emb = &n.embedding;
    let mut m = macs(&emb.dense, SQUARES);
    if let Some(p) = &emb.pe_dense {
        m += macs(&p.preprocess, 1) + macs(&p.ffn.dense1, SQUARES) + macs(&p.ffn.dense2, SQUARES);
    }
    let attention = 2 * (dims.heads * dims.head_depth) as u64 * SQUARES * SQUARES;
    for l in &n.encoders {
        m += macs(&l.q, SQUARES) + macs(&l.k, SQUARES) + macs(&l.v, SQUARES) + attention;
        m += macs(&l.out, SQUARES) + macs(&l.ffn.dense1, SQUARES) + macs(&l.ffn.dense2, SQUARES);
        if let Some(s) = &l.smolgen {
            m += macs(&s.compress, SQUARES) + macs(&s.dense1, 1) + macs(&s.dense2, 1);
            let weight_gen = n
                .smolgen_weight_gen
                .as_ref()
                .expect("smolgen implies a weight generator");
            m += macs(weight_gen, dims.heads as u64);
        }
    }
    let p = n.policy();
    m += macs(&p.embedding, SQUARES) + macs(&p.query, SQUARES) + macs(&p.key, SQUARES);
    m += SQUARES * SQUARES * p.query.outputs as u64;
    let v = n.value();
    m += macs(&v.embedding, SQUARES) + macs(&v.hidden, 1) + macs(&v.output, 1);
    if let Some(h) = &n.moves_left {
        m += macs(&h.embedding, SQUARES) + macs(&h.hidden, 1) + macs(&h.output, 1);
    }
    2 * m
}
