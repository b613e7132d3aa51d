//! A backend checked against the `cpu` oracle on random legal positions: move probabilities
//! (T = 1), raw logits, Q, D and M, with the thresholds of the GPU acceptance.

use serde::Serialize;

use crate::backend::{Backend, BackendError, BatchOutput, legal_move_probabilities};
use crate::board::POLICY_SIZE;
use crate::chess::policy_index::entry_moves_with_indices;
use crate::chess::{EncodedPosition, HistoryFill, PositionHistory, encode_position};

/// Pass limits.
pub const MAX_PROBABILITY_ERROR: f64 = 5e-3;
pub const MAX_LOGITS_RELATIVE_L2: f64 = 1e-2;
pub const MAX_Q_ERROR: f64 = 1e-2;
pub const MAX_D_ERROR: f64 = 1e-2;

/// The moves-left limit: 0.5 plies plus 1 % of M.
pub fn max_m_error(m: f64) -> f64 {
    0.5 + 0.01 * m.abs()
}

/// Positions from seeded random games: both colours, from the opening to the endgame.
pub fn random_histories(count: usize, seed: u64) -> Vec<PositionHistory> {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let mut history = PositionHistory::startpos();
        let plies = (next() % 160) as usize;
        for _ in 0..plies {
            let legal = history.last().legal_moves();
            if legal.is_empty() {
                break;
            }
            history.play(legal[(next() % legal.len() as u64) as usize]);
        }
        if !history.last().legal_moves().is_empty() {
            out.push(history);
        }
    }
    out
}

/// Errors of one batch size, over all positions.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Errors {
    pub batch: usize,
    pub positions: usize,
    pub max_probability: f64,
    pub mean_probability: f64,
    pub max_logits_relative_l2: f64,
    pub max_q: f64,
    pub max_d: f64,
    pub max_m: f64,
    /// The largest |ΔM| relative to its limit (≤ 1 passes).
    pub m_ratio: f64,
}

impl Errors {
    pub fn passed(&self) -> bool {
        self.max_probability <= MAX_PROBABILITY_ERROR
            && self.max_logits_relative_l2 <= MAX_LOGITS_RELATIVE_L2
            && self.max_q <= MAX_Q_ERROR
            && self.max_d <= MAX_D_ERROR
            && self.m_ratio <= 1.0
    }
}

/// Evaluates `positions` in batches of `batch` (the last one may be smaller).
pub fn evaluate_in_batches(
    backend: &dyn Backend,
    positions: &[EncodedPosition],
    batch: usize,
) -> Result<BatchOutput, BackendError> {
    let mut all = BatchOutput::default();
    for chunk in positions.chunks(batch.max(1)) {
        let planes: Vec<_> = chunk.iter().map(|e| e.planes).collect();
        let out = backend.evaluate(&planes)?;
        all.q.extend(out.q);
        all.d.extend(out.d);
        all.m.extend(out.m);
        all.policy.extend(out.policy);
    }
    Ok(all)
}

/// Compares `got` with the oracle's `want` for the same positions.
pub fn compare(
    histories: &[PositionHistory],
    encoded: &[EncodedPosition],
    got: &BatchOutput,
    want: &BatchOutput,
    batch: usize,
) -> Errors {
    let mut e = Errors {
        batch,
        positions: histories.len(),
        ..Errors::default()
    };
    let mut probability_sum = 0.0;
    let mut probability_count = 0usize;
    for (i, (history, enc)) in histories.iter().zip(encoded).enumerate() {
        let legal = entry_moves_with_indices(history.last(), enc.transform);
        let (a, b) = (got.policy_of(i), want.policy_of(i));
        let p_got = legal_move_probabilities(a, &legal, 1.0);
        let p_want = legal_move_probabilities(b, &legal, 1.0);
        for (x, y) in p_got.iter().zip(&p_want) {
            let d = f64::from((x - y).abs());
            e.max_probability = e.max_probability.max(d);
            probability_sum += d;
            probability_count += 1;
        }
        let diff: f64 = a.iter().zip(b).map(|(x, y)| f64::from(x - y).powi(2)).sum();
        let norm: f64 = b.iter().map(|y| f64::from(*y).powi(2)).sum();
        e.max_logits_relative_l2 = e
            .max_logits_relative_l2
            .max((diff / norm.max(1e-30)).sqrt());
        e.max_q = e.max_q.max(f64::from((got.q[i] - want.q[i]).abs()));
        e.max_d = e.max_d.max(f64::from((got.d[i] - want.d[i]).abs()));
        let dm = f64::from((got.m[i] - want.m[i]).abs());
        e.max_m = e.max_m.max(dm);
        e.m_ratio = e.m_ratio.max(dm / max_m_error(f64::from(want.m[i])));
        debug_assert_eq!(a.len(), POLICY_SIZE);
    }
    e.mean_probability = probability_sum / probability_count.max(1) as f64;
    e
}

/// Encodes histories for a backend's input format (fill `fen_only`, as lc0).
pub fn encode_all(histories: &[PositionHistory], backend: &dyn Backend) -> Vec<EncodedPosition> {
    histories
        .iter()
        .map(|h| encode_position(h, backend.input_format(), HistoryFill::FenOnly))
        .collect()
}
