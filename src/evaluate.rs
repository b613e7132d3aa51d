//! Positions in, lc0's answers out: encode each history in the backend's input format,
//! evaluate them as one batch (reading only the legal moves' logits), and turn those into
//! probabilities at a temperature.

use serde::Serialize;

use crate::backend::{Backend, BackendError, PolicyPicks, softmax};
use crate::chess::castling::uci_notation;
use crate::chess::policy_index::entry_moves_with_indices;
use crate::chess::{HistoryFill, PositionHistory, encode_position};

/// The evaluation of one position.
#[derive(Debug, Clone, Serialize)]
pub struct PositionEval {
    pub q: f32,
    pub d: f32,
    pub m: f32,
    /// Win, draw, loss probabilities for the side to move.
    pub wdl: [f32; 3],
    /// Legal moves in UCI as lc0 writes them without UCI_Chess960 (standard castling as e1g1,
    /// Chess960 castling as king takes rook) with their probabilities, most likely first.
    pub policy: Vec<(String, f32)>,
}

/// Evaluates the last position of each history in one backend call.
pub fn evaluate_positions(
    backend: &dyn Backend,
    histories: &[PositionHistory],
    fill: HistoryFill,
    temperature: f32,
) -> Result<Vec<PositionEval>, BackendError> {
    let format = backend.input_format();
    let encoded: Vec<_> = histories
        .iter()
        .map(|h| encode_position(h, format, fill))
        .collect();
    let planes: Vec<_> = encoded.iter().map(|e| e.planes).collect();
    let legal: Vec<_> = histories
        .iter()
        .zip(&encoded)
        .map(|(history, enc)| entry_moves_with_indices(history.last(), enc.transform))
        .collect();
    let picks = PolicyPicks::of_legal_moves(legal.iter().map(Vec::as_slice));
    let out = backend.evaluate_picked(&planes, &picks)?;
    Ok(legal
        .iter()
        .enumerate()
        .map(|(i, legal)| {
            let probabilities = softmax(out.logits_of(i), temperature);
            let mut policy: Vec<(String, f32)> = legal
                .iter()
                .zip(probabilities)
                .map(|(&(m, _), p)| (uci_notation(m, false).to_string(), p))
                .collect();
            policy.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            PositionEval {
                q: out.q[i],
                d: out.d[i],
                m: out.m[i],
                wdl: out.wdl_of(i),
                policy,
            }
        })
        .collect())
}
