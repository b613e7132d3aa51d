//! What the shared executor (lanes, graphs per batch size, input upload, output copies,
//! profiling) asks of a network family: its activation buffers and its pass. The attention
//! body and the residual tower each implement it once.

use std::fmt::Display;

use super::io::IoBuffers;
use super::ops::Ops;
use super::plan::PassPlan;
use crate::gpu::{GpuBuffer, GpuDevice, GpuResult};
use crate::weights::format::NetFormat;

/// One network on the device, its weights uploaded, ready to enqueue passes.
pub trait NetworkPass: Send + Sync + 'static {
    /// A lane's activation buffers for this network.
    type Buffers: Send + 'static;

    /// What the pass runs at one batch size: the choices every pass shares (a [`PassPlan`]) and
    /// the network family's own; its `Display` names them.
    type Plan: AsRef<PassPlan> + Display + Send + Sync + 'static;

    /// The plan of a pass at `pass.batch` positions on the device `pass` describes.
    fn plan(&self, pass: PassPlan) -> GpuResult<Self::Plan>;

    /// Activation buffers for up to `max_batch` positions (uninitialised).
    fn buffers(&self, device: &dyn GpuDevice, max_batch: usize) -> GpuResult<Self::Buffers>;

    /// Every buffer of `buffers`, for filling and counting.
    fn each_buffer(buffers: &Self::Buffers) -> Vec<&GpuBuffer>;

    /// Enqueues the pass `plan` describes (its batch of positions, whose inputs are in `io`;
    /// `ops` runs on `plan`'s shared part); it leaves the policy logits and (Q, D, M) in `io`'s
    /// outputs. No host synchronisation.
    ///
    /// # Safety
    /// The [device-memory contract](crate::gpu#the-device-memory-contract) for every buffer
    /// the pass touches: `io` and `buffers` were made on `ops.device`'s GPU for at least the
    /// plan's batch of positions (by [`IoBuffers::new`] and [`Self::buffers`]); they and `self`
    /// (its weights) stay allocated until the enqueued work is done and while any graph
    /// capturing it may be launched, and no other work uses `io` or `buffers` meanwhile.
    unsafe fn enqueue(
        &self,
        ops: &Ops<'_>,
        plan: &Self::Plan,
        io: &IoBuffers,
        buffers: &Self::Buffers,
    ) -> GpuResult<()>;

    /// The residual stream after the body's first layer and after each later one (eager
    /// passes over `ops.plan`'s batch, synchronised), where the network family reports it.
    ///
    /// # Safety
    /// As for [`Self::enqueue`], for `ops.plan`'s batch (nothing is captured here).
    unsafe fn layer_outputs(
        &self,
        _ops: &Ops<'_>,
        _io: &IoBuffers,
        _buffers: &Self::Buffers,
    ) -> GpuResult<Option<Vec<Vec<f32>>>> {
        Ok(None)
    }

    fn format(&self) -> &NetFormat;

    /// Whether the pass computes moves left (else M is 0).
    fn has_moves_left(&self) -> bool;
}
