//! Evaluations that read only some policy logits: a search needs each position's legal moves'
//! (about 30 of lc0's 1858), and copying the rest out of a GPU's download buffer costs more
//! than the search's whole use of them (lc0's search, likewise, reads its legal moves' logits
//! straight from its pinned buffer).

use shakmaty::Move;

use super::BatchOutput;
use super::finite::{NonFinite, check_layer, first_non_finite};
use crate::board::POLICY_SIZE;

/// Room for a position's legal moves (about a middlegame's number).
const MOVES_PER_POSITION: usize = 40;

/// The policy indices (lc0's 1858-move encoding) whose logits a caller reads, per position.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyPicks {
    indices: Vec<u16>,
    /// Where each position's indices end in `indices`.
    ends: Vec<u32>,
}

impl PolicyPicks {
    /// Room for `positions` positions of about `per_position` indices each.
    pub fn with_capacity(positions: usize, per_position: usize) -> Self {
        Self {
            indices: Vec::with_capacity(positions * per_position),
            ends: Vec::with_capacity(positions),
        }
    }

    /// Adds the next position's indices.
    ///
    /// # Panics
    /// If an index is not below 1858: indices come from the move encoding, which makes no
    /// other (as slicing a logit vector at such an index would panic).
    pub fn push(&mut self, indices: impl IntoIterator<Item = usize>) {
        for index in indices {
            assert!(
                index < POLICY_SIZE,
                "policy index {index} is not below {POLICY_SIZE}"
            );
            self.indices.push(index as u16);
        }
        self.ends.push(self.indices.len() as u32);
    }

    /// The picks a search makes: each position's legal moves, paired with their policy
    /// indices.
    pub fn of_legal_moves<'m>(
        positions: impl ExactSizeIterator<Item = &'m [(Move, usize)]>,
    ) -> Self {
        let mut picks = Self::with_capacity(positions.len(), MOVES_PER_POSITION);
        for legal in positions {
            picks.push(legal.iter().map(|&(_, index)| index));
        }
        picks
    }

    /// The number of positions.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// All indices, position after position.
    pub fn total(&self) -> usize {
        self.indices.len()
    }

    /// Where position `i`'s indices lie among all of them.
    pub fn range(&self, i: usize) -> std::ops::Range<usize> {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        start..self.ends[i] as usize
    }

    /// Every index, position after position.
    pub fn indices(&self) -> &[u16] {
        &self.indices
    }

    /// Where each position's indices end among all of them.
    pub fn ends(&self) -> &[u32] {
        &self.ends
    }

    /// Position `i`'s indices.
    pub fn of(&self, i: usize) -> &[u16] {
        &self.indices[self.range(i)]
    }

    /// The picks of positions `rows` (a part of a batch given to one GPU).
    pub fn rows(&self, rows: std::ops::Range<usize>) -> Self {
        let mut part = Self::with_capacity(rows.len(), 0);
        for i in rows {
            part.push(self.of(i).iter().map(|&index| usize::from(index)));
        }
        part
    }
}

/// The outputs of a batch with only the picked policy logits: position `i`'s logits in the
/// order of its picks.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PickedOutput {
    /// W − L (or the tanh value of a non-WDL network).
    pub q: Vec<f32>,
    /// Draw probability (0 for a non-WDL network).
    pub d: Vec<f32>,
    /// Moves left in plies (0 without a moves-left head).
    pub m: Vec<f32>,
    /// The picked logits, position after position.
    pub logits: Vec<f32>,
    /// Where each position's logits end in `logits`.
    ends: Vec<u32>,
}

impl PickedOutput {
    /// Assembles the outputs; `logits` holds `picks.total()` values in the picks' order.
    pub fn new(
        q: Vec<f32>,
        d: Vec<f32>,
        m: Vec<f32>,
        logits: Vec<f32>,
        picks: &PolicyPicks,
    ) -> Self {
        debug_assert_eq!(logits.len(), picks.total());
        Self {
            q,
            d,
            m,
            logits,
            ends: picks.ends.clone(),
        }
    }

    /// Picks from a batch's full outputs.
    pub fn from_full(out: BatchOutput, picks: &PolicyPicks) -> Self {
        let logits = (0..picks.len())
            .flat_map(|i| {
                let policy = out.policy_of(i);
                picks
                    .of(i)
                    .iter()
                    .map(move |&index| policy[usize::from(index)])
            })
            .collect();
        Self::new(out.q, out.d, out.m, logits, picks)
    }

    pub fn len(&self) -> usize {
        self.q.len()
    }

    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Win, draw and loss probabilities of position `i`.
    pub fn wdl_of(&self, i: usize) -> [f32; 3] {
        super::wdl(self.q[i], self.d[i])
    }

    /// Position `i`'s picked logits.
    pub fn logits_of(&self, i: usize) -> &[f32] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.logits[start..self.ends[i] as usize]
    }

    /// Appends another part of the same batch (the next positions).
    pub fn extend(&mut self, part: Self) {
        let offset = self.logits.len() as u32;
        self.q.extend(part.q);
        self.d.extend(part.d);
        self.m.extend(part.m);
        self.logits.extend(part.logits);
        self.ends
            .extend(part.ends.into_iter().map(|end| end + offset));
    }

    /// Checks every value: Q, D, M and the picked logits (the first non-finite one named
    /// with its head and position).
    pub fn check_finite(&self) -> Result<(), NonFinite> {
        check_layer(&self.q, 1, "value head (Q)")?;
        check_layer(&self.d, 1, "value head (D)")?;
        check_layer(&self.m, 1, "moves-left head")?;
        match first_non_finite(&self.logits) {
            None => Ok(()),
            Some(at) => Err(NonFinite {
                layer: "policy head".to_owned(),
                position: self.ends.partition_point(|&end| end as usize <= at),
            }),
        }
    }
}

/// The softmax of logits at `temperature`, as lc0 computes its priors (the maximum subtracted
/// first).
pub fn softmax(logits: &[f32], temperature: f32) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let exps: Vec<f32> = logits
        .iter()
        .map(|&logit| ((logit - max) / temperature).exp())
        .collect();
    let sum: f32 = exps.iter().sum();
    exps.into_iter().map(|e| e / sum).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picks(lists: &[&[usize]]) -> PolicyPicks {
        let mut picks = PolicyPicks::default();
        for list in lists {
            picks.push(list.iter().copied());
        }
        picks
    }

    /// The outputs of the batch's positions `rows`, whose logit at (position p, index k) is
    /// p·10000 + k: every value names itself.
    fn full(rows: std::ops::Range<usize>) -> BatchOutput {
        BatchOutput {
            q: rows.clone().map(|p| p as f32 / 10.0).collect(),
            d: vec![0.25; rows.len()],
            m: vec![40.0; rows.len()],
            policy: rows
                .flat_map(|p| (0..POLICY_SIZE).map(move |k| (p * 10_000 + k) as f32))
                .collect(),
        }
    }

    #[test]
    fn each_position_gets_its_own_logits_in_the_order_picked() {
        let picks = picks(&[&[1857, 0, 5], &[], &[42, 42, 7]]);
        let out = PickedOutput::from_full(full(0..3), &picks);
        assert_eq!(out.logits_of(0), [1857.0, 0.0, 5.0]);
        assert_eq!(out.logits_of(1), [] as [f32; 0]);
        assert_eq!(out.logits_of(2), [20_042.0, 20_042.0, 20_007.0]);
        assert_eq!(out.q, [0.0, 0.1, 0.2]);
        assert_eq!(picks.of(2), [42, 42, 7]);
        assert_eq!(picks.rows(1..3), self::picks(&[&[], &[42, 42, 7]]));
    }

    #[test]
    fn parts_join_into_the_whole() {
        let all = picks(&[&[3, 4], &[5], &[6, 7, 8], &[9]]);
        let mut joined = PickedOutput::from_full(full(0..2), &all.rows(0..2));
        joined.extend(PickedOutput::from_full(full(2..4), &all.rows(2..4)));
        assert_eq!(joined, PickedOutput::from_full(full(0..4), &all));
        assert_eq!(joined.logits_of(2), [20_006.0, 20_007.0, 20_008.0]);
    }

    #[test]
    fn a_non_finite_picked_logit_is_named_with_its_position() {
        let picks = picks(&[&[1, 2], &[], &[3]]);
        let mut out = PickedOutput::from_full(full(0..3), &picks);
        assert_eq!(out.check_finite(), Ok(()));
        out.logits[2] = f32::NAN;
        let error = out.check_finite().unwrap_err();
        assert_eq!((error.layer.as_str(), error.position), ("policy head", 2));
        out.d[1] = f32::INFINITY;
        assert_eq!(out.check_finite().unwrap_err().layer, "value head (D)");
    }

    #[test]
    #[should_panic(expected = "policy index 1858 is not below 1858")]
    fn an_index_past_the_policy_is_refused() {
        picks(&[&[1858]]);
    }

    #[test]
    fn softmax_hand_computed() {
        // Logits 0, ln 3, ln 2: probabilities 1/6, 3/6, 2/6; at temperature 2, √1 : √3 : √2.
        let p = softmax(&[0.0, 3f32.ln(), 2f32.ln()], 1.0);
        for (got, want) in p.iter().zip([1.0 / 6.0, 0.5, 1.0 / 3.0]) {
            assert!((got - want).abs() < 1e-6, "{p:?}");
        }
        let p = softmax(&[0.0, 3f32.ln(), 2f32.ln()], 2.0);
        let total = 1.0 + 3f32.sqrt() + 2f32.sqrt();
        for (got, want) in p.iter().zip([1.0, 3f32.sqrt(), 2f32.sqrt()]) {
            assert!((got - want / total).abs() < 1e-6, "{p:?}");
        }
        assert!(softmax(&[], 1.0).is_empty());
    }
}
