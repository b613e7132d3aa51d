//! lc0 weights files: reading (`.pb.gz` or `.pb`), lc0's fix-ups and checks, the typed network
//! description the backends consume, and writing files back.

mod assemble;
pub mod codec;
pub mod container;
pub mod cost;
mod error;
pub mod export;
mod fixups;
pub mod format;
pub mod model;
pub mod network;
mod repeats;
pub mod summary;
pub mod tower;
pub mod tower_export;
pub mod tower_summary;

pub mod proto {
    //! The prost types generated from `proto/net.proto` (package `pblczero`).
    #![allow(clippy::all, clippy::pedantic, missing_docs)]
    include!(concat!(env!("OUT_DIR"), "/pblczero.rs"));
}

use std::path::Path;

use bytes::Bytes;

pub use assemble::{BATCH_NORM_EPSILON, FileInfo, LoadOptions};
pub use error::WeightsError;
pub use model::Model;
pub use network::Network;

/// Loads and validates an attention-body weights file (gzip or plain protobuf).
pub fn load_file(path: &Path, options: &LoadOptions) -> Result<Network, WeightsError> {
    load_file_with_info(path, options).map(|(network, _)| network)
}

/// Like [`load_file`], also returning what the file says about itself.
pub fn load_file_with_info(
    path: &Path,
    options: &LoadOptions,
) -> Result<(Network, FileInfo), WeightsError> {
    let file = path.display().to_string();
    attention_only(load_model_file_with_info(path, options), &file)
}

/// Loads and validates an attention-body weights file held in memory; `name` identifies it in
/// errors.
pub fn load_bytes(
    bytes: impl Into<Bytes>,
    name: &str,
    options: &LoadOptions,
) -> Result<(Network, FileInfo), WeightsError> {
    attention_only(load_model_bytes(bytes, name, options), name)
}

/// Loads and validates a weights file of either body (attention or residual tower).
pub fn load_model_file_with_info(
    path: &Path,
    options: &LoadOptions,
) -> Result<(Model, FileInfo), WeightsError> {
    let net = container::read_net_file(path)?;
    assemble::assemble(net, &path.display().to_string(), options)
}

/// Like [`load_model_file_with_info`] for a file held in memory; `name` identifies it in errors.
pub fn load_model_bytes(
    bytes: impl Into<Bytes>,
    name: &str,
    options: &LoadOptions,
) -> Result<(Model, FileInfo), WeightsError> {
    let net = container::decode_net(bytes.into(), name)?;
    assemble::assemble(net, name, options)
}

/// The attention-body network of a loaded model, or an error naming the body it has instead.
fn attention_only(
    loaded: Result<(Model, FileInfo), WeightsError>,
    file: &str,
) -> Result<(Network, FileInfo), WeightsError> {
    match loaded? {
        (Model::Attention(network), info) => Ok((network, info)),
        (Model::Residual(tower), _) => Err(WeightsError::Unsupported {
            file: file.to_owned(),
            what: format!(
                "a residual tower ({} blocks × {} filters) where an attention-body network is needed",
                tower.blocks.len(),
                tower.filters()
            ),
        }),
    }
}
