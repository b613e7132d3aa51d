//! PUCT Monte-Carlo tree search in lc0's manner, on any [`Backend`]: priors from the policy
//! softmax at a temperature, a growing CPuct, first-play urgency, virtual loss so that
//! `minibatch` leaves go to the backend in one call, an NN cache, terminal positions scored by
//! the rules, and tree reuse between moves.

pub mod cache;
pub mod tree;
mod worker;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use shakmaty::{Move, Position};

use crate::backend::{Backend, BackendError, DEFAULT_POLICY_TEMPERATURE};
use crate::chess::castling::uci_notation;
use crate::chess::{HistoryFill, PositionHistory};
use cache::NnCache;
use tree::{ROOT, Tree};
use worker::{Context, SearchStats, TreeState};

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
    /// Search threads over the one tree; 0 chooses by backend (see [`Search::threads`]).
    pub threads: usize,
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
            threads: 0,
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
    /// Playouts that met a leaf already waiting for the backend (in this or another thread's
    /// batch) and were given up.
    pub collisions: u64,
    /// Backend calls and the positions sent in them.
    pub batches: u64,
    pub evaluated: u64,
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
    #[error("a search thread failed")]
    ThreadFailed,
}

/// The result: the move to play and the last report.
#[derive(Debug, Clone)]
pub struct SearchResult {
    pub best_move: Move,
    pub info: SearchInfo,
    /// The search ended because the tree reached `max_tree_nodes`.
    pub tree_full: bool,
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

    pub fn params(&self) -> &SearchParams {
        &self.params
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// The search threads a search runs: `params.threads`, or where that is 0 lc0's default
    /// for the backend (one more than the backend's own, i.e. 2 on a GPU whose calls from two
    /// threads run side by side on its lanes, 1 on the CPU, whose backend already uses every
    /// core).
    pub fn threads(&self) -> usize {
        match self.params.threads {
            0 if self.backend.attributes().runs_on_cpu => 1,
            0 => 2,
            n => n,
        }
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

    /// The tree as the last search left it (for inspection: visit counts, values, priors).
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// Playouts already in the root (reused from earlier searches or this one).
    pub fn root_visits(&self) -> u32 {
        self.tree.node(ROOT).visits
    }

    /// Searches until `limits` or `stop`, calling `on_batch` after the backend batches of the
    /// calling thread (the caller decides how often to report; the best move so far is
    /// `pv[0]`). [`Search::threads`] threads gather, evaluate and back up at once.
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
        let threads = self.threads();
        let cap = self
            .params
            .minibatch
            .clamp(1, self.backend.attributes().max_batch.max(1));
        let max_nodes = self.params.max_tree_nodes;
        let plan = |state: &TreeState| -> Option<usize> {
            let remaining = limits.nodes.map(|n| n.saturating_sub(state.stats.playouts));
            // Never stop before the root has children: there would be no move to name.
            let has_move = state.tree.node(ROOT).expanded;
            let limit_reached = remaining == Some(0)
                || worker::past(start, limits.time)
                || tree_full(state.tree, cap, max_nodes);
            if has_move && limit_reached {
                return None;
            }
            let remaining = remaining.filter(|_| has_move);
            Some(remaining.map_or(cap, |r| cap.min(r.try_into().unwrap_or(usize::MAX))))
        };
        let chess960 = self.params.chess960;
        let context = Context {
            backend: &*self.backend,
            params: &self.params,
            fill: self.fill,
            root: &self.root,
            state: Mutex::new(TreeState {
                tree: &mut self.tree,
                cache: &mut self.cache,
                stats: SearchStats::default(),
                finished: false,
            }),
            backed_up: Condvar::new(),
            stop,
        };
        let outcome = std::thread::scope(|scope| {
            let helpers: Vec<_> = (1..threads)
                .map(|_| scope.spawn(|| context.run_thread(&plan, &mut || {})))
                .collect();
            let mut report = || {
                let info = {
                    let state = context.lock();
                    info(&state, chess960, start.elapsed())
                };
                on_batch(&info);
            };
            let mine = context.run_thread(&plan, &mut report);
            helpers
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(SearchError::ThreadFailed)))
                .fold(mine, Result::and)
        });
        outcome?;
        let state = context.lock();
        let info = info(&state, chess960, start.elapsed());
        let best = state
            .tree
            .best_child(ROOT)
            .and_then(|c| state.tree.node(c).mv)
            .ok_or(SearchError::GameOver)?;
        Ok(SearchResult {
            best_move: best,
            tree_full: tree_full(state.tree, cap, max_nodes),
            info,
        })
    }
}

/// Whether another batch could take the tree past `max_nodes` (each leaf adds at most 218
/// children, the most legal moves a chess position has).
fn tree_full(tree: &Tree, batch: usize, max_nodes: usize) -> bool {
    let worst_batch = batch.saturating_mul(218);
    tree.nodes.len().saturating_add(worst_batch) > max_nodes
}

fn info(state: &TreeState, chess960: bool, elapsed: Duration) -> SearchInfo {
    let tree = &*state.tree;
    let pv = tree.principal_variation(ROOT);
    let best = tree.best_child(ROOT).map(|c| tree.node(c));
    let q = best.map_or(-tree.node(ROOT).q(), |b| b.q()) as f32;
    let mate = best.filter(|b| b.terminal == Some(1.0)).map(|_| 1);
    SearchInfo {
        depth: state.stats.mean_depth(),
        seldepth: state.stats.max_depth,
        nodes: state.stats.playouts,
        elapsed,
        q,
        mate,
        pv,
        chess960,
        collisions: state.stats.collisions,
        batches: state.stats.batches,
        evaluated: state.stats.evaluated,
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
