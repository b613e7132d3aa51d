//! The buffers every pass shares the shape of: a batch's input planes, uploaded in one copy,
//! and its outputs (Q, D, M and the policy logits), brought back in one.

use std::mem::size_of;

use half::f16;

use crate::board::{INPUT_PLANES, POLICY_SIZE};
use crate::chess::InputPlanes;
use crate::gpu::{DevicePtr, GpuBuffer, GpuDevice, GpuResult};

pub const HALF: usize = size_of::<f16>();
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
}

/// Bytes of one position's Q, D and M.
pub const FINISHED_BYTES: usize = 3 * size_of::<f32>();
/// Bytes of one position's policy logits.
pub const POLICY_BYTES: usize = POLICY_SIZE * size_of::<f32>();

impl IoBuffers {
    pub fn new(device: &dyn GpuDevice, max_batch: usize) -> GpuResult<Self> {
        Ok(Self {
            inputs: device.alloc(max_batch * INPUT_PLANES * INPUT_PLANE_BYTES)?,
            outputs: device.alloc(max_batch * (FINISHED_BYTES + POLICY_BYTES))?,
        })
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

    pub fn all(&self) -> [&GpuBuffer; 2] {
        [&self.inputs, &self.outputs]
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
            let planes = || batch.iter().flatten();
            masks[batch.len() * INPUT_PLANES * size_of::<u64>()..].fill(0);
            for (slot, plane) in masks.chunks_exact_mut(size_of::<u64>()).zip(planes()) {
                slot.copy_from_slice(&plane.mask.to_le_bytes());
            }
            for (slot, plane) in values.chunks_exact_mut(size_of::<f32>()).zip(planes()) {
                slot.copy_from_slice(&plane.value.to_le_bytes());
            }
        })
}
