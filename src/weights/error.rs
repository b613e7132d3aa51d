//! The one error type of weights loading and writing. Every message names the file and, where
//! one exists, the field path (`weights.encoder[3].mha.q_w`), so a user can see what and where.

use super::codec::CodecError;

/// Why a weights file could not be read, decoded or accepted. Each message is complete on
/// its own (the underlying error is part of the text, not a separate `source`).
#[derive(Debug, thiserror::Error)]
pub enum WeightsError {
    #[error("{file}: cannot read: {error}")]
    Io { file: String, error: std::io::Error },
    #[error("{file}: cannot write: {error}")]
    Write { file: String, error: std::io::Error },
    #[error("{file}: corrupt or truncated gzip data: {error}")]
    Gzip { file: String, error: std::io::Error },
    #[error("{file}: decompressed data exceeds the {limit}-byte limit for a weights file")]
    TooLarge { file: String, limit: u64 },
    #[error("{file}: cannot allocate {bytes} bytes to decompress the file")]
    OutOfMemory { file: String, bytes: usize },
    #[error("{file}: {what}")]
    NotWeights { file: String, what: String },
    #[error("{file}: not an lc0 network: protobuf decoding failed: {error}")]
    Protobuf {
        file: String,
        error: prost::DecodeError,
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
    #[error("{file}: {field}: {error}")]
    Layer {
        file: String,
        field: String,
        error: CodecError,
    },
    #[error("{file}: {error}")]
    UnknownHead {
        file: String,
        error: super::network::UnknownHead,
    },
}
