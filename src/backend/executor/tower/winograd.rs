//! A tower's 3×3 convolutions as Winograd F(m×m, 3×3) (`hip/winograd.hip`). Each convolution
//! is one GEMM per point (16 or 36, the device's batched product) between two transforms:
//! the input transform is done by whatever wrote the convolution's input (the output transform
//! of the convolution before, or `winograd_planes` from the uploaded input planes), and the output
//! transform carries the layer's epilogue (bias, skip, activation) and the next convolution's
//! input transform. A block is thus two GEMMs and two transform kernels, and with
//! squeeze-excitation two more (the gates from the means the output transform left, several
//! positions a block, and their application, which does the next input transform); the transformed points stay in `columns`, the products in
//! `products`. The residual stream between blocks is kept in f32 (`x`), and its last writer
//! rounds it into `x_half` too, which the heads read: in fp16 its rounding alone moved the T78
//! shape's logits 8e-3 relative (a simulation on the cpu backend; the limit is 1e-2), where
//! rounding every block's inner outputs moved them 1e-4.

use super::TowerForward;
use super::weights::{BlockGpu, SeGpu, WinogradGpu};
use crate::backend::executor::io::{FLOAT, HALF};
use crate::backend::executor::marks::Cost;
use crate::board::{INPUT_PLANES, SQUARES};
use crate::gpu::kernels::{activation_code, launchers};
use crate::gpu::{DevicePtr, GpuError, GpuResult, Launch};
use crate::weights::format::Activation;

/// A batch's points per channel.
fn points(conv: &WinogradGpu, batch: usize) -> u64 {
    conv.tile.batch_points(batch) as u64
}

/// FLOPs and bytes of a Winograd convolution's GEMMs over `batch` positions: its points, weights
/// and products.
fn products_cost(conv: &WinogradGpu, batch: usize) -> Cost {
    let (c, k) = (conv.inputs as u64, conv.outputs as u64);
    let weights = conv.tile.points() as u64 * k * c;
    Cost {
        flops: 2 * points(conv, batch) * c * k,
        bytes: HALF as u64 * (points(conv, batch) * (c + k) + weights),
    }
}

/// FLOPs and bytes of an output transform with the next input transform: the products read,
/// the next points written, and the output written and read again (or a skip's input read) at
/// `value_bytes` a value (fp16, or the f32 stream); about 12 FLOPs a point each way.
fn transform_cost(conv: &WinogradGpu, batch: usize, value_bytes: usize) -> Cost {
    let (p, k) = (points(conv, batch), conv.outputs as u64);
    let squares = (SQUARES * batch) as u64;
    Cost {
        flops: 24 * p * k,
        bytes: 2 * HALF as u64 * p * k + 2 * value_bytes as u64 * squares * k,
    }
}

/// Squeeze-excitation's FLOPs over `batch` positions of `channels`: its two dense layers and
/// the gates applied to every square.
fn se_flops(se: &SeGpu, batch: usize, channels: usize) -> Cost {
    Cost {
        flops: 4 * (se.fc1.inputs * se.fc1.outputs * batch) as u64
            + 8 * (batch * SQUARES * channels) as u64,
        bytes: 0,
    }
}

/// FLOPs and bytes of one Winograd convolution with its output transform into fp16 (the
/// profile's `conv1`).
fn cost(conv: &WinogradGpu, batch: usize) -> Cost {
    products_cost(conv, batch) + transform_cost(conv, batch, HALF)
}

/// FLOPs and bytes of the input convolution into the f32 stream.
pub(super) fn input_cost(conv: &WinogradGpu, batch: usize) -> Cost {
    products_cost(conv, batch) + transform_cost(conv, batch, FLOAT)
}

impl TowerForward<'_> {
    /// The Winograd form's buffers: the points every convolution reads, the products it
    /// writes, and squeeze-excitation's gates.
    fn winograd_scratch(&self) -> GpuResult<[DevicePtr; 3]> {
        let buffers = self.b.winograd.as_ref().ok_or_else(|| GpuError::Call {
            call: "tower Winograd convolution",
            detail: "the lane has no buffers for it".to_owned(),
        })?;
        Ok([
            self.b.columns.ptr(),
            buffers.products.ptr(),
            buffers.gates.ptr(),
        ])
    }

    /// Whether a Winograd convolution reads the residual stream after the input convolution
    /// (`None`) or after block `i`: the next block's (the policy head's gather their own).
    fn conv_follows(&self, block: Option<usize>) -> bool {
        block.map_or(0, |i| i + 1) < self.net.blocks.len()
    }

    /// The products `M_ξ = V_ξ · U_ξᵀ` of every point ξ from the points in `columns`.
    ///
    /// # Safety
    /// `TowerForward`'s invariant for `batch`, with `columns` holding the convolution's input
    /// points.
    unsafe fn winograd_products(&self, conv: &WinogradGpu, batch: usize) -> GpuResult<()> {
        let [points, products, _] = self.winograd_scratch()?;
        let shape = (conv.inputs, conv.outputs);
        // SAFETY: `columns` holds tiles × points × C values and `products` room for tiles ×
        // points × K (the lane's buffers, sized for the widest convolution), `conv.points`
        // points × K × C weights.
        unsafe {
            self.ops.device.batched_product(&conv.tile.products(
                batch,
                shape,
                points,
                conv.points.ptr(),
                products,
            ))
        }
    }

    /// The output transform of `conv`'s products into fp16: `y = act(out + bias)`, written to
    /// `out` and transformed from there into `columns` for the next convolution when `next`, or
    /// with its channel means left in the gates when `means` (squeeze-excitation's).
    ///
    /// # Safety
    /// `TowerForward`'s invariant for `batch`, with `products` holding the convolution's, and
    /// `out` one of the lane's fp16 buffers of `batch × 64` rows of K channels.
    unsafe fn winograd_output(
        &self,
        conv: &WinogradGpu,
        batch: usize,
        act: Activation,
        out: DevicePtr,
        (next, means): (bool, bool),
    ) -> GpuResult<()> {
        let [points, products, gates] = self.winograd_scratch()?;
        // SAFETY: the caller's promise; `columns` is the lane's, sized for the tower.
        unsafe {
            launchers::winograd_output(
                self.ops.device,
                conv.tile.kernels().1,
                conv.tile.output_launch(batch, conv.outputs),
                products,
                conv.outputs as i32,
                conv.bias.ptr(),
                activation_code(act),
                out,
                next.then_some(points),
                means.then_some(gates),
            )
        }
    }

    /// Where the residual stream's writer also rounds it to fp16: `x_half` for the last writer
    /// (no convolution follows, the heads read it), none before.
    fn stream_half(&self, next: bool) -> GpuResult<Option<DevicePtr>> {
        if next {
            return Ok(None);
        }
        let x_half = self.b.x_half.as_ref().ok_or_else(|| GpuError::Call {
            call: "tower Winograd convolution",
            detail: "the lane has no fp16 copy of the residual stream".to_owned(),
        })?;
        Ok(Some(x_half.ptr()))
    }

    /// The output transform of `conv`'s products into the f32 residual stream:
    /// `x = act(out + bias (+ x with the skip))`, transformed into `columns` for the next
    /// convolution when `next`, else rounded into `x_half` for the heads.
    ///
    /// # Safety
    /// `TowerForward`'s invariant for `batch`, with `products` holding the convolution's.
    unsafe fn winograd_stream_output(
        &self,
        conv: &WinogradGpu,
        batch: usize,
        skip: bool,
        next: bool,
    ) -> GpuResult<()> {
        let [points, products, _] = self.winograd_scratch()?;
        let x = self.b.x.ptr();
        let x_half = self.stream_half(next)?;
        // SAFETY: the caller's promise; `x` (f32), `x_half` and `columns` are the lane's, sized
        // for the tower.
        unsafe {
            launchers::winograd_stream_output(
                self.ops.device,
                conv.tile.stream_output_kernel(),
                conv.tile.output_launch(batch, conv.outputs),
                products,
                conv.outputs as i32,
                conv.bias.ptr(),
                skip.then_some(x),
                activation_code(self.act),
                x,
                x_half,
                next.then_some(points),
            )
        }
    }

    /// The input convolution of the planes into the f32 residual stream `x`.
    ///
    /// # Safety
    /// `TowerForward`'s invariant for `batch`, with `planes` holding the inputs.
    pub(super) unsafe fn winograd_input_conv(
        &self,
        conv: &WinogradGpu,
        batch: usize,
    ) -> GpuResult<()> {
        let [points, ..] = self.winograd_scratch()?;
        let (masks, values) = self.io.inputs(batch);
        // SAFETY: the inputs hold `batch × 112` masks and values, `columns` room for their
        // points (the invariant).
        unsafe {
            launchers::winograd_planes(
                self.ops.device,
                conv.tile.kernels().0,
                Launch::elements(conv.tile.tiles_per_board() * batch * INPUT_PLANES),
                masks,
                values,
                INPUT_PLANES as i32,
                points,
                batch as i32,
            )?;
            self.winograd_products(conv, batch)?;
            self.winograd_stream_output(conv, batch, false, self.conv_follows(None))
        }
    }

    /// Block `i`: `x = act(SE(conv2(act(conv1(x)))) + x)`, or without SE
    /// `act(conv2(…) + x)`, its input points already in `columns`; conv1's output goes to `h`
    /// (read back by its own output transform for conv2's points). With SE, conv2's output
    /// transform writes `y` (with its bias) and its channel means, `se_gates_of_means` the
    /// gates, and `winograd_se_apply` the residual stream and the next block's points.
    ///
    /// # Safety
    /// `TowerForward`'s invariant for `batch`.
    pub(super) unsafe fn winograd_block(
        &self,
        i: usize,
        (conv1, conv2): (&WinogradGpu, &WinogradGpu),
        block: &BlockGpu,
        batch: usize,
    ) -> GpuResult<()> {
        let (b, layer) = (self.b, Some(i));
        let next = self.conv_follows(layer);
        let channels = conv2.outputs;
        // SAFETY: `x` and `y` are the lane's buffers of `batch × 64` rows of the tower's
        // channels, the block's weights `net`'s (the invariant).
        unsafe {
            self.ops.op("conv1", layer, cost(conv1, batch), || {
                self.winograd_products(conv1, batch)?;
                self.winograd_output(conv1, batch, self.act, b.h.ptr(), (true, false))
            })?;
            self.ops
                .op("conv2", layer, products_cost(conv2, batch), || {
                    self.winograd_products(conv2, batch)
                })?;
            let Some(se) = &block.se else {
                return self.ops.op(
                    "residual+act",
                    layer,
                    transform_cost(conv2, batch, FLOAT),
                    || self.winograd_stream_output(conv2, batch, true, next),
                );
            };
            if let Some(launch) = conv2
                .tile
                .se_board_launch(batch, channels, se.fc1.outputs)
                .filter(|_| self.se_board)
            {
                let cost = transform_cost(conv2, batch, FLOAT) + se_flops(se, batch, channels);
                return self.ops.op("se+residual+act", layer, cost, || {
                    let [points, products, _] = self.winograd_scratch()?;
                    let (w1, b1, hidden, w2, b2) = se.kernel_weights()?;
                    launchers::winograd_se_board(
                        self.ops.device,
                        conv2.tile.se_board_kernel(),
                        launch,
                        products,
                        channels as i32,
                        conv2.bias.ptr(),
                        w1,
                        b1,
                        hidden,
                        w2,
                        b2,
                        activation_code(self.act),
                        b.x.ptr(),
                        self.stream_half(next)?,
                        next.then_some(points),
                    )
                });
            }
            // The output transform (with the channel means), the gates, and their application
            // (y read, the f32 stream read and written, beside the next points the transform's
            // cost counts).
            let squares = (batch * SQUARES * channels) as u64;
            let se_cost = transform_cost(conv2, batch, HALF)
                + se_flops(se, batch, channels)
                + Cost {
                    flops: 0,
                    bytes: (HALF + 2 * FLOAT) as u64 * squares,
                };
            self.ops.op("se+residual+act", layer, se_cost, || {
                let [points, _, gates] = self.winograd_scratch()?;
                let (w1, b1, hidden, w2, b2) = se.kernel_weights()?;
                let plain = Activation::Identity;
                self.winograd_output(conv2, batch, plain, b.y.ptr(), (false, true))?;
                let (per_block, launch) = se.gates_launch(batch, channels);
                launchers::se_gates_of_means(
                    self.ops.device,
                    launch,
                    gates,
                    channels as i32,
                    w1,
                    b1,
                    hidden,
                    w2,
                    b2,
                    activation_code(self.act),
                    per_block as i32,
                    batch as i32,
                )?;
                launchers::winograd_se_apply(
                    self.ops.device,
                    conv2.tile.kernels().2,
                    conv2.tile.output_launch(batch, channels),
                    b.y.ptr(),
                    gates,
                    channels as i32,
                    b.x.ptr(),
                    activation_code(self.act),
                    self.stream_half(next)?,
                    next.then_some(points),
                )
            })
        }
    }
}
