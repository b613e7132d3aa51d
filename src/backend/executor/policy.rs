//! The attention policy head, on an attention body's output or a residual tower's (both
//! square-major `[batch·64][C]`): embedding, query and key in one GEMM, scaled `Q·Kᵀ` per
//! position, then `policy_finish` maps the 64·64 moves and the promotions to the 1858 logits.

use super::dense::{DenseGpu, dense, stacked, upload_f16, upload_i16};
use super::io::HALF;
use super::marks::{Cost, linear_cost};
use super::ops::Ops;
use super::plan::ROW_THREADS;
use crate::board::SQUARES;
use crate::chess::policy_index::attention_policy_map;
use crate::gpu::kernels::launchers;
use crate::gpu::{BatchedProduct, DevicePtr, GpuBuffer, GpuDevice, GpuResult, Launch};
use crate::weights::format::Activation;
use crate::weights::network::PolicyHead;

/// Raw attention-policy values per position (64·64 moves plus 8·24 promotion entries) that
/// `policy_finish` maps to the 1858 outputs.
const POLICY_RAW: u32 = 4288;

pub struct PolicyGpu {
    pub embedding: DenseGpu,
    /// `[2·Dp][Ep]`: query, then key.
    pub query_key: DenseGpu,
    pub promotion: GpuBuffer,
    pub dp: usize,
    /// lc0's map from the raw values to the 1858 outputs.
    pub map: GpuBuffer,
}

/// A lane's buffers for the head.
pub struct PolicyBuffers {
    pub embedding: GpuBuffer,
    pub query_key: GpuBuffer,
    pub logits: GpuBuffer,
}

impl PolicyBuffers {
    pub fn new(device: &dyn GpuDevice, head: &PolicyGpu, max_batch: usize) -> GpuResult<Self> {
        let rows = max_batch * SQUARES;
        Ok(Self {
            embedding: device.alloc(rows * head.embedding.outputs * HALF)?,
            query_key: device.alloc(rows * head.query_key.outputs * HALF)?,
            logits: device.alloc(max_batch * SQUARES * SQUARES * HALF)?,
        })
    }

    pub fn all(&self) -> [&GpuBuffer; 3] {
        [&self.embedding, &self.query_key, &self.logits]
    }
}

impl PolicyGpu {
    pub fn upload(device: &dyn GpuDevice, p: &PolicyHead) -> GpuResult<Self> {
        Ok(Self {
            embedding: dense(device, &p.embedding)?,
            query_key: stacked(device, &[&p.query, &p.key])?,
            promotion: upload_f16(device, &p.promotion)?,
            dp: p.query.outputs,
            map: upload_i16(device, attention_policy_map())?,
        })
    }

    /// FLOPs and bytes of the head over `batch` positions.
    pub fn cost(&self, batch: usize) -> Cost {
        let rows = batch * SQUARES;
        let logits = Cost {
            flops: 2 * (batch * SQUARES * SQUARES * self.dp) as u64,
            bytes: (HALF * batch * SQUARES * SQUARES) as u64,
        };
        linear_cost(&self.embedding, rows) + linear_cost(&self.query_key, rows) + logits
    }

    /// The head over `input` (`[batch·64][inputs]`), its embedding activated by `act`, into
    /// the f32 logits at `out` (`[batch][1858]`).
    ///
    /// # Safety
    /// The [device-memory contract](crate::gpu#the-device-memory-contract) for `input` and
    /// `out` with those sizes, and for `b`, made by [`PolicyBuffers::new`] on this GPU for at
    /// least `batch` positions.
    pub unsafe fn enqueue(
        &self,
        ops: &Ops<'_>,
        (input, act): (DevicePtr, Activation),
        b: &PolicyBuffers,
        out: DevicePtr,
        batch: usize,
    ) -> GpuResult<()> {
        // SAFETY: `input`, `out` and `b` the caller's promise (`b`'s embedding, query/key and
        // logits buffers hold `batch × 64` rows); the layers, the promotion weights and the map are
        // the head's own buffers.
        unsafe {
            let rows = batch * SQUARES;
            ops.dense_act(&self.embedding, input, b.embedding.ptr(), rows, act)?;
            ops.linear(
                &self.query_key,
                b.embedding.ptr(),
                b.query_key.ptr(),
                rows,
                true,
            )?;
            let dp = self.dp;
            let keys = b.query_key.at(dp * HALF);
            ops.device.batched_product(&BatchedProduct {
                batch,
                m: SQUARES,
                n: SQUARES,
                k: dp,
                alpha: 1.0 / (dp as f32).sqrt(),
                a: b.query_key.ptr(),
                lda: 2 * dp,
                stride_a: SQUARES * 2 * dp,
                b: keys,
                ldb: 2 * dp,
                stride_b: SQUARES * 2 * dp,
                b_transposed: false,
                c: b.logits.ptr(),
                ldc: SQUARES,
                stride_c: SQUARES * SQUARES,
            })?;
            let launch = Launch {
                grid: [batch as u32, POLICY_RAW.div_ceil(ROW_THREADS), 1],
                block: [ROW_THREADS, 1, 1],
                shared_bytes: 0,
            };
            launchers::policy_finish(
                ops.device,
                launch,
                b.logits.ptr(),
                keys,
                (2 * dp) as i32,
                self.promotion.ptr(),
                dp as i32,
                self.map.ptr(),
                out,
            )
        }
    }
}
