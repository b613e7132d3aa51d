//! The architecture report of `lc0rs info`: one serializable record, printed as text or JSON.

use serde::Serialize;

use super::FileInfo;
use super::cost::{flops_per_position, parameter_count};
use super::format::{Activation, HeadLayout, InputEmbedding, InputFormat};
use super::network::{Network, SmolgenDims};

#[derive(Debug, Clone, Serialize)]
pub struct Activations {
    pub default: Activation,
    pub smolgen: Activation,
    pub ffn: Activation,
}

/// Everything `lc0rs info` reports about a network.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub file: String,
    pub embedding: usize,
    pub encoders: usize,
    pub heads: usize,
    pub head_depth: usize,
    pub d_model: usize,
    pub dff: usize,
    pub smolgen: Option<SmolgenDims>,
    pub activations: Activations,
    pub input_format: InputFormat,
    pub input_format_id: i32,
    pub input_embedding: InputEmbedding,
    pub input_width: usize,
    pub input_gating: bool,
    pub head_layout: HeadLayout,
    pub policy: &'static str,
    pub policy_heads: Vec<String>,
    pub policy_head: String,
    pub policy_d: usize,
    pub value: &'static str,
    pub value_heads: Vec<String>,
    pub value_head: String,
    pub moves_left: bool,
    pub residual_alpha: f32,
    pub encoding: Vec<&'static str>,
    pub min_version: String,
    pub parameters: u64,
    pub flops_per_position: u64,
}

impl Summary {
    pub fn new(file: &str, n: &Network, info: &FileInfo) -> Self {
        let d = &n.dims;
        let f = &n.format;
        Self {
            file: file.to_owned(),
            embedding: d.embedding,
            encoders: d.encoders,
            heads: d.heads,
            head_depth: d.head_depth,
            d_model: d.d_model,
            dff: d.dff,
            smolgen: d.smolgen,
            activations: Activations {
                default: f.default_activation,
                smolgen: f.smolgen_activation,
                ffn: f.ffn_activation,
            },
            input_format: f.input,
            input_format_id: f.input.lc0_id(),
            input_embedding: f.input_embedding,
            input_width: d.input_width,
            input_gating: n.embedding.gating.is_some(),
            head_layout: f.head_layout,
            policy: "attention",
            policy_heads: n.policy_heads.iter().map(|h| h.name.clone()).collect(),
            policy_head: n.policy_head_name().to_owned(),
            policy_d: n.policy().query.outputs,
            value: if f.wdl { "wdl" } else { "scalar" },
            value_heads: n.value_heads.iter().map(|h| h.name.clone()).collect(),
            value_head: n.value_head_name().to_owned(),
            moves_left: f.moves_left,
            residual_alpha: n.residual_alpha,
            encoding: info.layer_encodings.iter().map(|e| e.name()).collect(),
            min_version: info.min_version.to_string(),
            parameters: parameter_count(n),
            flops_per_position: flops_per_position(n),
        }
    }

    /// The human-readable report.
    pub fn to_text(&self) -> String {
        let smolgen = self.smolgen.map_or("none".to_owned(), |s| {
            format!(
                "{} hidden channels, hidden size {}, gen size {} per head",
                s.hidden_channels, s.hidden_size, s.gen_size
            )
        });
        let a = &self.activations;
        [
            format!("file:              {}", self.file),
            format!(
                "architecture:      {}x{}x{}h, head depth {}, dff {}",
                self.embedding, self.encoders, self.heads, self.head_depth, self.dff
            ),
            format!("smolgen:           {smolgen}"),
            format!(
                "activations:       default {}, smolgen {}, ffn {}",
                a.default.name(),
                a.smolgen.name(),
                a.ffn.name()
            ),
            format!(
                "input:             {:?} ({}), embedding {:?}, width {}, gating {}",
                self.input_format,
                self.input_format_id,
                self.input_embedding,
                self.input_width,
                if self.input_gating { "yes" } else { "no" }
            ),
            format!(
                "policy:            attention, d {}, heads [{}] (using {})",
                self.policy_d,
                self.policy_heads.join(", "),
                self.policy_head
            ),
            format!(
                "value:             {}, heads [{}] (using {})",
                self.value,
                self.value_heads.join(", "),
                self.value_head
            ),
            format!(
                "moves left:        {}",
                if self.moves_left { "yes" } else { "no" }
            ),
            format!("residual alpha:    {:.6}", self.residual_alpha),
            format!("layer encoding:    {}", self.encoding.join(", ")),
            format!("min lc0 version:   {}", self.min_version),
            format!("parameters:        {}", group_thousands(self.parameters)),
            format!(
                "FLOPs per position: {} ({:.3} GFLOP)",
                group_thousands(self.flops_per_position),
                self.flops_per_position as f64 / 1e9
            ),
        ]
        .join("\n")
    }
}

pub(super) fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn thousands_are_grouped() {
        assert_eq!(super::group_thousands(94_632_236), "94,632,236");
        assert_eq!(super::group_thousands(999), "999");
        assert_eq!(super::group_thousands(1000), "1,000");
    }
}
