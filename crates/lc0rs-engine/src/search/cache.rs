//! The NN cache: evaluations keyed by the network input (planes and position), so a position
//! reached again (by transposition, or in the next move's search) costs no backend call.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use shakmaty::Move;
use xxhash_rust::xxh3::xxh3_64;

use lc0rs::board::INPUT_PLANES;
use lc0rs::chess::InputPlanes;
use lc0rs::chess::history::HistoryEntry;

/// Bytes hashed for a key: each plane's mask and value, then the position's hash.
const KEY_BYTES: usize = INPUT_PLANES * 12 + 8;

/// What the network said about a position, as the cache keeps it: its value for the side to
/// move and one prior per legal move, in the order the position's legal moves are generated
/// (as lc0's cache keeps them), four bytes a move; [`CachedEval::children`] turns them into a
/// node's children again.
#[derive(Debug, Clone)]
pub struct CachedEval {
    pub q: f32,
    pub d: f32,
    pub priors: Box<[f32]>,
}

impl CachedEval {
    /// The children of the position whose legal moves are `legal` (in generation order), most
    /// likely first, as [`sorted_children`] made them when the position was evaluated; `None`
    /// if the count differs (another position under the same key: a 64-bit hash collision).
    pub fn children(&self, legal: &[Move]) -> Option<Vec<(Move, f32)>> {
        (legal.len() == self.priors.len()).then(|| sorted_children(&self.priors, |i| legal[i]))
    }
}

/// A node's children from its legal moves' priors (`priors[i]` the prior of `legal(i)`), most
/// likely first, equal priors in the legal moves' order (as a stable sort by prior leaves
/// them). Sorted as integers: a prior is ≥ 0, so its bits (the sign bit dropped, which a
/// softmax never sets) order as it does, and the key is their complement above the move's
/// index.
pub fn sorted_children(priors: &[f32], legal: impl Fn(usize) -> Move) -> Vec<(Move, f32)> {
    let mut keys: Vec<u64> = priors
        .iter()
        .zip(0u64..)
        .map(|(p, i)| (u64::from(!(p.to_bits() & 0x7fff_ffff)) << 32) | i)
        .collect();
    keys.sort_unstable();
    keys.into_iter()
        .map(|key| {
            let i = (key & 0xffff_ffff) as usize;
            (legal(i), priors[i])
        })
        .collect()
}

/// A bounded map; the oldest entries leave first.
pub struct NnCache {
    capacity: usize,
    /// Keyed by [`NnCache::key`], already a hash: Fx's one multiply spreads it over the table.
    entries: FxHashMap<u64, CachedEval>,
    order: VecDeque<u64>,
}

impl NnCache {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            entries: FxHashMap::default(),
            order: VecDeque::new(),
        }
    }

    /// The key of a network input: every plane, plus the position's own hash (the planes of
    /// some formats do not carry the en-passant square). XXH3, a 64-bit hash many times
    /// faster than the standard library's SipHash, which cost a quarter of the search's time.
    pub fn key(planes: &InputPlanes, position_key: u64) -> u64 {
        let mut bytes = [0u8; KEY_BYTES];
        for (plane, out) in planes.iter().zip(bytes.chunks_exact_mut(12)) {
            out[..8].copy_from_slice(&plane.mask.to_le_bytes());
            out[8..].copy_from_slice(&plane.value.to_bits().to_le_bytes());
        }
        bytes[KEY_BYTES - 8..].copy_from_slice(&position_key.to_le_bytes());
        xxh3_64(&bytes)
    }

    /// lc0's key of a position (its NN cache's): the position (board, side to move, castling
    /// and en passant, as [`HistoryEntry::key`] hashes them) and its repetitions, not the
    /// positions before it, which the network sees too.
    pub fn position_key(entry: &HistoryEntry) -> u64 {
        // The entry's key is already a hash; the odd multiplier spreads the count over it.
        entry.key ^ u64::from(entry.repetitions + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    pub fn get(&self, key: u64) -> Option<&CachedEval> {
        self.entries.get(&key)
    }

    pub fn insert(&mut self, key: u64, eval: CachedEval) {
        if self.capacity == 0 {
            return;
        }
        if self.entries.insert(key, eval).is_none() {
            self.order.push_back(key);
        }
        self.evict_beyond_capacity();
    }

    /// Drops the oldest entries until at most `capacity` remain.
    fn evict_beyond_capacity(&mut self) {
        while self.entries.len() > self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.entries.remove(&old);
            }
        }
    }

    /// How full the cache is, per mille (UCI `hashfull`).
    pub fn fill_per_mille(&self) -> u32 {
        if self.capacity == 0 {
            return 0;
        }
        (self.entries.len() as u64 * 1000 / self.capacity as u64) as u32
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Changes the bound, dropping the oldest entries if it shrank.
    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
        self.evict_beyond_capacity();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(q: f32) -> CachedEval {
        CachedEval {
            q,
            d: 0.0,
            priors: Box::new([]),
        }
    }

    #[test]
    fn the_oldest_entries_leave_first() {
        let mut cache = NnCache::new(2);
        cache.insert(1, eval(0.1));
        cache.insert(2, eval(0.2));
        cache.insert(3, eval(0.3));
        assert_eq!(cache.fill_per_mille(), 1000);
        assert!(cache.get(1).is_none());
        assert_eq!(cache.get(2).map(|e| e.q), Some(0.2));
        assert_eq!(cache.get(3).map(|e| e.q), Some(0.3));
        cache.set_capacity(1);
        assert_eq!(cache.len(), 1);
        assert!(cache.get(3).is_some());
        cache.set_capacity(0);
        cache.insert(4, eval(0.4));
        assert!(cache.is_empty());
    }

    #[test]
    fn lc0s_key_is_the_position_and_its_repetitions_and_the_exact_key_adds_the_history() {
        use lc0rs::chess::{HistoryFill, PositionHistory, encode_position};
        use lc0rs::weights::format::InputFormat;
        let keys = |spec: &str| {
            let history = PositionHistory::from_spec(spec).unwrap();
            let planes =
                encode_position(&history, InputFormat::Classical112, HistoryFill::FenOnly).planes;
            let entry = history.last();
            (
                NnCache::position_key(entry),
                NnCache::key(&planes, entry.key),
            )
        };
        // One position by two move orders: lc0's key is the same, the exact key (whose planes
        // hold the positions before) is not.
        let (a, exact_a) = keys("startpos moves g1f3 b8c6 b1c3");
        let (b, exact_b) = keys("startpos moves b1c3 b8c6 g1f3");
        assert_eq!(a, b);
        assert_ne!(exact_a, exact_b);
        // The same position again (a repetition) has another key, as in lc0.
        let (start, _) = keys("startpos");
        let (again, _) = keys("startpos moves g1f3 g8f6 f3g1 f6g8");
        assert_ne!(start, again);
        // Another side to move, or another position, another key.
        let (white_to_move, _) = keys("fen 4k3/8/8/8/8/8/8/4K3 w - - 0 1");
        let (black_to_move, _) = keys("fen 4k3/8/8/8/8/8/8/4K3 b - - 0 1");
        assert_ne!(white_to_move, black_to_move);
        assert_ne!(a, start);
    }
}
