//! Storage for the tree that grows in fixed chunks: a growing tree never moves what it already
//! holds (a `Vec` doubling would copy the whole tree each time), and each chunk's memory is
//! touched only as it fills.

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

    pub fn push(&mut self, item: T) -> u32 {
        self.extend(std::iter::once(item))
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(arena.push(7), second + 20);
    }
}
