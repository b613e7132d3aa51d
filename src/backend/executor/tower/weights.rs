//! A residual tower's weights on the GPU in fp16, rearranged once at upload for the
//! square-major activations (`[batch·64][C]`) the executor runs on: each 3×3 convolution as a
//! dense `[K][9·C]` layer over the gathered neighbourhoods (column `tap·C + c`), each 1×1
//! convolution as a dense `[K][C]` layer, and each dense layer after a flatten with its
//! inputs in square-major order (the file's are channel-major, `channel·64 + square`).

use crate::backend::executor::dense::{DenseGpu, dense, upload_i16};
use crate::backend::executor::policy::PolicyGpu;
use crate::board::POLICY_SIZE;
use crate::board::SQUARES;
use crate::chess::conv_policy_map::conv_policy_map;
use crate::gpu::{GpuBuffer, GpuDevice, GpuResult};
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

pub struct BlockGpu {
    pub conv1: DenseGpu,
    pub conv2: DenseGpu,
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
    /// Two 3×3 convolutions, then `policy_gather` through lc0's map.
    Convolution {
        conv1: DenseGpu,
        conv2: DenseGpu,
        map: GpuBuffer,
    },
    Attention(PolicyGpu),
}

pub struct TowerGpu {
    pub filters: usize,
    pub input: DenseGpu,
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
    pub fn upload(device: &dyn GpuDevice, net: &TowerNetwork) -> GpuResult<Self> {
        let blocks = net
            .blocks
            .iter()
            .map(|b| {
                Ok(BlockGpu {
                    conv1: conv(device, &b.conv1)?,
                    conv2: conv(device, &b.conv2)?,
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
            input: conv(device, &net.input)?,
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
