//! One search thread's work: gather a minibatch of leaves as lc0 does (passes of the picker in
//! [`super::pick`], positions already known answered at once, within a collision budget), evaluate
//! the new ones on the backend, back everything up. Several threads share one tree behind a
//! mutex (the state's): tree work (µs per leaf) is done holding it, the backend call (ms per
//! batch) without it, so one thread's backend call overlaps another's gathering and back-up,
//! and a backend with several lanes runs their calls side by side. The tree itself sits in a
//! read-write lock inside: written only by the holder of the state's mutex, and read, during a
//! pass, by that holder and the task workers it hands the pass's subtrees to. The NN cache has
//! a mutex of its own, so that its lookups (while leaves are prepared) and its inserts (after
//! a back-up) are never made holding the tree's.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{
    Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
};
use std::time::{Duration, Instant};

use shakmaty::Move;

use lc0rs::backend::{Backend, PickedOutput, PolicyPicks};
use lc0rs::chess::{HistoryFill, InputPlanes, PositionHistory};

use super::cache::{CachedEval, NnCache};
use super::leaf::{
    self, Evaluation, LeafOutcome, NetInput, PreparedLeaf, answer_by_rules, evaluation,
    expand_and_back_up,
};
use super::pick::{self, Collision, PassInput, collision_budget};
use super::profile::{Phase, SearchProfile};
use super::tasks::{Chunks, TaskWorkers};
use super::tree::{ROOT, Tree};
use super::{SearchError, SearchParams};

/// How long a thread whose gathering found only leaves already waiting for another thread's
/// batch sleeps before trying again (it is woken earlier when a batch is backed up).
const COLLISION_WAIT: Duration = Duration::from_millis(2);

/// What the threads share behind the state's mutex: the tree and the counters.
pub(super) struct TreeState<'a> {
    /// Written only while the state's mutex is held (see the module's docs).
    pub tree: &'a RwLock<Tree>,
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

impl<'a> TreeState<'a> {
    /// The root's visits so far: those kept and this search's playouts (what `go nodes`
    /// limits, as in lc0).
    pub fn visits(&self) -> u64 {
        self.kept_visits + self.stats.playouts
    }

    /// Takes back the in-flight visits of every collision held.
    pub fn cancel_collisions(&mut self) {
        let mut tree = self.tree_mut();
        for collision in self.collisions.drain(..) {
            tree.cancel(&collision.ancestors, collision.visits);
        }
    }

    /// The tree, to read.
    pub fn tree(&self) -> RwLockReadGuard<'a, Tree> {
        self.tree.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The tree, to change (a panic while it was held left whole values only: the tree is
    /// changed by whole operations, none of which can panic midway).
    pub fn tree_mut(&self) -> RwLockWriteGuard<'a, Tree> {
        self.tree.write().unwrap_or_else(PoisonError::into_inner)
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
    /// Walks of the tree from the root (passes of the picker), each followed by its leaves'
    /// preparation: many short walks a batch mean many lock hand-overs.
    pub walks: u64,
    /// Those of the walks whose subtrees were walked on the task workers too.
    pub shared_walks: u64,
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
    /// The root's visits that end the search (`go nodes`): checked before every pass, since
    /// other threads gather while this one prepares its leaves without the lock.
    pub visit_limit: Option<u64>,
}

/// What every thread of one search reads.
pub(super) struct Context<'a> {
    pub backend: &'a dyn Backend,
    pub params: &'a SearchParams,
    pub fill: HistoryFill,
    pub root: &'a PositionHistory,
    /// The root moves to search (`searchmoves`; empty: all).
    pub root_moves: &'a [Move],
    /// The NN cache, locked apart from the tree (see the module's docs); never taken while
    /// the tree's lock is held.
    pub cache: Mutex<&'a mut NnCache>,
    pub state: Mutex<TreeState<'a>>,
    /// Notified after every back-up, for threads waiting out a collision.
    pub backed_up: Condvar,
    pub stop: &'a AtomicBool,
    /// The search threads, and how many of them are in a backend call now: a thread gathers
    /// a full minibatch only while another keeps the backend busy (lc0's idling rule).
    pub threads: usize,
    pub in_backend: AtomicUsize,
    /// Gatherings whose leaves are in the tree's in-flight counts and not yet backed up: being
    /// prepared without the lock, in a backend call, or waiting for the lock to back up. A
    /// thread that found only collisions waits while any other is counted here, since those
    /// leaves will be backed up; otherwise it would gather again at once, collide again, and
    /// take the lock from the thread that needs it to finish.
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

    fn cache(&self) -> MutexGuard<'_, &'a mut NnCache> {
        // A panic while the cache was held leaves it consistent (each call is whole).
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The NN cache's fill, per mille (UCI `hashfull`).
    pub fn cache_fill(&self) -> u32 {
        self.cache().fill_per_mille()
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
    /// back-ups. `tasks` prepare the leaves of large passes and the children of a batch's
    /// leaves. `thread` 0 is the first search thread; the others wait for the root's
    /// [`SearchParams::single_thread_visits`] before they gather.
    pub fn run_thread<'c>(
        &'c self,
        tasks: &TaskWorkers<'c>,
        plan: &BatchPlan,
        thread: usize,
        after_batch: &mut dyn FnMut(),
    ) -> Result<(), SearchError> {
        if thread > 0 {
            self.wait_to_join();
        }
        let mut sharing = pick::Sharing::default();
        loop {
            let busy = tasks.busy();
            let mut state = self.lock_counted();
            let Some(target) = self.next_batch(&mut state, plan) else {
                return Ok(());
            };
            let (state, gathered) = self.gather(tasks, &mut sharing, state, target);
            drop(busy);
            if gathered.pending.is_empty() {
                if gathered.in_flight {
                    self.batches_in_flight.fetch_sub(1, Ordering::AcqRel);
                }
                let others_pending = self.batches_in_flight.load(Ordering::Acquire) > 0;
                if gathered.answered > 0 || !others_pending {
                    // Work was backed up (or no other thread's batch will be): the collisions
                    // held so far are taken back, as after any back-up.
                    let mut state = state;
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
            // Leaves wait for the backend only after being prepared, which counted the gathering.
            debug_assert!(gathered.in_flight);
            drop(state);
            self.evaluate(tasks, gathered.pending)?;
            after_batch();
        }
    }

    /// The search threads that gather now: the first alone while the root has fewer visits
    /// than [`SearchParams::single_thread_visits`], then all of them (the root's visits only
    /// grow during a search, so a thread that joined never has to wait again).
    fn gathering_threads(&self, state: &TreeState) -> usize {
        if state.visits() < self.params.single_thread_visits {
            1
        } else {
            self.threads
        }
    }

    /// For a search thread other than the first: sleeps until the root has
    /// [`SearchParams::single_thread_visits`] or the search ends (woken by each back-up, and
    /// within [`COLLISION_WAIT`] to see the stop flag).
    fn wait_to_join(&self) {
        let start = Instant::now();
        // The lock's wait counts as part of this one.
        let mut state = self.lock();
        while self.gathering_threads(&state) == 1
            && !state.finished
            && !self.stop.load(Ordering::Relaxed)
        {
            state = self
                .backed_up
                .wait_timeout(state, COLLISION_WAIT)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        state.stats.profile.add(Phase::JoinWait, start.elapsed());
    }

    /// The size of this thread's next batch, or `None` when the search ends: another thread
    /// ended it, `stop` was set (once the root has a move to name), or `plan` says so.
    fn next_batch(&self, state: &mut TreeState, plan: &BatchPlan) -> Option<BatchTarget> {
        let stopped = self.stop.load(Ordering::Relaxed) && state.tree().node(ROOT).expanded;
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

    /// Evaluates `pending` without the lock, turns each policy into the leaf's children (still
    /// without it), then expands and backs up every leaf holding it and takes back the
    /// collisions held; if the backend fails, takes their virtual loss back and ends the
    /// search.
    fn evaluate<'c>(
        &'c self,
        tasks: &TaskWorkers<'c>,
        mut pending: Vec<PendingLeaf>,
    ) -> Result<(), SearchError> {
        let planes: Vec<InputPlanes> = pending.iter().map(|p| p.input.planes).collect();
        let picks = PolicyPicks::of_legal_moves(pending.iter().map(|p| p.input.legal.as_slice()));
        self.in_backend.fetch_add(1, Ordering::AcqRel);
        let call_start = Instant::now();
        let output = self.backend.evaluate_picked(&planes, &picks);
        let call_end = Instant::now();
        self.in_backend.fetch_sub(1, Ordering::AcqRel);
        let evals = output.map(|out| self.evaluations(tasks, out, &mut pending));
        let leaves_time = call_end.elapsed();
        let mut state = self.lock_counted();
        state.stats.profile.add_call(call_start, call_end);
        state.stats.profile.add(Phase::Leaves, leaves_time);
        let back_up_start = Instant::now();
        let mut to_cache = Vec::new();
        let result = match evals {
            Ok(evals) => {
                let mut tree = state.tree_mut();
                let stats = &mut state.stats;
                stats.batches += 1;
                stats.evaluated += pending.len() as u64;
                to_cache.reserve(pending.len());
                for (leaf, (eval, cached)) in pending.iter().zip(evals) {
                    expand_and_back_up(&mut tree, &leaf.path, &eval);
                    stats.record_depth(leaf.path.len());
                    to_cache.push((leaf.input.key, cached));
                }
                Ok(())
            }
            Err(e) => {
                let mut tree = state.tree_mut();
                for leaf in &pending {
                    tree.cancel(&leaf.path, 1);
                }
                drop(tree);
                state.finished = true;
                Err(SearchError::from(e))
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
        // The leaves' paths and inputs are freed here, not while the tree is locked.
        drop(pending);
        if !to_cache.is_empty() {
            let mut cache = self.cache();
            for (key, eval) in to_cache {
                cache.insert(key, eval);
            }
        }
        result
    }

    /// Each leaf's evaluation from the backend's output: its value and its children (the
    /// leaves' legal moves are taken: nothing reads them after this).
    fn evaluations<'c>(
        &'c self,
        tasks: &TaskWorkers<'c>,
        output: PickedOutput,
        pending: &mut [PendingLeaf],
    ) -> Vec<(Evaluation, CachedEval)> {
        let temperature = self.params.policy_temperature;
        let legal = pending
            .iter_mut()
            .map(|leaf| std::mem::take(&mut leaf.input.legal))
            .enumerate()
            .collect();
        let output = Arc::new(output);
        tasks.map(
            legal,
            Chunks::Even,
            || (),
            move |(), (i, legal)| {
                let values = [output.q[i], output.d[i]];
                evaluation(values, output.logits_of(i), &legal, temperature)
            },
        )
    }

    /// Gathers a minibatch as lc0 does: passes of the picker until `target.evaluations`
    /// positions wait for the backend, the collisions exceed their budget, or the leaves
    /// answered at once (game over, cached) reach lc0's out-of-order limit. Each pass's leaves
    /// are prepared without the lock (see [`super::leaf`]); those answered at once are backed
    /// up here, and a pass that answered any takes its collisions back at once (the tree
    /// changed under them). Returns the lock again with what was gathered.
    fn gather<'s>(
        &'s self,
        tasks: &TaskWorkers<'s>,
        sharing: &mut pick::Sharing,
        mut state: MutexGuard<'s, TreeState<'a>>,
        target: BatchTarget,
    ) -> (MutexGuard<'s, TreeState<'a>>, Gathered) {
        let mut gathered = Gathered::default();
        let root_visits = f64::from(state.tree().node(ROOT).visits);
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
            if self.backend_idle(&state, &gathered) {
                break;
            }
            let nodes_left = target.visit_limit.map_or(usize::MAX, |n| {
                usize::try_from(n.saturating_sub(state.visits())).unwrap_or(usize::MAX)
            });
            if nodes_left == 0 {
                break;
            }
            let limit = (collisions_left as usize)
                .min(target.evaluations - gathered.pending.len())
                .min(out_of_order_limit - gathered.answered)
                .min(target.playouts - gathered.playouts())
                .min(nodes_left);
            let start = Instant::now();
            let pick::PassOutput {
                leaves: started,
                mut collisions,
                shared,
            } = pick::run(state.tree, tasks, input, limit as u32, sharing);
            state.stats.walks += 1;
            state.stats.shared_walks += u64::from(shared);
            // Counted now, while the lock is held: each started leaf becomes one playout, and
            // another thread sizing its batch while these are prepared must see them.
            state.stats.playouts += started.len() as u64;
            let mut walk_time = start.elapsed();
            let prepared = if started.is_empty() {
                Vec::new()
            } else {
                if !gathered.in_flight {
                    self.batches_in_flight.fetch_add(1, Ordering::AcqRel);
                    gathered.in_flight = true;
                }
                drop(state);
                let start = Instant::now();
                let encoding = leaf::Encoding {
                    format: self.backend.input_format(),
                    fill: self.fill,
                    exact_key: self.params.exact_cache_key,
                };
                let prepared = leaf::prepare(tasks, started, self.root, encoding, &self.cache);
                let leaves_time = start.elapsed();
                state = self.lock_counted();
                state.stats.profile.add(Phase::Leaves, leaves_time);
                prepared
            };
            let start = Instant::now();
            let mut tree = state.tree_mut();
            if take_in(&mut tree, &mut state.stats, prepared, &mut gathered) > 0 {
                for c in collisions.drain(..) {
                    tree.cancel(&c.ancestors, c.visits);
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
                    collision.grow(&tree, extra - collision.visits);
                }
                collisions_left -= i64::from(collision.visits);
                collided += u64::from(collision.visits);
                state.collisions.push(collision);
                exhausted |= collisions_left <= 0;
            }
            drop(tree);
            walk_time += start.elapsed();
            state.stats.profile.add(Phase::Gather, walk_time);
            if exhausted || self.stop.load(Ordering::Relaxed) {
                break;
            }
        }
        state.stats.collisions += collided;
        tracing::debug!(
            target: "lc0rs_engine::search",
            asked = target.evaluations,
            to_backend = gathered.pending.len(),
            answered_at_once = gathered.answered,
            collisions = collided,
            "batch gathered"
        );
        (state, gathered)
    }

    /// lc0's early end of a gathering with several threads: once something waits for the
    /// backend and no other thread is in a backend call, send it rather than let it idle.
    /// Threads still waiting to join count as none (they keep no backend busy): until the
    /// root has [`SearchParams::single_thread_visits`], the first thread gathers as if alone.
    fn backend_idle(&self, state: &TreeState, gathered: &Gathered) -> bool {
        let threads = self.gathering_threads(state);
        threads > 1
            && !gathered.pending.is_empty()
            && threads - self.in_backend.load(Ordering::Acquire) > 1
    }
}

/// Backs up the prepared leaves known at once (proofs, the rules, the NN cache) and keeps the
/// others for the backend; returns how many were answered.
fn take_in(
    tree: &mut Tree,
    stats: &mut SearchStats,
    prepared: Vec<PreparedLeaf>,
    gathered: &mut Gathered,
) -> usize {
    let mut answered = 0;
    for leaf in prepared {
        match leaf.outcome {
            LeafOutcome::Evaluate(input) => {
                gathered.pending.push(PendingLeaf {
                    path: leaf.path,
                    input,
                });
                continue;
            }
            LeafOutcome::Cached(eval) => expand_and_back_up(tree, &leaf.path, &eval),
            known => answer_by_rules(tree, &leaf.path, &known),
        }
        stats.record_depth(leaf.path.len());
        answered += 1;
    }
    gathered.answered += answered;
    answered
}

/// A leaf waiting for the backend.
struct PendingLeaf {
    path: Vec<u32>,
    input: Box<NetInput>,
}

#[derive(Default)]
struct Gathered {
    pending: Vec<PendingLeaf>,
    /// Playouts backed up during gathering (no backend call needed).
    answered: usize,
    /// Whether this gathering is counted in [`Context::batches_in_flight`] (from the first time
    /// it lets go of the lock with leaves started).
    in_flight: bool,
}

impl Gathered {
    fn playouts(&self) -> usize {
        self.pending.len() + self.answered
    }
}

/// Whether `start` is `limit` or more ago.
pub(super) fn past(start: Instant, limit: Option<Duration>) -> bool {
    limit.is_some_and(|t| start.elapsed() >= t)
}
