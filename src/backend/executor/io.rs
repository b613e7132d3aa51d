//! The buffers every pass shares the shape of: a batch's input planes, uploaded in one copy,
//! and its outputs (Q, D, M and the policy logits), brought back in one; and for a caller that
//! reads only some logits, its picks and the outputs gathered for them (`gather_picked`).

use std::mem::size_of;

use half::f16;

use crate::backend::PolicyPicks;
use crate::board::{INPUT_PLANES, POLICY_SIZE};
use crate::chess::InputPlanes;
use crate::gpu::{DevicePtr, GpuBuffer, GpuDevice, GpuResult};

pub const HALF: usize = size_of::<f16>();
pub const FLOAT: usize = size_of::<f32>();
/// Bytes of one input plane on the device: its u64 mask and its f32 value.
const INPUT_PLANE_BYTES: usize = size_of::<u64>() + size_of::<f32>();

/// The buffers every pass shares the shape of: a batch's input planes and its outputs.
pub struct IoBuffers {
    /// A batch's input planes, uploaded in one copy: the n·112 masks (u64), then the n·112
    /// values (f32) right after them (see [`IoBuffers::inputs`]).
    pub inputs: GpuBuffer,
    /// The outputs of a pass over n positions, together so that one copy brings them back:
    /// `[n][3]` f32 (Q, D, M), then `[n][1858]` f32 policy logits (see
    /// [`IoBuffers::finished`], [`IoBuffers::policy`]).
    pub outputs: GpuBuffer,
    /// A batch's picks (see [`upload_picks`]): where each position's end (u32 a position),
    /// then the indices (u16 a pick).
    pub picks: GpuBuffer,
    /// The outputs `gather_picked` gathers for the picks: the batch's `[n][3]` Q, D, M, then
    /// the picked logits in the picks' order (f32).
    pub picked: GpuBuffer,
}

/// Picks a batch may have, on average, for the gathered copy back: past a position's largest
/// number of legal moves (218), so a search's batches always fit; a caller picking more is
/// read from the whole policy instead.
pub const PICKS_PER_POSITION: usize = 256;

/// Bytes of one position's Q, D and M.
pub const FINISHED_BYTES: usize = 3 * size_of::<f32>();
/// Bytes of one position's policy logits.
pub const POLICY_BYTES: usize = POLICY_SIZE * size_of::<f32>();

impl IoBuffers {
    pub fn new(device: &dyn GpuDevice, max_batch: usize) -> GpuResult<Self> {
        Ok(Self {
            inputs: device.alloc(max_batch * INPUT_PLANES * INPUT_PLANE_BYTES)?,
            outputs: device.alloc(max_batch * (FINISHED_BYTES + POLICY_BYTES))?,
            picks: device
                .alloc(max_batch * (size_of::<u32>() + PICKS_PER_POSITION * size_of::<u16>()))?,
            picked: device
                .alloc(max_batch * (FINISHED_BYTES + PICKS_PER_POSITION * size_of::<f32>()))?,
        })
    }

    /// Where a batch's pick ends and indices lie in `picks` (see [`upload_picks`]).
    pub fn picks(&self, batch: usize) -> (DevicePtr, DevicePtr) {
        (self.picks.ptr(), self.picks.at(batch * size_of::<u32>()))
    }

    /// Where the masks and the values of a pass over `batch` positions lie in `inputs`.
    pub fn inputs(&self, batch: usize) -> (DevicePtr, DevicePtr) {
        let masks = self.inputs.ptr();
        (
            masks,
            self.inputs.at(batch * INPUT_PLANES * size_of::<u64>()),
        )
    }

    /// Where a pass writes its Q, D and M: first in `outputs`, whatever its size.
    pub fn finished(&self) -> DevicePtr {
        self.outputs.ptr()
    }

    /// Where a pass over `size` positions writes its policy logits: right after its Q, D, M.
    pub fn policy(&self, size: usize) -> DevicePtr {
        self.outputs.at(size * FINISHED_BYTES)
    }

    pub fn all(&self) -> [&GpuBuffer; 4] {
        [&self.inputs, &self.outputs, &self.picks, &self.picked]
    }
}

/// Copies a batch's 112 (mask, value) pairs to the device, as lc0 sends them, laid out for a
/// pass over `size ≥ batch.len()` positions: the positions past the batch get empty masks
/// (all-zero input planes), so that a pass padded to a prepared batch size computes them
/// from defined inputs.
pub fn upload_inputs(
    device: &dyn GpuDevice,
    buffers: &mut IoBuffers,
    batch: &[InputPlanes],
    size: usize,
) -> GpuResult<()> {
    debug_assert!(
        size >= batch.len(),
        "a pass of {size} for {} positions",
        batch.len()
    );
    // One copy: every mask of the padded pass, then the batch's values, written by `fill`
    // straight into the staging memory.
    let mask_bytes = size * INPUT_PLANES * size_of::<u64>();
    let value_bytes = batch.len() * INPUT_PLANES * size_of::<f32>();
    buffers
        .inputs
        .copy_from_host_with(device, 0, mask_bytes + value_bytes, &mut |staged| {
            let (masks, values) = staged.split_at_mut(mask_bytes);
            fill_inputs(masks, values, batch);
        })
}

/// Copies a batch's picks to the device for `gather_picked`, each position's end then every
/// index, and says whether they fit (at most [`PICKS_PER_POSITION`] a position on average);
/// those that do not are left to be read from the whole policy.
pub fn upload_picks(
    device: &dyn GpuDevice,
    buffers: &mut IoBuffers,
    picks: &PolicyPicks,
) -> GpuResult<bool> {
    if picks.total() > picks.len() * PICKS_PER_POSITION {
        return Ok(false);
    }
    if picks.total() == 0 {
        // `gather_picked` reads neither ends nor indices without picks.
        return Ok(true);
    }
    let ends = bytemuck::cast_slice::<u32, u8>(picks.ends());
    let indices = bytemuck::cast_slice::<u16, u8>(picks.indices());
    buffers
        .picks
        .copy_from_host_with(device, 0, ends.len() + indices.len(), &mut |staged| {
            let (at_ends, at_indices) = staged.split_at_mut(ends.len());
            at_ends.copy_from_slice(ends);
            at_indices.copy_from_slice(indices);
        })?;
    Ok(true)
}

/// Writes the batch's masks (u64, the positions past the batch zero) and values (f32) into
/// their little-endian bytes: as typed slices where the bytes are aligned for them (pinned
/// staging memory is page-aligned; at batch 128 about 1.7× as fast as writing byte chunks),
/// else byte by byte.
fn fill_inputs(masks: &mut [u8], values: &mut [u8], batch: &[InputPlanes]) {
    let planes = || batch.iter().flatten();
    let typed = (
        bytemuck::try_cast_slice_mut::<u8, u64>(masks),
        bytemuck::try_cast_slice_mut::<u8, f32>(values),
    );
    if cfg!(target_endian = "little")
        && let (Ok(masks), Ok(values)) = typed
    {
        let (ours, padding) = masks.split_at_mut(batch.len() * INPUT_PLANES);
        padding.fill(0);
        for ((mask, value), plane) in ours.iter_mut().zip(values.iter_mut()).zip(planes()) {
            *mask = plane.mask;
            *value = plane.value;
        }
        return;
    }
    masks[batch.len() * INPUT_PLANES * size_of::<u64>()..].fill(0);
    for (slot, plane) in masks.chunks_exact_mut(size_of::<u64>()).zip(planes()) {
        slot.copy_from_slice(&plane.mask.to_le_bytes());
    }
    for (slot, plane) in values.chunks_exact_mut(size_of::<f32>()).zip(planes()) {
        slot.copy_from_slice(&plane.value.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chess::InputPlane;

    /// A batch of `n` positions whose planes are all different.
    fn batch(n: usize) -> Vec<InputPlanes> {
        (0..n)
            .map(|p| {
                std::array::from_fn(|i| InputPlane {
                    mask: (p as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i as u64,
                    value: p as f32 * 1000.0 + i as f32 * 0.5,
                })
            })
            .collect()
    }

    /// The bytes lc0's layout gives a pass over `size` positions, written out plane by plane.
    fn expected(batch: &[InputPlanes], size: usize) -> (Vec<u8>, Vec<u8>) {
        let mut masks = Vec::new();
        let mut values = Vec::new();
        for plane in batch.iter().flatten() {
            masks.extend_from_slice(&plane.mask.to_le_bytes());
            values.extend_from_slice(&plane.value.to_le_bytes());
        }
        masks.resize(size * INPUT_PLANES * size_of::<u64>(), 0);
        (masks, values)
    }

    #[test]
    fn inputs_are_written_the_same_into_aligned_and_unaligned_staging() {
        let (n, size) = (3, 5);
        let positions = batch(n);
        let (want_masks, want_values) = expected(&positions, size);
        let total = want_masks.len() + want_values.len();
        // Aligned: the bytes of a u64 buffer; unaligned: the same one byte further on.
        let mut words = vec![u64::MAX; total / size_of::<u64>() + 2];
        for offset in [0, 1] {
            let bytes =
                &mut bytemuck::cast_slice_mut::<u64, u8>(&mut words)[offset..offset + total];
            bytes.fill(0xAB);
            let (masks, values) = bytes.split_at_mut(want_masks.len());
            fill_inputs(masks, values, &positions);
            assert_eq!(masks, &want_masks[..], "masks at offset {offset}");
            assert_eq!(values, &want_values[..], "values at offset {offset}");
        }
    }
}
