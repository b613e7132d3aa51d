//! PUCT Monte-Carlo tree search in lc0's manner, on any [`Backend`]: priors from the policy
//! softmax at a temperature, a growing CPuct, first-play urgency, minibatches gathered as lc0
//! gathers them (visits dealt from the root in passes, in-flight visits lowering only the
//! exploration term, a collision budget that grows with the tree, positions already known
//! answered out of order), an NN cache, terminal positions scored by the rules, and tree reuse
//! between moves.

mod arena;
pub mod cache;
mod leaf;
mod pick;
pub mod profile;
mod ranking;
pub mod stats;
mod tasks;
pub mod time;
pub mod tree;
mod worker;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Condvar, Mutex, PoisonError, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use shakmaty::{Chess, Move, Position};

use lc0rs::backend::{Backend, BackendError, DEFAULT_POLICY_TEMPERATURE};
use lc0rs::chess::castling::uci_notation;
use lc0rs::chess::history::HistoryEntry;
use lc0rs::chess::{HistoryFill, PositionHistory, encode_position};

use cache::NnCache;
use tasks::TaskWorkers;
pub use tasks::TaskWorkersError;
use tree::{ROOT, Tree};
use worker::{BatchTarget, Context, SearchStats, TreeState};

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
    /// Leaves gathered per backend call (capped at the backend's maximum batch); 0: the
    /// backend's recommended batch (see [`Search::minibatch`]).
    pub minibatch: usize,
    /// lc0's MaxCollisionVisits: the most collision visits one gathering may hold, reached
    /// once the tree has `collision_scaling_end` visits.
    pub max_collision_visits: u32,
    /// lc0's MaxCollisionVisitsScalingStart, ...End and ...Power: up to a tree of the start's
    /// visits a gathering ends at its first collision; from there the budget grows as a curve
    /// of this power to `max_collision_visits` (an end of 0: no scaling).
    pub collision_scaling_start: u32,
    pub collision_scaling_end: u32,
    pub collision_scaling_power: f32,
    /// lc0's MaxOutOfOrderEvalsFactor: a gathering ends once the leaves answered without the
    /// backend (game ends, cached positions) reach this many times the minibatch.
    pub max_out_of_order_evals_factor: f32,
    /// NN cache entries (lc0's NNCacheSize, 2,000,000 as in lc0: in a game the cache holds
    /// every position the game's searches evaluated, and a later search finds the positions
    /// its tree did not keep, transpositions from earlier moves, in it).
    pub cache_size: usize,
    /// Whether the NN cache keys a position by the network's whole input, its history
    /// included (the library's default: a search's results then depend on the inputs alone),
    /// or as lc0 does (the UCI engine's default), by the position and its repetitions alone: a
    /// position reached again by another move order (a transposition) is then answered with
    /// the evaluation its first arrival got, and costs no backend call.
    pub exact_cache_key: bool,
    /// The most edges and nodes the tree may hold together (16 and 40 bytes, see
    /// [`tree`]); a search that reaches it ends, as lc0's RamLimitMb does, instead of growing
    /// until memory runs out.
    pub max_tree_nodes: usize,
    /// UCI_Chess960: castling moves are written as king takes rook.
    pub chess960: bool,
    /// Search threads over the one tree; 0 chooses by backend (see [`Search::threads`]).
    pub threads: usize,
    /// The root's visits (those kept from the last search included) below which only the
    /// first search thread gathers; the others join once the root has them (0: all threads
    /// from the start, as lc0). A second thread picks its leaves while the first one's are in
    /// flight, blind to their values; in a small tree that batch is a large share of what the
    /// tree knows, and at 100 nodes a move two threads played weaker than one, in lc0 as in
    /// lc0rs. In a large tree (a reused one, most moves of a game) nothing changes.
    pub single_thread_visits: u64,
    /// Threads that help each search thread prepare leaves (lc0's TaskWorkers, per search
    /// thread); `None` chooses as lc0 does (see [`Search::task_workers`]).
    pub task_workers: Option<usize>,
    /// Root moves reported in [`SearchInfo::lines`] (UCI MultiPV).
    pub multipv: usize,
    /// lc0's SmartPruningFactor: a search with a node or time limit ends once the best move
    /// can no longer be overtaken in the playouts left divided by this (0: off; lc0's UCI
    /// default is 1.33). It also ends a limited search at once where only one move is legal.
    pub smart_pruning_factor: f32,
}

impl Default for SearchParams {
    fn default() -> Self {
        Self {
            cpuct: 1.745,
            cpuct_base: 38_739.0,
            cpuct_factor: 3.894,
            fpu_reduction: 0.330,
            policy_temperature: DEFAULT_POLICY_TEMPERATURE,
            minibatch: 0,
            max_collision_visits: 80_000,
            collision_scaling_start: 28,
            collision_scaling_end: 145_000,
            collision_scaling_power: 1.25,
            max_out_of_order_evals_factor: 2.4,
            cache_size: 2_000_000,
            exact_cache_key: true,
            max_tree_nodes: 40_000_000,
            chess960: false,
            threads: 0,
            single_thread_visits: 0,
            task_workers: None,
            multipv: 1,
            smart_pruning_factor: 0.0,
        }
    }
}

/// When a search ends (besides the stop flag): once the root has `nodes` visits (as lc0's
/// `go nodes`: the visits kept from the previous search count) or after `time`, once the
/// mean playout depth reaches `depth`, or once a mate in at most `mate` moves is proven (lc0's
/// `go depth` and `go mate`); and the root moves it considers (`searchmoves`; empty: every
/// legal move).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    pub nodes: Option<u64>,
    pub time: Option<Duration>,
    pub depth: Option<u32>,
    pub mate: Option<u32>,
    pub searchmoves: Vec<Move>,
}

/// One root move and what the search found under it (a UCI `multipv` line).
#[derive(Debug, Clone, PartialEq)]
pub struct PvLine {
    /// The root move first.
    pub pv: Vec<Move>,
    pub visits: u32,
    /// Q for the side to move at the root (W − L).
    pub q: f32,
    /// Win, draw and loss probabilities for the side to move at the root.
    pub wdl: [f32; 3],
    /// Mate in this many moves (negative: mated) when the line's result is proven.
    pub mate: Option<i32>,
    /// The root move's place among the root's moves in policy order, from 1 (UCI
    /// `currmovenumber`).
    pub move_number: u32,
}

/// A report on the search so far (UCI `info`).
#[derive(Debug, Clone, PartialEq)]
pub struct SearchInfo {
    /// Mean depth of this search's playouts, rounded.
    pub depth: u32,
    pub seldepth: u32,
    /// Visits of the root: those kept from the previous search and this search's playouts
    /// (lc0's UCI `nodes`).
    pub nodes: u64,
    /// Playouts in this search (what `nps` counts, as lc0's).
    pub playouts: u64,
    pub elapsed: Duration,
    /// Q of the best move for the side to move (W − L).
    pub q: f32,
    /// Mate in this many moves for the side to move (negative: mated), when proven.
    pub mate: Option<i32>,
    pub pv: Vec<Move>,
    /// The best `multipv` root moves, best first (the first is `q`, `mate` and `pv`).
    pub lines: Vec<PvLine>,
    /// The NN cache's fill, per mille (UCI `hashfull`).
    pub hashfull: u32,
    /// Whether moves are written in Chess960 notation (king takes rook).
    pub chess960: bool,
    /// Whether the lines carry their number (`multipv N`): as in lc0, whenever MultiPV above 1
    /// was asked, even where fewer root moves exist (one legal move, or a search stopped early).
    pub numbered_lines: bool,
    /// Playouts that met a leaf already waiting for the backend (in this or another thread's
    /// batch) and were given up.
    pub collisions: u64,
    /// Walks of the tree from the root that gathered them.
    pub walks: u64,
    /// Those of the walks whose subtrees were shared among the task workers.
    pub shared_walks: u64,
    /// Backend calls and the positions sent in them.
    pub batches: u64,
    pub evaluated: u64,
    /// Where the search threads spent their time: in the final report of a search only (the
    /// reports during it leave it empty, so that none sorts the backend calls so far).
    pub times: profile::PhaseTimes,
}

impl PvLine {
    /// W, D, L per mille, summing to 1000 (UCI `wdl`), rounded as lc0 rounds them: W and L
    /// from Q and D, D the rest (where W and L overshoot, D is 0 and they share the excess).
    pub fn wdl_per_mille(&self) -> [i32; 3] {
        wdl_per_mille(self.q, self.wdl[1])
    }
}

/// W, D, L per mille from W − L and D, summing to 1000 (UCI `wdl`), rounded as lc0 rounds
/// them (see [`PvLine::wdl_per_mille`]).
pub fn wdl_per_mille(wl: f32, d: f32) -> [i32; 3] {
    let (wl, d) = (f64::from(wl), f64::from(d));
    let mut w = ((500.0 * (1.0 + wl - d)).round() as i32).max(0);
    let mut l = ((500.0 * (1.0 - wl - d)).round() as i32).max(0);
    let mut draw = 1000 - w - l;
    if draw < 0 {
        w = (w + draw / 2).clamp(0, 1000);
        l = 1000 - w;
        draw = 0;
    }
    [w, draw, l]
}

impl SearchInfo {
    pub fn nps(&self) -> u64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            (self.playouts as f64 / secs) as u64
        } else {
            0
        }
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
    #[error(transparent)]
    TaskWorkers(#[from] TaskWorkersError),
    #[error("searchmoves: {0} is not a legal move in the position searched")]
    IllegalSearchMove(String),
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
    /// The tree, locked for the threads of a search (see [`worker`]); between searches only
    /// this search's own methods reach it.
    tree: RwLock<Tree>,
    /// An empty tree made ahead ([`Search::make_spare_tree`]) for the next move's reuse to
    /// copy into: a new tree writes megabytes (its chunk table and first chunk of nodes), 1–2
    /// ms a move that a GUI's clock would otherwise count.
    spare: Option<Tree>,
    /// The subtree after the expected two moves (this search's best move and the reply it
    /// expects), copied ahead by [`Search::prepare_next_move`]: when those are played, the next
    /// search starts on it without a copy.
    prepared: Option<(Vec<Move>, Tree)>,
    root: PositionHistory,
    /// The threads and minibatch the backend was last warmed up for.
    warmed: Option<(usize, usize)>,
}

impl Search {
    pub fn new(backend: Arc<dyn Backend>, params: SearchParams) -> Self {
        Self {
            backend,
            cache: NnCache::new(params.cache_size),
            params,
            fill: HistoryFill::FenOnly,
            tree: RwLock::new(Tree::default()),
            spare: None,
            prepared: None,
            root: PositionHistory::startpos(),
            warmed: None,
        }
    }

    /// Has the backend prepare every batch size a search can send (up to the minibatch, from
    /// each thread at once; see [`Backend::prepare`]), so that a GPU backend's one-time work
    /// per batch size and lane (graph capture, GEMM algorithm choice) is done before the first
    /// search rather than during it. Does nothing when already done for these threads and
    /// minibatch.
    pub fn warm_up(&mut self) -> Result<(), SearchError> {
        let key = (self.threads(), self.minibatch());
        if self.warmed == Some(key) {
            return Ok(());
        }
        self.backend.prepare(key.1, key.0)?;
        self.warmed = Some(key);
        Ok(())
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

    /// The task workers a search runs beside its threads, shared by them:
    /// `params.task_workers` for each of [`Search::threads`], or lc0's default for them on
    /// this machine's cores and the backend.
    pub fn task_workers(&self) -> usize {
        let threads = self.threads();
        match self.params.task_workers {
            Some(per_thread) => per_thread.saturating_mul(threads),
            None => {
                let cores = std::thread::available_parallelism().map_or(1, usize::from);
                let on_cpu = self.backend.attributes().runs_on_cpu;
                tasks::default_count(threads, cores, on_cpu)
            }
        }
    }

    /// The search threads a search runs: `params.threads`, or where that is 0 the backend's
    /// recommendation (lc0's default: one more than the backend's own threads).
    pub fn threads(&self) -> usize {
        match self.params.threads {
            0 => self.backend.attributes().recommended_threads.max(1),
            n => n,
        }
    }

    /// The leaves gathered per backend call: `params.minibatch`, or where that is 0 the
    /// backend's recommended batch (as lc0's MinibatchSize 0), within its maximum.
    pub fn minibatch(&self) -> usize {
        let attributes = self.backend.attributes();
        let wanted = match self.params.minibatch {
            0 => attributes.recommended_batch,
            n => n,
        };
        wanted.clamp(1, attributes.max_batch.max(1))
    }

    /// Searches `history` from scratch (a new game or an unrelated position).
    pub fn set_position(&mut self, history: PositionHistory) {
        self.root = history;
        self.prepared = None;
        *self.tree_mut() = Tree::default();
    }

    /// The tree outside a search (no thread can hold its lock then).
    fn tree_mut(&mut self) -> &mut Tree {
        self.tree.get_mut().unwrap_or_else(PoisonError::into_inner)
    }

    /// Plays `moves` from the current root, keeping the subtree under them.
    pub fn advance(&mut self, moves: &[Move]) {
        if let Some((expected, tree)) = self.prepared.take() {
            if expected == moves {
                for m in moves {
                    self.root.play(*m);
                }
                drop_elsewhere(std::mem::replace(self.tree_mut(), tree));
                return;
            }
            drop_elsewhere(tree);
        }
        let mut index = ROOT;
        let mut reusable = true;
        for m in moves {
            self.root.play(*m);
            let tree = self.tree_mut();
            let child = tree.child_by_move(index, m);
            match child.and_then(|edge| tree.child_node(edge)) {
                Some(child) if reusable => index = child,
                _ => reusable = false,
            }
        }
        let into = self.spare.take().unwrap_or_default();
        let tree = self.tree_mut();
        let kept = if reusable {
            tree.subtree(index, into)
        } else {
            into
        };
        drop_elsewhere(std::mem::replace(tree, kept));
    }

    /// Work for the time between two searches (after the answer, while the opponent thinks),
    /// so that the next move's tree reuse costs little on the clock: an empty tree for it to
    /// copy into, and the subtree after the best move and the reply the search expects, copied
    /// ahead (the copy takes milliseconds in a large tree).
    pub fn prepare_next_move(&mut self) {
        self.spare.get_or_insert_with(Tree::default);
        let tree = self.tree_mut();
        let mut index = ROOT;
        let mut moves = Vec::with_capacity(2);
        for _ in 0..2 {
            let best = tree.ranked_children(index).first().copied();
            let Some((edge, child)) = best.and_then(|e| Some((e, tree.child_node(e)?))) else {
                return;
            };
            moves.push(tree.edge(edge).mv);
            index = child;
        }
        let copy = tree.subtree(index, Tree::default());
        self.prepared = Some((moves, copy));
    }

    /// The moves whose subtree [`Search::prepare_next_move`] copied ahead, if any.
    pub fn prepared_moves(&self) -> Option<&[Move]> {
        self.prepared.as_ref().map(|(moves, _)| moves.as_slice())
    }

    pub fn history(&self) -> &PositionHistory {
        &self.root
    }

    /// The tree as the last search left it (for inspection: visit counts, values, priors).
    pub fn tree(&self) -> RwLockReadGuard<'_, Tree> {
        self.tree.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The root's moves with their visits, priors, values and PUCT terms, the least
    /// promising first (lc0's VerboseMoveStats).
    pub fn move_stats(&self) -> Vec<stats::MoveStats> {
        let format = self.backend.input_format();
        let cached_value = |m: Move| {
            let mut history = self.root.clone();
            history.play(m);
            let key = if self.params.exact_cache_key {
                let encoded = encode_position(&history, format, self.fill);
                NnCache::key(&encoded.planes, history.last().key)
            } else {
                NnCache::position_key(history.last())
            };
            // The network's Q is for the side to move after `m`.
            self.cache.get(key).map(|eval| -eval.q)
        };
        stats::root_move_stats(&self.tree(), &self.params, &cached_value)
    }

    /// Playouts already in the root (reused from earlier searches or this one).
    pub fn root_visits(&self) -> u32 {
        self.tree().node(ROOT).visits
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
            Some(position) => {
                if let Some(m) = limits.searchmoves.iter().find(|m| !position.is_legal(**m)) {
                    return Err(SearchError::IllegalSearchMove(uci(m, self.params.chess960)));
                }
            }
        }
        let start = Instant::now();
        let task_workers = self.task_workers();
        let threads = self.threads();
        let cap = self.minibatch();
        let in_flight = leaves_per_round(cap, threads, &self.params);
        let kept_visits = u64::from(self.tree_mut().node(ROOT).visits);
        let plan = batch_plan(&limits, &self.params, start, cap, in_flight);
        let params = &self.params;
        let context = Context {
            backend: &*self.backend,
            params: &self.params,
            fill: self.fill,
            root: &self.root,
            root_moves: &limits.searchmoves,
            cache: Mutex::new(&mut self.cache),
            state: Mutex::new(TreeState {
                tree: &self.tree,
                stats: SearchStats::default(),
                kept_visits,
                first_playout_at: None,
                finished: false,
                collisions: Vec::new(),
            }),
            backed_up: Condvar::new(),
            stop,
            threads,
            in_backend: AtomicUsize::new(0),
            batches_in_flight: AtomicUsize::new(0),
        };
        // Declared after what its work borrows, so that it is dropped first.
        let tasks = TaskWorkers::new(task_workers);
        let outcome = std::thread::scope(|scope| {
            tasks.run(scope, || {
                let helpers: Vec<_> = (1..threads)
                    .map(|thread| {
                        let (context, tasks, plan) = (&context, &tasks, &plan);
                        scope.spawn(move || context.run_thread(tasks, plan, thread, &mut || {}))
                    })
                    .collect();
                let mut report = || {
                    let info = {
                        let hashfull = context.cache_fill();
                        let state = context.lock();
                        info(
                            &state,
                            params,
                            &limits.searchmoves,
                            start.elapsed(),
                            hashfull,
                        )
                    };
                    on_batch(&info);
                };
                let mine = context.run_thread(&tasks, &plan, 0, &mut report);
                helpers
                    .into_iter()
                    .map(|h| h.join().unwrap_or(Err(SearchError::ThreadFailed)))
                    .fold(mine, Result::and)
            })
        });
        let hashfull = context.cache_fill();
        let mut state = context.lock();
        state.cancel_collisions();
        outcome??;
        let info = SearchInfo {
            times: state.stats.profile.times(),
            ..info(
                &state,
                params,
                &limits.searchmoves,
                start.elapsed(),
                hashfull,
            )
        };
        let best = info.pv.first().copied().ok_or(SearchError::GameOver)?;
        Ok(SearchResult {
            best_move: best,
            tree_full: tree_full(&state.tree(), in_flight, self.params.max_tree_nodes),
            info,
        })
    }
}

/// Frees `tree` on a thread of its own, so that the search starting meanwhile does not wait
/// for it (a large tree takes milliseconds to free); here if it is small or no thread can be
/// started.
fn drop_elsewhere(tree: Tree) {
    // Freeing a small tree costs less than starting a thread.
    const SMALL: usize = 50_000;
    if tree.size() < SMALL {
        return drop(tree);
    }
    // A thread that cannot be started drops its closure, and the tree with it, here.
    let _ = std::thread::Builder::new()
        .name("lc0rs-tree-free".to_owned())
        .spawn(move || drop(tree));
}

/// The most leaves the threads can expand before the next check of the tree's size: each
/// thread's minibatch and the leaves its gathering answers out of order.
fn leaves_per_round(cap: usize, threads: usize, params: &SearchParams) -> usize {
    let out_of_order = (params.max_out_of_order_evals_factor * cap as f32) as usize;
    cap.saturating_add(out_of_order.max(1))
        .saturating_mul(threads)
}

/// What each search thread asks before a batch: how many positions to send the backend (at
/// most `cap`) and how many playouts to gather (within the node limit), or `None` once a
/// limit is reached (never before the root has a move to name).
fn batch_plan<'a>(
    limits: &'a Limits,
    params: &'a SearchParams,
    start: Instant,
    cap: usize,
    in_flight: usize,
) -> impl Fn(&mut TreeState) -> Option<BatchTarget> + Sync + 'a {
    move |state: &mut TreeState| {
        let remaining = limits.nodes.map(|n| n.saturating_sub(state.visits()));
        let has_move = state.tree().node(ROOT).expanded;
        let limit_reached = remaining == Some(0)
            || worker::past(start, limits.time)
            || limits.depth.is_some_and(|d| state.stats.mean_depth() >= d)
            || limits
                .mate
                .is_some_and(|n| mate_found(&state.tree(), &limits.searchmoves, n))
            || tree_full(&state.tree(), in_flight, params.max_tree_nodes)
            || settled(state, limits, start, params.smart_pruning_factor);
        if has_move && limit_reached {
            return None;
        }
        // The root's own evaluation comes first, alone: the limits count from it on.
        let playouts = match remaining {
            _ if !has_move => 1,
            Some(r) => r.try_into().unwrap_or(usize::MAX),
            None => usize::MAX,
        };
        Some(BatchTarget {
            evaluations: cap.min(playouts),
            playouts,
            remaining_playouts: remaining_playouts(state, limits, start, params),
            // The root's own evaluation is gathered whatever the node limit says.
            visit_limit: limits.nodes.filter(|_| has_move),
        })
    }
}

/// The playouts the search still expects, as lc0's stoppers hint them to its gathering: with
/// smart pruning on, the node limit's remainder (4·10⁹ without one), once smart pruning is
/// active that or the time left at the measured speed, divided by the factor; infinite with
/// smart pruning off.
fn remaining_playouts(
    state: &TreeState,
    limits: &Limits,
    start: Instant,
    params: &SearchParams,
) -> f64 {
    const NO_NODE_LIMIT: u64 = 4_000_000_000;
    let factor = params.smart_pruning_factor;
    if factor <= 0.0 {
        return f64::INFINITY;
    }
    let left = limits
        .nodes
        .unwrap_or(NO_NODE_LIMIT)
        .saturating_sub(state.visits());
    let Some(first) = state.first_playout_at else {
        return left as f64;
    };
    let elapsed = start.elapsed();
    time::remaining_playouts(
        &time::PruningInput {
            edge_visits: &[],
            playouts: state.stats.playouts,
            since_first_eval: elapsed.saturating_sub(first),
            time_left: limits.time.map(|t| t.saturating_sub(elapsed)),
            playouts_left: Some(left),
        },
        factor,
    )
    .unwrap_or(left as f64)
}

/// Whether the best root move is a proven mate in at most `moves` moves.
fn mate_found(tree: &Tree, root_moves: &[Move], moves: u32) -> bool {
    let best = root_ranking(tree, root_moves)
        .first()
        .map(|&c| pv_line(tree, c));
    best.and_then(|line| line.mate)
        .is_some_and(|m| m > 0 && m.unsigned_abs() <= moves)
}

/// Whether the leaves in flight (a batch on each search thread) could take the tree past
/// `max_nodes` (see [`Tree::size`]: each leaf adds its node and at most 218 edges, the most
/// legal moves a chess position has).
fn tree_full(tree: &Tree, in_flight: usize, max_nodes: usize) -> bool {
    let worst = in_flight.saturating_mul(1 + 218);
    tree.size().saturating_add(worst) > max_nodes
}

/// Whether smart pruning ends a search with a limit, as lc0's does: one move to choose from,
/// at most one move not proven lost, a proven win, or a best move that the playouts left
/// cannot overtake.
fn settled(state: &mut TreeState, limits: &Limits, start: Instant, factor: f32) -> bool {
    let limited = limits.nodes.is_some() || limits.time.is_some() || limits.depth.is_some();
    let tree = state.tree();
    if factor <= 0.0 || !limited || !tree.node(ROOT).expanded {
        return false;
    }
    let edges = root_ranking(&tree, &limits.searchmoves);
    let proof = |c: u32| tree.child(c).proof.map(|p| p.value);
    let not_lost = edges.iter().filter(|&&c| proof(c) != Some(-1)).count();
    let win_found = edges.first().is_some_and(|&c| proof(c) == Some(1));
    if not_lost <= 1 || win_found {
        return true;
    }
    let edge_visits: Vec<u32> = edges.iter().map(|&c| tree.child(c).visits).collect();
    if state.stats.playouts == 0 {
        return false;
    }
    let first = *state.first_playout_at.get_or_insert(start.elapsed());
    let elapsed = start.elapsed();
    time::best_move_is_settled(
        time::PruningInput {
            edge_visits: &edge_visits,
            playouts: state.stats.playouts,
            since_first_eval: elapsed.saturating_sub(first),
            time_left: limits.time.map(|t| t.saturating_sub(elapsed)),
            playouts_left: limits.nodes.map(|n| n.saturating_sub(state.visits())),
        },
        factor,
    )
}

fn info(
    state: &TreeState,
    params: &SearchParams,
    root_moves: &[Move],
    elapsed: Duration,
    hashfull: u32,
) -> SearchInfo {
    let tree = &*state.tree();
    let ranked = root_ranking(tree, root_moves);
    let lines: Vec<PvLine> = ranked
        .iter()
        .take(params.multipv.max(1))
        .map(|&c| pv_line(tree, c))
        .collect();
    let (q, mate, pv) = lines
        .first()
        .map_or((-tree.node(ROOT).q() as f32, None, Vec::new()), |l| {
            (l.q, l.mate, l.pv.clone())
        });
    SearchInfo {
        depth: state.stats.mean_depth(),
        seldepth: state.stats.max_depth,
        nodes: state.visits(),
        playouts: state.stats.playouts,
        elapsed,
        q,
        mate,
        pv,
        lines,
        hashfull,
        chess960: params.chess960,
        numbered_lines: params.multipv > 1,
        collisions: state.stats.collisions,
        walks: state.stats.walks,
        shared_walks: state.stats.shared_walks,
        batches: state.stats.batches,
        evaluated: state.stats.evaluated,
        times: profile::PhaseTimes::default(),
    }
}

/// The root's edges among `root_moves` (all where empty), best first.
fn root_ranking(tree: &Tree, root_moves: &[Move]) -> Vec<u32> {
    let mut ranked = tree.ranked_children(ROOT);
    if !root_moves.is_empty() {
        ranked.retain(|&e| root_moves.contains(&tree.edge(e).mv));
    }
    ranked
}

/// The line through the root's edge `edge`.
fn pv_line(tree: &Tree, edge: u32) -> PvLine {
    let node = tree.child(edge);
    let mut pv = vec![tree.edge(edge).mv];
    if let Some(child) = tree.child_node(edge) {
        pv.extend(tree.principal_variation(child));
    }
    let q = node.proof.map_or(node.q() as f32, |p| p.value());
    let d = match node.proof {
        Some(p) => f32::from(u8::from(p.value == 0)),
        None => node.draw,
    };
    // Plies from the root to the game end: one more than from the child.
    let mate = node.proof.and_then(|p| {
        let plies = i32::from(p.plies) + 1;
        match p.value {
            1 => Some((plies + 1) / 2),
            -1 => Some(-(plies / 2)),
            _ => None,
        }
    });
    PvLine {
        pv,
        visits: node.visits,
        q,
        wdl: [(1.0 + q - d) / 2.0, d, (1.0 - q - d) / 2.0],
        mate,
        move_number: edge - tree.children(ROOT).start + 1,
    }
}

/// The game result for the player who just moved into the last position, if the game is over:
/// +1 when they mated, 0 for stalemate, the fifty-move rule, threefold repetition or
/// insufficient material. `None` also where no game continues (the side not to move in
/// check), a position the search refuses at its root and never reaches by a move.
pub fn terminal_value(history: &PositionHistory) -> Option<f32> {
    let entry = history.last();
    let position = entry.position.as_ref()?;
    game_result(entry, position, position.legal_moves().is_empty())
}

/// [`terminal_value`] of `entry` (whose rules `position` holds), its legal moves already
/// generated: `no_moves` where there are none.
pub(super) fn game_result(entry: &HistoryEntry, position: &Chess, no_moves: bool) -> Option<f32> {
    if no_moves {
        return Some(if position.is_check() { 1.0 } else { 0.0 });
    }
    let draw = entry.rule50 >= 100 || entry.repetitions >= 2 || position.is_insufficient_material();
    draw.then_some(0.0)
}
