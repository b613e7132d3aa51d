//! Helpers shared by the integration tests (each test binary uses a part of them).
#![allow(dead_code)]

pub mod conv_kernels;
pub mod gpu;
pub mod kernels;
pub mod matrix;
pub mod naive_tower;
pub mod planes;
pub mod prereq;
pub mod tower;
pub mod winograd_kernels;

use lc0rs::weights::network::{Dense, LayerNorm, Network};

/// Collects named tensors.
#[derive(Default)]
struct Tensors<'a>(Vec<(String, &'a [f32])>);

impl<'a> Tensors<'a> {
    fn push(&mut self, name: String, values: &'a [f32]) {
        self.0.push((name, values));
    }

    fn dense(&mut self, name: String, d: &'a Dense) {
        self.push(format!("{name}.w"), &d.weights);
        if let Some(b) = &d.biases {
            self.push(format!("{name}.b"), b);
        }
    }

    fn norm(&mut self, name: String, l: &'a LayerNorm) {
        self.push(format!("{name}.gammas"), &l.gammas);
        self.push(format!("{name}.betas"), &l.betas);
    }
}

/// Every tensor of a network with a readable name, enumerated independently of the loader's
/// and writer's own traversals so that a field either of them drops shows up as a mismatch.
pub fn tensors(n: &Network) -> Vec<(String, &[f32])> {
    let mut t = Tensors::default();
    let e = &n.embedding;
    t.dense("emb".into(), &e.dense);
    if let Some(g) = &e.gating {
        t.push("gate.mult".into(), &g.mult);
        t.push("gate.add".into(), &g.add);
    }
    if let Some(p) = &e.pe_dense {
        t.dense("preproc".into(), &p.preprocess);
        t.norm("emb_ln".into(), &p.ln);
        t.dense("emb_ffn1".into(), &p.ffn.dense1);
        t.dense("emb_ffn2".into(), &p.ffn.dense2);
        t.norm("emb_ffn_ln".into(), &p.ffn_ln);
    }
    for (i, l) in n.encoders.iter().enumerate() {
        let parts = [("q", &l.q), ("k", &l.k), ("v", &l.v), ("out", &l.out)];
        for (name, d) in parts
            .into_iter()
            .chain([("ffn1", &l.ffn.dense1), ("ffn2", &l.ffn.dense2)])
        {
            t.dense(format!("enc{i}.{name}"), d);
        }
        t.norm(format!("enc{i}.ln1"), &l.ln1);
        t.norm(format!("enc{i}.ln2"), &l.ln2);
        if let Some(s) = &l.smolgen {
            t.dense(format!("enc{i}.sg.compress"), &s.compress);
            t.dense(format!("enc{i}.sg.dense1"), &s.dense1);
            t.dense(format!("enc{i}.sg.dense2"), &s.dense2);
            t.norm(format!("enc{i}.sg.ln1"), &s.ln1);
            t.norm(format!("enc{i}.sg.ln2"), &s.ln2);
        }
    }
    if let Some(g) = &n.smolgen_weight_gen {
        t.dense("smolgen_w".into(), g);
    }
    for p in &n.policy_heads {
        t.dense(format!("policy.{}.emb", p.name), &p.head.embedding);
        t.dense(format!("policy.{}.q", p.name), &p.head.query);
        t.dense(format!("policy.{}.k", p.name), &p.head.key);
        t.push(format!("policy.{}.ppo", p.name), &p.head.promotion);
    }
    for v in &n.value_heads {
        t.dense(format!("value.{}.emb", v.name), &v.head.embedding);
        t.dense(format!("value.{}.hidden", v.name), &v.head.hidden);
        t.dense(format!("value.{}.out", v.name), &v.head.output);
    }
    if let Some(m) = &n.moves_left {
        t.dense("mlh.emb".into(), &m.embedding);
        t.dense("mlh.hidden".into(), &m.hidden);
        t.dense("mlh.out".into(), &m.output);
    }
    t.0
}
