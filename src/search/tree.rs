//! The search tree: nodes in one arena, each node's children contiguous, values stored from
//! the point of view of the player who made the move into the node.

use std::ops::Range;

use shakmaty::Move;

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
    /// Playouts on their way through this node, not yet backed up (virtual loss).
    pub in_flight: u32,
    /// The children, once expanded.
    pub children: Range<u32>,
    pub expanded: bool,
    /// The game result here for the player who made `mv`, when the game is over.
    pub terminal: Option<f32>,
}

impl Node {
    fn new(mv: Option<Move>, prior: f32) -> Self {
        Self {
            mv,
            prior,
            visits: 0,
            value_sum: 0.0,
            in_flight: 0,
            children: 0..0,
            expanded: false,
            terminal: None,
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

    /// Adds the children of `index` with their priors, most likely first.
    pub fn expand(&mut self, index: u32, mut moves: Vec<(Move, f32)>) {
        moves.sort_by(|a, b| b.1.total_cmp(&a.1));
        let start = self.nodes.len() as u32;
        let end = start + moves.len() as u32;
        self.nodes
            .extend(moves.into_iter().map(|(m, p)| Node::new(Some(m), p)));
        let node = self.node_mut(index);
        node.children = start..end;
        node.expanded = true;
    }

    /// Adds one playout through `path` (root first) and takes its virtual loss back: `value`
    /// is for the player who moved into the last node, and flips sign at each level up.
    pub fn back_up(&mut self, path: &[u32], mut value: f32) {
        for &index in path.iter().rev() {
            let node = self.node_mut(index);
            node.visits += 1;
            node.value_sum += f64::from(value);
            node.in_flight -= 1;
            value = -value;
        }
    }

    /// Takes back the virtual loss of a playout that will not be evaluated.
    pub fn cancel(&mut self, path: &[u32]) {
        for &index in path {
            self.node_mut(index).in_flight -= 1;
        }
    }

    /// The child of `index` with the most visits (ties: the better value, then the prior).
    pub fn best_child(&self, index: u32) -> Option<u32> {
        self.children(index).max_by(|&a, &b| {
            let (a, b) = (self.node(a), self.node(b));
            a.visits
                .cmp(&b.visits)
                .then(a.q().total_cmp(&b.q()))
                .then(a.prior.total_cmp(&b.prior))
        })
    }

    /// The principal variation from `index`: most-visited children while they have visits.
    pub fn principal_variation(&self, mut index: u32) -> Vec<Move> {
        let mut pv = Vec::new();
        while let Some(child) = self.best_child(index) {
            let node = self.node(child);
            if node.visits == 0 {
                break;
            }
            pv.extend(node.mv);
            index = child;
        }
        pv
    }

    /// The subtree under `index` as a tree of its own (for reuse after a move).
    pub fn subtree(&self, index: u32) -> Tree {
        let mut nodes = vec![self.node(index).clone()];
        nodes[0].mv = None;
        let mut next = 0;
        while next < nodes.len() {
            let old = nodes[next].children.clone();
            let start = nodes.len() as u32;
            nodes.extend_from_slice(&self.nodes[old.start as usize..old.end as usize]);
            nodes[next].children = start..nodes.len() as u32;
            next += 1;
        }
        Tree { nodes }
    }

    /// The child of `index` reached by `mv`.
    pub fn child_by_move(&self, index: u32, mv: &Move) -> Option<u32> {
        self.children(index)
            .find(|&c| self.node(c).mv.as_ref() == Some(mv))
    }
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
    fn a_subtree_keeps_its_shape_and_counts() {
        let position = shakmaty::Chess::default();
        let moves: Vec<Move> = shakmaty::Position::legal_moves(&position)
            .into_iter()
            .collect();
        let mut tree = Tree::default();
        tree.expand(ROOT, moves.iter().map(|&m| (m, 0.05)).collect());
        let child = tree.children(ROOT).start + 3;
        tree.expand(child, moves[..2].iter().map(|&m| (m, 0.5)).collect());
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
