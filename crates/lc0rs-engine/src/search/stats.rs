//! Per-move statistics of the root (lc0's VerboseMoveStats): visits, prior, value, draw
//! probability, the PUCT terms, and what is proven.

use shakmaty::Move;

use super::SearchParams;
use super::pick::Puct;
use super::tree::{Proof, ROOT, Tree};

/// One root move as the search sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct MoveStats {
    pub mv: Move,
    pub visits: u32,
    /// Playouts on their way through it (0 once a search has ended).
    pub in_flight: u32,
    /// The policy prior.
    pub prior: f32,
    /// W − L for the side to move at the root (the first-play urgency where unvisited).
    pub q: f32,
    /// Mean draw probability (`None` where unvisited).
    pub draw: Option<f32>,
    /// The exploration term and the score PUCT ranks by (Q + U).
    pub u: f32,
    pub score: f32,
    pub proof: Option<Proof>,
    /// The network's own value of the position after the move, for the side to move at the
    /// root, where the NN cache still holds it (lc0's V).
    pub network_value: Option<f32>,
}

/// The cached network value of the position after each move, for the mover.
pub type CachedValue<'a> = dyn Fn(Move) -> Option<f32> + 'a;

/// The root's moves, the least promising first, as lc0 prints them (sorted by visits, then
/// by score).
pub fn root_move_stats(
    tree: &Tree,
    params: &SearchParams,
    cached_value: &CachedValue,
) -> Vec<MoveStats> {
    if !tree.node(ROOT).expanded {
        return Vec::new();
    }
    let puct = Puct::at(tree, params, ROOT);
    let mut stats: Vec<MoveStats> = tree
        .edges_of(ROOT)
        .iter()
        .map(|edge| {
            let node = tree.stats(edge);
            let (q, u) = puct.q_and_u(node, edge.prior);
            let mv = edge.mv;
            MoveStats {
                mv,
                visits: node.visits,
                in_flight: node.in_flight(),
                prior: edge.prior,
                q: q as f32,
                draw: (node.visits > 0).then_some(node.draw),
                u: u as f32,
                score: (q + u) as f32,
                proof: node.proof,
                network_value: cached_value(mv),
            }
        })
        .collect();
    stats.sort_by(|a, b| a.visits.cmp(&b.visits).then(a.score.total_cmp(&b.score)));
    stats
}
