//! The f32 forward pass of a residual-tower network, batch at a time, as lc0's BLAS backend
//! computes it. Activations are channel-major per position (`[batch][channels][64]`, lc0's
//! NCHW); a convolution is one GEMM over the batch's 3×3 (or 1×1) neighbourhoods.

use rayon::prelude::*;

use super::forward::{OpRecorder, attention_policy, q_and_d};
use super::math::{activate, activate_all, dense, matmul_transposed, parallelism};
use crate::backend::BatchOutput;
use crate::backend::finite::{NonFinite, check_layer, check_outputs};
use crate::board::{INPUT_PLANES, POLICY_SIZE, SQUARES};
use crate::chess::InputPlanes;
use crate::chess::conv_policy_map::conv_policy_map;
use crate::weights::format::Activation;
use crate::weights::tower::{
    Conv, ConvHead, ResidualBlock, SqueezeExcitation, TowerNetwork, TowerPolicy,
};

/// Evaluates `inputs`; `with_moves_left` false reports M = 0. Each operation goes through
/// `ops` (tracing span, and host-clock timing when profiling).
pub fn forward(
    net: &TowerNetwork,
    inputs: &[InputPlanes],
    with_moves_left: bool,
    ops: &mut OpRecorder,
) -> Result<BatchOutput, NonFinite> {
    let n = inputs.len();
    let _pass =
        tracing::trace_span!("forward", backend = "cpu", body = "tower", batch = n).entered();
    let per_position = net.filters() * SQUARES;
    let act = net.format.default_activation;
    let mut x = ops.run("input conv", None, conv_cost(n, &net.input), || {
        let mut x = convolve(&input_planes(inputs), n, &net.input);
        activate_all(act, &mut x);
        x
    });
    check_layer(&x, per_position, "input convolution")?;
    for (i, block) in net.blocks.iter().enumerate() {
        let (flops, bytes) = conv_cost(n, &block.conv1);
        x = ops.run("residual block", Some(i), (2 * flops, 2 * bytes), || {
            residual_block(block, x, n, act)
        });
        check_layer(&x, per_position, &format!("residual[{i}]"))?;
    }
    let (q, d, m) = ops.run("value+mlh heads", None, (0, 0), || {
        let (q, d) = value_head(net, &x, n);
        let m = match (&net.moves_left, with_moves_left) {
            (Some(head), true) => conv_head(head, &x, n, act)
                .into_iter()
                .map(|v| activate(Activation::Relu, v))
                .collect(),
            _ => vec![0.0; n],
        };
        (q, d, m)
    });
    let policy = ops.run("policy head", None, (0, 0), || policy_head(net, &x, n));
    let out = BatchOutput { q, d, m, policy };
    check_outputs(&out)?;
    Ok(out)
}

/// FLOPs and f32 bytes (inputs, weights, outputs once) of one convolution over `n` positions.
fn conv_cost(n: usize, conv: &Conv) -> (u64, u64) {
    let positions = (n * SQUARES) as u64;
    let weights = conv.weights.len() as u64;
    let (inputs, outputs) = (conv.inputs as u64, conv.outputs as u64);
    (
        2 * positions * weights,
        4 * (positions * (inputs + outputs) + weights),
    )
}

/// The dense input planes `[n][112][64]`.
fn input_planes(inputs: &[InputPlanes]) -> Vec<f32> {
    inputs
        .iter()
        .flat_map(|planes| {
            planes.iter().take(INPUT_PLANES).flat_map(|p| {
                (0..SQUARES).map(move |s| if p.mask >> s & 1 == 1 { p.value } else { 0.0 })
            })
        })
        .collect()
}

/// `conv(x) + bias` over `x[n][inputs][64]` with zero padding: `[n][outputs][64]`.
pub fn convolve(x: &[f32], n: usize, conv: &Conv) -> Vec<f32> {
    let taps = conv.kernel * conv.kernel;
    let width = conv.inputs * taps;
    let columns = neighbourhoods(x, n, conv.inputs, conv.kernel);
    let outputs = conv.outputs;
    let mut square_major = vec![0.0f32; n * SQUARES * outputs];
    matmul_transposed(
        &mut square_major,
        &columns,
        &conv.weights,
        n * SQUARES,
        width,
        outputs,
        parallelism(),
    );
    let mut out = vec![0.0f32; n * outputs * SQUARES];
    out.par_chunks_mut(outputs * SQUARES)
        .enumerate()
        .for_each(|(b, position)| {
            let rows = &square_major[b * SQUARES * outputs..(b + 1) * SQUARES * outputs];
            for (o, plane) in position.chunks_mut(SQUARES).enumerate() {
                for (s, v) in plane.iter_mut().enumerate() {
                    *v = rows[s * outputs + o] + conv.biases[o];
                }
            }
        });
    out
}

/// For each square of each position, the `channels × k × k` inputs under the kernel centred
/// there (`[n·64][channels·k·k]`, channel then kernel row (rank) then column (file)), zero
/// off the board.
fn neighbourhoods(x: &[f32], n: usize, channels: usize, kernel: usize) -> Vec<f32> {
    let taps = kernel * kernel;
    let width = channels * taps;
    let pad = (kernel / 2) as i32;
    let mut columns = vec![0.0f32; n * SQUARES * width];
    columns
        .par_chunks_mut(width)
        .enumerate()
        .for_each(|(row, column)| {
            let (b, s) = (row / SQUARES, row % SQUARES);
            let (rank, file) = ((s / 8) as i32, (s % 8) as i32);
            let position = &x[b * channels * SQUARES..(b + 1) * channels * SQUARES];
            for tap in 0..taps {
                let r = rank + (tap / kernel) as i32 - pad;
                let f = file + (tap % kernel) as i32 - pad;
                if !(0..8).contains(&r) || !(0..8).contains(&f) {
                    continue;
                }
                let source = (r * 8 + f) as usize;
                for c in 0..channels {
                    column[c * taps + tap] = position[c * SQUARES + source];
                }
            }
        });
    columns
}

fn residual_block(block: &ResidualBlock, x: Vec<f32>, n: usize, act: Activation) -> Vec<f32> {
    let mut h = convolve(&x, n, &block.conv1);
    activate_all(act, &mut h);
    let mut y = convolve(&h, n, &block.conv2);
    let channels = block.conv2.outputs;
    let gates = block
        .se
        .as_ref()
        .map(|se| squeeze_excitation_gates(se, &y, n, channels, act));
    y.par_chunks_mut(channels * SQUARES)
        .enumerate()
        .for_each(|(b, position)| {
            for (c, plane) in position.chunks_mut(SQUARES).enumerate() {
                let (scale, shift) = gates
                    .as_ref()
                    .map_or((1.0, 0.0), |g| (g[b].0[c], g[b].1[c]));
                let skip = &x[(b * channels + c) * SQUARES..(b * channels + c + 1) * SQUARES];
                for (v, r) in plane.iter_mut().zip(skip) {
                    *v = activate(act, scale * *v + shift + r);
                }
            }
        });
    y
}

/// Per position, SE's (sigmoid(γ), β) per channel from the mean of each plane of `y`.
fn squeeze_excitation_gates(
    se: &SqueezeExcitation,
    y: &[f32],
    n: usize,
    channels: usize,
    act: Activation,
) -> Vec<(Vec<f32>, Vec<f32>)> {
    let pooled: Vec<f32> = y
        .chunks(SQUARES)
        .map(|plane| plane.iter().sum::<f32>() / SQUARES as f32)
        .collect();
    let mut hidden = dense(&pooled, n, &se.fc1);
    activate_all(act, &mut hidden);
    let gates = dense(&hidden, n, &se.fc2);
    gates
        .chunks(2 * channels)
        .map(|g| {
            let scale = g[..channels]
                .iter()
                .map(|&v| activate(Activation::Sigmoid, v))
                .collect();
            (scale, g[channels..].to_vec())
        })
        .collect()
}

/// `output(act(hidden(flatten(act(conv 1×1)))))`, the flatten channel-major as in lc0.
fn conv_head(head: &ConvHead, x: &[f32], n: usize, act: Activation) -> Vec<f32> {
    let mut planes = convolve(x, n, &head.conv);
    activate_all(act, &mut planes);
    let mut hidden = dense(&planes, n, &head.hidden);
    activate_all(act, &mut hidden);
    dense(&hidden, n, &head.output)
}

/// (Q, D) per position from the value head.
fn value_head(net: &TowerNetwork, x: &[f32], n: usize) -> (Vec<f32>, Vec<f32>) {
    let out = conv_head(&net.value, x, n, net.format.default_activation);
    q_and_d(&out, net.format.wdl, n)
}

fn policy_head(net: &TowerNetwork, x: &[f32], n: usize) -> Vec<f32> {
    let act = net.format.default_activation;
    match &net.policy {
        TowerPolicy::Classical { conv, dense: fc } => {
            let mut planes = convolve(x, n, conv);
            activate_all(act, &mut planes);
            dense(&planes, n, fc)
        }
        TowerPolicy::Convolution { conv1, conv2 } => {
            let mut h = convolve(x, n, conv1);
            activate_all(act, &mut h);
            let planes = convolve(&h, n, conv2);
            map_conv_policy(&planes, n, conv2.outputs)
        }
        TowerPolicy::Attention(head) => {
            let tokens = square_major(x, n, net.filters());
            attention_policy(head, Activation::Selu, &tokens, n)
        }
    }
}

/// The 1858 logits of each position from its `[planes][64]` convolution policy outputs.
fn map_conv_policy(planes: &[f32], n: usize, count: usize) -> Vec<f32> {
    let map = conv_policy_map();
    let mut policy = vec![0.0f32; n * POLICY_SIZE];
    policy
        .par_chunks_mut(POLICY_SIZE)
        .enumerate()
        .for_each(|(b, out)| {
            let position = &planes[b * count * SQUARES..(b + 1) * count * SQUARES];
            for (&value, &index) in position.iter().zip(map) {
                if index >= 0 {
                    out[index as usize] = value;
                }
            }
        });
    policy
}

/// `[n][C][64]` → `[n][64][C]` (lc0's NCHW to NHWC before an attention policy).
fn square_major(x: &[f32], n: usize, channels: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; x.len()];
    out.par_chunks_mut(SQUARES * channels)
        .enumerate()
        .for_each(|(b, position)| {
            for (s, row) in position.chunks_mut(channels).enumerate() {
                for (c, v) in row.iter_mut().enumerate() {
                    *v = x[(b * channels + c) * SQUARES + s];
                }
            }
        });
    debug_assert_eq!(out.len(), n * SQUARES * channels);
    out
}
