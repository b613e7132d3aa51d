//! What the shared executor (lanes, graphs per batch size, input upload, output copies,
//! profiling) asks of a network family: its activation buffers and its pass. The attention
//! body and the residual tower each implement it once.

use super::ops::{IoBuffers, Ops};
use crate::gpu::{GpuBuffer, GpuDevice, GpuResult};
use crate::weights::format::NetFormat;

/// One network on the device, its weights uploaded, ready to enqueue passes.
pub trait NetworkPass: Send + Sync + 'static {
    /// A lane's activation buffers for this network.
    type Buffers: Send + 'static;

    /// Activation buffers for up to `max_batch` positions (uninitialised).
    fn buffers(&self, device: &dyn GpuDevice, max_batch: usize) -> GpuResult<Self::Buffers>;

    /// Every buffer of `buffers`, for filling and counting.
    fn each_buffer(buffers: &Self::Buffers) -> Vec<&GpuBuffer>;

    /// Enqueues the pass of `batch` positions whose inputs are in `io`; it leaves the policy
    /// logits and (Q, D, M) in `io`'s outputs. No host synchronisation.
    fn enqueue(
        &self,
        ops: &Ops<'_>,
        io: &IoBuffers,
        buffers: &Self::Buffers,
        batch: usize,
    ) -> GpuResult<()>;

    /// The residual stream after the body's first layer and after each later one (eager
    /// passes, synchronised), where the network family reports it.
    fn layer_outputs(
        &self,
        _ops: &Ops<'_>,
        _io: &IoBuffers,
        _buffers: &Self::Buffers,
        _n: usize,
    ) -> GpuResult<Option<Vec<Vec<f32>>>> {
        Ok(None)
    }

    fn format(&self) -> &NetFormat;

    /// Whether the pass computes moves left (else M is 0).
    fn has_moves_left(&self) -> bool;
}
