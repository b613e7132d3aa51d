//! The one error type of weights loading and writing. Every message names the file and, where
//! one exists, the field path (`weights.encoder[3].mha.q_w`), so a user can see what and where.

use super::codec::CodecError;

/// Why a weights file could not be read, decoded or accepted.
#[derive(Debug, thiserror::Error)]
pub enum WeightsError {
    #[error("{file}: cannot read: {source}")]
    Io {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: cannot write: {source}")]
    Write {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: corrupt or truncated gzip data: {source}")]
    Gzip {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: decompressed data exceeds the {limit}-byte limit for a weights file")]
    TooLarge { file: String, limit: u64 },
    #[error("{file}: {what}")]
    NotWeights { file: String, what: String },
    #[error("{file}: not an lc0 network: protobuf decoding failed: {source}")]
    Protobuf {
        file: String,
        source: prost::DecodeError,
    },
    #[error("{file}: magic {found:#x} is not lc0's {expected:#x}: not an lc0 network")]
    BadMagic {
        file: String,
        found: u32,
        expected: u32,
    },
    #[error(
        "{file}: the network needs lc0 {required} or newer; lc0rs reads networks up to {supported}"
    )]
    TooNew {
        file: String,
        required: String,
        supported: String,
    },
    #[error("{file}: unsupported network: {what}")]
    Unsupported { file: String, what: String },
    #[error("{file}: {field}: {problem}")]
    Field {
        file: String,
        field: String,
        problem: String,
    },
    #[error("{file}: {field}: expected {expected} values ({shape}), found {found}")]
    Shape {
        file: String,
        field: String,
        expected: usize,
        shape: String,
        found: usize,
    },
    #[error("{file}: {field}: {source}")]
    Layer {
        file: String,
        field: String,
        source: CodecError,
    },
    #[error("{file}: {source}")]
    UnknownHead {
        file: String,
        source: super::network::UnknownHead,
    },
}
