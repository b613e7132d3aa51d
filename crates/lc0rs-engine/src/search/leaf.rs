//! The leaves a gathering starts, and what is learned of each. The walk, holding the tree's
//! lock, records only each leaf's path and moves; the leaves' positions are then played out,
//! judged by the rules, encoded, hashed and looked up in the NN cache (which has a lock of its
//! own) without the tree's lock and on the task workers (as lc0's do), and the
//! tree's lock is taken again only to answer those known at once (game ends, proofs, cached
//! positions) and to back up. The policy's softmax and the sort of each
//! leaf's children after a backend call are likewise done before the lock is taken.

use std::sync::Mutex;

use shakmaty::Move;

use lc0rs::backend::softmax;
use lc0rs::chess::policy_index::moves_with_indices;
use lc0rs::chess::{HistoryFill, InputPlanes, PositionHistory, encode_position};
use lc0rs::weights::format::InputFormat;

use super::cache::{CachedEval, NnCache, sorted_children};
use super::game_result;
use super::tasks::{Chunks, TaskWorkers};
use super::tree::{Proof, Tree};

/// A leaf as the walk started it.
pub(super) struct StartedLeaf {
    /// The nodes from the root to the leaf.
    pub path: Vec<u32>,
    /// The moves from the root's position to the leaf's (one fewer than `path`).
    pub moves: Vec<Move>,
    /// The leaf's proof when the walk reached it (a proven node is answered with it).
    pub proof: Option<Proof>,
}

impl StartedLeaf {
    /// Records the leaf at the end of `path`.
    pub fn at(tree: &Tree, path: &[u32]) -> Self {
        let moves = path[1..]
            .iter()
            .map(|&index| tree.mv(index).expect("children have moves"))
            .collect();
        let leaf = *path.last().expect("a path holds the root");
        Self {
            path: path.to_vec(),
            moves,
            proof: tree.node(leaf).proof,
        }
    }
}

/// What is known of a leaf once its position is played out.
pub(super) enum LeafOutcome {
    /// Proven earlier (a game end or certainty propagation).
    Proven(Proof),
    /// A game end by the rules, first found now: the result for the player who moved into it.
    Terminal(f32),
    /// lc0's two-fold draw, first found now: the plies of the repetition's cycle.
    TwoFold(u16),
    /// Held by the NN cache (looked up here, without the tree's lock).
    Cached(Evaluation),
    /// For the network.
    Evaluate(Box<NetInput>),
}

/// A leaf's network input and what its output is read with.
pub(super) struct NetInput {
    pub planes: InputPlanes,
    /// The NN cache key of `planes` and the position.
    pub key: u64,
    /// The legal moves with their policy indices.
    pub legal: Vec<(Move, usize)>,
}

/// A leaf with what is known of it.
pub(super) struct PreparedLeaf {
    pub path: Vec<u32>,
    pub outcome: LeafOutcome,
}

/// How a leaf's position is encoded and looked up in the NN cache.
#[derive(Clone, Copy)]
pub(super) struct Encoding {
    pub format: InputFormat,
    pub fill: HistoryFill,
    /// Key the cache by the network's whole input (see
    /// [`super::SearchParams::exact_cache_key`]).
    pub exact_key: bool,
}

/// Plays out, judges and encodes `leaves` (from the root's position `root`), on the task
/// workers where there are enough of them; each is looked up in the NN `cache` (whose lock is
/// taken for each lookup alone).
pub(super) fn prepare<'c>(
    tasks: &TaskWorkers<'c>,
    leaves: Vec<StartedLeaf>,
    root: &'c PositionHistory,
    encoding: Encoding,
    cache: &'c Mutex<&mut NnCache>,
) -> Vec<PreparedLeaf> {
    let cached = move |key| {
        let cache = cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.get(key).cloned()
    };
    tasks.map(
        leaves,
        Chunks::Even,
        move || Replay::new(root),
        move |replay, leaf| {
            let outcome = match leaf.proof {
                Some(proof) => LeafOutcome::Proven(proof),
                None => {
                    let history = replay.to(&leaf.moves);
                    outcome(history, leaf.moves.len(), encoding, &cached)
                }
            };
            PreparedLeaf {
                path: leaf.path,
                outcome,
            }
        },
    )
}

/// The NN cache's entry for a key, if it holds one (called from the task workers).
type CachedLookup<'c> = dyn Fn(u64) -> Option<CachedEval> + 'c;

/// What the rules and the input encoding say of the position `plies` below the root that
/// `history` ends in. The legal moves are generated once, for the rules' verdict and for
/// the policy.
fn outcome(
    history: &PositionHistory,
    plies: usize,
    encoding: Encoding,
    cached: &CachedLookup<'_>,
) -> LeafOutcome {
    let entry = history.last();
    let moves = entry.legal_moves();
    // The root is searched even where the rules would end the game (a draw claimable by
    // repetition or the fifty-move rule): the engine still has to name a move.
    if plies > 0
        && let Some(position) = &entry.position
        && let Some(value) = game_result(entry, position, moves.is_empty())
    {
        return LeafOutcome::Terminal(value);
    }
    if let Some(cycle) = two_fold_draw(history, plies) {
        return LeafOutcome::TwoFold(cycle);
    }
    let from_cache = |key| {
        let eval: CachedEval = cached(key)?;
        let children = eval.children(&moves)?;
        Some(LeafOutcome::Cached(Evaluation {
            q: eval.q,
            d: eval.d,
            children,
        }))
    };
    // lc0's key needs no encoding: a position found in the cache is never encoded.
    let position_key = (!encoding.exact_key).then(|| NnCache::position_key(entry));
    if let Some(found) = position_key.and_then(from_cache) {
        return found;
    }
    let encoded = encode_position(history, encoding.format, encoding.fill);
    let key = position_key.unwrap_or_else(|| NnCache::key(&encoded.planes, entry.key));
    if position_key.is_none()
        && let Some(found) = from_cache(key)
    {
        return found;
    }
    LeafOutcome::Evaluate(Box::new(NetInput {
        planes: encoded.planes,
        key,
        legal: moves_with_indices(entry.turn, moves, encoded.transform),
    }))
}

/// lc0's two-fold draw (its TwoFoldDraws, on by default): a position `plies` below the root
/// that repeats one inside the search (its cycle no longer than those plies) is scored a draw,
/// since the side that steered into it can repeat again. Returns the cycle's plies.
fn two_fold_draw(history: &PositionHistory, plies: usize) -> Option<u16> {
    let entry = history.last();
    let inside = plies >= 4 && usize::try_from(entry.cycle).is_ok_and(|c| c <= plies);
    (entry.repetitions == 1 && inside).then(|| u16::try_from(entry.cycle).unwrap_or(u16::MAX))
}

/// The root's history played on to one leaf after another. A pass's leaves come in the order
/// of its walk, so neighbours share most of their moves: only the moves after the shared
/// ones are taken back and played.
struct Replay {
    history: PositionHistory,
    root_len: usize,
    moves: Vec<Move>,
}

impl Replay {
    fn new(root: &PositionHistory) -> Self {
        Self {
            history: root.clone(),
            root_len: root.len(),
            moves: Vec::new(),
        }
    }

    /// The history after `moves` from the root.
    fn to(&mut self, moves: &[Move]) -> &PositionHistory {
        let shared = self
            .moves
            .iter()
            .zip(moves)
            .take_while(|(a, b)| a == b)
            .count();
        self.history.truncate(self.root_len + shared);
        for &m in &moves[shared..] {
            self.history.play(m);
        }
        self.moves.clear();
        self.moves.extend_from_slice(moves);
        &self.history
    }
}

/// What the network said about a leaf, as the tree takes it: its value for the side to move,
/// and its children (the legal moves with their priors, most likely first).
#[derive(Debug, Clone)]
pub(super) struct Evaluation {
    pub q: f32,
    pub d: f32,
    pub children: Vec<(Move, f32)>,
}

/// A leaf's evaluation from the network's outputs (`logits[i]` the logit of `legal[i]`, the
/// priors their softmax at `temperature`), and the same as the NN cache keeps it.
pub(super) fn evaluation(
    [q, d]: [f32; 2],
    logits: &[f32],
    legal: &[(Move, usize)],
    temperature: f32,
) -> (Evaluation, CachedEval) {
    debug_assert_eq!(logits.len(), legal.len(), "a logit for each legal move");
    let priors = softmax(logits, temperature);
    let children = sorted_children(&priors, |i| legal[i].0);
    let cached = CachedEval {
        q,
        d,
        priors: priors.into_boxed_slice(),
    };
    (Evaluation { q, d, children }, cached)
}

/// Expands the leaf at the end of `path` with an evaluation and backs it up.
pub(super) fn expand_and_back_up(tree: &mut Tree, path: &[u32], eval: &Evaluation) {
    let leaf = *path.last().expect("a path holds the root");
    tree.expand(leaf, &eval.children);
    // The network's Q is for the side to move at the leaf; the leaf stores the mover's.
    tree.back_up(path, -eval.q, eval.d);
}

/// Backs up a leaf whose result is known without the network: a proof, a game end or a
/// two-fold draw (the last two are recorded on the leaf as proofs).
pub(super) fn answer_by_rules(tree: &mut Tree, path: &[u32], outcome: &LeafOutcome) {
    let leaf = *path.last().expect("a path holds the root");
    match *outcome {
        LeafOutcome::Proven(proof) => back_up_proven(tree, path, proof),
        LeafOutcome::Terminal(value) => {
            let proof = Proof {
                value: value as i8,
                plies: 0,
            };
            tree.prove(leaf, proof);
            back_up_proven(tree, path, proof);
            tree.propagate_proof(path);
        }
        LeafOutcome::TwoFold(cycle) => {
            let proof = Proof { value: 0, plies: 0 };
            let node = tree.node_mut(leaf);
            node.proof = Some(proof);
            node.two_fold = cycle;
            back_up_proven(tree, path, proof);
        }
        LeafOutcome::Cached(_) | LeafOutcome::Evaluate(_) => {
            unreachable!("a leaf answered by the network has no rules' answer")
        }
    }
}

/// Backs up a playout that ended on a proven node: its certain result.
fn back_up_proven(tree: &mut Tree, path: &[u32], proof: Proof) {
    let draw = if proof.value == 0 { 1.0 } else { 0.0 };
    tree.back_up(path, proof.value(), draw);
}

#[cfg(test)]
mod tests {
    use super::*;
    use shakmaty::uci::UciMove;

    #[test]
    fn two_fold_draws_need_their_cycle_inside_the_search() {
        let shuffle = "g1f3 g8f6 f3g1 f6g8";
        let once = PositionHistory::from_spec(&format!("startpos moves {shuffle}")).unwrap();
        // The start position again, 4 plies after its first occurrence.
        assert_eq!(two_fold_draw(&once, 4), Some(4));
        assert_eq!(two_fold_draw(&once, 9), Some(4));
        // Searched from 2 or 3 plies before it, the first occurrence lies above the root.
        assert_eq!(two_fold_draw(&once, 3), None);
        assert_eq!(two_fold_draw(&once, 2), None);
        // No repetition, or a third occurrence (a draw by the rules, not this one).
        let fresh = PositionHistory::from_spec("startpos moves g1f3 g8f6 f3g1").unwrap();
        assert_eq!(two_fold_draw(&fresh, 8), None);
        let twice =
            PositionHistory::from_spec(&format!("startpos moves {shuffle} {shuffle}")).unwrap();
        assert_eq!(two_fold_draw(&twice, 8), None);
    }

    #[test]
    fn a_replay_takes_back_only_the_moves_not_shared() {
        let root = PositionHistory::from_spec("startpos").unwrap();
        let line = |spec: &str| {
            let full = PositionHistory::from_spec(&format!("startpos moves {spec}")).unwrap();
            (full.last().key, spec.split(' ').count())
        };
        let moves = |spec: &str| -> Vec<Move> {
            let mut h = root.clone();
            spec.split(' ')
                .map(|uci| {
                    let position = h.last().position.clone().unwrap();
                    let m = uci.parse::<UciMove>().unwrap().to_move(&position).unwrap();
                    h.play(m);
                    m
                })
                .collect()
        };
        let mut replay = Replay::new(&root);
        for spec in [
            "e2e4 e7e5 g1f3",
            "e2e4 e7e5 f1c4",
            "d2d4",
            "d2d4 d7d5 c2c4 e7e6",
        ] {
            let history = replay.to(&moves(spec));
            let (key, plies) = line(spec);
            assert_eq!(history.last().key, key, "{spec}");
            assert_eq!(history.len(), root.len() + plies, "{spec}");
        }
    }

    #[test]
    fn children_come_most_likely_first_and_come_back_alike_from_the_cache() {
        let root = PositionHistory::from_spec("startpos").unwrap();
        let legal: Vec<(Move, usize)> = root
            .last()
            .legal_moves()
            .into_iter()
            .take(3)
            .zip([1500, 7, 300])
            .collect();
        // The moves' logits in their order (their policy indices play no part): 0, ln 3, ln 2,
        // so priors 1/6, 3/6, 2/6.
        let logits = [0.0, 3f32.ln(), 2f32.ln()];
        let (got, cached) = evaluation([0.25, 0.5], &logits, &legal, 1.0);
        assert_eq!((got.q, got.d, cached.q, cached.d), (0.25, 0.5, 0.25, 0.5));
        // The cache keeps the priors in the legal moves' order and sorts them again when the
        // position is found: the same children, bit for bit, or none for another move count.
        let moves: Vec<Move> = legal.iter().map(|&(m, _)| m).collect();
        assert_eq!(cached.children(&moves), Some(got.children.clone()));
        assert_eq!(cached.children(&moves[..2]), None);
        let got = got.children;
        let expected = [
            (legal[1].0, 0.5),
            (legal[2].0, 1.0 / 3.0),
            (legal[0].0, 1.0 / 6.0),
        ];
        for ((m, p), (em, ep)) in got.iter().zip(expected) {
            assert_eq!(*m, em);
            assert!((p - ep).abs() < 1e-6, "{p} vs {ep}");
        }
        // Equal priors keep the legal moves' order, after the more likely ones.
        let got = evaluation([0.0; 2], &[0.0, 1.0, 0.0], &legal, 1.0)
            .0
            .children;
        let order: Vec<Move> = got.iter().map(|&(m, _)| m).collect();
        assert_eq!(order, [legal[1].0, legal[0].0, legal[2].0]);
    }
}
