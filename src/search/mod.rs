//! PUCT Monte-Carlo tree search in lc0's manner, on any [`Backend`]: priors from the policy
//! softmax at a temperature, a growing CPuct, first-play urgency, virtual loss so that
//! `minibatch` leaves go to the backend in one call, an NN cache, terminal positions scored by
//! the rules, and tree reuse between moves.

pub mod cache;
pub mod tree;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use shakmaty::{Move, Position};

use crate::backend::{Backend, BackendError, DEFAULT_POLICY_TEMPERATURE, legal_move_probabilities};
use crate::chess::castling::uci_notation;
use crate::chess::policy_index::entry_moves_with_indices;
use crate::chess::{HistoryFill, InputPlanes, PositionHistory, encode_position};
use cache::{CachedEval, NnCache};
use tree::{ROOT, Tree};

/// The search parameters, with lc0's defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchParams {
    pub cpuct: f32,
    pub cpuct_base: f32,
    pub cpuct_factor: f32,
    /// First-play urgency: an unvisited move is valued at the parent's Q minus this times
    /// the square root of the visited policy.
    pub fpu_reduction: f32,
    pub policy_temperature: f32,
    /// Leaves gathered per backend call (capped at the backend's maximum batch).
    pub minibatch: usize,
    /// NN cache entries.
    pub cache_size: usize,
    /// The most nodes the tree may hold (each about 48 bytes); a search that reaches it ends,
    /// as lc0's RamLimitMb does, instead of growing until memory runs out.
    pub max_tree_nodes: usize,
    /// UCI_Chess960: castling moves are written as king takes rook.
    pub chess960: bool,
}

impl Default for SearchParams {
    fn default() -> Self {
        Self {
            cpuct: 1.745,
            cpuct_base: 38_739.0,
            cpuct_factor: 3.894,
            fpu_reduction: 0.330,
            policy_temperature: DEFAULT_POLICY_TEMPERATURE,
            minibatch: 256,
            cache_size: 200_000,
            max_tree_nodes: 40_000_000,
            chess960: false,
        }
    }
}

/// When a search ends (besides the stop flag): after `nodes` new playouts or `time`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    pub nodes: Option<u64>,
    pub time: Option<Duration>,
}

/// A report on the search so far (UCI `info`).
#[derive(Debug, Clone, PartialEq)]
pub struct SearchInfo {
    /// Mean depth of this search's playouts, rounded.
    pub depth: u32,
    pub seldepth: u32,
    /// Playouts in this search.
    pub nodes: u64,
    pub elapsed: Duration,
    /// Q of the root for the side to move (W − L).
    pub q: f32,
    /// Mate in this many moves for the side to move, when the best move mates.
    pub mate: Option<i32>,
    pub pv: Vec<Move>,
    /// Whether moves are written in Chess960 notation (king takes rook).
    pub chess960: bool,
}

impl SearchInfo {
    pub fn nps(&self) -> u64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            (self.nodes as f64 / secs) as u64
        } else {
            0
        }
    }

    /// lc0's centipawn score from Q: `90·tan(1.5637541897·q)`.
    pub fn centipawns(&self) -> i32 {
        let q = f64::from(self.q.clamp(-0.9999, 0.9999));
        (90.0 * (1.563_754_189_7 * q).tan()).round() as i32
    }

    /// The principal variation in UCI notation.
    pub fn pv_uci(&self) -> Vec<String> {
        self.pv.iter().map(|m| self.move_uci(m)).collect()
    }

    /// A move in UCI notation, castling as this search's notation asks.
    pub fn move_uci(&self, m: &Move) -> String {
        uci(m, self.chess960)
    }
}

/// A move in UCI notation as lc0 writes it (see [`uci_notation`]).
pub fn uci(m: &Move, chess960: bool) -> String {
    uci_notation(*m, chess960).to_string()
}

/// Why a search could not run.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("the game is over in this position: no move to search")]
    GameOver,
    #[error("the side not to move is in check: no game continues from this position")]
    NoContinuation,
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// The result: the move to play and the last report.
#[derive(Debug, Clone)]
pub struct SearchResult {
    pub best_move: Move,
    pub info: SearchInfo,
    /// The search ended because the tree reached `max_tree_nodes`.
    pub tree_full: bool,
}

/// A leaf waiting for the backend.
struct PendingLeaf {
    path: Vec<u32>,
    planes: InputPlanes,
    key: u64,
    legal: Vec<(Move, usize)>,
}

/// A search over one position, kept between moves so its tree can be reused.
pub struct Search {
    backend: Arc<dyn Backend>,
    params: SearchParams,
    fill: HistoryFill,
    cache: NnCache,
    tree: Tree,
    root: PositionHistory,
}

impl Search {
    pub fn new(backend: Arc<dyn Backend>, params: SearchParams) -> Self {
        Self {
            backend,
            cache: NnCache::new(params.cache_size),
            params,
            fill: HistoryFill::FenOnly,
            tree: Tree::default(),
            root: PositionHistory::startpos(),
        }
    }

    pub fn set_params(&mut self, params: SearchParams) {
        self.cache.set_capacity(params.cache_size);
        self.params = params;
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Searches `history` from scratch (a new game or an unrelated position).
    pub fn set_position(&mut self, history: PositionHistory) {
        self.root = history;
        self.tree = Tree::default();
    }

    /// Plays `moves` from the current root, keeping the subtree under them.
    pub fn advance(&mut self, moves: &[Move]) {
        let mut index = ROOT;
        let mut reusable = true;
        for m in moves {
            self.root.play(*m);
            match self.tree.child_by_move(index, m) {
                Some(child) if reusable => index = child,
                _ => reusable = false,
            }
        }
        self.tree = if reusable {
            self.tree.subtree(index)
        } else {
            Tree::default()
        };
    }

    pub fn history(&self) -> &PositionHistory {
        &self.root
    }

    /// Playouts already in the root (reused from earlier searches or this one).
    pub fn root_visits(&self) -> u32 {
        self.tree.node(ROOT).visits
    }

    /// Searches until `limits` or `stop`, calling `on_batch` after every backend batch (the
    /// caller decides how often to report; the best move so far is `pv[0]`).
    pub fn run(
        &mut self,
        limits: Limits,
        stop: &AtomicBool,
        on_batch: &mut dyn FnMut(&SearchInfo),
    ) -> Result<SearchResult, SearchError> {
        match &self.root.last().position {
            None => return Err(SearchError::NoContinuation),
            Some(position) if position.legal_moves().is_empty() => {
                return Err(SearchError::GameOver);
            }
            Some(_) => {}
        }
        let start = Instant::now();
        let mut stats = DepthStats::default();
        loop {
            let remaining = limits.nodes.map(|n| n.saturating_sub(stats.playouts));
            // Never stop before the root has children: there would be no move to name.
            let has_move = self.tree.node(ROOT).expanded;
            let limit_reached = remaining == Some(0)
                || limits.time.is_some_and(|t| start.elapsed() >= t)
                || stop.load(Ordering::Relaxed)
                || self.tree_full();
            if has_move && limit_reached {
                break;
            }
            let batch = self.batch_size(remaining.filter(|_| has_move));
            self.playout_batch(batch, &mut stats)?;
            on_batch(&self.info(&stats, start.elapsed()));
        }
        let info = self.info(&stats, start.elapsed());
        let best = self
            .tree
            .best_child(ROOT)
            .and_then(|c| self.tree.node(c).mv)
            .ok_or(SearchError::GameOver)?;
        Ok(SearchResult {
            best_move: best,
            info,
            tree_full: self.tree_full(),
        })
    }

    /// Whether another batch could take the tree past `max_tree_nodes` (each leaf adds at
    /// most 218 children, the most legal moves a chess position has).
    fn tree_full(&self) -> bool {
        let worst_batch = self.params.minibatch.saturating_mul(218);
        self.tree.nodes.len().saturating_add(worst_batch) > self.params.max_tree_nodes
    }

    fn batch_size(&self, remaining: Option<u64>) -> usize {
        let cap = self
            .params
            .minibatch
            .clamp(1, self.backend.attributes().max_batch.max(1));
        remaining.map_or(cap, |r| cap.min(r.try_into().unwrap_or(usize::MAX)))
    }

    /// Gathers up to `size` playouts, evaluates the new leaves in one backend call and backs
    /// everything up.
    fn playout_batch(&mut self, size: usize, stats: &mut DepthStats) -> Result<(), SearchError> {
        let mut pending: Vec<PendingLeaf> = Vec::new();
        let mut collisions = 0;
        let mut done = 0;
        while done + collisions < size {
            let root_len = self.root.len();
            let path = self.descend();
            stats.record(path.len() as u32 - 1);
            let leaf = *path.last().expect("a path holds the root");
            let outcome = self.leaf_outcome(leaf, &path);
            self.root.truncate(root_len);
            match outcome {
                LeafOutcome::Done => done += 1,
                LeafOutcome::Collision => collisions += 1,
                LeafOutcome::Pending(p) => {
                    pending.push(*p);
                    done += 1;
                }
            }
        }
        stats.playouts += done as u64;
        tracing::debug!(
            target: "lc0rs::search",
            asked = size,
            to_backend = pending.len(),
            answered_at_once = done - pending.len(),
            collisions,
            "batch gathered"
        );
        if pending.is_empty() {
            return Ok(());
        }
        let planes: Vec<InputPlanes> = pending.iter().map(|p| p.planes).collect();
        let out = self.backend.evaluate(&planes)?;
        for (i, leaf) in pending.into_iter().enumerate() {
            let probabilities = legal_move_probabilities(
                out.policy_of(i),
                &leaf.legal,
                self.params.policy_temperature,
            );
            let eval = CachedEval {
                q: out.q[i],
                d: out.d[i],
                m: out.m[i],
                priors: probabilities,
            };
            self.expand_and_back_up(&leaf.path, &leaf.legal, &eval);
            self.cache.insert(leaf.key, eval);
        }
        Ok(())
    }

    /// Walks from the root to a leaf by PUCT, playing the moves on `self.root` and adding a
    /// virtual loss to every node on the way.
    fn descend(&mut self) -> Vec<u32> {
        let mut path = vec![ROOT];
        let mut index = ROOT;
        self.tree.node_mut(ROOT).in_flight += 1;
        loop {
            let node = self.tree.node(index);
            if node.terminal.is_some() || !node.expanded || node.children.is_empty() {
                return path;
            }
            index = self.select_child(index);
            let child = self.tree.node_mut(index);
            child.in_flight += 1;
            let m = child.mv.expect("children have moves");
            self.root.play(m);
            path.push(index);
        }
    }

    /// The child maximising Q + U, with in-flight playouts counted as losses.
    fn select_child(&self, index: u32) -> u32 {
        let parent = self.tree.node(index);
        let parent_n = f64::from(parent.visits + parent.in_flight);
        let p = &self.params;
        let cpuct = f64::from(p.cpuct)
            + f64::from(p.cpuct_factor)
                * ((parent_n + f64::from(p.cpuct_base)) / f64::from(p.cpuct_base)).ln();
        let children = self.tree.children(index);
        let visited_policy: f64 = children
            .clone()
            .map(|c| self.tree.node(c))
            .filter(|c| c.visits > 0)
            .map(|c| f64::from(c.prior))
            .sum();
        // The parent's value for the side to move there (its own is for the other side).
        let parent_q = -parent.q();
        let fpu = parent_q - f64::from(p.fpu_reduction) * visited_policy.sqrt();
        let sqrt_n = parent_n.max(1.0).sqrt();
        let score = |c: u32| {
            let child = self.tree.node(c);
            let n = f64::from(child.visits + child.in_flight);
            let q = if n == 0.0 {
                fpu
            } else {
                (child.value_sum - f64::from(child.in_flight)) / n
            };
            q + cpuct * f64::from(child.prior) * sqrt_n / (1.0 + n)
        };
        children
            .max_by(|&a, &b| score(a).total_cmp(&score(b)))
            .expect("select_child is called on expanded nodes with children")
    }

    /// Scores a leaf at once where possible (game over, cached, or already pending), or
    /// prepares it for the backend.
    fn leaf_outcome(&mut self, leaf: u32, path: &[u32]) -> LeafOutcome {
        let node = self.tree.node(leaf);
        if let Some(value) = node.terminal {
            self.tree.back_up(path, value);
            return LeafOutcome::Done;
        }
        if node.in_flight > 1 {
            // Another playout of this batch already waits on this leaf.
            self.tree.cancel(path);
            return LeafOutcome::Collision;
        }
        // The root is searched even where the rules would end the game (a draw claimable
        // by repetition or the fifty-move rule): the engine still has to name a move.
        let terminal = if path.len() > 1 {
            terminal_value(&self.root)
        } else {
            None
        };
        if let Some(value) = terminal {
            self.tree.node_mut(leaf).terminal = Some(value);
            self.tree.back_up(path, value);
            return LeafOutcome::Done;
        }
        let encoded = encode_position(&self.root, self.backend.input_format(), self.fill);
        let current = self.root.last();
        let legal = entry_moves_with_indices(current, encoded.transform);
        let key = NnCache::key(&encoded.planes, current.key);
        if let Some(eval) = self.cache.get(key).cloned() {
            self.expand_and_back_up(path, &legal, &eval);
            return LeafOutcome::Done;
        }
        LeafOutcome::Pending(Box::new(PendingLeaf {
            path: path.to_vec(),
            planes: encoded.planes,
            key,
            legal,
        }))
    }

    fn expand_and_back_up(&mut self, path: &[u32], legal: &[(Move, usize)], eval: &CachedEval) {
        let leaf = *path.last().expect("a path holds the root");
        let moves = legal
            .iter()
            .zip(&eval.priors)
            .map(|((m, _), &p)| (*m, p))
            .collect();
        self.tree.expand(leaf, moves);
        // The network's Q is for the side to move at the leaf; the leaf stores the mover's.
        self.tree.back_up(path, -eval.q);
    }

    fn info(&self, stats: &DepthStats, elapsed: Duration) -> SearchInfo {
        let pv = self.tree.principal_variation(ROOT);
        let best = self.tree.best_child(ROOT).map(|c| self.tree.node(c));
        let q = best.map_or(-self.tree.node(ROOT).q(), |b| b.q()) as f32;
        let mate = best.filter(|b| b.terminal == Some(1.0)).map(|_| 1);
        SearchInfo {
            depth: stats.mean_depth(),
            seldepth: stats.max_depth,
            nodes: stats.playouts,
            elapsed,
            q,
            mate,
            pv,
            chess960: self.params.chess960,
        }
    }
}

enum LeafOutcome {
    Done,
    Collision,
    Pending(Box<PendingLeaf>),
}

#[derive(Default)]
struct DepthStats {
    playouts: u64,
    depth_sum: u64,
    samples: u64,
    max_depth: u32,
}

impl DepthStats {
    fn record(&mut self, depth: u32) {
        self.depth_sum += u64::from(depth);
        self.samples += 1;
        self.max_depth = self.max_depth.max(depth);
    }

    fn mean_depth(&self) -> u32 {
        if self.samples == 0 {
            0
        } else {
            ((self.depth_sum as f64 / self.samples as f64).round() as u32).max(1)
        }
    }
}

/// The game result for the player who just moved into the last position, if the game is over:
/// +1 when they mated, 0 for stalemate, the fifty-move rule, threefold repetition or
/// insufficient material. `None` also where no game continues (the side not to move in
/// check), a position the search refuses at its root and never reaches by a move.
pub fn terminal_value(history: &PositionHistory) -> Option<f32> {
    let entry = history.last();
    let position = entry.position.as_ref()?;
    if position.legal_moves().is_empty() {
        return Some(if position.is_check() { 1.0 } else { 0.0 });
    }
    let draw = entry.rule50 >= 100 || entry.repetitions >= 2 || position.is_insufficient_material();
    draw.then_some(0.0)
}
