//! The children a split chooses among, best first. lc0 finds each block's best child and the
//! second best score by scanning the children in order of prior, up to the first one without
//! visits and the one after it (the unvisited children after it score lower still). A split
//! deals many blocks at a wide node, and each block changes only its best child's score, so
//! the children that scan reads are kept here in a heap: each block costs a pop and a push
//! instead of a scan, and chooses exactly what the scan would (the first of equal scores).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A child read by the scan, with its score.
#[derive(Debug, Clone, Copy)]
struct Ranked {
    score: f64,
    child: usize,
}

impl Ord for Ranked {
    /// By score (−0 equal to +0, as the scan compares), then the earlier child first.
    fn cmp(&self, other: &Self) -> Ordering {
        match self.score.partial_cmp(&other.score) {
            Some(Ordering::Equal) | None => other.child.cmp(&self.child),
            Some(order) => order,
        }
    }
}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ranked {}

/// The best child of a block and the best score among the others read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Choice {
    pub best: usize,
    pub second_score: Option<f64>,
}

/// The children read so far at one node, ranked.
#[derive(Default)]
pub(super) struct Ranking {
    heap: BinaryHeap<Ranked>,
    /// The next child the scan has not read.
    next: usize,
    /// The first searchable child read without visits, while it has none.
    first_unstarted: Option<usize>,
    /// The searchable child read after it, where the scan has read it (and so stops).
    after_first: Option<usize>,
}

impl Ranking {
    /// Starts on another node, keeping the heap's memory.
    pub fn reset(&mut self) {
        self.heap.clear();
        self.next = 0;
        self.first_unstarted = None;
        self.after_first = None;
    }

    /// Takes the best of `len` children out of the ranking (it goes back with its new score
    /// through [`Ranking::put_back`]) with the second best score; `read(i)` gives child `i`'s
    /// score and whether it has no visits, or `None` where it may not be searched.
    pub fn take_best(
        &mut self,
        len: usize,
        mut read: impl FnMut(usize) -> Option<(f64, bool)>,
    ) -> Option<Choice> {
        while self.after_first.is_none() && self.next < len {
            let child = self.next;
            self.next += 1;
            let Some((score, unstarted)) = read(child) else {
                continue;
            };
            self.heap.push(Ranked { score, child });
            if self.first_unstarted.is_some() {
                self.after_first = Some(child);
            } else if unstarted {
                self.first_unstarted = Some(child);
            }
        }
        let best = self.heap.pop()?;
        Some(Choice {
            best: best.child,
            second_score: self.heap.peek().map(|r| r.score),
        })
    }

    /// Returns the child taken by [`Ranking::take_best`] with its new score; `unstarted(i)`
    /// says whether child `i` still has no visits. Where the first unvisited child has taken
    /// its first visit, the scan reads on: to the next unvisited child and the one after it.
    pub fn put_back(&mut self, child: usize, score: f64, unstarted: impl Fn(usize) -> bool) {
        self.heap.push(Ranked { score, child });
        if self.first_unstarted == Some(child) && !unstarted(child) {
            self.first_unstarted = self.after_first.take().filter(|&after| unstarted(after));
        }
    }
}

/// lc0's scan itself: the best of the first `len` children (the first of equal scores) and the
/// second best score, reading them in order and stopping one past the first without visits;
/// `read` as in [`Ranking::take_best`]. Cheaper than the ranking where a node has few children
/// to read.
pub(super) fn scan(
    len: usize,
    mut read: impl FnMut(usize) -> Option<(f64, bool)>,
) -> Option<Choice> {
    let mut best: Option<(usize, f64)> = None;
    let mut second_score: Option<f64> = None;
    let mut can_exit = false;
    for i in 0..len {
        let Some((score, unstarted)) = read(i) else {
            continue;
        };
        match best {
            Some((_, b)) if score <= b => {
                if second_score.is_none_or(|s| score > s) {
                    second_score = Some(score);
                }
            }
            _ => {
                second_score = best.map(|(_, b)| b);
                best = Some((i, score));
            }
        }
        if can_exit {
            break;
        }
        can_exit = unstarted;
    }
    best.map(|(best, _)| Choice { best, second_score })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scan over whole vectors, as the tests hold the children.
    fn scan_all(score: &[f64], started: &[u32], searchable: &[bool]) -> Option<Choice> {
        scan(score.len(), |i| {
            searchable[i].then(|| (score[i], started[i] == 0))
        })
    }

    /// A xorshift stream for the cases.
    fn stream(seed: u64) -> impl FnMut() -> u64 {
        let mut state = seed | 1;
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    /// Splits as the search deals them, on random nodes: children in falling prior with
    /// some visited, some not searchable, scores with ties and signed zeros; each block takes
    /// visits from its best child's score. The ranking chooses what the scan chooses at every
    /// block.
    #[test]
    fn every_block_chooses_what_the_scan_chooses() {
        let mut next = stream(7);
        for case in 0..3000 {
            let len = 1 + (next() % 40) as usize;
            let visited = (next() % (len as u64 + 1)) as usize;
            let mut started: Vec<u32> = (0..len)
                .map(|i| {
                    if i < visited || next().is_multiple_of(9) {
                        1 + (next() % 50) as u32
                    } else {
                        0
                    }
                })
                .collect();
            let searchable: Vec<bool> = (0..len).map(|_| !next().is_multiple_of(11)).collect();
            let steps = [0.0, -0.0, 0.25, 0.5];
            let mut score: Vec<f64> = (0..len)
                .map(|i| {
                    if started[i] == 0 {
                        1.0 - i as f64 / 64.0
                    } else {
                        steps[(next() % 4) as usize] + (next() % 3) as f64 / 4.0
                    }
                })
                .collect();
            let mut ranking = Ranking::default();
            ranking.reset();
            for block in 0..60 {
                let want = scan_all(&score, &started, &searchable);
                let read = |i: usize| searchable[i].then(|| (score[i], started[i] == 0));
                let got = ranking.take_best(len, read);
                assert_eq!(got, want, "case {case}, block {block}");
                let Some(Choice { best, .. }) = got else {
                    break;
                };
                started[best] += 1 + (next() % 3) as u32;
                score[best] -= (next() % 3) as f64 / 8.0;
                ranking.put_back(best, score[best], |i| started[i] == 0);
            }
        }
    }

    #[test]
    fn equal_scores_go_to_the_earlier_child_and_signed_zeros_are_equal() {
        let mut ranking = Ranking::default();
        let scores = [0.0, 0.5, -0.0, 0.5];
        let choice = ranking.take_best(4, |i| Some((scores[i], false)));
        assert_eq!(
            choice,
            Some(Choice {
                best: 1,
                second_score: Some(0.5)
            })
        );
        ranking.put_back(1, -0.0, |_| false);
        ranking.take_best(4, |_| unreachable!("all four read"));
        let third = ranking.take_best(4, |_| unreachable!("all four read"));
        // Left: child 0 (+0), child 1 (−0) and child 2 (−0): the first of them.
        assert_eq!(third.map(|c| c.best), Some(0));
    }
}
