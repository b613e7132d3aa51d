//! The search tree: nodes in one arena, each node's children contiguous, values stored from
//! the point of view of the player who made the move into the node.

use std::ops::Range;

use shakmaty::Move;

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

/// One position of the tree, reached by `mv` from its parent.
#[derive(Debug, Clone)]
pub struct Node {
    /// The move into this node (`None` at the root).
    pub mv: Option<Move>,
    /// The policy prior of `mv` at the parent.
    pub prior: f32,
    pub visits: u32,
    /// Sum of backed-up values for the player who made `mv` (+1 win, −1 loss).
    pub value_sum: f64,
    /// Mean of the backed-up draw probabilities.
    pub draw: f32,
    /// Visits on their way through this node, not yet backed up: they lower its exploration
    /// term while they are under way (lc0's N in flight).
    pub in_flight: u32,
    /// The children, once expanded.
    pub children: Range<u32>,
    pub expanded: bool,
    /// The result here, when it is certain (see [`Proof`]).
    pub proof: Option<Proof>,
    /// Where the proof is lc0's two-fold draw (the position repeats one inside the search, so
    /// that either side could repeat it again): the plies of that cycle. Such a draw holds only
    /// while the cycle lies below the root; it proves nothing about the parent.
    pub two_fold: u16,
}

impl Node {
    fn new(mv: Option<Move>, prior: f32) -> Self {
        Self {
            mv,
            prior,
            visits: 0,
            value_sum: 0.0,
            draw: 0.0,
            in_flight: 0,
            children: 0..0,
            expanded: false,
            proof: None,
            two_fold: 0,
        }
    }

    /// The mean value for the player who made `mv`.
    pub fn q(&self) -> f64 {
        if self.visits == 0 {
            0.0
        } else {
            self.value_sum / f64::from(self.visits)
        }
    }
}

/// The arena; node 0 is the root.
#[derive(Debug, Clone)]
pub struct Tree {
    pub nodes: Vec<Node>,
}

impl Default for Tree {
    fn default() -> Self {
        Self {
            nodes: vec![Node::new(None, 1.0)],
        }
    }
}

pub const ROOT: u32 = 0;

impl Tree {
    pub fn node(&self, index: u32) -> &Node {
        &self.nodes[index as usize]
    }

    pub fn node_mut(&mut self, index: u32) -> &mut Node {
        &mut self.nodes[index as usize]
    }

    pub fn children(&self, index: u32) -> Range<u32> {
        self.node(index).children.clone()
    }

    /// Adds the children of `index` with their priors, which come most likely first (the
    /// picker's scan of unvisited children relies on that order).
    pub fn expand(&mut self, index: u32, children: &[(Move, f32)]) {
        debug_assert!(children.is_sorted_by(|a, b| a.1 >= b.1));
        let start = self.nodes.len() as u32;
        let end = start + children.len() as u32;
        self.nodes
            .extend(children.iter().map(|&(m, p)| Node::new(Some(m), p)));
        let node = self.node_mut(index);
        node.children = start..end;
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
            node.in_flight -= 1;
            value = -value;
        }
    }

    /// After the last node of `path` got a proof: proves its ancestors where their children
    /// now decide them, up to (not including) the root, which is always searched on.
    pub fn propagate_proof(&mut self, path: &[u32]) {
        for &index in path.iter().rev().skip(1) {
            if index == ROOT {
                return;
            }
            let proof = self.proof_from_children(index);
            if proof.is_none() || proof == self.node(index).proof {
                return;
            }
            self.node_mut(index).proof = proof;
        }
    }

    /// What the children of `index` prove about it: a loss for its mover if a child wins for
    /// the side to move (the fastest such win), else, when every child is proven, the best
    /// result among them (a draw, or a loss delayed the longest).
    fn proof_from_children(&self, index: u32) -> Option<Proof> {
        let mut best: Option<Proof> = None;
        let mut all_proven = true;
        for child in self.children(index) {
            let node = self.node(child);
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
            self.node_mut(index).in_flight -= visits;
        }
    }

    /// The children of `index`, best first: proven wins (the fastest first), then by visits
    /// (ties: the better value, then the prior), proven losses last (the slowest first), as
    /// lc0 orders them.
    pub fn ranked_children(&self, index: u32) -> Vec<u32> {
        let mut children: Vec<u32> = self.children(index).collect();
        children.sort_by(|&a, &b| self.child_order(b, a));
        children
    }

    /// The best child of `index` (see [`Tree::ranked_children`]).
    pub fn best_child(&self, index: u32) -> Option<u32> {
        self.children(index).max_by(|&a, &b| self.child_order(a, b))
    }

    fn child_order(&self, a: u32, b: u32) -> std::cmp::Ordering {
        let (a, b) = (self.node(a), self.node(b));
        let rank = |n: &Node| match n.proof {
            Some(p) if p.value == 1 => (2, -i32::from(p.plies)),
            Some(p) if p.value == -1 => (0, i32::from(p.plies)),
            _ => (1, 0),
        };
        rank(a)
            .cmp(&rank(b))
            .then(a.visits.cmp(&b.visits))
            .then(a.q().total_cmp(&b.q()))
            .then(a.prior.total_cmp(&b.prior))
    }

    /// The principal variation from `index`, as lc0 prints it: the best child (see
    /// [`Tree::ranked_children`]) while it has visits, then the best move of the last node
    /// searched (its policy's first choice where none of its moves has a visit yet).
    pub fn principal_variation(&self, mut index: u32) -> Vec<Move> {
        let mut pv = Vec::new();
        while let Some(child) = self.best_child(index) {
            let node = self.node(child);
            pv.extend(node.mv);
            if node.visits == 0 {
                break;
            }
            index = child;
        }
        pv
    }

    /// The subtree under `index` as a tree of its own (for reuse after a move). Its root is
    /// searched on whatever was proven about it (it needs a move). Two-fold draws whose cycle
    /// no longer lies below the new root are taken back, visits and all (as lc0 does).
    pub fn subtree(&self, index: u32) -> Tree {
        let mut nodes = vec![self.node(index).clone()];
        nodes[0].mv = None;
        nodes[0].proof = None;
        let mut next = 0;
        while next < nodes.len() {
            let old = nodes[next].children.clone();
            let start = nodes.len() as u32;
            nodes.extend_from_slice(&self.nodes[old.start as usize..old.end as usize]);
            nodes[next].children = start..nodes.len() as u32;
            next += 1;
        }
        let mut tree = Tree { nodes };
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
        for child in self.children(index) {
            path.push(child);
            self.revert_broken_two_folds(path);
            path.pop();
        }
    }

    /// The child of `index` reached by `mv`.
    pub fn child_by_move(&self, index: u32, mv: &Move) -> Option<u32> {
        self.children(index)
            .find(|&c| self.node(c).mv.as_ref() == Some(mv))
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

    #[test]
    fn nodes_stay_small() {
        // SearchParams::max_tree_nodes is documented in terms of this size.
        assert!(size_of::<Node>() <= 48, "{} bytes", size_of::<Node>());
    }

    #[test]
    fn proofs_rise_from_the_children() {
        let moves: Vec<Move> = shakmaty::Position::legal_moves(&shakmaty::Chess::default())
            .into_iter()
            .collect();
        let mut tree = Tree::default();
        tree.expand(ROOT, &[(moves[0], 0.6), (moves[1], 0.4)]);
        let (a, b) = (1, 2);
        tree.expand(a, &[(moves[2], 0.5), (moves[3], 0.5)]);
        tree.expand(b, &[(moves[4], 0.5), (moves[5], 0.5)]);
        let proof = |value, plies| Some(Proof { value, plies });
        // A reply to `a` wins for its mover: `a` is lost for ours, one ply further.
        tree.node_mut(3).proof = proof(1, 0);
        tree.propagate_proof(&[ROOT, a, 3]);
        assert_eq!(tree.node(a).proof, proof(-1, 1));
        // One reply to `b` proven lost for its mover says nothing while the other is open...
        tree.node_mut(5).proof = proof(-1, 1);
        tree.propagate_proof(&[ROOT, b, 5]);
        assert_eq!(tree.node(b).proof, None);
        // ...and with both lost, `b` wins, the loser choosing the longer loss.
        tree.node_mut(6).proof = proof(-1, 3);
        tree.propagate_proof(&[ROOT, b, 6]);
        assert_eq!(tree.node(b).proof, proof(1, 4));
        // The root is never proven; its ranking puts the win first and the loss last.
        assert_eq!(tree.node(ROOT).proof, None);
        tree.node_mut(a).visits = 50;
        assert_eq!(tree.ranked_children(ROOT), [b, a]);
        // A draw among lost moves is the best choice.
        tree.node_mut(5).proof = proof(0, 0);
        tree.node_mut(b).proof = None;
        tree.propagate_proof(&[ROOT, b, 5]);
        assert_eq!(tree.node(b).proof, proof(0, 1));
    }

    #[test]
    fn a_two_fold_draw_is_taken_back_once_its_cycle_starts_above_the_root() {
        let moves: Vec<Move> = shakmaty::Position::legal_moves(&shakmaty::Chess::default())
            .into_iter()
            .collect();
        // root → 1 → 2 → 3 → 4 → 5, each the only child; 5 a two-fold draw of a 4-ply cycle
        // (it repeats the position at 1), visited 3 times; 4 once more by the network (v 0.5).
        let mut tree = Tree::default();
        for parent in 0..5 {
            tree.expand(parent, &[(moves[0], 1.0)]);
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
        let kept = tree.subtree(1);
        assert_eq!(kept.node(4).two_fold, 4);
        assert_eq!(kept.node(ROOT).visits, 5);
        // From 2 it lies 3 plies down and repeats a position above the root: taken back.
        let sub = tree.subtree(2);
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
        let position = shakmaty::Chess::default();
        let moves: Vec<Move> = shakmaty::Position::legal_moves(&position)
            .into_iter()
            .collect();
        let mut tree = Tree::default();
        let children: Vec<_> = moves.iter().map(|&m| (m, 0.05)).collect();
        tree.expand(ROOT, &children);
        let child = tree.children(ROOT).start + 3;
        tree.expand(child, &[(moves[0], 0.5), (moves[1], 0.5)]);
        for (i, index) in tree.children(child).enumerate() {
            tree.node_mut(index).visits = 10 + i as u32;
        }
        let sub = tree.subtree(child);
        assert_eq!(sub.nodes.len(), 3);
        assert!(sub.node(ROOT).mv.is_none());
        let visits: Vec<u32> = sub.children(ROOT).map(|c| sub.node(c).visits).collect();
        assert_eq!(visits, [10, 11]);
        assert_eq!(sub.best_child(ROOT), Some(2));
    }
}
