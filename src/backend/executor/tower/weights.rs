//! A residual tower's weights on the GPU in fp16, rearranged once at upload for the
//! square-major activations (`[batch·64][C]`) the executor runs on: each 3×3 convolution of the
//! tower as Winograd points (`[points][K][C]`) or as a dense `[K][9·C]` layer over the gathered
//! neighbourhoods (column `tap·C + c`), as the convolution policy's always, each 1×1
//! convolution as a dense `[K][C]` layer, and each dense layer after a flatten with its inputs
//! in square-major order (the file's are channel-major, `channel·64 + square`).

use crate::backend::executor::dense::{DenseGpu, dense, upload_f16, upload_i16};
use crate::backend::executor::policy::PolicyGpu;
use crate::board::POLICY_SIZE;
use crate::board::SQUARES;
use crate::chess::conv_policy_map::conv_policy_map;
use crate::gpu::kernels::{SE_RESIDUAL_THREADS, WinogradTile, se_gates_launch};
use crate::gpu::{DevicePtr, GpuBuffer, GpuDevice, GpuResult, Launch};
use crate::weights::network::Dense;
use crate::weights::tower::{Conv, ConvHead, TowerNetwork, TowerPolicy};

/// `weights[out][in][tap]` (the file's order) as `[out][tap][in]`, the order of the gathered
/// neighbourhoods.
pub fn tap_major(conv: &Conv) -> Vec<f32> {
    let taps = conv.kernel * conv.kernel;
    let mut out = vec![0.0; conv.weights.len()];
    for o in 0..conv.outputs {
        for c in 0..conv.inputs {
            for tap in 0..taps {
                out[(o * taps + tap) * conv.inputs + c] =
                    conv.weights[(o * conv.inputs + c) * taps + tap];
            }
        }
    }
    out
}

/// A dense layer's inputs from `index = channel·64 + square` to `square·channels + channel`.
pub fn square_major_inputs(d: &Dense, channels: usize) -> Vec<f32> {
    let mut out = vec![0.0; d.weights.len()];
    for (row, rearranged) in d.weights.chunks(d.inputs).zip(out.chunks_mut(d.inputs)) {
        for c in 0..channels {
            for s in 0..SQUARES {
                rearranged[s * channels + c] = row[c * SQUARES + s];
            }
        }
    }
    out
}

/// lc0's convolution policy map (`[80 planes][64 squares]` → output index) indexed by the
/// square-major outputs of a `planes`-channel convolution (`square·planes + plane`); planes
/// beyond the map's are unused (−1).
pub fn square_major_conv_policy_map(planes: usize) -> Vec<i16> {
    let map = conv_policy_map();
    let mapped_planes = map.len() / SQUARES;
    let mut out = vec![-1i16; SQUARES * planes];
    for p in 0..planes.min(mapped_planes) {
        for s in 0..SQUARES {
            out[s * planes + p] = map[p * SQUARES + s];
        }
    }
    out
}

/// A convolution as the dense layer the executor runs over gathered neighbourhoods (3×3) or
/// over the squares themselves (1×1).
fn conv(device: &dyn GpuDevice, c: &Conv) -> GpuResult<DenseGpu> {
    DenseGpu::upload(
        device,
        (c.inputs * c.kernel * c.kernel, c.outputs),
        &tap_major(c),
        Some(&c.biases),
    )
}

/// How a pass runs its 3×3 convolutions (the `conv` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvForm {
    /// Winograd: an input transform, one GEMM per point, and an output transform that carries
    /// the layer's epilogue and the next convolution's input transform (`conv=winograd2`,
    /// `conv=winograd4`).
    Winograd(WinogradTile),
    /// Every square's 3 × 3 neighbourhood gathered (im2col), then one GEMM (`conv=gather`).
    Gather,
}

impl Default for ConvForm {
    fn default() -> Self {
        Self::Winograd(WinogradTile::F2)
    }
}

impl ConvForm {
    /// The names `from_name` takes.
    pub const NAMES: &str = "winograd2, winograd4 or gather";

    /// The form named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "winograd2" => Some(Self::Winograd(WinogradTile::F2)),
            "winograd4" => Some(Self::Winograd(WinogradTile::F4)),
            "gather" => Some(Self::Gather),
            _ => None,
        }
    }
}

/// A 3×3 convolution's Winograd weights: `points` holds `[points][outputs][inputs]` fp16, one
/// GEMM's `[K][C]` per point.
pub struct WinogradGpu {
    pub tile: WinogradTile,
    pub inputs: usize,
    pub outputs: usize,
    pub points: GpuBuffer,
    pub bias: GpuBuffer,
}

/// A 3×3 convolution in the form its pass runs.
pub enum Conv3x3Gpu {
    Gather(DenseGpu),
    Winograd(WinogradGpu),
}

impl Conv3x3Gpu {
    fn upload(device: &dyn GpuDevice, c: &Conv, form: ConvForm) -> GpuResult<Self> {
        Ok(match form {
            ConvForm::Gather => Self::Gather(conv(device, c)?),
            ConvForm::Winograd(tile) => Self::Winograd(WinogradGpu {
                tile,
                inputs: c.inputs,
                outputs: c.outputs,
                points: upload_f16(device, &tile.weight_points(&c.weights, c.outputs, c.inputs))?,
                bias: upload_f16(device, &c.biases)?,
            }),
        })
    }
}

/// A dense layer over the flattened `[64][channels]` planes of a head.
fn flattened(device: &dyn GpuDevice, d: &Dense, channels: usize) -> GpuResult<DenseGpu> {
    DenseGpu::upload(
        device,
        (d.inputs, d.outputs),
        &square_major_inputs(d, channels),
        d.biases.as_deref(),
    )
}

pub struct SeGpu {
    pub fc1: DenseGpu,
    pub fc2: DenseGpu,
}

/// Squeeze-excitation's weights as its kernels take them: fc1's weight and bias, its hidden
/// units, fc2's weight and bias.
pub type SeKernelWeights = (DevicePtr, DevicePtr, i32, DevicePtr, DevicePtr);

impl SeGpu {
    /// The weights every squeeze-excitation kernel takes, in their order.
    pub fn kernel_weights(&self) -> GpuResult<SeKernelWeights> {
        Ok((
            self.fc1.w.ptr(),
            self.fc1.required_bias("squeeze-excitation fc1")?,
            self.fc1.outputs as i32,
            self.fc2.w.ptr(),
            self.fc2.required_bias("squeeze-excitation fc2")?,
        ))
    }

    /// The launch of `se_gates_of_means` over `batch` positions of `channels`, and its
    /// positions a block.
    pub fn gates_launch(&self, batch: usize, channels: usize) -> (usize, Launch) {
        se_gates_launch(batch, channels, self.fc1.outputs)
    }

    /// The launch of `se_residual` (one block per position) over `batch` positions of
    /// `channels`: shared memory for the pooled channels, the hidden layer and the gates, in
    /// f32.
    pub fn launch(&self, batch: usize, channels: usize) -> Launch {
        let floats = channels + self.fc1.outputs + self.fc2.outputs;
        Launch {
            grid: [batch as u32, 1, 1],
            block: [SE_RESIDUAL_THREADS, 1, 1],
            shared_bytes: (floats * size_of::<f32>()) as u32,
        }
    }
}

pub struct BlockGpu {
    pub conv1: Conv3x3Gpu,
    pub conv2: Conv3x3Gpu,
    pub se: Option<SeGpu>,
}

/// A value or moves-left head: 1×1 convolution, flatten, hidden, output.
pub struct ConvHeadGpu {
    pub conv: DenseGpu,
    pub hidden: DenseGpu,
    pub output: DenseGpu,
}

pub enum TowerPolicyGpu {
    /// 1×1 convolution, dense to 1858 (fp16), then `policy_gather` through the identity.
    Classical {
        conv: DenseGpu,
        dense: DenseGpu,
        map: GpuBuffer,
    },
    /// Two 3×3 convolutions, then `policy_gather` through lc0's map. They run on gathered
    /// neighbourhoods in every form: the logits take their errors unsoftened, and Winograd's
    /// (F(2×2)'s 1.5–2 times the direct convolution's) there doubled the probabilities' largest
    /// error on Maia 1900 (4.8e-3 against 2.6e-3, 256 positions, `hip-emu`), where in the tower
    /// it adds a sixth.
    Convolution {
        conv1: DenseGpu,
        conv2: DenseGpu,
        map: GpuBuffer,
    },
    Attention(PolicyGpu),
}

pub struct TowerGpu {
    pub filters: usize,
    pub form: ConvForm,
    pub input: Conv3x3Gpu,
    pub blocks: Vec<BlockGpu>,
    pub policy: TowerPolicyGpu,
    pub value: ConvHeadGpu,
    pub moves_left: Option<ConvHeadGpu>,
}

fn conv_head(device: &dyn GpuDevice, h: &ConvHead) -> GpuResult<ConvHeadGpu> {
    Ok(ConvHeadGpu {
        conv: conv(device, &h.conv)?,
        hidden: flattened(device, &h.hidden, h.conv.outputs)?,
        output: dense(device, &h.output)?,
    })
}

impl TowerGpu {
    pub fn upload(device: &dyn GpuDevice, net: &TowerNetwork, form: ConvForm) -> GpuResult<Self> {
        let conv3x3 = |c: &Conv| Conv3x3Gpu::upload(device, c, form);
        let blocks = net
            .blocks
            .iter()
            .map(|b| {
                Ok(BlockGpu {
                    conv1: conv3x3(&b.conv1)?,
                    conv2: conv3x3(&b.conv2)?,
                    se: b
                        .se
                        .as_ref()
                        .map(|se| -> GpuResult<SeGpu> {
                            Ok(SeGpu {
                                fc1: dense(device, &se.fc1)?,
                                fc2: dense(device, &se.fc2)?,
                            })
                        })
                        .transpose()?,
                })
            })
            .collect::<GpuResult<Vec<_>>>()?;
        let policy = match &net.policy {
            TowerPolicy::Classical { conv: c, dense: d } => {
                let identity: Vec<i16> = (0..POLICY_SIZE as i16).collect();
                TowerPolicyGpu::Classical {
                    conv: conv(device, c)?,
                    dense: flattened(device, d, c.outputs)?,
                    map: upload_i16(device, &identity)?,
                }
            }
            TowerPolicy::Convolution { conv1, conv2 } => TowerPolicyGpu::Convolution {
                conv1: conv(device, conv1)?,
                conv2: conv(device, conv2)?,
                map: upload_i16(device, &square_major_conv_policy_map(conv2.outputs))?,
            },
            TowerPolicy::Attention(head) => {
                TowerPolicyGpu::Attention(PolicyGpu::upload(device, head)?)
            }
        };
        Ok(Self {
            filters: net.filters(),
            form,
            input: conv3x3(&net.input)?,
            blocks,
            policy,
            value: conv_head(device, &net.value)?,
            moves_left: net
                .moves_left
                .as_ref()
                .map(|h| conv_head(device, h))
                .transpose()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_by_three_weights_become_tap_major() {
        // 2 inputs, 1 output; the file's weight at input c, tap t is 10·c + t.
        let conv = Conv {
            inputs: 2,
            outputs: 1,
            kernel: 3,
            weights: (0..2)
                .flat_map(|c| (0..9).map(move |t| (10 * c + t) as f32))
                .collect(),
            biases: vec![0.0],
        };
        let w = tap_major(&conv);
        // Column tap·2 + c.
        assert_eq!(&w[..6], &[0.0, 10.0, 1.0, 11.0, 2.0, 12.0]);
        assert_eq!(w[8 * 2 + 1], 18.0);
    }

    #[test]
    fn flattened_inputs_become_square_major() {
        // 3 channels; input channel·64 + square holds 100·channel + square.
        let d = Dense {
            inputs: 3 * 64,
            outputs: 1,
            weights: (0..3)
                .flat_map(|c| (0..64).map(move |s| (100 * c + s) as f32))
                .collect(),
            biases: None,
        };
        let w = square_major_inputs(&d, 3);
        assert_eq!(&w[..4], &[0.0, 100.0, 200.0, 1.0]);
        assert_eq!(w[63 * 3 + 2], 263.0);
    }

    #[test]
    fn the_conv_policy_map_covers_every_output_once() {
        let map = square_major_conv_policy_map(80);
        let mut seen = vec![0; POLICY_SIZE];
        for &i in map.iter().filter(|&&i| i >= 0) {
            seen[i as usize] += 1;
        }
        assert!(
            seen.iter().all(|&n| n == 1),
            "every logit written exactly once"
        );
        // Plane p of square s (the file's p·64 + s) at s·80 + p.
        let file = conv_policy_map();
        assert_eq!(map[5 * 80 + 7], file[7 * 64 + 5]);
        assert_eq!(square_major_conv_policy_map(90)[3 * 90 + 85], -1);
    }
}
