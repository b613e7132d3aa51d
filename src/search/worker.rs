//! One search thread's work: gather a minibatch of leaves as lc0 does (passes of the picker in
//! [`super::pick`], positions already known answered at once, within a collision budget), evaluate
//! the new ones on the backend, back everything up. Several threads share one tree and one NN
//! cache behind a single mutex: tree work (µs per leaf) is done holding it, the backend call
//! (ms per batch) without it, so one thread's backend call overlaps another's gathering and
//! back-up, and a backend with several lanes runs their calls side by side.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use shakmaty::Move;

use super::cache::{CachedEval, NnCache};
use super::pick::{Collision, Pass, PassInput, collision_budget};
use super::profile::{Phase, SearchProfile};
use super::tree::{Proof, ROOT, Tree};
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
    /// Every thread's collisions, held until the next back-up (as lc0's shared collisions).
    pub collisions: Vec<Collision>,
}

impl TreeState<'_> {
    /// The root's visits so far: those kept and this search's playouts (what `go nodes`
    /// limits, as in lc0).
    pub fn visits(&self) -> u64 {
        self.kept_visits + self.stats.playouts
    }

    /// Takes back the in-flight visits of every collision held.
    pub fn cancel_collisions(&mut self) {
        for collision in self.collisions.drain(..) {
            self.tree.cancel(&collision.ancestors, collision.visits);
        }
    }
}

/// Counters of one search.
#[derive(Debug, Default, Clone)]
pub(super) struct SearchStats {
    /// New playouts, counted when gathered (so a node limit is never exceeded).
    pub playouts: u64,
    /// Visits that met a leaf already waiting for the backend or a proven node (lc0's
    /// collisions): held in flight until the next back-up, then taken back; they count no
    /// visit.
    pub collisions: u64,
    /// Backend calls and the positions sent in them.
    pub batches: u64,
    pub evaluated: u64,
    depth_sum: u64,
    samples: u64,
    /// The longest path backed up, in nodes from the root (lc0's seldepth).
    pub max_depth: u32,
    pub profile: SearchProfile,
}

impl SearchStats {
    /// Counts a backed-up playout whose path holds `nodes` nodes, the root included (lc0's
    /// depth of a visit: its plies plus one).
    fn record_depth(&mut self, nodes: usize) {
        let depth = u32::try_from(nodes).unwrap_or(u32::MAX);
        self.depth_sum += u64::from(depth);
        self.samples += 1;
        self.max_depth = self.max_depth.max(depth);
    }

    /// The mean depth of the playouts backed up, rounded down (lc0's UCI `depth`).
    pub fn mean_depth(&self) -> u32 {
        self.depth_sum
            .checked_div(self.samples)
            .map_or(0, |d| u32::try_from(d).unwrap_or(u32::MAX))
    }
}

/// How many playouts one thread's next gathering may take.
#[derive(Debug, Clone, Copy)]
pub(super) struct BatchTarget {
    /// Positions to send to the backend (the minibatch).
    pub evaluations: usize,
    /// Playouts in all, those answered at once included (the node limit's remainder).
    pub playouts: usize,
    /// The playouts the search still expects (see [`PassInput::remaining_playouts`]).
    pub remaining_playouts: f64,
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
    /// The search threads, and how many of them are in a backend call now: a thread gathers
    /// a full minibatch only while another keeps the backend busy (lc0's idling rule).
    pub threads: usize,
    pub in_backend: AtomicUsize,
    /// Batches gathered and not yet backed up (in a backend call or waiting for the lock).
    pub batches_in_flight: AtomicUsize,
}

/// What a thread asks before each batch: `Some(target)` to gather, `None` to end the search.
pub(super) type BatchPlan<'p> = dyn Fn(&mut TreeState) -> Option<BatchTarget> + Sync + 'p;

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
            let Some(target) = self.next_batch(&mut state, plan) else {
                return Ok(());
            };
            let start = Instant::now();
            let gathered = self.gather(&mut state, &mut history, target);
            state.stats.profile.add(Phase::Gather, start.elapsed());
            if gathered.pending.is_empty() {
                let others_pending = self.batches_in_flight.load(Ordering::Acquire) > 0;
                if gathered.answered > 0 || !others_pending {
                    // Work was backed up (or no other thread's batch will be): the collisions
                    // held so far are taken back, as after any back-up.
                    state.cancel_collisions();
                    drop(state);
                    self.backed_up.notify_all();
                    after_batch();
                    continue;
                }
                // Everything collided with other threads' batches: wait for one of them to be
                // backed up (the wait lets go of the lock, which that back-up needs).
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
            self.batches_in_flight.fetch_add(1, Ordering::AcqRel);
            drop(state);
            self.evaluate(gathered.pending)?;
            after_batch();
        }
    }

    /// The size of this thread's next batch, or `None` when the search ends: another thread
    /// ended it, `stop` was set (once the root has a move to name), or `plan` says so.
    fn next_batch(&self, state: &mut TreeState, plan: &BatchPlan) -> Option<BatchTarget> {
        let stopped = self.stop.load(Ordering::Relaxed) && state.tree.node(ROOT).expanded;
        let target = if state.finished || stopped {
            None
        } else {
            plan(state)
        };
        if target.is_none() {
            state.finished = true;
            self.backed_up.notify_all();
        }
        target
    }

    /// Evaluates `pending` without the lock, then expands and backs up every leaf holding it
    /// and takes back the collisions held; if the backend fails, takes their virtual loss back
    /// and ends the search.
    fn evaluate(&self, pending: Vec<PendingLeaf>) -> Result<(), SearchError> {
        let planes: Vec<InputPlanes> = pending.iter().map(|p| p.planes).collect();
        self.in_backend.fetch_add(1, Ordering::AcqRel);
        let call_start = Instant::now();
        let output = self.backend.evaluate(&planes);
        let call_end = Instant::now();
        self.in_backend.fetch_sub(1, Ordering::AcqRel);
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
                    state.stats.record_depth(leaf.path.len());
                    state.cache.insert(leaf.key, eval);
                }
                Ok(())
            }
            Err(e) => {
                for leaf in &pending {
                    state.tree.cancel(&leaf.path, 1);
                }
                state.finished = true;
                Err(e.into())
            }
        };
        state.cancel_collisions();
        self.batches_in_flight.fetch_sub(1, Ordering::AcqRel);
        state
            .stats
            .profile
            .add(Phase::BackUp, back_up_start.elapsed());
        drop(state);
        self.backed_up.notify_all();
        result
    }

    /// Gathers a minibatch as lc0 does: passes of the picker until `target.evaluations`
    /// positions wait for the backend, the collisions exceed their budget, or the leaves
    /// answered at once (game over, cached) reach lc0's out-of-order limit. Those answered
    /// are backed up here; a pass that answered any takes its collisions back at once (the
    /// tree changed under them).
    fn gather(
        &self,
        state: &mut TreeState,
        history: &mut PositionHistory,
        target: BatchTarget,
    ) -> Gathered {
        let mut gathered = Gathered::default();
        let root_visits = f64::from(state.tree.node(ROOT).visits);
        let mut collisions_left = i64::from(collision_budget(
            root_visits.min(target.remaining_playouts),
            self.params,
        ));
        let out_of_order_limit = ((self.params.max_out_of_order_evals_factor
            * target.evaluations as f32) as usize)
            .max(1);
        let input = PassInput {
            params: self.params,
            root_moves: self.root_moves,
            remaining_playouts: target.remaining_playouts,
        };
        let mut collided = 0u64;
        while gathered.pending.len() < target.evaluations
            && gathered.answered < out_of_order_limit
            && gathered.playouts() < target.playouts
        {
            if self.backend_idle(&gathered) {
                break;
            }
            let limit = (collisions_left as usize)
                .min(target.evaluations - gathered.pending.len())
                .min(out_of_order_limit - gathered.answered)
                .min(target.playouts - gathered.playouts());
            let (leaves, collisions) = self.pass(state, history, &input, limit as u32);
            let answered = leaves
                .iter()
                .filter(|l| !matches!(l.outcome, LeafOutcome::Pending(_)))
                .count();
            let mut collisions = collisions;
            if answered > 0 {
                for c in collisions.drain(..) {
                    state.tree.cancel(&c.ancestors, c.visits);
                }
            }
            for leaf in leaves {
                match leaf.outcome {
                    LeafOutcome::Pending(pending) => gathered.pending.push(*pending),
                    outcome => {
                        answer(state, &leaf.path, outcome);
                        state.stats.record_depth(leaf.path.len());
                        gathered.answered += 1;
                    }
                }
            }
            let mut exhausted = false;
            for mut collision in collisions {
                // lc0 grows a collision that took a whole pass, to end the gathering sooner;
                // only once something waits for the backend here: a thread whose gathering found
                // nothing yet (all of it in another thread's batch) gathers on past it instead.
                let extra = collision
                    .max_visits
                    .min(collisions_left.try_into().unwrap_or(u32::MAX));
                if extra > collision.visits && !gathered.pending.is_empty() {
                    collision.grow(state.tree, extra - collision.visits);
                }
                collisions_left -= i64::from(collision.visits);
                collided += u64::from(collision.visits);
                state.collisions.push(collision);
                exhausted |= collisions_left <= 0;
            }
            if exhausted || self.stop.load(Ordering::Relaxed) {
                break;
            }
        }
        state.stats.playouts += gathered.playouts() as u64;
        state.stats.collisions += collided;
        tracing::debug!(
            target: "lc0rs::search",
            asked = target.evaluations,
            to_backend = gathered.pending.len(),
            answered_at_once = gathered.answered,
            collisions = collided,
            "batch gathered"
        );
        gathered
    }

    /// lc0's early end of a gathering with several threads: once something waits for the
    /// backend and no other thread is in a backend call, send it rather than let it idle.
    fn backend_idle(&self, gathered: &Gathered) -> bool {
        self.threads > 1
            && !gathered.pending.is_empty()
            && self.threads - self.in_backend.load(Ordering::Acquire) > 1
    }

    /// One pass of the picker over `limit` visits: the leaves it starts, each classified, and
    /// its collisions.
    fn pass(
        &self,
        state: &mut TreeState,
        history: &mut PositionHistory,
        input: &PassInput,
        limit: u32,
    ) -> (Vec<Leaf>, Vec<Collision>) {
        let mut leaves = Vec::new();
        let cache = &*state.cache;
        let collisions = Pass::run(state.tree, input, limit, history, |tree, path, history| {
            leaves.push(Leaf {
                path: path.to_vec(),
                outcome: self.classify(tree, cache, path, history),
            });
        });
        (leaves, collisions)
    }

    /// What is known of a leaf whose evaluation starts: a proof, the rules' result, a cached
    /// evaluation, or nothing yet (it goes to the backend).
    fn classify(
        &self,
        tree: &Tree,
        cache: &NnCache,
        path: &[u32],
        history: &PositionHistory,
    ) -> LeafOutcome {
        let leaf = *path.last().expect("a path holds the root");
        if let Some(proof) = tree.node(leaf).proof {
            return LeafOutcome::Proven(proof);
        }
        // The root is searched even where the rules would end the game (a draw claimable
        // by repetition or the fifty-move rule): the engine still has to name a move.
        let terminal = if path.len() > 1 {
            terminal_value(history)
        } else {
            None
        };
        if let Some(value) = terminal {
            return LeafOutcome::Terminal(value);
        }
        if let Some(cycle) = two_fold_draw(history, path.len() - 1) {
            return LeafOutcome::TwoFold(cycle);
        }
        let encoded = encode_position(history, self.backend.input_format(), self.fill);
        let current = history.last();
        let legal = entry_moves_with_indices(current, encoded.transform);
        let key = NnCache::key(&encoded.planes, current.key);
        if let Some(eval) = cache.get(key) {
            return LeafOutcome::Cached(legal, eval.clone());
        }
        LeafOutcome::Pending(Box::new(PendingLeaf {
            path: path.to_vec(),
            planes: encoded.planes,
            key,
            legal,
        }))
    }
}

/// lc0's two-fold draw (its TwoFoldDraws, on by default): a position `plies` below the root
/// that repeats one inside the search (its cycle no longer than those plies) is scored a draw,
/// since the side that steered into it can repeat again. Returns the cycle's plies.
fn two_fold_draw(history: &PositionHistory, plies: usize) -> Option<u16> {
    let entry = history.last();
    let inside = plies >= 4 && usize::try_from(entry.cycle).is_ok_and(|c| c <= plies);
    (entry.repetitions == 1 && inside).then(|| u16::try_from(entry.cycle).unwrap_or(u16::MAX))
}

/// Backs up a leaf answered without the backend.
fn answer(state: &mut TreeState, path: &[u32], outcome: LeafOutcome) {
    match outcome {
        LeafOutcome::Proven(proof) => back_up_proven(state.tree, path, proof),
        LeafOutcome::Terminal(value) => {
            let proof = Proof {
                value: value as i8,
                plies: 0,
            };
            let leaf = *path.last().expect("a path holds the root");
            state.tree.node_mut(leaf).proof = Some(proof);
            back_up_proven(state.tree, path, proof);
            state.tree.propagate_proof(path);
        }
        LeafOutcome::TwoFold(cycle) => {
            let proof = Proof { value: 0, plies: 0 };
            let leaf = state
                .tree
                .node_mut(*path.last().expect("a path holds the root"));
            leaf.proof = Some(proof);
            leaf.two_fold = cycle;
            back_up_proven(state.tree, path, proof);
        }
        LeafOutcome::Cached(legal, eval) => expand_and_back_up(state.tree, path, &legal, &eval),
        LeafOutcome::Pending(_) => unreachable!("pending leaves go to the backend"),
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

impl Gathered {
    fn playouts(&self) -> usize {
        self.pending.len() + self.answered
    }
}

/// A leaf a pass started, and what is known of it.
struct Leaf {
    path: Vec<u32>,
    outcome: LeafOutcome,
}

enum LeafOutcome {
    /// Proven earlier (a game end or certainty propagation).
    Proven(Proof),
    /// A game end by the rules, first found now: the result for the player who moved into it.
    Terminal(f32),
    /// lc0's two-fold draw, first found now: the plies of the repetition's cycle.
    TwoFold(u16),
    /// In the NN cache: its legal moves with their policy indices, and the evaluation.
    Cached(Vec<(Move, usize)>, CachedEval),
    Pending(Box<PendingLeaf>),
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
