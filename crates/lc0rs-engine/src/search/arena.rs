//! Storage for the tree that grows in fixed chunks: a growing tree never moves what it already
//! holds (a `Vec` doubling would copy the whole tree each time). [`Arena`] is grown by one
//! thread at a time and touches each chunk's memory only as it fills; [`SharedArena`] is grown
//! by several threads at once (the walkers of one pass's subtrees each give nodes to the
//! children they visit first).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// Items in chunks of [`CHUNK`]; an item's index names its chunk (high bits) and its place
/// there (low bits), so indices stay valid as the arena grows.
#[derive(Debug, Clone)]
pub(super) struct Arena<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

const CHUNK_BITS: u32 = 16;
/// Items per chunk: large enough that the tail a run of items leaves unused (at most the 218
/// children of one node) is negligible.
const CHUNK: usize = 1 << CHUNK_BITS;

impl<T> Default for Arena<T> {
    fn default() -> Self {
        Self {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Arena<T> {
    /// Appends `items` as one run within a chunk (so that they can be read back as a slice)
    /// and returns the index of the first.
    pub fn extend(&mut self, items: impl ExactSizeIterator<Item = T>) -> u32 {
        let n = items.len();
        assert!(n <= CHUNK, "a run of {n} items exceeds a chunk");
        if self.chunks.last().is_none_or(|c| c.len() + n > CHUNK) {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        let number = self.chunks.len() - 1;
        let chunk = &mut self.chunks[number];
        let start = u32::try_from(number << CHUNK_BITS | chunk.len())
            .expect("the tree's indices fit 32 bits");
        chunk.extend(items);
        self.len += n;
        start
    }

    /// The items stored (not counting the unused chunk tails).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn get(&self, index: u32) -> &T {
        &self.chunks[(index >> CHUNK_BITS) as usize][index as usize & (CHUNK - 1)]
    }

    pub fn get_mut(&mut self, index: u32) -> &mut T {
        &mut self.chunks[(index >> CHUNK_BITS) as usize][index as usize & (CHUNK - 1)]
    }

    /// The run of `len` items from `start` (as [`Arena::extend`] stored it).
    pub fn run(&self, start: u32, len: usize) -> &[T] {
        if len == 0 {
            return &[];
        }
        let offset = start as usize & (CHUNK - 1);
        &self.chunks[(start >> CHUNK_BITS) as usize][offset..offset + len]
    }
}

/// Items in chunks of [`CHUNK`] as [`Arena`]'s, added through a shared reference by several
/// threads at once: an item is taken from a chunk made whole up front (each slot holding
/// `T::default()`), so the items' own fields carry whatever a thread sets after taking one
/// (atomics). A new arena writes its chunk table (1.5 MiB) and first chunk (2.6 MiB of nodes):
/// tenths of a millisecond a new tree, where a second level of table, tried, added 3 % to a
/// search's instructions (callgrind, the `random` backend, 20,000 nodes).
pub(super) struct SharedArena<T> {
    /// Every chunk the 32-bit indices can name, each made when its first item is taken.
    chunks: Box<[OnceLock<Box<[T]>>]>,
    /// Items taken.
    len: AtomicU32,
}

/// The chunks 32-bit indices can name.
const MAX_CHUNKS: usize = 1 << (32 - CHUNK_BITS);

impl<T: Default> Default for SharedArena<T> {
    fn default() -> Self {
        Self {
            chunks: (0..MAX_CHUNKS).map(|_| OnceLock::new()).collect(),
            len: AtomicU32::new(0),
        }
    }
}

impl<T> std::fmt::Debug for SharedArena<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedArena")
            .field("len", &self.len.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<T: Default> SharedArena<T> {
    /// Takes the next item (`T::default()` until the caller sets it) and returns its index
    /// with it; safe from several threads at once.
    pub fn take(&self) -> (u32, &T) {
        let index = self.len.fetch_add(1, Ordering::Relaxed);
        assert!(index != u32::MAX, "the tree's indices fit 32 bits");
        let chunk = self.chunks[(index >> CHUNK_BITS) as usize]
            .get_or_init(|| (0..CHUNK).map(|_| T::default()).collect());
        (index, &chunk[index as usize & (CHUNK - 1)])
    }

    /// The items taken.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed) as usize
    }

    /// Item `index`, taken earlier (by this thread, or by another before a synchronisation
    /// that ordered it before this read: a lock, or the end of a task the reader waited for).
    pub fn get(&self, index: u32) -> &T {
        let chunk = self.chunks[(index >> CHUNK_BITS) as usize]
            .get()
            .expect("an index names an item taken");
        &chunk[index as usize & (CHUNK - 1)]
    }

    pub fn get_mut(&mut self, index: u32) -> &mut T {
        let chunk = self.chunks[(index >> CHUNK_BITS) as usize]
            .get_mut()
            .expect("an index names an item taken");
        &mut chunk[index as usize & (CHUNK - 1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_arena_hands_out_each_index_once_across_threads() {
        let arena: SharedArena<AtomicU32> = SharedArena::default();
        let per_thread = CHUNK as u32 / 2 + 7;
        let taken: Vec<Vec<u32>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4u32)
                .map(|t| {
                    let arena = &arena;
                    scope.spawn(move || {
                        (0..per_thread)
                            .map(|i| {
                                let (index, item) = arena.take();
                                item.store(t * per_thread + i, Ordering::Relaxed);
                                index
                            })
                            .collect()
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let mut all: Vec<u32> = taken.iter().flatten().copied().collect();
        all.sort_unstable();
        // Two chunks and more filled without a gap or a repeat, each item as its taker set it.
        assert_eq!(all, (0..4 * per_thread).collect::<Vec<u32>>());
        assert_eq!(arena.len(), all.len());
        for (t, indices) in (0u32..).zip(&taken) {
            for (i, &index) in (0u32..).zip(indices) {
                assert_eq!(arena.get(index).load(Ordering::Relaxed), t * per_thread + i);
            }
        }
    }

    #[test]
    fn runs_stay_whole_and_indices_stay_valid_across_chunks() {
        let mut arena = Arena::default();
        let first = arena.extend(0..CHUNK as u32 - 10);
        assert_eq!(first, 0);
        // 20 items do not fit the first chunk's tail: they start the second chunk.
        let second = arena.extend(0..20);
        assert_eq!(second, 1 << CHUNK_BITS);
        assert_eq!(arena.run(second, 20), (0..20).collect::<Vec<u32>>());
        assert_eq!(*arena.get(first + 5), 5);
        *arena.get_mut(second + 3) = 99;
        assert_eq!(arena.run(second, 4), [0, 1, 2, 99]);
        assert_eq!(arena.len(), CHUNK + 10);
        assert_eq!(arena.extend(std::iter::once(7)), second + 20);
    }
}
