//! The batch sizes passes run at: a search meets every size up to its minibatch, so each call
//! is padded to one of a few dozen sizes that are captured and tuned ahead of it.

/// The batch size a call of `batch` positions runs at: `batch` below 16; above that, `batch`
/// rounded up to a multiple of an eighth of the power of two at or below it (at most 12.5 %
/// padding: 17 → 18, 100 → 104, 252 → 256, 257 → 288), eight sizes per doubling; never above
/// `max_batch`.
/// A search meets every size up to its minibatch (collisions cut batches short); padded,
/// those are a few dozen sizes, each captured and tuned once (`Backend::prepare` does it
/// before a search), instead of a graph capture and a round of GEMM algorithm timing at every
/// new size.
pub fn padded_batch(batch: usize, max_batch: usize) -> usize {
    let power = 1usize << batch.max(1).ilog2();
    let step = (power / 8).max(1);
    batch.next_multiple_of(step).min(max_batch)
}

/// The distinct sizes that batches of 1 to `largest` positions run at (padded within
/// `max_batch`), ascending.
pub fn padded_sizes(largest: usize, max_batch: usize) -> Vec<usize> {
    let mut sizes: Vec<usize> = (1..=largest.min(max_batch))
        .map(|batch| padded_batch(batch, max_batch))
        .collect();
    sizes.dedup();
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_padded_by_at_most_an_eighth_to_eight_sizes_per_doubling() {
        let cases = [
            (1, 1),
            (15, 15),
            (16, 16),
            (17, 18),
            (100, 104),
            (252, 256),
            (256, 256),
        ];
        for (batch, padded) in cases
            .into_iter()
            .chain([(257, 288), (1000, 1024), (1024, 1024)])
        {
            assert_eq!(padded_batch(batch, 1024), padded, "batch {batch}");
        }
        // Never above the buffers' size.
        assert_eq!(padded_batch(300, 300), 300);
        assert_eq!(padded_batch(1000, 1000), 1000);
        for batch in 1..=4096 {
            let p = padded_batch(batch, 4096);
            assert!(
                p >= batch && (p - batch) * 8 <= batch,
                "batch {batch} padded to {p}"
            );
        }
        let expected: Vec<usize> = (1..=16).chain((18..=32).step_by(2)).collect();
        assert_eq!(padded_sizes(32, 1024), expected);
        // A largest batch between two sizes is prepared at the size it runs at: the default
        // minibatch on an H200 (2 × 132 SMs = 264) runs at 288.
        assert_eq!(padded_sizes(17, 1024).last(), Some(&18));
        assert_eq!(padded_sizes(264, 1024).last(), Some(&288));
        assert_eq!(padded_sizes(264, 260).last(), Some(&260));
    }
}
