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
pub mod network;
mod repeats;
pub mod summary;

pub mod proto {
    //! The prost types generated from `proto/net.proto` (package `pblczero`).
    #![allow(clippy::all, clippy::pedantic, missing_docs)]
    include!(concat!(env!("OUT_DIR"), "/pblczero.rs"));
}

use std::path::Path;

use bytes::Bytes;

pub use assemble::{FileInfo, INPUT_PLANES, LoadOptions, SQUARES};
pub use error::WeightsError;
pub use network::Network;

/// Loads and validates a weights file (gzip or plain protobuf).
pub fn load_file(path: &Path, options: &LoadOptions) -> Result<Network, WeightsError> {
    load_file_with_info(path, options).map(|(network, _)| network)
}

/// Like [`load_file`], also returning what the file says about itself.
pub fn load_file_with_info(
    path: &Path,
    options: &LoadOptions,
) -> Result<(Network, FileInfo), WeightsError> {
    let net = container::read_net_file(path)?;
    assemble::assemble(net, &path.display().to_string(), options)
}

/// Loads and validates a weights file held in memory; `name` identifies it in errors.
pub fn load_bytes(
    bytes: impl Into<Bytes>,
    name: &str,
    options: &LoadOptions,
) -> Result<(Network, FileInfo), WeightsError> {
    let net = container::decode_net(bytes.into(), name)?;
    assemble::assemble(net, name, options)
}
