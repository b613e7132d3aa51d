//! The search tree, values stored from the point of view of the player who made the move into
//! the node. Expanding a leaf and walking the tree touch as little memory as they can, as in
//! lc0: a node's children are compact [`Edge`]s (its move and prior, 16 bytes), contiguous per
//! node and most likely first, and a child gets its [`Node`] (its statistics, 40 bytes) only
//! when its first visit starts. Most children are never visited: where each child was a
//! 48-byte node, a leaf with 30 moves now adds 480 bytes instead of 1,440. Both live in
//! chunked arenas ([`Arena`], [`SharedArena`]), which never move what they hold as the tree
//! grows.
//!
//! A pass of the gathering may walk disjoint subtrees on several threads at once, each
//! through a shared reference (see [`super::pick`]): what a walk changes, the in-flight
//! counts, the children's nodes and the nodes themselves, is atomic ([`Node::in_flight`],
//! [`Tree::spawn_child`]); everything else changes only through `&mut Tree`, when no walk
//! runs.

use std::ops::Range;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering::Relaxed};

use shakmaty::Move;

use super::arena::{Arena, SharedArena};

/// A game result known for certain, for the player who made the move into the node: at a
/// game end (`plies` 0), or proven from the children (lc0's certainty propagation, lite): a
/// node with a child that wins for the side to move there is lost for its mover; one whose
/// children are all proven is worth the best of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proof {
    /// +1 a win, 0 a draw, −1 a loss.
    pub value: i8,
    /// Plies to the game end with best play (the winner hurrying, the loser delaying).
    pub plies: u16,
}

impl Proof {
    pub fn value(self) -> f32 {
        f32::from(self.value)
    }

    /// The proof of a parent whose side to move can reach `self` (a child) in one ply.
    fn through_parent(self) -> Proof {
        Proof {
            value: -self.value,
            plies: self.plies.saturating_add(1),
        }
    }
}

/// A move out of a node with its policy prior: a node's edges lie together in the tree's edge
/// arena, most likely first. The child's statistics exist only once a visit starts there
/// (lc0 spawns its nodes the same way), since most children are never visited.
#[derive(Debug)]
pub struct Edge {
    pub mv: Move,
    /// The policy prior of `mv`.
    pub prior: f32,
    /// The child's [`Node`] ([`NONE`] until its first visit starts; set by the walk that
    /// starts it, see [`Tree::spawn_child`]).
    node: AtomicU32,
}

impl Edge {
    fn node(&self) -> u32 {
        self.node.load(Relaxed)
    }
}

/// The statistics of a node once a visit started there, for the player who made the move
/// into it.
#[derive(Debug)]
pub struct Node {
    /// Sum of backed-up values for the player who made the move into it (+1 win, −1 loss).
    pub value_sum: f64,
    pub visits: u32,
    /// Visits on their way through this node, not yet backed up: they lower its exploration
    /// term while they are under way (lc0's N in flight). Raised by the walks (see the
    /// module's docs).
    in_flight: AtomicU32,
    /// Mean of the backed-up draw probabilities.
    pub draw: f32,
    /// The first of its edges, once expanded.
    first_edge: u32,
    /// The edge into it ([`NONE`] at the root), which holds its move; set by the walk that
    /// makes the node.
    edge: AtomicU32,
    /// How many edges it has (a chess position has at most 218 legal moves).
    edge_count: u8,
    /// One past the last of its edges whose child has a node: the edges from here on have
    /// never been visited, so they score in the order of their priors (see
    /// [`Tree::spawned_edges`]). Raised by the walks.
    spawned: AtomicU8,
    pub expanded: bool,
    /// Where the proof is lc0's two-fold draw (the position repeats one inside the search, so
    /// that either side could repeat it again): the plies of that cycle. Such a draw holds only
    /// while the cycle lies below the root; it proves nothing about the parent.
    pub two_fold: u16,
    /// The result here, when it is certain (see [`Proof`]).
    pub proof: Option<Proof>,
}

/// No node (an unvisited edge's child, the root's parent edge).
const NONE: u32 = u32::MAX;

/// What an edge whose child has no node reads as: nothing visited, nothing known.
static UNVISITED: Node = Node::new(NONE);

impl Node {
    const fn new(edge: u32) -> Self {
        Self {
            value_sum: 0.0,
            visits: 0,
            in_flight: AtomicU32::new(0),
            draw: 0.0,
            first_edge: 0,
            edge: AtomicU32::new(edge),
            edge_count: 0,
            spawned: AtomicU8::new(0),
            expanded: false,
            two_fold: 0,
            proof: None,
        }
    }

    /// Visits on their way through this node (lc0's N in flight).
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Relaxed)
    }

    /// Starts `visits` more visits through this node (a walk's share of it).
    pub(super) fn add_in_flight(&self, visits: u32) {
        self.in_flight.fetch_add(visits, Relaxed);
    }

    /// Ends `visits` of its visits in flight (backed up or taken back).
    fn end_in_flight(&mut self, visits: u32) {
        *self.in_flight.get_mut() -= visits;
    }

    fn edge(&self) -> u32 {
        self.edge.load(Relaxed)
    }

    /// The mean value for the player who made the move into it.
    pub fn q(&self) -> f64 {
        if self.visits == 0 {
            0.0
        } else {
            self.value_sum / f64::from(self.visits)
        }
    }
}

impl Default for Node {
    fn default() -> Self {
        Self::new(NONE)
    }
}

impl Clone for Node {
    fn clone(&self) -> Self {
        Self {
            in_flight: AtomicU32::new(self.in_flight()),
            edge: AtomicU32::new(self.edge()),
            spawned: AtomicU8::new(self.spawned.load(Relaxed)),
            ..*self
        }
    }
}

/// Edges and nodes in chunked arenas ([`Arena`], [`SharedArena`]); node 0 is the root.
#[derive(Debug)]
pub struct Tree {
    nodes: SharedArena<Node>,
    edges: Arena<Edge>,
}

impl Default for Tree {
    fn default() -> Self {
        let nodes = SharedArena::default();
        nodes.take();
        Self {
            nodes,
            edges: Arena::default(),
        }
    }
}

pub const ROOT: u32 = 0;

impl Tree {
    pub fn node(&self, index: u32) -> &Node {
        self.nodes.get(index)
    }

    pub fn node_mut(&mut self, index: u32) -> &mut Node {
        self.nodes.get_mut(index)
    }

    /// The edges of node `index` (empty until it is expanded).
    pub fn children(&self, index: u32) -> Range<u32> {
        let node = self.node(index);
        node.first_edge..node.first_edge + u32::from(node.edge_count)
    }

    /// The edges of node `index` as a slice, for scans over all of them.
    pub fn edges_of(&self, index: u32) -> &[Edge] {
        let node = self.node(index);
        self.edges
            .run(node.first_edge, usize::from(node.edge_count))
    }

    /// The edges of node `index` up to the last whose child has a node: every visited child is
    /// among them, and the edges after them are unvisited, most likely first.
    pub fn spawned_edges(&self, index: u32) -> &[Edge] {
        let node = self.node(index);
        let spawned = node.spawned.load(Relaxed);
        self.edges.run(node.first_edge, usize::from(spawned))
    }

    pub fn edge(&self, edge: u32) -> &Edge {
        self.edges.get(edge)
    }

    /// The child node behind `edge`, once a visit has started there.
    pub fn child_node(&self, edge: u32) -> Option<u32> {
        let node = self.edge(edge).node();
        (node != NONE).then_some(node)
    }

    /// The statistics of the child behind `edge` (all zero where no visit has started).
    pub fn child(&self, edge: u32) -> &Node {
        self.stats(self.edge(edge))
    }

    /// The statistics of the child behind an edge of [`Tree::edges_of`].
    pub fn stats(&self, edge: &Edge) -> &Node {
        match edge.node() {
            NONE => &UNVISITED,
            node => self.node(node),
        }
    }

    /// The child node behind `edge`, an edge of `parent`, made where it has none yet (a visit
    /// starts there). Walks on several threads may call it at once for edges of different
    /// nodes (each walks a subtree of its own, see the module's docs).
    pub fn spawn_child(&self, parent: u32, edge: u32) -> u32 {
        let link = &self.edge(edge).node;
        match link.load(Relaxed) {
            NONE => {
                let (node, stats) = self.nodes.take();
                stats.edge.store(edge, Relaxed);
                link.store(node, Relaxed);
                let parent = self.node(parent);
                debug_assert!(parent.first_edge <= edge);
                let offset = u8::try_from(edge - parent.first_edge + 1).expect("at most 218 edges");
                debug_assert!(offset <= parent.edge_count);
                parent.spawned.fetch_max(offset, Relaxed);
                node
            }
            node => node,
        }
    }

    /// The move into node `index` (`None` at the root).
    pub fn mv(&self, index: u32) -> Option<Move> {
        match self.node(index).edge() {
            NONE => None,
            edge => Some(self.edge(edge).mv),
        }
    }

    /// The tree's size as [`super::SearchParams::max_tree_nodes`] counts it: its edges and its
    /// nodes.
    pub fn size(&self) -> usize {
        self.edges.len() + self.nodes.len()
    }

    /// Adds the edges of `index` with their priors, which come most likely first (the
    /// picker's scan of unvisited children relies on that order).
    pub fn expand(&mut self, index: u32, children: &[(Move, f32)]) {
        debug_assert!(children.is_sorted_by(|a, b| a.1 >= b.1));
        let edges = children.iter().map(|&(mv, prior)| Edge {
            mv,
            prior,
            node: AtomicU32::new(NONE),
        });
        let first_edge = self.edges.extend(edges);
        let node = self.node_mut(index);
        node.first_edge = first_edge;
        node.edge_count = u8::try_from(children.len()).expect("at most 218 legal moves");
        node.expanded = true;
    }

    /// Adds one playout through `path` (root first) and takes its virtual loss back: `value`
    /// is for the player who moved into the last node, and flips sign at each level up;
    /// `draw` is the draw probability, the same for both sides.
    pub fn back_up(&mut self, path: &[u32], mut value: f32, draw: f32) {
        for &index in path.iter().rev() {
            let node = self.node_mut(index);
            node.visits += 1;
            node.value_sum += f64::from(value);
            node.draw += (draw - node.draw) / node.visits as f32;
            node.end_in_flight(1);
            value = -value;
        }
    }

    /// After the last node of `path` got a proof (and its playout was backed up): proves its
    /// ancestors where their children now decide them, up to (not including) the root, which
    /// is always searched on. A node proven here takes its proven value for all its visits,
    /// and its ancestors' sums are corrected by the difference (lc0's `MakeTerminal` and
    /// `AdjustForTerminal`): a forced result found deep in the tree reaches the root's
    /// children at once, not one visit at a time.
    pub fn propagate_proof(&mut self, path: &[u32]) {
        for at in (0..path.len().saturating_sub(1)).rev() {
            let index = path[at];
            if index == ROOT {
                return;
            }
            let proof = self.proof_from_children(index);
            let Some(proof) = proof.filter(|&p| Some(p) != self.node(index).proof) else {
                return;
            };
            self.prove(index, proof);
            self.settle_proven_value(&path[..=at]);
        }
    }

    /// Makes the value of the last node of `path`, just proven, its proof's for every visit,
    /// and moves its ancestors' sums by as much (the sign alternating with the side).
    fn settle_proven_value(&mut self, path: &[u32]) {
        let Some((&index, ancestors)) = path.split_last() else {
            return;
        };
        let node = self.node_mut(index);
        let Some(proof) = node.proof else {
            return;
        };
        let visits = f64::from(node.visits);
        let value_change = f64::from(proof.value()) * visits - node.value_sum;
        let draw = if proof.value == 0 { 1.0 } else { 0.0 };
        let draw_change = (draw - node.draw) * node.visits as f32;
        node.value_sum += value_change;
        node.draw = draw;
        let mut sign = -1.0;
        for &ancestor in ancestors.iter().rev() {
            let node = self.node_mut(ancestor);
            node.value_sum += sign * value_change;
            if node.visits > 0 {
                node.draw += draw_change / node.visits as f32;
            }
            sign = -sign;
        }
    }

    /// Records what is proven about `index`. A proven loss for the player who moves into it
    /// takes its move's prior away, as lc0 does: a move lost by force has no uncertainty for
    /// U to explore, and its prior, counted in its parent's visited policy, would lower the
    /// first-play urgency of the moves not yet tried (in a position where many moves lose,
    /// the one that holds was reached far later than lc0 reaches it).
    pub fn prove(&mut self, index: u32, proof: Proof) {
        let node = self.node_mut(index);
        node.proof = Some(proof);
        let edge = node.edge();
        if proof.value == -1 && edge != NONE {
            self.edges.get_mut(edge).prior = 0.0;
        }
    }

    /// What the children of `index` prove about it: a loss for its mover if a child wins for
    /// the side to move (the fastest such win), else, when every child is proven, the best
    /// result among them (a draw, or a loss delayed the longest).
    fn proof_from_children(&self, index: u32) -> Option<Proof> {
        let mut best: Option<Proof> = None;
        let mut all_proven = true;
        for edge in self.edges_of(index) {
            let node = self.stats(edge);
            let Some(p) = node.proof.filter(|_| node.two_fold == 0) else {
                all_proven = false;
                continue;
            };
            if best.is_none_or(|b| proof_order(p, b).is_gt()) {
                best = Some(p);
            }
        }
        let best = best?;
        (best.value == 1 || all_proven).then(|| best.through_parent())
    }

    /// Takes back `visits` in-flight visits from every node of `path` (playouts that will not
    /// be backed up).
    pub fn cancel(&mut self, path: &[u32], visits: u32) {
        for &index in path {
            self.node_mut(index).end_in_flight(visits);
        }
    }

    /// The edges of `index`, best first: proven wins (the fastest first), then by visits
    /// (ties: the better value, then the prior), proven losses last (the slowest first), as
    /// lc0 orders them.
    pub fn ranked_children(&self, index: u32) -> Vec<u32> {
        let mut children: Vec<u32> = self.children(index).collect();
        children.sort_by(|&a, &b| self.edge_order(self.edge(b), self.edge(a)));
        children
    }

    /// The best edge of `index` (see [`Tree::ranked_children`]).
    pub fn best_child(&self, index: u32) -> Option<u32> {
        let best = (self.children(index).start..).zip(self.edges_of(index));
        best.max_by(|(_, a), (_, b)| self.edge_order(a, b))
            .map(|(edge, _)| edge)
    }

    fn edge_order(&self, a: &Edge, b: &Edge) -> std::cmp::Ordering {
        let (prior_a, prior_b) = (a.prior, b.prior);
        let (a, b) = (self.stats(a), self.stats(b));
        let rank = |n: &Node| match n.proof {
            Some(p) if p.value == 1 => (2, -i32::from(p.plies)),
            Some(p) if p.value == -1 => (0, i32::from(p.plies)),
            _ => (1, 0),
        };
        rank(a)
            .cmp(&rank(b))
            .then(a.visits.cmp(&b.visits))
            .then(a.q().total_cmp(&b.q()))
            .then(prior_a.total_cmp(&prior_b))
    }

    /// The principal variation from `index`, as lc0 prints it: the best child (see
    /// [`Tree::ranked_children`]) while it has visits, then the best move of the last node
    /// searched (its policy's first choice where none of its moves has a visit yet).
    pub fn principal_variation(&self, mut index: u32) -> Vec<Move> {
        let mut pv = Vec::new();
        while let Some(edge) = self.best_child(index) {
            pv.push(self.edge(edge).mv);
            match self.child_node(edge) {
                Some(child) if self.node(child).visits > 0 => index = child,
                _ => break,
            }
        }
        pv
    }

    /// The subtree under `index` as a tree of its own (for reuse after a move), copied into
    /// `tree` (an empty one, made ahead). Its root is searched on whatever was proven about it
    /// (it needs a move). Two-fold draws whose cycle no longer lies below the new root are
    /// taken back, visits and all (as lc0 does).
    pub fn subtree(&self, index: u32, mut tree: Tree) -> Tree {
        debug_assert_eq!(
            tree.nodes.len(),
            1,
            "a tree to copy into holds its root alone"
        );
        *tree.node_mut(ROOT) = Node {
            edge: AtomicU32::new(NONE),
            proof: None,
            ..self.node(index).clone()
        };
        let mut copied = vec![(index, ROOT)];
        while let Some((old, new)) = copied.pop() {
            let first_edge = tree.edges.extend(self.edges_of(old).iter().map(|e| Edge {
                mv: e.mv,
                prior: e.prior,
                node: AtomicU32::new(NONE),
            }));
            tree.node_mut(new).first_edge = first_edge;
            for (edge, old_edge) in (first_edge..).zip(self.children(old)) {
                if let Some(old_child) = self.child_node(old_edge) {
                    // The copy keeps the old node's `spawned`: its children get nodes at the
                    // same offsets as they are copied.
                    let child = tree.spawn_child(new, edge);
                    *tree.node_mut(child) = Node {
                        edge: AtomicU32::new(edge),
                        ..self.node(old_child).clone()
                    };
                    copied.push((old_child, child));
                }
            }
        }
        tree.revert_broken_two_folds(&mut vec![ROOT]);
        tree
    }

    /// Takes back every two-fold draw under the last node of `path` whose cycle is longer than
    /// its plies from the root: its visits leave it and its ancestors (each was a draw, worth
    /// 0 to both sides), and it becomes a leaf to evaluate again.
    fn revert_broken_two_folds(&mut self, path: &mut Vec<u32>) {
        let index = *path.last().expect("a path holds the root");
        let node = self.node(index);
        let plies = path.len() - 1;
        if node.two_fold > 0 && plies < usize::from(node.two_fold) {
            let visits = node.visits;
            for &on_path in path.iter() {
                let n = self.node_mut(on_path);
                let left = n.visits - visits;
                n.draw = if left == 0 {
                    0.0
                } else {
                    (n.draw * n.visits as f32 - visits as f32) / left as f32
                };
                n.visits = left;
            }
            let n = self.node_mut(index);
            n.value_sum = 0.0;
            n.proof = None;
            n.two_fold = 0;
            return;
        }
        // Only the spawned edges can lead to nodes (see `Tree::spawned_edges`).
        let spawned = self.node(index).spawned.load(Relaxed);
        let first = self.node(index).first_edge;
        for edge in first..first + u32::from(spawned) {
            if let Some(child) = self.child_node(edge) {
                path.push(child);
                self.revert_broken_two_folds(path);
                path.pop();
            }
        }
    }

    /// The edge of `index` that plays `mv`.
    pub fn child_by_move(&self, index: u32, mv: &Move) -> Option<u32> {
        self.children(index).find(|&e| self.edge(e).mv == *mv)
    }
}

/// Which of two proofs the side choosing between them prefers: a higher value; among wins
/// the faster, among losses the slower.
fn proof_order(a: Proof, b: Proof) -> std::cmp::Ordering {
    a.value.cmp(&b.value).then(match a.value {
        1 => b.plies.cmp(&a.plies),
        _ => a.plies.cmp(&b.plies),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moves() -> Vec<Move> {
        shakmaty::Position::legal_moves(&shakmaty::Chess::default())
            .into_iter()
            .collect()
    }

    /// The node behind edge `i` of `parent`, made for the test.
    fn spawn(tree: &mut Tree, parent: u32, i: u32) -> u32 {
        tree.spawn_child(parent, tree.children(parent).start + i)
    }

    #[test]
    fn edges_and_nodes_stay_small() {
        // The module docs and SearchParams::max_tree_nodes give these sizes.
        assert_eq!(size_of::<Edge>(), 16);
        assert_eq!(size_of::<Node>(), 40);
    }

    #[test]
    fn unvisited_children_read_as_empty_until_spawned() {
        let moves = moves();
        let mut tree = Tree::default();
        tree.expand(ROOT, &[(moves[0], 0.7), (moves[1], 0.3)]);
        let edge = tree.children(ROOT).start + 1;
        assert_eq!(tree.child_node(edge), None);
        assert_eq!((tree.child(edge).visits, tree.child(edge).proof), (0, None));
        assert_eq!(tree.size(), 3);
        let node = tree.spawn_child(ROOT, edge);
        assert_eq!(tree.spawn_child(ROOT, edge), node);
        assert_eq!(tree.child_node(edge), Some(node));
        assert_eq!(tree.mv(node), Some(moves[1]));
        assert_eq!(tree.mv(ROOT), None);
        assert_eq!(tree.size(), 4);
    }

    #[test]
    fn proofs_rise_from_the_children() {
        let moves = moves();
        let mut tree = Tree::default();
        tree.expand(ROOT, &[(moves[0], 0.6), (moves[1], 0.4)]);
        let (edge_a, edge_b) = (tree.children(ROOT).start, tree.children(ROOT).start + 1);
        let (a, b) = (spawn(&mut tree, ROOT, 0), spawn(&mut tree, ROOT, 1));
        tree.expand(a, &[(moves[2], 0.5), (moves[3], 0.5)]);
        tree.expand(b, &[(moves[4], 0.5), (moves[5], 0.5)]);
        let a1 = spawn(&mut tree, a, 0);
        let (b1, b2) = (spawn(&mut tree, b, 0), spawn(&mut tree, b, 1));
        let proof = |value, plies| Some(Proof { value, plies });
        // A reply to `a` wins for its mover: `a` is lost for ours, one ply further.
        tree.node_mut(a1).proof = proof(1, 0);
        tree.propagate_proof(&[ROOT, a, a1]);
        assert_eq!(tree.node(a).proof, proof(-1, 1));
        // A move lost by force keeps no prior (lc0's MakeTerminal), a winning one keeps its.
        assert_eq!(
            (tree.edge(edge_a).prior, tree.edge(edge_b).prior),
            (0.0, 0.4)
        );
        // One reply to `b` proven lost for its mover says nothing while the other is open...
        tree.node_mut(b1).proof = proof(-1, 1);
        tree.propagate_proof(&[ROOT, b, b1]);
        assert_eq!(tree.node(b).proof, None);
        // ...and with both lost, `b` wins, the loser choosing the longer loss.
        tree.node_mut(b2).proof = proof(-1, 3);
        tree.propagate_proof(&[ROOT, b, b2]);
        assert_eq!(tree.node(b).proof, proof(1, 4));
        assert_eq!(tree.edge(edge_b).prior, 0.4);
        // The root is never proven; its ranking puts the win first and the loss last.
        assert_eq!(tree.node(ROOT).proof, None);
        tree.node_mut(a).visits = 50;
        assert_eq!(tree.ranked_children(ROOT), [edge_b, edge_a]);
        // A draw among lost moves is the best choice.
        tree.node_mut(b1).proof = proof(0, 0);
        tree.node_mut(b).proof = None;
        tree.propagate_proof(&[ROOT, b, b1]);
        assert_eq!(tree.node(b).proof, proof(0, 1));
    }

    #[test]
    fn a_proven_node_takes_its_value_for_every_visit_and_its_ancestors_follow() {
        let moves = moves();
        let mut tree = Tree::default();
        tree.expand(ROOT, &[(moves[0], 0.6), (moves[1], 0.4)]);
        let a = spawn(&mut tree, ROOT, 0);
        tree.expand(a, &[(moves[2], 0.5), (moves[3], 0.5)]);
        let a1 = spawn(&mut tree, a, 0);
        let set = |tree: &mut Tree, index, visits, value_sum, draw| {
            let node = tree.node_mut(index);
            (node.visits, node.value_sum, node.draw) = (visits, value_sum, draw);
        };
        // `a1` a mate just found and backed up; `a` 10 visits worth 0.2 a visit to the side
        // to move at the root, D 0.5; the root 15 visits, −3 in all, D 0.4.
        set(&mut tree, a1, 1, 1.0, 0.0);
        set(&mut tree, a, 10, 2.0, 0.5);
        set(&mut tree, ROOT, 15, -3.0, 0.4);
        tree.prove(a1, Proof { value: 1, plies: 0 });
        tree.propagate_proof(&[ROOT, a, a1]);
        // `a` is lost for its mover: −1 for each of its 10 visits, a change of −12, which
        // the root (the other side) gains: −3 + 12 = 9; D: a's 10 visits lose their 0.5
        // each, the root's mean falls by 5 / 15.
        let node = tree.node(a);
        assert_eq!((node.value_sum, node.draw), (-10.0, 0.0));
        let root = tree.node(ROOT);
        assert_eq!(root.value_sum, 9.0);
        assert!(
            (root.draw - (0.4 - 5.0 / 15.0)).abs() < 1e-6,
            "{}",
            root.draw
        );
    }

    #[test]
    fn a_two_fold_draw_is_taken_back_once_its_cycle_starts_above_the_root() {
        let moves = moves();
        // root → 1 → 2 → 3 → 4 → 5, each the only child; 5 a two-fold draw of a 4-ply cycle
        // (it repeats the position at 1), visited 3 times; 4 once more by the network (v 0.5).
        let mut tree = Tree::default();
        for parent in 0..5 {
            tree.expand(parent, &[(moves[0], 1.0)]);
            assert_eq!(spawn(&mut tree, parent, 0), parent + 1);
        }
        let draw = |visits: u32, extra: u32| {
            (visits as f32 + extra as f32 * 0.25) / (visits + extra) as f32
        };
        for (index, visits, extra) in [(0, 3, 2), (1, 3, 2), (2, 3, 2), (3, 3, 2), (4, 3, 1)] {
            let node = tree.node_mut(index);
            node.visits = visits + extra;
            node.value_sum = 0.5 * f64::from(extra);
            node.draw = draw(visits, extra);
        }
        let leaf = tree.node_mut(5);
        (leaf.visits, leaf.draw, leaf.two_fold) = (3, 1.0, 4);
        leaf.proof = Some(Proof { value: 0, plies: 0 });
        // From 1 the draw lies 4 plies down: its cycle (back to 1) is still inside.
        let kept = tree.subtree(1, Tree::default());
        assert_eq!(kept.node(4).two_fold, 4);
        assert_eq!(kept.node(ROOT).visits, 5);
        // From 2 it lies 3 plies down and repeats a position above the root: taken back.
        let sub = tree.subtree(2, Tree::default());
        let leaf = sub.node(3);
        assert_eq!((leaf.visits, leaf.proof, leaf.two_fold), (0, None, 0));
        assert!(!leaf.expanded);
        for index in 0..3 {
            let node = sub.node(index);
            let extra = if index == 2 { 1 } else { 2 };
            assert_eq!(node.visits, extra, "node {index}");
            assert!(
                (node.draw - 0.25).abs() < 1e-6,
                "node {index}: {}",
                node.draw
            );
            assert!((node.value_sum - 0.5 * f64::from(extra)).abs() < 1e-12);
        }
    }

    #[test]
    fn a_subtree_keeps_its_shape_and_counts() {
        let moves = moves();
        let mut tree = Tree::default();
        let children: Vec<_> = moves.iter().map(|&m| (m, 0.05)).collect();
        tree.expand(ROOT, &children);
        spawn(&mut tree, ROOT, 0);
        let child = spawn(&mut tree, ROOT, 3);
        tree.expand(child, &[(moves[0], 0.5), (moves[1], 0.5)]);
        for i in 0..2 {
            let grandchild = spawn(&mut tree, child, i);
            tree.node_mut(grandchild).visits = 10 + i;
        }
        let sub = tree.subtree(child, Tree::default());
        // The root, its two edges and their two nodes.
        assert_eq!(sub.size(), 5);
        assert!(sub.mv(ROOT).is_none());
        let visits: Vec<u32> = sub.children(ROOT).map(|e| sub.child(e).visits).collect();
        assert_eq!(visits, [10, 11]);
        assert_eq!(sub.best_child(ROOT), Some(sub.children(ROOT).start + 1));
        let moved: Vec<Move> = sub.edges_of(ROOT).iter().map(|e| e.mv).collect();
        assert_eq!(moved, moves[..2]);
    }
}
