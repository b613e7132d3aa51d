//! One search thread's work: gather a minibatch of leaves by PUCT with virtual loss, evaluate
//! the new ones on the backend, back everything up. Several threads share one tree and one NN
//! cache behind a single mutex: tree work (µs per leaf) is done holding it, the backend call
//! (ms per batch) without it, so one thread's backend call overlaps another's gathering and
//! back-up, and a backend with several lanes runs their calls side by side.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use shakmaty::Move;

use super::cache::{CachedEval, NnCache};
use super::profile::{Phase, SearchProfile};
use super::tree::{Node, Proof, ROOT, Tree};
use super::{SearchError, SearchParams, terminal_value};
use crate::backend::{Backend, legal_move_probabilities};
use crate::chess::policy_index::entry_moves_with_indices;
use crate::chess::{HistoryFill, InputPlanes, PositionHistory, encode_position};

/// How long a thread whose gathering found only leaves already waiting for another thread's
/// batch sleeps before trying again (it is woken earlier when a batch is backed up).
const COLLISION_WAIT: Duration = Duration::from_millis(2);

/// What the threads share: the tree, the cache and the counters, all behind one mutex.
pub(super) struct TreeState<'a> {
    pub tree: &'a mut Tree,
    pub cache: &'a mut NnCache,
    pub stats: SearchStats,
    /// The root's visits when the search began (kept from the previous search).
    pub kept_visits: u64,
    /// When the first playout of this search was gathered, measured from its start (smart
    /// pruning estimates the speed from then on).
    pub first_playout_at: Option<Duration>,
    /// Set by the first thread that finds a limit reached or fails: the others end too.
    pub finished: bool,
}

impl TreeState<'_> {
    /// The root's visits so far: those kept and this search's playouts (what `go nodes`
    /// limits, as in lc0).
    pub fn visits(&self) -> u64 {
        self.kept_visits + self.stats.playouts
    }
}

/// Counters of one search.
#[derive(Debug, Default, Clone)]
pub(super) struct SearchStats {
    /// New playouts, counted when gathered (so a node limit is never exceeded).
    pub playouts: u64,
    /// Gathered playouts that ended on a leaf already waiting for the backend (lc0's
    /// collisions): their virtual loss is taken back and they count no visit.
    pub collisions: u64,
    /// Backend calls and the positions sent in them.
    pub batches: u64,
    pub evaluated: u64,
    depth_sum: u64,
    samples: u64,
    pub max_depth: u32,
    pub profile: SearchProfile,
}

impl SearchStats {
    fn record_depth(&mut self, depth: u32) {
        self.depth_sum += u64::from(depth);
        self.samples += 1;
        self.max_depth = self.max_depth.max(depth);
    }

    pub fn mean_depth(&self) -> u32 {
        if self.samples == 0 {
            0
        } else {
            ((self.depth_sum as f64 / self.samples as f64).round() as u32).max(1)
        }
    }
}

/// What every thread of one search reads.
pub(super) struct Context<'a> {
    pub backend: &'a dyn Backend,
    pub params: &'a SearchParams,
    pub fill: HistoryFill,
    pub root: &'a PositionHistory,
    /// The root moves to search (`searchmoves`; empty: all).
    pub root_moves: &'a [Move],
    pub state: Mutex<TreeState<'a>>,
    /// Notified after every back-up, for threads waiting out a collision.
    pub backed_up: Condvar,
    pub stop: &'a AtomicBool,
}

/// What a thread asks before each batch: `Some(size)` to gather up to `size` playouts, `None`
/// to end the search.
pub(super) type BatchPlan<'p> = dyn Fn(&mut TreeState) -> Option<usize> + Sync + 'p;

impl<'a> Context<'a> {
    pub fn lock(&self) -> MutexGuard<'_, TreeState<'a>> {
        // A thread that panicked holding the lock left counters, not broken links: the tree is
        // changed only by whole operations below, none of which can panic midway.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The lock, with the time spent waiting for it counted.
    fn lock_counted(&self) -> MutexGuard<'_, TreeState<'a>> {
        let start = Instant::now();
        let mut state = self.lock();
        state.stats.profile.add(Phase::LockWait, start.elapsed());
        state
    }

    /// One thread's loop: batches until `plan` says stop, another thread finished, or the
    /// backend fails; `after_batch` runs (without the lock) after each of this thread's
    /// back-ups.
    pub fn run_thread(
        &self,
        plan: &BatchPlan,
        after_batch: &mut dyn FnMut(),
    ) -> Result<(), SearchError> {
        let mut history = self.root.clone();
        loop {
            let mut state = self.lock_counted();
            let Some(size) = self.next_batch(&mut state, plan) else {
                return Ok(());
            };
            let start = Instant::now();
            let gathered = self.gather(&mut state, &mut history, size);
            state.stats.profile.add(Phase::Gather, start.elapsed());
            if gathered.pending.is_empty() && gathered.answered == 0 {
                // Everything collided with other threads' batches: wait for one of them.
                let start = Instant::now();
                let (mut state, _) = self
                    .backed_up
                    .wait_timeout(state, COLLISION_WAIT)
                    .unwrap_or_else(|e| e.into_inner());
                state
                    .stats
                    .profile
                    .add(Phase::CollisionWait, start.elapsed());
                continue;
            }
            drop(state);
            if !gathered.pending.is_empty() {
                self.evaluate(gathered.pending)?;
            }
            after_batch();
        }
    }

    /// The size of this thread's next batch, or `None` when the search ends: another thread
    /// ended it, `stop` was set (once the root has a move to name), or `plan` says so.
    fn next_batch(&self, state: &mut TreeState, plan: &BatchPlan) -> Option<usize> {
        let stopped = self.stop.load(Ordering::Relaxed) && state.tree.node(ROOT).expanded;
        let size = if state.finished || stopped {
            None
        } else {
            plan(state)
        };
        if size.is_none() {
            state.finished = true;
            self.backed_up.notify_all();
        }
        size
    }

    /// Evaluates `pending` without the lock, then expands and backs up every leaf holding it;
    /// if the backend fails, takes their virtual loss back and ends the search.
    fn evaluate(&self, pending: Vec<PendingLeaf>) -> Result<(), SearchError> {
        let planes: Vec<InputPlanes> = pending.iter().map(|p| p.planes).collect();
        let call_start = Instant::now();
        let output = self.backend.evaluate(&planes);
        let call_end = Instant::now();
        let mut state = self.lock_counted();
        state.stats.profile.add_call(call_start, call_end);
        let back_up_start = Instant::now();
        let result = match output {
            Ok(output) => {
                state.stats.batches += 1;
                state.stats.evaluated += pending.len() as u64;
                for (i, leaf) in pending.into_iter().enumerate() {
                    let priors = legal_move_probabilities(
                        output.policy_of(i),
                        &leaf.legal,
                        self.params.policy_temperature,
                    );
                    let eval = CachedEval {
                        q: output.q[i],
                        d: output.d[i],
                        m: output.m[i],
                        priors,
                    };
                    expand_and_back_up(state.tree, &leaf.path, &leaf.legal, &eval);
                    state.cache.insert(leaf.key, eval);
                }
                Ok(())
            }
            Err(e) => {
                for leaf in &pending {
                    state.tree.cancel(&leaf.path);
                }
                state.finished = true;
                Err(e.into())
            }
        };
        state
            .stats
            .profile
            .add(Phase::BackUp, back_up_start.elapsed());
        drop(state);
        self.backed_up.notify_all();
        result
    }

    /// Gathers up to `size` playouts: those answered at once (game over, cached) are backed
    /// up here, the others wait for the backend with their virtual loss in place.
    fn gather(
        &self,
        state: &mut TreeState,
        history: &mut PositionHistory,
        size: usize,
    ) -> Gathered {
        let mut gathered = Gathered::default();
        let mut collisions = 0;
        let root_len = self.root.len();
        while gathered.answered + gathered.pending.len() + collisions < size {
            let path = descend(state.tree, self.params, self.root_moves, history);
            state.stats.record_depth(path.len() as u32 - 1);
            match self.leaf_outcome(state, history, &path) {
                LeafOutcome::Answered => gathered.answered += 1,
                LeafOutcome::Collision => collisions += 1,
                LeafOutcome::Pending(leaf) => gathered.pending.push(*leaf),
            }
            history.truncate(root_len);
        }
        let playouts = gathered.answered + gathered.pending.len();
        state.stats.playouts += playouts as u64;
        state.stats.collisions += collisions as u64;
        tracing::debug!(
            target: "lc0rs::search",
            asked = size,
            to_backend = gathered.pending.len(),
            answered_at_once = gathered.answered,
            collisions,
            "batch gathered"
        );
        gathered
    }

    /// Scores a leaf at once where possible (game over, cached, or already pending), or
    /// prepares it for the backend.
    fn leaf_outcome(
        &self,
        state: &mut TreeState,
        history: &PositionHistory,
        path: &[u32],
    ) -> LeafOutcome {
        let leaf = *path.last().expect("a path holds the root");
        let node = state.tree.node(leaf);
        if let Some(proof) = node.proof {
            back_up_proven(state.tree, path, proof);
            return LeafOutcome::Answered;
        }
        if node.in_flight > 1 {
            // A playout of this or another thread's batch already waits on this leaf.
            state.tree.cancel(path);
            return LeafOutcome::Collision;
        }
        // The root is searched even where the rules would end the game (a draw claimable
        // by repetition or the fifty-move rule): the engine still has to name a move.
        let terminal = if path.len() > 1 {
            terminal_value(history)
        } else {
            None
        };
        if let Some(value) = terminal {
            let proof = Proof {
                value: value as i8,
                plies: 0,
            };
            state.tree.node_mut(leaf).proof = Some(proof);
            back_up_proven(state.tree, path, proof);
            state.tree.propagate_proof(path);
            return LeafOutcome::Answered;
        }
        let encoded = encode_position(history, self.backend.input_format(), self.fill);
        let current = history.last();
        let legal = entry_moves_with_indices(current, encoded.transform);
        let key = NnCache::key(&encoded.planes, current.key);
        if let Some(eval) = state.cache.get(key).cloned() {
            expand_and_back_up(state.tree, path, &legal, &eval);
            return LeafOutcome::Answered;
        }
        LeafOutcome::Pending(Box::new(PendingLeaf {
            path: path.to_vec(),
            planes: encoded.planes,
            key,
            legal,
        }))
    }
}

/// A leaf waiting for the backend.
struct PendingLeaf {
    path: Vec<u32>,
    planes: InputPlanes,
    key: u64,
    legal: Vec<(Move, usize)>,
}

#[derive(Default)]
struct Gathered {
    pending: Vec<PendingLeaf>,
    /// Playouts backed up during gathering (no backend call needed).
    answered: usize,
}

enum LeafOutcome {
    Answered,
    Collision,
    Pending(Box<PendingLeaf>),
}

/// Walks from the root to a leaf by PUCT, playing the moves on `history` and adding a
/// virtual loss to every node on the way.
fn descend(
    tree: &mut Tree,
    params: &SearchParams,
    root_moves: &[Move],
    history: &mut PositionHistory,
) -> Vec<u32> {
    let mut path = vec![ROOT];
    let mut index = ROOT;
    tree.node_mut(ROOT).in_flight += 1;
    loop {
        let node = tree.node(index);
        if node.proof.is_some() || !node.expanded || node.children.is_empty() {
            return path;
        }
        let allowed = if index == ROOT { root_moves } else { &[] };
        index = select_child(tree, params, index, allowed);
        let child = tree.node_mut(index);
        child.in_flight += 1;
        let m = child.mv.expect("children have moves");
        history.play(m);
        path.push(index);
    }
}

/// The child maximising Q + U, with in-flight playouts counted as losses; only those whose
/// move is in `allowed`, where it is not empty.
fn select_child(tree: &Tree, p: &SearchParams, index: u32, allowed: &[Move]) -> u32 {
    let puct = Puct::at(tree, p, index);
    let score = |c: u32| {
        let (q, u) = puct.q_and_u(tree.node(c));
        q + u
    };
    tree.children(index)
        .filter(|&c| allowed.is_empty() || tree.node(c).mv.is_some_and(|m| allowed.contains(&m)))
        .max_by(|&a, &b| score(a).total_cmp(&score(b)))
        .expect("select_child is called on expanded nodes with children")
}

/// The terms PUCT scores a node's children with: CPuct grown with the node's visits, the
/// first-play urgency of unvisited children, and √N.
pub(super) struct Puct {
    pub cpuct: f64,
    pub fpu: f64,
    sqrt_n: f64,
}

impl Puct {
    pub fn at(tree: &Tree, p: &SearchParams, index: u32) -> Self {
        let parent = tree.node(index);
        let parent_n = f64::from(parent.visits + parent.in_flight);
        let cpuct = f64::from(p.cpuct)
            + f64::from(p.cpuct_factor)
                * ((parent_n + f64::from(p.cpuct_base)) / f64::from(p.cpuct_base)).ln();
        let visited_policy: f64 = tree
            .children(index)
            .map(|c| tree.node(c))
            .filter(|c| c.visits > 0)
            .map(|c| f64::from(c.prior))
            .sum();
        // The parent's value for the side to move there (its own is for the other side).
        let parent_q = -parent.q();
        Self {
            cpuct,
            fpu: parent_q - f64::from(p.fpu_reduction) * visited_policy.sqrt(),
            sqrt_n: parent_n.max(1.0).sqrt(),
        }
    }

    /// A child's Q (its in-flight playouts counted as losses; the FPU if unvisited) and U.
    pub fn q_and_u(&self, child: &Node) -> (f64, f64) {
        let n = f64::from(child.visits + child.in_flight);
        let q = if n == 0.0 {
            self.fpu
        } else {
            (child.value_sum - f64::from(child.in_flight)) / n
        };
        (
            q,
            self.cpuct * f64::from(child.prior) * self.sqrt_n / (1.0 + n),
        )
    }
}

fn expand_and_back_up(tree: &mut Tree, path: &[u32], legal: &[(Move, usize)], eval: &CachedEval) {
    let leaf = *path.last().expect("a path holds the root");
    let moves = legal
        .iter()
        .zip(&eval.priors)
        .map(|((m, _), &p)| (*m, p))
        .collect();
    tree.expand(leaf, moves);
    // The network's Q is for the side to move at the leaf; the leaf stores the mover's.
    tree.back_up(path, -eval.q, eval.d);
}

/// Backs up a playout that ended on a proven node: its certain result.
fn back_up_proven(tree: &mut Tree, path: &[u32], proof: Proof) {
    let draw = if proof.value == 0 { 1.0 } else { 0.0 };
    tree.back_up(path, proof.value(), draw);
}

/// Whether `start` is `limit` or more ago.
pub(super) fn past(start: Instant, limit: Option<Duration>) -> bool {
    limit.is_some_and(|t| start.elapsed() >= t)
}
