//! A pass's outputs read back from the device: one copy of the Q, D, M and the policy logits
//! (laid out by [`IoBuffers`](super::io::IoBuffers)), taken apart piece by piece as it lands,
//! with the finite check folded into the copy. The policy is read whole, or only the logits a
//! caller picked, straight out of the pinned piece; or, where the picks were gathered on the
//! device (`gather_picked`), the batch's Q, D, M and picked logits alone.

use std::mem::size_of;
use std::ops::Range;

use crate::backend::finite::{extend_finite, first_non_finite};
use crate::backend::{BatchOutput, PickedOutput, PolicyPicks};

use super::io::{FINISHED_BYTES, POLICY_BYTES};

/// What is kept of a batch's policy logits as they land, and the outputs made with them.
pub trait PolicySink {
    type Output;
    /// Takes the policy's bytes at offsets `landed` from its start; says whether the values
    /// it kept are all finite.
    fn take(&mut self, landed: Range<usize>, bytes: &[u8]) -> bool;
    /// The batch's outputs from its Q, D, M and what was kept; says whether the values kept
    /// last are all finite.
    fn finish(self, q: Vec<f32>, d: Vec<f32>, m: Vec<f32>) -> (Self::Output, bool);
}

/// Every logit of the batch.
pub struct AllLogits(Vec<f32>);

impl AllLogits {
    pub fn new(batch: usize) -> Self {
        // Filled once, from where it lands (no zero-filled vector first: at batch 1024 that
        // is 7.6 MB written twice).
        Self(Vec::with_capacity(batch * POLICY_BYTES / size_of::<f32>()))
    }
}

impl PolicySink for AllLogits {
    type Output = BatchOutput;

    fn take(&mut self, _landed: Range<usize>, bytes: &[u8]) -> bool {
        extend_f32(&mut self.0, bytes)
    }

    fn finish(self, q: Vec<f32>, d: Vec<f32>, m: Vec<f32>) -> (BatchOutput, bool) {
        (
            BatchOutput {
                q,
                d,
                m,
                policy: self.0,
            },
            true,
        )
    }
}

/// The logits a caller picked, in the picks' order, copied straight out of each piece (NaN
/// until they land, so that one never read is caught as non-finite).
pub struct PickedLogits<'p> {
    picks: &'p PolicyPicks,
    logits: Vec<f32>,
}

impl<'p> PickedLogits<'p> {
    pub fn new(picks: &'p PolicyPicks) -> Self {
        Self {
            picks,
            logits: vec![f32::NAN; picks.total()],
        }
    }
}

impl PolicySink for PickedLogits<'_> {
    type Output = PickedOutput;

    fn take(&mut self, landed: Range<usize>, bytes: &[u8]) -> bool {
        if landed.is_empty() {
            return true;
        }
        let first = landed.start / POLICY_BYTES;
        let last = (landed.end - 1) / POLICY_BYTES;
        for position in first..=last {
            let slots = &mut self.logits[self.picks.range(position)];
            for (slot, &index) in slots.iter_mut().zip(self.picks.of(position)) {
                let at = position * POLICY_BYTES + usize::from(index) * size_of::<f32>();
                if landed.contains(&at) {
                    let from = at - landed.start;
                    *slot = bytemuck::pod_read_unaligned(&bytes[from..from + size_of::<f32>()]);
                }
            }
        }
        true
    }

    fn finish(self, q: Vec<f32>, d: Vec<f32>, m: Vec<f32>) -> (PickedOutput, bool) {
        let finite = first_non_finite(&self.logits).is_none();
        (PickedOutput::new(q, d, m, self.logits, self.picks), finite)
    }
}

/// Takes apart the outputs `gather_picked` gathered for a batch's picks as they land: the
/// batch's Q, D, M (`[n][3]` f32), then its picked logits.
pub struct GatheredReader<'p> {
    picks: &'p PolicyPicks,
    values: Vec<f32>,
    finite: bool,
}

impl<'p> GatheredReader<'p> {
    pub fn new(picks: &'p PolicyPicks) -> Self {
        Self {
            picks,
            values: Vec::with_capacity(3 * picks.len() + picks.total()),
            finite: true,
        }
    }

    /// The bytes to download.
    pub fn bytes(&self) -> usize {
        self.picks.len() * FINISHED_BYTES + self.picks.total() * size_of::<f32>()
    }

    /// Takes the next piece that landed (in order, whole f32 values).
    pub fn take(&mut self, piece: &[u8]) {
        self.finite &= extend_f32(&mut self.values, piece);
    }

    /// The batch's outputs, and whether they are all finite.
    pub fn finish(mut self) -> (PickedOutput, bool) {
        debug_assert_eq!(
            self.values.len() * size_of::<f32>(),
            self.bytes(),
            "outputs read in part"
        );
        let logits = self.values.split_off(3 * self.picks.len());
        let [q, d, m] = finished_columns(&self.values);
        (PickedOutput::new(q, d, m, logits, self.picks), self.finite)
    }
}

/// The Q, D and M columns of `[n][3]` values.
fn finished_columns(finished: &[f32]) -> [Vec<f32>; 3] {
    std::array::from_fn(|skip| finished.iter().skip(skip).step_by(3).copied().collect())
}

/// Takes apart the bytes of the outputs of a pass over `size` positions for a batch of the
/// first `batch` of them, in the order they land: the Q, D, M of all `size` (the batch's are
/// kept), then the batch's policy logits, given to `policy`.
pub struct OutputReader<S> {
    batch: usize,
    size: usize,
    /// Bytes taken so far.
    taken: usize,
    finished: Vec<f32>,
    policy: S,
    finite: bool,
}

impl<S: PolicySink> OutputReader<S> {
    pub fn new(batch: usize, size: usize, policy: S) -> Self {
        debug_assert!(batch <= size, "a batch of {batch} in a pass of {size}");
        Self {
            batch,
            size,
            taken: 0,
            finished: Vec::with_capacity(batch * 3),
            policy,
            finite: true,
        }
    }

    /// The bytes to download: every Q, D, M of the pass, then the batch's policy.
    pub fn bytes(&self) -> usize {
        self.size * FINISHED_BYTES + self.batch * POLICY_BYTES
    }

    /// Takes the next piece that landed (the pieces come in order, each a whole number of
    /// f32 values).
    pub fn take(&mut self, piece: &[u8]) {
        let here = self.taken..self.taken + piece.len();
        self.taken = here.end;
        let policy_start = self.size * FINISHED_BYTES;
        let kept = within(&here, 0..self.batch * FINISHED_BYTES);
        self.finite &= extend_f32(&mut self.finished, &piece[kept]);
        let in_piece = within(&here, policy_start..self.bytes());
        // As offsets from the policy's start (an empty piece of it before the policy: 0..0).
        let start = (here.start + in_piece.start).saturating_sub(policy_start);
        let landed = start..start + in_piece.len();
        self.finite &= self.policy.take(landed, &piece[in_piece]);
    }

    /// The batch's outputs, and whether they are all finite.
    pub fn finish(self) -> (S::Output, bool) {
        debug_assert_eq!(self.taken, self.bytes(), "outputs read in part");
        let [q, d, m] = finished_columns(&self.finished);
        let (out, finite) = self.policy.finish(q, d, m);
        (out, self.finite && finite)
    }
}

/// The part of `region` (download offsets) that lies in the piece at `here`, as offsets into
/// the piece (empty where they do not meet).
fn within(here: &Range<usize>, region: Range<usize>) -> Range<usize> {
    let start = region.start.clamp(here.start, here.end);
    let end = region.end.clamp(start, here.end);
    start - here.start..end - here.start
}

/// Appends the little-endian f32 values in `bytes` and says whether all are finite (one copy
/// with the check folded in where they are 4-byte aligned, as in page-aligned staging memory).
fn extend_f32(out: &mut Vec<f32>, bytes: &[u8]) -> bool {
    match bytemuck::try_cast_slice::<u8, f32>(bytes) {
        Ok(values) => extend_finite(out, values),
        Err(_) => {
            let from = out.len();
            out.extend(
                bytes
                    .chunks_exact(size_of::<f32>())
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
            first_non_finite(&out[from..]).is_none()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::POLICY_SIZE;

    #[test]
    fn f32_results_are_read_from_aligned_and_unaligned_bytes() {
        let values = [1.5f32, -0.25, 3.0e-8, f32::MAX, 0.0];
        // Bytes written independently of extend_f32: each value's little-endian encoding.
        let mut bytes = vec![0u8];
        for v in values {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        let mut aligned = vec![0u32; values.len()];
        bytemuck::cast_slice_mut::<u32, u8>(&mut aligned).copy_from_slice(&bytes[1..]);
        for input in [bytemuck::cast_slice::<u32, u8>(&aligned), &bytes[1..]] {
            let mut out = vec![7.0f32];
            assert!(extend_f32(&mut out, input));
            assert_eq!(out[0], 7.0);
            assert_eq!(out[1..], values);
        }
    }

    /// The device's outputs of a pass over `size` positions, as the kernels lay them out:
    /// position p's Q, D, M are 1000p + 0, 1, 2; its logit j is p + j / 4096.
    fn device_outputs(size: usize, padded_value: f32) -> Vec<u8> {
        let mut values = Vec::new();
        for p in 0..size {
            values.extend([0.0, 1.0, 2.0].map(|k| 1000.0 * p as f32 + k));
        }
        for p in 0..size {
            values.extend((0..POLICY_SIZE).map(|j| p as f32 + j as f32 / 4096.0));
        }
        // Positions past the batch may hold anything; here non-finite values.
        values[(size - 1) * 3] = padded_value;
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    fn read(batch: usize, size: usize, bytes: &[u8], piece: usize) -> (BatchOutput, bool) {
        read_with(AllLogits::new(batch), batch, size, bytes, piece)
    }

    fn read_with<S: PolicySink>(
        sink: S,
        batch: usize,
        size: usize,
        bytes: &[u8],
        piece: usize,
    ) -> (S::Output, bool) {
        let mut reader = OutputReader::new(batch, size, sink);
        let wanted = reader.bytes();
        for chunk in bytes[..wanted].chunks(piece) {
            reader.take(chunk);
        }
        reader.finish()
    }

    #[test]
    fn a_padded_pass_is_read_for_its_batch_in_pieces_of_any_size() {
        let (batch, size) = (3, 5);
        let bytes = device_outputs(size, f32::NAN);
        for piece in [4, 8, 12, 40, 7428, 1 << 20] {
            let (out, finite) = read(batch, size, &bytes, piece);
            assert!(
                finite,
                "piece {piece}: the padded position's NaN is not the batch's"
            );
            assert_eq!(out.q, [0.0, 1000.0, 2000.0], "piece {piece}");
            assert_eq!(out.d, [1.0, 1001.0, 2001.0], "piece {piece}");
            assert_eq!(out.m, [2.0, 1002.0, 2002.0], "piece {piece}");
            assert_eq!(out.policy.len(), batch * POLICY_SIZE);
            for p in 0..batch {
                for j in [0, 1, 1857] {
                    let want = p as f32 + j as f32 / 4096.0;
                    assert_eq!(out.policy[p * POLICY_SIZE + j], want, "piece {piece}");
                }
            }
        }
    }

    #[test]
    fn picked_logits_are_read_in_pieces_of_any_size() {
        let (batch, size) = (3, 5);
        let bytes = device_outputs(size, f32::NAN);
        let mut picks = PolicyPicks::default();
        picks.push([1857, 0, 700]);
        picks.push([]);
        picks.push([5, 5, 1000, 1]);
        for piece in [4, 8, 12, 40, 7428, 7432, 1 << 20] {
            let (out, finite) = read_with(PickedLogits::new(&picks), batch, size, &bytes, piece);
            assert!(finite, "piece {piece}");
            assert_eq!(out.q, [0.0, 1000.0, 2000.0], "piece {piece}");
            assert_eq!(out.m, [2.0, 1002.0, 2002.0], "piece {piece}");
            for p in 0..batch {
                let want: Vec<f32> = picks
                    .of(p)
                    .iter()
                    .map(|&j| p as f32 + f32::from(j) / 4096.0)
                    .collect();
                assert_eq!(out.logits_of(p), want, "piece {piece}, position {p}");
            }
        }
    }

    #[test]
    fn a_non_finite_picked_logit_is_reported_and_an_unpicked_one_ignored() {
        let size = 2;
        let mut bytes = device_outputs(size, 0.5);
        // Position 1's logit 9 (not picked) and logit 3 (picked once the second time).
        let at = |j: usize| bytes.len() - (POLICY_SIZE - j) * 4;
        let (unpicked, picked) = (at(9), at(3));
        bytes[unpicked..unpicked + 4].copy_from_slice(&f32::NAN.to_le_bytes());
        bytes[picked..picked + 4].copy_from_slice(&f32::INFINITY.to_le_bytes());
        let mut picks = PolicyPicks::default();
        picks.push([3]);
        picks.push([4, 2]);
        let (_, finite) = read_with(PickedLogits::new(&picks), size, size, &bytes, 64);
        assert!(finite);
        let mut picks = PolicyPicks::default();
        picks.push([3]);
        picks.push([4, 3]);
        let (out, finite) = read_with(PickedLogits::new(&picks), size, size, &bytes, 64);
        assert!(!finite);
        assert_eq!(out.logits_of(1)[1], f32::INFINITY);
    }

    #[test]
    fn a_non_finite_output_of_the_batch_is_reported() {
        let size = 2;
        let mut bytes = device_outputs(size, 0.5);
        let (_, finite) = read(size, size, &bytes, 64);
        assert!(finite);
        // The last logit of the last position.
        let last = bytes.len() - 4;
        bytes[last..].copy_from_slice(&f32::INFINITY.to_le_bytes());
        let (out, finite) = read(size, size, &bytes, 64);
        assert!(!finite);
        assert_eq!(out.policy[2 * POLICY_SIZE - 1], f32::INFINITY);
        let (_, finite) = read(size, size, &device_outputs(size, f32::NAN), 64);
        assert!(!finite, "a NaN in the batch's own Q, D, M");
    }

    /// `gather_picked`'s array for `picks` (Q, D, M of position p: 1000p + 0, 1, 2; pick j of
    /// position p: p + index / 4096), as bytes.
    fn gathered(picks: &PolicyPicks) -> Vec<u8> {
        let mut values: Vec<f32> = (0..picks.len())
            .flat_map(|p| [0.0, 1.0, 2.0].map(|k| 1000.0 * p as f32 + k))
            .collect();
        for p in 0..picks.len() {
            values.extend(
                picks
                    .of(p)
                    .iter()
                    .map(|&j| p as f32 + f32::from(j) / 4096.0),
            );
        }
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn gathered_outputs_are_read_in_pieces_of_any_size() {
        let mut picks = PolicyPicks::default();
        picks.push([1857, 0, 700]);
        picks.push([]);
        picks.push([5, 5, 1000, 1]);
        let mut bytes = gathered(&picks);
        for piece in [4, 8, 12, 40, 1 << 20] {
            let mut reader = GatheredReader::new(&picks);
            assert_eq!(reader.bytes(), bytes.len());
            bytes.chunks(piece).for_each(|chunk| reader.take(chunk));
            let (out, finite) = reader.finish();
            assert!(finite, "piece {piece}");
            assert_eq!(out.q, [0.0, 1000.0, 2000.0], "piece {piece}");
            assert_eq!(out.d, [1.0, 1001.0, 2001.0], "piece {piece}");
            assert_eq!(out.m, [2.0, 1002.0, 2002.0], "piece {piece}");
            assert_eq!(out.logits_of(0), [1857.0 / 4096.0, 0.0, 700.0 / 4096.0]);
            assert!(out.logits_of(1).is_empty());
            assert_eq!(
                out.logits_of(2),
                [
                    2.0 + 5.0 / 4096.0,
                    2.0 + 5.0 / 4096.0,
                    2.0 + 1000.0 / 4096.0,
                    2.0 + 1.0 / 4096.0
                ]
            );
        }
        // The last picked logit non-finite.
        let last = bytes.len() - 4;
        bytes[last..].copy_from_slice(&f32::NAN.to_le_bytes());
        let mut reader = GatheredReader::new(&picks);
        reader.take(&bytes);
        let (out, finite) = reader.finish();
        assert!(!finite);
        assert!(out.logits_of(2)[3].is_nan());
    }
}
