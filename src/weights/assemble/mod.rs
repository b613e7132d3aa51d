//! From the decoded `pblczero.Net` to a validated [`Network`]: resolves the formats, derives
//! every dimension from the data as lc0 does (docs/lc0-format.md §3.6) and checks each layer's
//! length against its derived shape, naming the field on any mismatch. One file per job:
//! `format` (what the file declares), `reader` (tensor primitives), then one per layer kind
//! (`embedding`, `encoder`, `heads`), as lc0's loader reads them, and `tower` for residual
//! towers (convolutions with batch norm folded, convolutional heads).

mod embedding;
mod encoder;
mod format;
mod heads;
mod reader;
mod tower;

pub use tower::BATCH_NORM_EPSILON;

use self::reader::Reader;

use super::codec::LayerEncoding;
use super::container::Version;
use super::error::WeightsError;
use super::fixups::fix_older_weights_file;
use super::model::Model;
use super::network::{
    Dims, Embedding, EncoderLayer, MovesLeftHead, Network, SmolgenDims, residual_alpha,
};
use super::proto::network_format::NetworkStructure;
use super::proto::{Net, NetworkFormat};
use super::tower::TowerNetwork;
use crate::board::{INPUT_PLANES, SQUARES};

/// LayerNorm eps of smolgen and of the PE_DENSE embedding.
const EPS_1E3: f32 = 1e-3;

/// Which heads to evaluate, by lc0's names (backend options `policy_head` / `value_head`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    pub policy_head: String,
    pub value_head: String,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            policy_head: "vanilla".to_owned(),
            value_head: "winner".to_owned(),
        }
    }
}

/// What a file says about itself beyond the network (for `lc0rs info`).
#[derive(Debug, Clone, PartialEq)]
pub struct FileInfo {
    pub min_version: Version,
    pub license: Option<String>,
    /// The distinct layer encodings, in the order first met.
    pub layer_encodings: Vec<LayerEncoding>,
}

/// Applies lc0's fix-ups and turns the message into a validated network of either body.
pub fn assemble(
    mut net: Net,
    file: &str,
    options: &LoadOptions,
) -> Result<(Model, FileInfo), WeightsError> {
    if net.weights.is_none() {
        return Err(WeightsError::Field {
            file: file.to_owned(),
            field: "weights".to_owned(),
            problem: "missing".to_owned(),
        });
    }
    fix_older_weights_file(&mut net);
    let nf = net
        .format
        .as_ref()
        .and_then(|f| f.network_format)
        .unwrap_or_default();
    let weights = net.weights.as_ref().expect("checked above");
    let reader = Reader::new(file);
    let format = reader.net_format(&nf)?;
    if is_residual_tower(&nf) {
        TowerNetwork::check_heads(&options.policy_head, &options.value_head).map_err(|error| {
            WeightsError::UnknownHead {
                file: file.to_owned(),
                error,
            }
        })?;
        let tower = tower::assemble_tower(&reader, &nf, weights, format)?;
        return Ok((Model::Residual(tower), reader.file_info(&net)));
    }
    reader.check_supported_body(&nf, weights)?;
    let embedding = reader.embedding(weights, &format)?;
    let e = embedding.dense.outputs;
    let (encoders, smolgen_weight_gen) = reader.encoders(weights, &format, e)?;
    let policy_heads = reader.policy_heads(weights, e)?;
    let value_heads = reader.value_heads(weights, e, format.wdl)?;
    let moves_left = if format.moves_left {
        Some(reader.moves_left(weights, e)?)
    } else {
        None
    };
    let dims = derive_dims(
        &embedding,
        &encoders,
        moves_left.as_ref(),
        weights.headcount() as usize,
    );
    let info = reader.file_info(&net);
    let network = Network {
        format,
        dims,
        residual_alpha: residual_alpha(encoders.len()),
        embedding,
        encoders,
        smolgen_weight_gen,
        policy_heads,
        value_heads,
        moves_left,
        selected_policy: 0,
        selected_value: 0,
    };
    let mut network = network;
    network
        .select_heads(&options.policy_head, &options.value_head)
        .map_err(|error| WeightsError::UnknownHead {
            file: file.to_owned(),
            error,
        })?;
    Ok((Model::Attention(network), info))
}

/// Whether the (fixed-up) structure is a residual tower: classical or SE, with head formats.
fn is_residual_tower(nf: &NetworkFormat) -> bool {
    matches!(
        nf.network(),
        NetworkStructure::NetworkClassicalWithHeadformat
            | NetworkStructure::NetworkSeWithHeadformat
    )
}

/// The body's dimensions (head sizes are read from the selected heads themselves).
fn derive_dims(
    embedding: &Embedding,
    encoders: &[EncoderLayer],
    moves_left: Option<&MovesLeftHead>,
    heads: usize,
) -> Dims {
    let first = &encoders[0];
    let d_model = first.q.outputs;
    Dims {
        embedding: embedding.dense.outputs,
        d_model,
        encoders: encoders.len(),
        heads,
        head_depth: d_model / heads,
        dff: first.ffn.dense1.outputs,
        input_width: embedding.dense.inputs,
        dense_size: embedding.dense.inputs - INPUT_PLANES - pe_map_width(embedding),
        smolgen: first.smolgen.as_ref().map(|s| SmolgenDims {
            hidden_channels: s.compress.outputs,
            hidden_size: s.dense1.outputs,
            gen_size: s.dense2.outputs / heads,
        }),
        mlh_embedding: moves_left.map_or(0, |m| m.embedding.outputs),
        mlh_hidden: moves_left.map_or(0, |m| m.hidden.outputs),
    }
}

fn pe_map_width(embedding: &Embedding) -> usize {
    if embedding.pe_dense.is_some() {
        0
    } else {
        SQUARES
    }
}
