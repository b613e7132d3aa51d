//! Choosing the leaves of one minibatch as lc0's search chooses them: a pass deals a number of
//! visits from the root down in one walk, each node's share split among its children by PUCT.
//!
//! The rules, as lc0 has them:
//! - A child's score is `Q + U` with Q its mean value from completed visits only (the
//!   first-play urgency where it has none) and `U = cpuct·P·√(N_parent − 1) / (1 + N_started)`,
//!   `N_started` counting the visits on their way through it. Visits in flight thus only lower
//!   a child's U; they never count as losses, which would push a large minibatch out into
//!   breadth.
//! - A node's share goes to its best child in blocks: as many visits as the best child takes
//!   before the second best would overtake it (solved from U's formula), then the scores are
//!   updated and the next block dealt.
//! - The first visit to a node that has none starts its evaluation (a [`Visit`]); visits that
//!   arrive at a node whose evaluation is already under way, or at a node whose result is
//!   proven, are a [`Collision`]: they keep their in-flight count on the node's ancestors, so
//!   that the rest of the gathering goes elsewhere, and are taken back once a batch is backed
//!   up. The gathering ends when the collisions exceed a budget that grows with the tree, so
//!   a small tree gets small batches and keeps its depth.
//!
//! A large pass is walked on the task workers too, as lc0's picking tasks walk it: the
//! search thread deals the visits of the nodes near the root, down to shares of a few visits
//! each (grouped into [`Segment`]s of a parent's consecutive shares), and the workers (the
//! search thread among them) deal each segment's visits in its subtrees. Subtrees of
//! different segments share no node, so the walks touch disjoint parts of the tree, and each
//! deals exactly what the one-thread walk deals there: the pass starts the same leaves, in the
//! same order.

use std::sync::{PoisonError, RwLock};

use shakmaty::Move;

use super::SearchParams;
use super::leaf::StartedLeaf;
use super::ranking::{self, Choice, Ranking};
use super::tasks::{Chunks, TaskWorkers};
use super::tree::{Node, ROOT, Tree};

/// Visits that reached a node whose evaluation is under way or whose result is proven: they
/// hold `visits` in flight on `ancestors` (root first; empty where the root itself collided).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Collision {
    pub ancestors: Vec<u32>,
    pub visits: u32,
    /// Where the whole pass ended in this collision: the most visits it can take before any
    /// choice on its way would change (lc0 grows such a collision to end the gathering
    /// sooner); 0 otherwise.
    pub max_visits: u32,
}

impl Collision {
    /// Adds `extra` visits to the collision and to its ancestors' in-flight counts.
    pub fn grow(&mut self, tree: &Tree, extra: u32) {
        self.visits += extra;
        for &index in &self.ancestors {
            tree.node(index).add_in_flight(extra);
        }
    }
}

/// What a pass needs besides the tree.
#[derive(Clone, Copy)]
pub(super) struct PassInput<'a> {
    pub params: &'a SearchParams,
    /// The root moves to search (`searchmoves`; empty: all).
    pub root_moves: &'a [Move],
    /// The playouts the search still expects (its node or time limit, divided by the smart
    /// pruning factor once that is active): a root move that cannot catch up with the best one
    /// in them gets no visit. Infinite where no limit applies.
    pub remaining_playouts: f64,
}

/// A split that reads no more children than this finds each block's best by lc0's scan: on
/// so few a heap's upkeep costs more than the scans it saves.
const SCAN_MAX_CHILDREN: usize = 16;

/// A pass of fewer visits is walked by the search thread alone: handing out its few
/// subtrees would cost more than walking them.
const PARALLEL_MIN_VISITS: u32 = 48;

/// The fewest visits the search thread hands out as one [`Segment`] of a parallel pass.
const MIN_SEGMENT_VISITS: u32 = 8;

/// A large pass is shared only while the last large pass started at least this many leaves.
const PARALLEL_MIN_LEAVES: usize = 16;

/// Whether a search thread's next large pass is shared among the task workers. Sharing pays
/// only where a pass starts many leaves; where the tree is full of leaves in flight (a slow
/// backend's batches), a large pass mostly collides near the root and is over sooner than its
/// segments are handed out. Each large pass tells whether the next one is worth sharing.
pub(super) struct Sharing {
    worth_it: bool,
}

impl Default for Sharing {
    fn default() -> Self {
        Self { worth_it: true }
    }
}

impl Sharing {
    /// Learns from a pass that could have been shared, which started `leaves` leaves.
    fn learn(&mut self, leaves: usize) {
        self.worth_it = leaves >= PARALLEL_MIN_LEAVES;
    }
}

/// The leaves a pass starts (in the order the one-thread walk starts them) and its
/// collisions.
#[derive(Default)]
pub(super) struct PassOutput {
    pub leaves: Vec<StartedLeaf>,
    pub collisions: Vec<Collision>,
    /// Whether the pass was walked in segments, on the task workers too.
    pub shared: bool,
}

/// Deals `limit` visits from the root, on `tasks` too where the pass is large enough and
/// `sharing` finds it worth it (see the module's docs). The tree is read (and its in-flight
/// counts raised) through `tree`'s read lock, which nobody may hold for writing meanwhile:
/// the caller holds the search's state lock, under which alone the tree is written. The walk
/// touches the tree only: the leaves' positions are played out afterwards, without the tree's
/// lock (see [`super::leaf`]).
pub(super) fn run<'c>(
    tree: &'c RwLock<Tree>,
    tasks: &TaskWorkers<'c>,
    input: PassInput<'c>,
    limit: u32,
    sharing: &mut Sharing,
) -> PassOutput {
    let workers = tasks.count();
    let (mut output, segments) = {
        let tree = read(tree);
        let mut pass = Pass::new(&tree, &input, limit);
        pass.root_searchable = root_searchable(&tree, &input);
        let shareable = workers > 0 && limit >= PARALLEL_MIN_VISITS && dealt_below(tree.node(ROOT));
        if !(shareable && sharing.worth_it) {
            pass.deal(ROOT, limit);
            if shareable {
                sharing.learn(pass.output.leaves.len());
            }
            return pass.output;
        }
        // Segments small enough that every worker gets a few.
        let segment_visits = (limit / (2 * (workers as u32 + 1))).max(MIN_SEGMENT_VISITS);
        let mut segments = Vec::new();
        pass.plan(ROOT, limit, segment_visits, &mut segments);
        (pass.output, segments)
    };
    let walked = tasks.map(
        segments,
        Chunks::EachItem,
        Walker::default,
        move |walker, segment| {
            let tree = read(tree);
            walker.walk(&tree, &input, limit, segment)
        },
    );
    for part in walked {
        output.leaves.extend(part.leaves);
        output.collisions.extend(part.collisions);
    }
    output.shared = true;
    sharing.learn(output.leaves.len());
    output
}

/// The tree's read lock (a panic while it was held for writing left whole values only).
fn read(tree: &RwLock<Tree>) -> std::sync::RwLockReadGuard<'_, Tree> {
    tree.read().unwrap_or_else(PoisonError::into_inner)
}

/// Whether a visit reaching `node` is dealt on among its children (else it starts the
/// node's evaluation or collides there).
fn dealt_below(node: &Node) -> bool {
    node.visits > 0 && node.proof.is_none() && node.expanded
}

/// Part of a parallel pass: consecutive shares of the children of the last node of `path`
/// (the root first), each dealt as the one-thread walk deals it (its evaluations started,
/// then its visits dealt below the child).
pub(super) struct Segment {
    path: Vec<u32>,
    shares: Vec<Share>,
    /// The shares' visits and evaluations.
    weight: u32,
    /// The pass's `max_limit` where the one-thread walk would reach this segment. It decides
    /// whether a collision took the whole pass, which only a chain of single shares from the
    /// root can: the planning dealt that chain, so its value here is the one-thread walk's,
    /// also where the chain's last collision lies in a segment of its one share.
    max_limit: u32,
}

/// A worker's buffers, kept from one segment to the next.
#[derive(Default)]
pub(super) struct Walker {
    scores: ChildScores,
    shares: Vec<Share>,
}

impl Walker {
    /// Deals `segment` (of a pass of `limit` visits).
    fn walk(&mut self, tree: &Tree, input: &PassInput, limit: u32, segment: Segment) -> PassOutput {
        let mut pass = Pass::new(tree, input, limit);
        std::mem::swap(&mut pass.scores, &mut self.scores);
        std::mem::swap(&mut pass.shares, &mut self.shares);
        pass.max_limit = segment.max_limit;
        pass.path = segment.path;
        for share in segment.shares {
            pass.deal_share(share);
        }
        std::mem::swap(&mut pass.scores, &mut self.scores);
        std::mem::swap(&mut pass.shares, &mut self.shares);
        pass.output
    }
}

/// One walk of the gathering, of a whole pass or of a segment.
struct Pass<'t, 'i> {
    tree: &'t Tree,
    input: &'i PassInput<'i>,
    output: PassOutput,
    path: Vec<u32>,
    /// The pass's visits.
    limit: u32,
    /// The fewest visits any choice of this pass could take before it changed.
    max_limit: u32,
    /// Whether each root edge may take visits in this pass (see [`root_searchable`]): what
    /// decides it (completed visits, the best edge, the playouts left) holds still during a
    /// pass, so it is judged once and not at every block dealt at the root. Empty in a
    /// segment, which never splits the root.
    root_searchable: Vec<bool>,
    /// The scores of the node being split, reused from one split to the next (a split ends
    /// before the walk goes below it).
    scores: ChildScores,
    /// The shares of every node on the current path, each split's behind its parent's.
    shares: Vec<Share>,
}

impl<'t, 'i> Pass<'t, 'i> {
    fn new(tree: &'t Tree, input: &'i PassInput<'i>, limit: u32) -> Self {
        Pass {
            tree,
            input,
            output: PassOutput::default(),
            path: vec![ROOT],
            limit,
            max_limit: u32::MAX,
            root_searchable: Vec::new(),
            scores: ChildScores::default(),
            shares: Vec::new(),
        }
    }

    /// Records the leaf at the end of the current path (a visit that starts its evaluation).
    fn start_leaf(&mut self) {
        self.output
            .leaves
            .push(StartedLeaf::at(self.tree, &self.path));
    }

    /// Deals `limit` visits at `index`, the last node of `self.path` (whose in-flight count
    /// already holds them, except at the root).
    fn deal(&mut self, index: u32, mut limit: u32) {
        let is_root = index == ROOT;
        if !dealt_below(self.tree.node(index)) {
            if is_root && try_start(self.tree.node(ROOT)) {
                limit -= 1;
                self.start_leaf();
            }
            if limit > 0 {
                self.collide(limit);
            }
            return;
        }
        if is_root {
            self.tree.node(ROOT).add_in_flight(limit);
        }
        let first = self.shares.len();
        self.split(index, limit);
        let end = self.shares.len();
        for i in first..end {
            self.deal_share(self.shares[i]);
        }
        self.shares.truncate(first);
    }

    /// Deals one share of a child of the last node of `self.path`: starts its evaluations,
    /// then deals its visits below the child.
    fn deal_share(&mut self, share: Share) {
        self.path.push(share.child);
        for _ in 0..share.evaluations {
            self.start_leaf();
        }
        if share.visits > 0 {
            self.deal(share.child, share.visits);
        }
        self.path.pop();
    }

    /// Deals `limit` visits at `index` (dealt below, see [`dealt_below`]) as
    /// [`Pass::deal`] does, but goes on itself only into the children whose share is more than
    /// `segment_visits` (and that are dealt below): the other shares become [`Segment`]s, runs
    /// of consecutive shares of at most `segment_visits` in all (or of one larger share), in
    /// the order the one-thread walk reaches them.
    fn plan(&mut self, index: u32, limit: u32, segment_visits: u32, segments: &mut Vec<Segment>) {
        if index == ROOT {
            self.tree.node(ROOT).add_in_flight(limit);
        }
        let first = self.shares.len();
        self.split(index, limit);
        let end = self.shares.len();
        let mut group: Option<Segment> = None;
        for i in first..end {
            let share = self.shares[i];
            if share.visits > segment_visits && dealt_below(self.tree.node(share.child)) {
                // A child dealt below was visited: no visit starts its evaluation.
                debug_assert_eq!(share.evaluations, 0);
                segments.extend(group.take());
                self.path.push(share.child);
                self.plan(share.child, share.visits, segment_visits, segments);
                self.path.pop();
                continue;
            }
            let weight = share.visits + share.evaluations;
            if group
                .as_ref()
                .is_some_and(|g| g.weight + weight > segment_visits)
            {
                segments.extend(group.take());
            }
            let group = group.get_or_insert_with(|| Segment {
                path: self.path.clone(),
                shares: Vec::new(),
                weight: 0,
                max_limit: self.max_limit,
            });
            group.shares.push(share);
            group.weight += weight;
        }
        segments.extend(group);
        self.shares.truncate(first);
    }

    /// Records a collision of `visits` at the last node of `self.path`.
    fn collide(&mut self, visits: u32) {
        let whole_pass = visits == self.limit && self.max_limit > visits;
        self.output.collisions.push(Collision {
            ancestors: self.path[..self.path.len() - 1].to_vec(),
            visits,
            max_visits: if whole_pass { self.max_limit } else { 0 },
        });
    }

    /// Splits `limit` visits among the children of `index` by PUCT, raising the in-flight
    /// counts of those that take visits; the shares go on the end of `self.shares`.
    fn split(&mut self, index: u32, mut limit: u32) {
        let mut scores = std::mem::take(&mut self.scores);
        // Away from the root (where `searchmoves` and smart pruning may skip children) every
        // child may be searched: see [`ChildScores::reset`].
        let reach = (index != ROOT).then_some(limit);
        scores.reset(self.tree, self.input.params, index, reach);
        let first = self.shares.len();
        while limit > 0 {
            let Some(choice) = self.best_two(&mut scores, index) else {
                // Nothing may be searched here (cannot happen: the root's best child is never
                // pruned): hold the visits as a collision so that they are taken back.
                self.collide(limit);
                break;
            };
            let best = choice.best;
            let mut new_visits = match choice.second_score {
                Some(second) => {
                    let to_change = scores.visits_to_change_best(best, second);
                    self.max_limit = self.max_limit.min(to_change);
                    limit.min(to_change)
                }
                None => limit,
            };
            let child_index = self
                .tree
                .spawn_child(index, scores.children.start + best as u32);
            let share = share_of(&mut self.shares, first, child_index);
            share.visits += new_visits;
            limit -= new_visits;
            let child = self.tree.node(child_index);
            if !try_start(child) {
                // An evaluation is under way here: its score cannot change, so it stays the
                // best choice and takes everything left.
                share.visits += limit;
                break;
            }
            new_visits -= 1;
            scores.terms[best].started += 1;
            let evaluates = child.visits == 0 || child.proof.is_some();
            if evaluates {
                share.visits -= 1;
                share.evaluations += 1;
            } else {
                child.add_in_flight(new_visits);
                scores.terms[best].started += new_visits;
            }
            scores.rescore(best);
        }
        self.scores = scores;
    }

    /// The best child by score and the second best score, over the children that may be
    /// searched, as lc0's scan finds them (see [`super::ranking`]).
    fn best_two(&self, scores: &mut ChildScores, index: u32) -> Option<Choice> {
        let searchable = |i: usize| index != ROOT || self.root_searchable[i];
        scores.take_best(searchable)
    }
}

/// Whether each root edge may take visits: its move is among `searchmoves` (where given), and it
/// is the best edge or can still catch up with it in the playouts left.
fn root_searchable(tree: &Tree, input: &PassInput) -> Vec<bool> {
    let visits = |e| f64::from(tree.child(e).visits);
    // Where the playouts left cover the most visits of any edge, every edge can catch up
    // with the best one, whichever it is: it need not be found (it is, near a search's end).
    let most = tree.children(ROOT).map(visits).fold(0.0, f64::max);
    let best = if input.remaining_playouts >= most {
        None
    } else {
        tree.best_child(ROOT).map(|best| (best, visits(best)))
    };
    tree.children(ROOT)
        .map(|edge| {
            let listed =
                input.root_moves.is_empty() || input.root_moves.contains(&tree.edge(edge).mv);
            let can_catch_up = match best {
                Some((best, best_visits)) if best != edge => {
                    input.remaining_playouts >= best_visits - visits(edge)
                }
                _ => true,
            };
            listed && can_catch_up
        })
        .collect()
}

/// Starts a visit at `node` unless its first evaluation is already under way (lc0's
/// TryStartScoreUpdate).
fn try_start(node: &Node) -> bool {
    if node.visits == 0 && node.in_flight() > 0 {
        return false;
    }
    node.add_in_flight(1);
    true
}

/// The visits a child takes in one pass.
#[derive(Clone, Copy)]
struct Share {
    child: u32,
    /// Visits that start an evaluation of the child itself.
    evaluations: u32,
    /// Visits dealt on below it (or collisions there).
    visits: u32,
}

/// The share of `child` among the shares from `first` on, added where it has none yet.
fn share_of(shares: &mut Vec<Share>, first: usize, child: u32) -> &mut Share {
    let at = match shares[first..].iter().position(|s| s.child == child) {
        Some(i) => first + i,
        None => {
            shares.push(Share {
                child,
                evaluations: 0,
                visits: 0,
            });
            shares.len() - 1
        }
    };
    &mut shares[at]
}

/// The PUCT terms of one node's children during a pass, and their ranking. Every child's
/// terms are computed when the split starts, right after the pass over the children's
/// statistics that the node's visited policy needs anyway (see [`Puct`]), while they are in
/// the cache; the scan then reads only these terms.
#[derive(Default)]
struct ChildScores {
    /// The node's edges.
    children: std::ops::Range<u32>,
    /// `cpuct · √(N − 1)` and the first-play urgency at the node.
    puct: Puct,
    /// The children's terms (one record each: the terms of a child are read together).
    terms: Vec<Terms>,
    ranking: Ranking,
}

/// One child's PUCT terms during a split.
#[derive(Debug, Clone, Copy)]
struct Terms {
    /// `P · cpuct · √(N − 1)`.
    weighted_prior: f64,
    /// Q, or the first-play urgency where unvisited.
    util: f64,
    /// Visits completed and in flight.
    started: u32,
    score: f64,
}

impl Terms {
    fn new(weighted_prior: f64, util: f64, started: u32) -> Self {
        let mut terms = Self {
            weighted_prior,
            util,
            started,
            score: 0.0,
        };
        terms.rescore();
        terms
    }

    fn rescore(&mut self) {
        self.score = self.weighted_prior / f64::from(1 + self.started) + self.util;
    }
}

impl ChildScores {
    /// Starts on node `index`, keeping the buffers' memory: the children's statistics are
    /// read for the visited policy, then again, from the cache, for their terms.
    ///
    /// With `reach` set (a split of that many visits where every child may be searched), only
    /// the children the split can reach get terms, as lc0 bounds its scan: the children after
    /// [`Tree::spawned_edges`] are unvisited and score in the order of their priors, a block
    /// that takes one starts it, and the scan reads one past the first unstarted child; so
    /// `reach` blocks read no further than `reach` children past the spawned ones.
    fn reset(&mut self, tree: &Tree, params: &SearchParams, index: u32, reach: Option<u32>) {
        self.children = tree.children(index);
        self.puct = Puct::at(tree, params, index);
        self.terms.clear();
        let puct = &self.puct;
        let all = tree.edges_of(index);
        let reached = reach.map_or(all.len(), |visits| {
            let visits = usize::try_from(visits).unwrap_or(usize::MAX);
            let spawned = tree.spawned_edges(index).len();
            all.len()
                .min(spawned.saturating_add(visits).saturating_add(1))
        });
        self.terms.extend(all[..reached].iter().map(|edge| {
            let stats = tree.stats(edge);
            Terms::new(
                f64::from(edge.prior) * puct.mult,
                puct.util(stats),
                stats.visits + stats.in_flight(),
            )
        }));
        self.ranking.reset();
    }

    /// The best child that `searchable` allows, with the second best score: found by lc0's scan
    /// where the split reads few children, else taken out of the ranking (it goes back,
    /// rescored, in [`ChildScores::rescore`]).
    fn take_best(&mut self, searchable: impl Fn(usize) -> bool) -> Option<Choice> {
        let terms = &self.terms;
        let read = |i: usize| searchable(i).then(|| (terms[i].score, terms[i].started == 0));
        if self.scans() {
            ranking::scan(terms.len(), read)
        } else {
            self.ranking.take_best(terms.len(), read)
        }
    }

    /// Scores child `i`, chosen by [`ChildScores::take_best`], again (and ranks it again).
    fn rescore(&mut self, i: usize) {
        self.terms[i].rescore();
        if !self.scans() {
            let terms = &self.terms;
            self.ranking
                .put_back(i, terms[i].score, |child| terms[child].started == 0);
        }
    }

    /// Whether blocks are chosen by scanning the children's terms rather than ranking them.
    fn scans(&self) -> bool {
        self.terms.len() <= SCAN_MAX_CHILDREN
    }

    /// How many more visits child `best` takes before its score falls below `second` (at
    /// least 1): the smallest k with `wP / (1 + started + k) + util < second`.
    fn visits_to_change_best(&self, best: usize, second: f64) -> u32 {
        let Terms {
            weighted_prior,
            util,
            started,
            ..
        } = self.terms[best];
        if util >= second {
            return u32::MAX;
        }
        let n1 = f64::from(started) + 1.0;
        let k = weighted_prior / (second - util) - n1 + 1.0;
        k.clamp(1.0, 1e9) as u32
    }
}

/// The terms PUCT scores a node's children with, as lc0 computes them: CPuct grown with the
/// node's completed visits, `cpuct·√(N − 1)` (its children's completed visits), and the
/// first-play urgency of unvisited children.
#[derive(Default)]
pub(super) struct Puct {
    /// `cpuct · √max(N − 1, 1)`.
    pub mult: f64,
    pub fpu: f64,
}

impl Puct {
    pub fn at(tree: &Tree, p: &SearchParams, index: u32) -> Self {
        // Only spawned children can have visits.
        let children = tree
            .spawned_edges(index)
            .iter()
            .map(|e| (e.prior, tree.stats(e)));
        Self::new(tree.node(index), p, children)
    }

    /// The terms at `parent`, whose children are given by their priors and statistics.
    fn new<'n>(
        parent: &Node,
        p: &SearchParams,
        children: impl Iterator<Item = (f32, &'n Node)>,
    ) -> Self {
        let n = f64::from(parent.visits);
        let cpuct = f64::from(p.cpuct)
            + f64::from(p.cpuct_factor)
                * ((n + f64::from(p.cpuct_base)) / f64::from(p.cpuct_base)).ln();
        let visited_policy: f64 = children
            .filter(|(_, c)| c.visits > 0)
            .map(|(prior, _)| f64::from(prior))
            .sum();
        // The parent's value for the side to move there (its own is for the other side).
        let parent_q = -parent.q();
        let children_visits = parent.visits.saturating_sub(1).max(1);
        Self {
            mult: cpuct * f64::from(children_visits).sqrt(),
            fpu: parent_q - f64::from(p.fpu_reduction) * visited_policy.sqrt(),
        }
    }

    /// A child's Q for the side choosing it: its proven result, the mean of its completed
    /// visits, or the first-play urgency where it has none.
    pub fn util(&self, child: &Node) -> f64 {
        match child.proof {
            Some(proof) if child.visits > 0 => f64::from(proof.value()),
            _ if child.visits > 0 => child.q(),
            _ => self.fpu,
        }
    }

    /// A child's Q (see [`Puct::util`]) and U from its `prior`, its in-flight visits counted
    /// as started.
    pub fn q_and_u(&self, child: &Node, prior: f32) -> (f64, f64) {
        let started = f64::from(child.visits + child.in_flight());
        (
            self.util(child),
            self.mult * f64::from(prior) / (1.0 + started),
        )
    }
}

/// lc0's collision budget of one gathering (CalculateCollisionsLeft): 1 up to a tree of
/// `scaling_start` visits, the full `max_visits` from `scaling_end` on, and between them a
/// curve of the given power; `nodes` is the smaller of the root's visits and the playouts the
/// search still expects.
pub(super) fn collision_budget(nodes: f64, params: &SearchParams) -> u32 {
    let (start, end) = (
        f64::from(params.collision_scaling_start),
        f64::from(params.collision_scaling_end),
    );
    if nodes >= end {
        return params.max_collision_visits;
    }
    if nodes <= start {
        return 1;
    }
    let ratio = ((nodes - start) / (end - start)).powf(f64::from(params.collision_scaling_power));
    let high = f64::from(params.max_collision_visits);
    (1.0 + (high - 1.0) * ratio).round() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_collision_budget_grows_with_the_tree_as_lc0s() {
        let p = SearchParams::default();
        // 1 + 79,999·((n − 28) / 144,972)^1.25, rounded; 1 up to 28 visits, 80,000 from 145,000.
        for (nodes, budget) in [
            (0.0, 1),
            (28.0, 1),
            (29.0, 1),
            (800.0, 116),
            (50_000.0, 21_130),
        ] {
            assert_eq!(collision_budget(nodes, &p), budget, "{nodes} nodes");
        }
        assert_eq!(collision_budget(145_000.0, &p), 80_000);
        assert_eq!(collision_budget(f64::INFINITY, &p), 80_000);
        // A scaling end of 0 turns the scaling off.
        let flat = SearchParams {
            collision_scaling_end: 0,
            ..p
        };
        assert_eq!(collision_budget(5.0, &flat), 80_000);
    }

    #[test]
    fn the_best_child_takes_visits_until_the_second_would_overtake_it() {
        // wP = 2, util −0.1, 3 visits started: 2 / (1 + 3 + k) − 0.1 < 0.2 first at k = 3
        // (2/7 = 0.286 − 0.1 = 0.186), so the formula's 2 / 0.3 − 4 + 1 = 3.67 truncates to 3.
        let scores = ChildScores {
            children: 1..3,
            puct: Puct::default(),
            terms: vec![Terms::new(2.0, -0.1, 3), Terms::new(0.5, 0.0, 0)],
            ranking: Ranking::default(),
        };
        assert_eq!(scores.visits_to_change_best(0, 0.2), 3);
        // A best child whose Q alone beats the second never changes.
        assert_eq!(scores.visits_to_change_best(1, -0.5), u32::MAX);
        // Never fewer than one (2 / 0.6 − 3 = 0.33).
        assert_eq!(scores.visits_to_change_best(0, 0.5), 1);
    }
}
