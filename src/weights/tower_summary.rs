//! The `lc0rs info` report of a residual-tower network: blocks × filters, SE, heads,
//! parameters and FLOPs per position (multiply-adds counted as 2 FLOPs, as for attention nets).

use serde::Serialize;

use super::FileInfo;
use super::format::{Activation, InputFormat};
use super::network::Dense;
use super::tower::{Conv, ConvHead, TowerNetwork, TowerPolicy};
use crate::board::SQUARES;

/// Everything `lc0rs info` reports about a residual-tower network.
#[derive(Debug, Clone, Serialize)]
pub struct TowerSummary {
    pub file: String,
    pub body: &'static str,
    pub blocks: usize,
    pub filters: usize,
    /// SE channels of the first block, when the blocks have squeeze-excitation.
    pub se_channels: Option<usize>,
    pub activation: Activation,
    pub input_format: InputFormat,
    pub input_format_id: i32,
    pub policy: &'static str,
    pub value: &'static str,
    pub value_channels: usize,
    pub moves_left: bool,
    pub encoding: Vec<&'static str>,
    pub min_version: String,
    pub parameters: u64,
    pub flops_per_position: u64,
}

impl TowerSummary {
    pub fn new(file: &str, n: &TowerNetwork, info: &FileInfo) -> Self {
        Self {
            file: file.to_owned(),
            body: "residual tower",
            blocks: n.blocks.len(),
            filters: n.filters(),
            se_channels: n.blocks[0].se.as_ref().map(|se| se.fc1.outputs),
            activation: n.format.default_activation,
            input_format: n.format.input,
            input_format_id: n.format.input.lc0_id(),
            policy: n.policy.kind(),
            value: if n.format.wdl { "wdl" } else { "scalar" },
            value_channels: n.value.conv.outputs,
            moves_left: n.moves_left.is_some(),
            encoding: info.layer_encodings.iter().map(|e| e.name()).collect(),
            min_version: info.min_version.to_string(),
            parameters: tower_parameters(n),
            flops_per_position: tower_flops(n),
        }
    }

    /// The human-readable report.
    pub fn to_text(&self) -> String {
        let se = self
            .se_channels
            .map_or("no SE".to_owned(), |c| format!("SE ({c} channels)"));
        [
            format!("file:              {}", self.file),
            format!(
                "architecture:      residual tower, {} blocks x {} filters, {se}",
                self.blocks, self.filters
            ),
            format!("activation:        {}", self.activation.name()),
            format!(
                "input:             {:?} ({})",
                self.input_format, self.input_format_id
            ),
            format!("policy:            {}", self.policy),
            format!(
                "value:             {}, {} channels",
                self.value, self.value_channels
            ),
            format!(
                "moves left:        {}",
                if self.moves_left { "yes" } else { "no" }
            ),
            format!("layer encoding:    {}", self.encoding.join(", ")),
            format!("min lc0 version:   {}", self.min_version),
            format!(
                "parameters:        {}",
                super::summary::group_thousands(self.parameters)
            ),
            format!(
                "FLOPs per position: {} ({:.3} GFLOP)",
                super::summary::group_thousands(self.flops_per_position),
                self.flops_per_position as f64 / 1e9
            ),
        ]
        .join("\n")
    }
}

fn conv_parameters(c: &Conv) -> u64 {
    (c.weights.len() + c.biases.len()) as u64
}

fn dense_parameters(d: &Dense) -> u64 {
    (d.weights.len() + d.biases.as_ref().map_or(0, Vec::len)) as u64
}

fn head_parameters(h: &ConvHead) -> u64 {
    conv_parameters(&h.conv) + dense_parameters(&h.hidden) + dense_parameters(&h.output)
}

/// Every weight and bias after batch-norm folding.
pub fn tower_parameters(n: &TowerNetwork) -> u64 {
    let blocks: u64 = n
        .blocks
        .iter()
        .map(|b| {
            conv_parameters(&b.conv1)
                + conv_parameters(&b.conv2)
                + b.se.as_ref().map_or(0, |se| {
                    dense_parameters(&se.fc1) + dense_parameters(&se.fc2)
                })
        })
        .sum();
    let policy = match &n.policy {
        TowerPolicy::Classical { conv, dense } => conv_parameters(conv) + dense_parameters(dense),
        TowerPolicy::Convolution { conv1, conv2 } => {
            conv_parameters(conv1) + conv_parameters(conv2)
        }
        TowerPolicy::Attention(h) => {
            dense_parameters(&h.embedding)
                + dense_parameters(&h.query)
                + dense_parameters(&h.key)
                + h.promotion.len() as u64
        }
    };
    conv_parameters(&n.input)
        + blocks
        + policy
        + head_parameters(&n.value)
        + n.moves_left.as_ref().map_or(0, head_parameters)
}

fn conv_flops(c: &Conv) -> u64 {
    2 * (SQUARES * c.weights.len()) as u64
}

fn dense_flops(d: &Dense, rows: usize) -> u64 {
    2 * (rows * d.weights.len()) as u64
}

fn head_flops(h: &ConvHead) -> u64 {
    conv_flops(&h.conv) + dense_flops(&h.hidden, 1) + dense_flops(&h.output, 1)
}

/// Multiply-adds ×2 of one position through the convolutions and dense layers.
pub fn tower_flops(n: &TowerNetwork) -> u64 {
    let blocks: u64 = n
        .blocks
        .iter()
        .map(|b| {
            conv_flops(&b.conv1)
                + conv_flops(&b.conv2)
                + b.se
                    .as_ref()
                    .map_or(0, |se| dense_flops(&se.fc1, 1) + dense_flops(&se.fc2, 1))
        })
        .sum();
    let policy = match &n.policy {
        TowerPolicy::Classical { conv, dense } => conv_flops(conv) + dense_flops(dense, 1),
        TowerPolicy::Convolution { conv1, conv2 } => conv_flops(conv1) + conv_flops(conv2),
        TowerPolicy::Attention(h) => {
            dense_flops(&h.embedding, SQUARES)
                + dense_flops(&h.query, SQUARES)
                + dense_flops(&h.key, SQUARES)
                + 2 * (SQUARES * SQUARES * h.query.outputs) as u64
        }
    };
    conv_flops(&n.input)
        + blocks
        + policy
        + head_flops(&n.value)
        + n.moves_left.as_ref().map_or(0, head_flops)
}
