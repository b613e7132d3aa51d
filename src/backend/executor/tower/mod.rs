//! A residual-tower (convolutional) network on the GPU: the input convolution, residual blocks
//! (with or without squeeze-excitation), the classical, convolution or attention policy head,
//! value and moves-left heads. Activations are square-major (`[batch·64][C]`); a 3×3 convolution
//! is Winograd F(2×2, 3×3) by default or F(4×4, 3×3) (`winograd.rs`, whose residual stream is
//! f32), or `conv_gather3x3` and one GEMM (all fp16); a 1×1 convolution is one GEMM.

pub mod weights;
mod winograd;

use super::dense::DenseGpu;
use super::io::{FLOAT, HALF, IoBuffers};
use super::marks::{Cost, linear_cost, pass_cost};
use super::ops::{Ops, finish_value};
use super::pass::NetworkPass;
use super::plan::PassPlan;
use super::policy::PolicyBuffers;
use crate::board::{INPUT_PLANES, POLICY_SIZE, SQUARES};
use crate::gpu::kernels::{activation_code, launchers};
use crate::gpu::{DevicePtr, GpuBuffer, GpuDevice, GpuError, GpuResult, Launch};
use crate::weights::format::{Activation, NetFormat};
use crate::weights::tower::TowerNetwork;
use weights::{BlockGpu, Conv3x3Gpu, ConvForm, ConvHeadGpu, TowerGpu, TowerPolicyGpu};

/// Taps of a 3×3 kernel.
const TAPS: usize = 9;

/// A residual tower on the device.
pub struct TowerPass {
    net: TowerGpu,
    format: NetFormat,
}

impl TowerPass {
    pub fn new(device: &dyn GpuDevice, network: &TowerNetwork, form: ConvForm) -> GpuResult<Self> {
        Ok(Self {
            net: TowerGpu::upload(device, network, form)?,
            format: network.format.clone(),
        })
    }
}

/// A lane's activation buffers for a tower.
pub struct TowerBuffers {
    /// The input planes as `[batch·64][112]`, for an input convolution that gathers (the
    /// Winograd form transforms the uploaded planes themselves).
    planes: Option<GpuBuffer>,
    /// A 3×3 convolution's input as the GEMM reads it: gathered neighbourhoods
    /// `[batch·64][9·max(112, C)]`, or Winograd points `[tiles][points][max(112, C)]`.
    columns: GpuBuffer,
    /// The Winograd form's products and squeeze-excitation gates (none in the gather form).
    winograd: Option<WinogradBuffers>,
    /// The residual stream `[batch·64][C]`: f32 in the Winograd form, fp16 in the gather form.
    x: GpuBuffer,
    /// The Winograd form's residual stream after the last block in fp16, for the heads.
    x_half: Option<GpuBuffer>,
    /// The first convolution's output in a block (and the convolution policy's).
    h: GpuBuffer,
    /// The second convolution's output in a block (before its bias in the gather form, with
    /// it in the Winograd form's squeeze-excitation).
    y: GpuBuffer,
    /// A head's 1×1 (or policy) convolution output `[batch·64][planes]`.
    head_planes: GpuBuffer,
    /// The classical policy's 1858 fp16 logits, or the value and moves-left heads' hidden layer.
    head_dense: GpuBuffer,
    value_out: GpuBuffer,
    mlh_out: GpuBuffer,
    attention_policy: Option<PolicyBuffers>,
}

/// A lane's buffers of the Winograd form.
struct WinogradBuffers {
    /// The products `[tiles][points][C]`.
    products: GpuBuffer,
    /// Squeeze-excitation's gates `[batch][2C]` in f32.
    gates: GpuBuffer,
}

/// The widest output of a head's convolution.
fn head_planes(net: &TowerGpu) -> usize {
    let policy = match &net.policy {
        TowerPolicyGpu::Classical { conv, .. } => conv.outputs,
        TowerPolicyGpu::Convolution { conv2, .. } => conv2.outputs,
        TowerPolicyGpu::Attention(_) => 0,
    };
    let heads = [Some(&net.value), net.moves_left.as_ref()];
    heads
        .into_iter()
        .flatten()
        .map(|h| h.conv.outputs)
        .fold(policy, usize::max)
}

/// The widest per-position dense output a head keeps in fp16 before its last layer.
fn head_dense_width(net: &TowerGpu) -> usize {
    let policy = match &net.policy {
        TowerPolicyGpu::Classical { .. } => POLICY_SIZE,
        _ => 0,
    };
    let heads = [Some(&net.value), net.moves_left.as_ref()];
    heads
        .into_iter()
        .flatten()
        .map(|h| h.hidden.outputs)
        .fold(policy, usize::max)
}

impl NetworkPass for TowerPass {
    type Buffers = TowerBuffers;
    /// A tower's choices are the shared ones: which kernel each dense layer (convolutions
    /// included) runs on, and programmatic launch.
    type Plan = PassPlan;

    fn plan(&self, pass: PassPlan) -> GpuResult<PassPlan> {
        Ok(pass)
    }

    fn buffers(&self, device: &dyn GpuDevice, max_batch: usize) -> GpuResult<TowerBuffers> {
        let net = &self.net;
        let rows = max_batch * SQUARES;
        let half = |elements: usize| device.alloc(elements * HALF);
        let c = net.filters;
        let widest_input = c.max(INPUT_PLANES);
        // The convolution policy gathers its neighbourhoods in every form.
        let gathered = match (net.form, &net.policy) {
            (ConvForm::Gather, _) => rows * TAPS * widest_input,
            (_, TowerPolicyGpu::Convolution { conv1, .. }) => rows * conv1.inputs,
            _ => 0,
        };
        let (columns, winograd) = match net.form {
            ConvForm::Gather => (half(gathered)?, None),
            ConvForm::Winograd(tile) => {
                let points = tile.batch_points(max_batch);
                let columns = half(gathered.max(points * widest_input))?;
                let buffers = WinogradBuffers {
                    products: half(points * c)?,
                    gates: device.alloc(max_batch * 2 * c * size_of::<f32>())?,
                };
                (columns, Some(buffers))
            }
        };
        Ok(TowerBuffers {
            planes: match net.input {
                Conv3x3Gpu::Gather(_) => Some(half(rows * INPUT_PLANES)?),
                Conv3x3Gpu::Winograd(_) => None,
            },
            x: match net.form {
                ConvForm::Gather => half(rows * c)?,
                ConvForm::Winograd(_) => device.alloc(rows * c * FLOAT)?,
            },
            x_half: match net.form {
                ConvForm::Gather => None,
                ConvForm::Winograd(_) => Some(half(rows * c)?),
            },
            columns,
            winograd,
            h: half(rows * c)?,
            y: half(rows * c)?,
            head_planes: half(rows * head_planes(net))?,
            head_dense: half(max_batch * head_dense_width(net))?,
            value_out: half(max_batch * net.value.output.outputs)?,
            mlh_out: half(max_batch)?,
            attention_policy: match &net.policy {
                TowerPolicyGpu::Attention(head) => {
                    Some(PolicyBuffers::new(device, head, max_batch)?)
                }
                _ => None,
            },
        })
    }

    fn each_buffer(b: &TowerBuffers) -> Vec<&GpuBuffer> {
        [
            &b.columns,
            &b.x,
            &b.h,
            &b.y,
            &b.head_planes,
            &b.head_dense,
            &b.value_out,
            &b.mlh_out,
        ]
        .into_iter()
        .chain(&b.planes)
        .chain(&b.x_half)
        .chain(b.winograd.iter().flat_map(|w| [&w.products, &w.gates]))
        .chain(b.attention_policy.iter().flat_map(PolicyBuffers::all))
        .collect()
    }

    unsafe fn enqueue(
        &self,
        ops: &Ops<'_>,
        plan: &PassPlan,
        io: &IoBuffers,
        b: &TowerBuffers,
    ) -> GpuResult<()> {
        let pass = TowerForward {
            ops: *ops,
            net: &self.net,
            act: self.format.default_activation,
            wdl: self.format.wdl,
            io,
            b,
            se_board: plan.se_board,
        };
        // SAFETY: the caller's promise, for the plan's batch.
        unsafe { pass.enqueue(plan.batch) }
    }

    fn format(&self) -> &NetFormat {
        &self.format
    }

    fn has_moves_left(&self) -> bool {
        self.net.moves_left.is_some()
    }
}

/// FLOPs and bytes of a 3×3 convolution on gathered neighbourhoods: the gather and the GEMM.
fn gathered_cost(conv: &DenseGpu, batch: usize) -> Cost {
    let rows = batch * SQUARES;
    pass_cost(rows * conv.inputs, 1) + linear_cost(conv, rows)
}

/// The error of a tower whose 3×3 convolutions are not all of one form (never uploaded so).
fn mixed_forms() -> GpuError {
    GpuError::Call {
        call: "tower pass",
        detail: "its 3×3 convolutions are not all of one form".to_owned(),
    }
}

/// Enqueues one tower pass of `batch` positions whose inputs are on the device.
///
/// Its methods are `unsafe` with one precondition, its invariant for their `batch`:
/// [`NetworkPass::enqueue`]'s promise for `io` and `b` (one lane's buffers, made on
/// `ops.device`'s GPU for at least `batch` positions, so each holds its tensor for `batch × 64`
/// rows; used by no other work) and `net` (the pass's weights, each buffer sized by its
/// layer's shape), all outliving the work and any graph capturing it.
struct TowerForward<'a> {
    ops: Ops<'a>,
    net: &'a TowerGpu,
    act: Activation,
    wdl: bool,
    io: &'a IoBuffers,
    b: &'a TowerBuffers,
    /// The plan's choice of `winograd_se_board` where a board fits one block.
    se_board: bool,
}

impl TowerForward<'_> {
    /// The input convolution of the gather form: the planes expanded square-major, then
    /// gathered and multiplied.
    ///
    /// # Safety
    /// `TowerForward`'s invariant for `batch`.
    unsafe fn gathered_input_conv(&self, conv: &DenseGpu, batch: usize) -> GpuResult<()> {
        let planes = self.b.planes.as_ref().ok_or_else(|| GpuError::Call {
            call: "tower input convolution",
            detail: "the lane has no square-major planes for it".to_owned(),
        })?;
        let (masks, values) = self.io.inputs(batch);
        // SAFETY: `planes` holds `batch × 64` rows of 112 planes, the inputs `io`'s for `batch`
        // (the invariant).
        unsafe {
            launchers::expand_tokens(
                self.ops.device,
                Launch::elements(batch * SQUARES * INPUT_PLANES),
                masks,
                values,
                None,
                0,
                0,
                planes.ptr(),
                batch as i32,
            )?;
            self.conv3x3(conv, planes.ptr(), self.b.x.ptr(), batch, Some(self.act))
        }
    }

    /// # Safety
    /// `TowerForward`'s invariant for `batch`.
    unsafe fn enqueue(&self, batch: usize) -> GpuResult<()> {
        // SAFETY: `x` and the other activations are the lane's buffers for `batch × 64` rows, the
        // inputs `io`'s for `batch` (the invariant); each call below keeps it.
        unsafe {
            let net = self.net;
            let input_cost = match &net.input {
                // The planes expanded square-major first.
                Conv3x3Gpu::Gather(conv) => {
                    gathered_cost(conv, batch) + pass_cost(batch * SQUARES * INPUT_PLANES, 0)
                }
                Conv3x3Gpu::Winograd(conv) => winograd::input_cost(conv, batch),
            };
            self.ops
                .op("input conv", None, input_cost, || match &net.input {
                    Conv3x3Gpu::Gather(conv) => self.gathered_input_conv(conv, batch),
                    Conv3x3Gpu::Winograd(conv) => self.winograd_input_conv(conv, batch),
                })?;
            for (i, block) in net.blocks.iter().enumerate() {
                self.block(i, block, batch)?;
            }
            self.ops
                .op("policy head", None, self.policy_cost(batch), || {
                    self.policy(batch)
                })?;
            self.ops
                .op("value+mlh heads", None, self.heads_cost(batch), || {
                    self.value_and_moves_left(batch)
                })
        }
    }

    /// `y = conv(x)` (3×3), with the bias and `act` where given (`None`: no bias).
    ///
    /// # Safety
    /// `TowerForward`'s invariant for `batch`, and the device-memory contract for `x` and `y` (`batch × 64`
    /// rows of the convolution's input and output channels).
    unsafe fn conv3x3(
        &self,
        conv: &DenseGpu,
        x: DevicePtr,
        y: DevicePtr,
        batch: usize,
        act: Option<Activation>,
    ) -> GpuResult<()> {
        // SAFETY: `columns` is the lane's im2col buffer of `batch × 64` rows of the widest
        // convolution's 9 × channels (the invariant); `x`, `y` the caller's promise.
        unsafe {
            let channels = conv.inputs / TAPS;
            let columns = self.b.columns.ptr();
            let vector = if channels.is_multiple_of(8) { 8 } else { 1 };
            launchers::conv_gather3x3(
                self.ops.device,
                Launch::elements(batch * SQUARES * conv.inputs / vector),
                x,
                channels as i32,
                columns,
                batch as i32,
            )?;
            match act {
                Some(act) => self.ops.dense_act(conv, columns, y, batch * SQUARES, act),
                None => self.ops.linear(conv, columns, y, batch * SQUARES, false),
            }
        }
    }

    /// `x = act(SE(conv2(act(conv1(x)))) + x)`, or without SE `act(conv2(…) + x)`.
    ///
    /// # Safety
    /// `TowerForward`'s invariant for `batch`.
    unsafe fn block(&self, i: usize, block: &BlockGpu, batch: usize) -> GpuResult<()> {
        // SAFETY: the invariant, passed on.
        unsafe {
            match (&block.conv1, &block.conv2) {
                (Conv3x3Gpu::Gather(conv1), Conv3x3Gpu::Gather(conv2)) => {
                    self.gathered_block(i, (conv1, conv2), block, batch)
                }
                (Conv3x3Gpu::Winograd(conv1), Conv3x3Gpu::Winograd(conv2)) => {
                    self.winograd_block(i, (conv1, conv2), block, batch)
                }
                _ => Err(mixed_forms()),
            }
        }
    }

    /// [`Self::block`] with gathered neighbourhoods.
    ///
    /// # Safety
    /// `TowerForward`'s invariant for `batch`.
    unsafe fn gathered_block(
        &self,
        i: usize,
        (conv1, conv2): (&DenseGpu, &DenseGpu),
        block: &BlockGpu,
        batch: usize,
    ) -> GpuResult<()> {
        // SAFETY: `x`, `h` and `y` are the lane's buffers of `batch × 64` rows of the tower's
        // channels; the block's weights are `net`'s (the invariant).
        unsafe {
            let (b, rows, layer) = (self.b, batch * SQUARES, Some(i));
            self.ops
                .op("conv1", layer, gathered_cost(conv1, batch), || {
                    self.conv3x3(conv1, b.x.ptr(), b.h.ptr(), batch, Some(self.act))
                })?;
            self.ops
                .op("conv2", layer, gathered_cost(conv2, batch), || {
                    self.conv3x3(conv2, b.h.ptr(), b.y.ptr(), batch, None)
                })?;
            let channels = self.net.filters;
            let bias = conv2.required_bias("conv2")?;
            let Some(se) = &block.se else {
                return self
                    .ops
                    .op("residual+act", layer, pass_cost(rows * channels, 2), || {
                        launchers::bias_residual_act(
                            self.ops.device,
                            Launch::elements(rows * channels),
                            b.y.ptr(),
                            bias,
                            b.x.ptr(),
                            rows as i64,
                            channels as i32,
                            activation_code(self.act),
                        )
                    });
            };
            let cost = pass_cost(rows * channels, 2)
                + linear_cost(&se.fc1, batch)
                + linear_cost(&se.fc2, batch);
            self.ops.op("se+residual+act", layer, cost, || {
                let (w1, b1, hidden, w2, b2) = se.kernel_weights()?;
                launchers::se_residual(
                    self.ops.device,
                    se.launch(batch, channels),
                    b.y.ptr(),
                    bias,
                    b.x.ptr(),
                    channels as i32,
                    w1,
                    b1,
                    hidden,
                    w2,
                    b2,
                    activation_code(self.act),
                )
            })
        }
    }

    /// The residual stream after the last block in fp16, as the heads' GEMMs read it: the
    /// Winograd form's rounded copy, or the gather form's stream itself.
    fn head_input(&self) -> DevicePtr {
        self.b.x_half.as_ref().unwrap_or(&self.b.x).ptr()
    }

    fn policy_cost(&self, batch: usize) -> Cost {
        let rows = batch * SQUARES;
        match &self.net.policy {
            TowerPolicyGpu::Classical { conv, dense, .. } => {
                linear_cost(conv, rows) + linear_cost(dense, batch)
            }
            TowerPolicyGpu::Convolution { conv1, conv2, .. } => {
                gathered_cost(conv1, batch) + gathered_cost(conv2, batch)
            }
            TowerPolicyGpu::Attention(head) => head.cost(batch),
        }
    }

    /// # Safety
    /// `TowerForward`'s invariant for `batch`.
    unsafe fn policy(&self, batch: usize) -> GpuResult<()> {
        // SAFETY: `x`, `h`, `head_planes`, `head_dense` and the attention policy's buffers are
        // the lane's, for `batch` positions; the policy part of the outputs holds `batch × 1858` f32;
        // the layers and maps are `net`'s (the invariant).
        unsafe {
            let (b, rows, out) = (self.b, batch * SQUARES, self.io.policy(batch));
            let x = self.head_input();
            match &self.net.policy {
                TowerPolicyGpu::Classical { conv, dense, map } => {
                    self.ops
                        .dense_act(conv, x, b.head_planes.ptr(), rows, self.act)?;
                    self.ops
                        .linear(dense, b.head_planes.ptr(), b.head_dense.ptr(), batch, true)?;
                    self.gather_policy(b.head_dense.ptr(), POLICY_SIZE, map, batch)
                }
                TowerPolicyGpu::Convolution { conv1, conv2, map } => {
                    self.conv3x3(conv1, x, b.h.ptr(), batch, Some(self.act))?;
                    self.conv3x3(
                        conv2,
                        b.h.ptr(),
                        b.head_planes.ptr(),
                        batch,
                        Some(Activation::Identity),
                    )?;
                    let planes = conv2.outputs;
                    self.gather_policy(b.head_planes.ptr(), SQUARES * planes, map, batch)
                }
                TowerPolicyGpu::Attention(head) => {
                    // Made with the lane's buffers whenever the head is an attention policy.
                    let buffers = b.attention_policy.as_ref().ok_or_else(|| GpuError::Call {
                        call: "tower attention policy",
                        detail: "the lane has no buffers for it".to_owned(),
                    })?;
                    // lc0 runs these heads' embedding with SELU whatever the file says.
                    head.enqueue(&self.ops, (x, Activation::Selu), buffers, out, batch)
                }
            }
        }
    }

    /// `policy[b][map[j]] = input[b·per_position + j]` for every mapped `j` (the policy part of
    /// the outputs, [`IoBuffers::policy`]).
    ///
    /// # Safety
    /// `TowerForward`'s invariant for `batch`, and the device-memory contract for `input` (`batch ×
    /// per_position` halves) and `map` (`per_position` indices).
    unsafe fn gather_policy(
        &self,
        input: DevicePtr,
        per_position: usize,
        map: &GpuBuffer,
        batch: usize,
    ) -> GpuResult<()> {
        // SAFETY: the caller's promise for `input` and `map`; the outputs' policy part holds
        // `batch × 1858` f32 (the invariant).
        unsafe {
            launchers::policy_gather(
                self.ops.device,
                Launch::elements(batch * per_position),
                input,
                per_position as i32,
                map.ptr(),
                per_position as i32,
                self.io.policy(batch),
                batch as i32,
            )
        }
    }

    fn heads_cost(&self, batch: usize) -> Cost {
        let rows = batch * SQUARES;
        [Some(&self.net.value), self.net.moves_left.as_ref()]
            .into_iter()
            .flatten()
            .map(|h| {
                linear_cost(&h.conv, rows)
                    + linear_cost(&h.hidden, batch)
                    + linear_cost(&h.output, batch)
            })
            .fold(Cost::default(), |a, b| a + b)
    }

    /// `output(act(hidden(flatten(act(conv 1×1)))))` into `out`.
    ///
    /// # Safety
    /// `TowerForward`'s invariant for `batch`, and the device-memory contract for `out` (`batch` rows of the
    /// head's outputs).
    unsafe fn conv_head(&self, head: &ConvHeadGpu, out: DevicePtr, batch: usize) -> GpuResult<()> {
        // SAFETY: `x`, `head_planes` and `head_dense` are the lane's buffers for `batch`
        // positions, the head's layers `net`'s (the invariant); `out` the caller's promise.
        unsafe {
            let b = self.b;
            self.ops.dense_act(
                &head.conv,
                self.head_input(),
                b.head_planes.ptr(),
                batch * SQUARES,
                self.act,
            )?;
            self.ops.dense_act(
                &head.hidden,
                b.head_planes.ptr(),
                b.head_dense.ptr(),
                batch,
                self.act,
            )?;
            self.ops
                .linear(&head.output, b.head_dense.ptr(), out, batch, true)
        }
    }

    /// # Safety
    /// `TowerForward`'s invariant for `batch`.
    unsafe fn value_and_moves_left(&self, batch: usize) -> GpuResult<()> {
        // SAFETY: `value_out` and `mlh_out` hold `batch` rows of the heads' outputs, the outputs'
        // first `batch × 3` f32 are (Q, D, M) (the invariant).
        unsafe {
            let b = self.b;
            self.conv_head(&self.net.value, b.value_out.ptr(), batch)?;
            let mlh = match &self.net.moves_left {
                Some(head) => {
                    self.conv_head(head, b.mlh_out.ptr(), batch)?;
                    Some(b.mlh_out.ptr())
                }
                None => None,
            };
            finish_value(
                &self.ops,
                (b.value_out.ptr(), self.wdl),
                mlh,
                self.io.finished(),
                batch,
            )
        }
    }
}
