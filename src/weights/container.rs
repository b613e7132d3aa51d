//! The file around the network: gzip (or a plain protobuf), the `pblczero.Net` message, lc0's
//! magic number, the minimum-version check and the file-level encoding check.

use std::io::Read;
use std::path::Path;

use bytes::Bytes;
use flate2::read::MultiGzDecoder;
use prost::Message;

use super::error::WeightsError;
use super::proto::{Net, format::Encoding as FileEncoding};

/// `Net.magic` of every lc0 weights file.
pub const MAGIC: u32 = 0x1c0;

/// A `min_version` that lc0 always accepts ("97.98.99").
const ALWAYS_ACCEPTED_VERSION: u32 = 0x5c9_9973;

/// Decompressed files larger than this are refused instead of exhausting memory (BT4 in
/// FLOAT32 is about 0.7 GB).
pub const MAX_DECOMPRESSED_BYTES: u64 = 4 << 30;

/// An lc0 version as `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Version {
    /// lc0's single-number form `major·1e6 + minor·1e3 + patch`.
    pub fn number(self) -> u32 {
        self.major
            .saturating_mul(1_000_000)
            .saturating_add(self.minor.saturating_mul(1_000))
            .saturating_add(self.patch)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "v{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The newest lc0 file format lc0rs reads: lc0 master's (per-layer encodings, `dims`).
pub const SUPPORTED_VERSION: Version = Version {
    major: 0,
    minor: 33,
    patch: 0,
};

/// From this version on, layers may use encodings other than LINEAR16 (lc0 master's rule).
const PER_LAYER_ENCODING_VERSION: Version = SUPPORTED_VERSION;

/// Reads and decodes a `.pb.gz` or `.pb` file. Gzip files are decompressed as they are read,
/// so the compressed bytes are never held in memory as a whole.
pub fn read_net_file(path: &Path) -> Result<Net, WeightsError> {
    let file = path.display().to_string();
    let io_error = |error| WeightsError::Io {
        file: file.clone(),
        error,
    };
    let mut reader = std::fs::File::open(path).map_err(io_error)?;
    let mut magic = [0u8; 2];
    let magic_len = read_up_to(&mut reader, &mut magic).map_err(io_error)?;
    let payload = if magic[..magic_len] == [0x1f, 0x8b] {
        let size_hint = gzip_size_hint(&mut reader).map_err(io_error)?;
        let compressed = std::io::BufReader::with_capacity(1 << 20, reader);
        gunzip(
            std::io::Cursor::new(magic).chain(compressed),
            size_hint,
            &file,
        )?
    } else {
        let mut bytes = magic[..magic_len].to_vec();
        reader.read_to_end(&mut bytes).map_err(io_error)?;
        bytes
    };
    decode_payload(Bytes::from(payload), &file)
}

/// Reads until `buf` is full or the file ends; returns how many bytes were read.
fn read_up_to(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// The most a weights file is expected to shrink under gzip: lc0's LINEAR16 and float layers
/// compress by 1.1-2×; a declared size beyond this many times the compressed size is not
/// believed.
const PLAUSIBLE_GZIP_RATIO: u64 = 8;

/// The largest output buffer allocated up front from a size hint (BT4 in FLOAT32 fits);
/// bigger outputs grow as they are decompressed.
const MAX_PREALLOCATED_BYTES: u64 = 1 << 30;

/// The output buffer size to allocate up front for a gzip file of `compressed_len` bytes
/// whose trailer declares `declared` uncompressed bytes (ISIZE, the size mod 2³²). A corrupt,
/// truncated or padded file declares anything, so the declaration is only believed where it
/// is plausible for the compressed size; otherwise the compressed size itself is the guess. A
/// wrong guess costs a regrowth of the buffer, never more than a small multiple of the real
/// decompressed size.
pub fn gzip_buffer_hint(compressed_len: u64, declared: Option<u32>) -> usize {
    let plausible = compressed_len.saturating_mul(PLAUSIBLE_GZIP_RATIO);
    let hint = match declared.map(u64::from) {
        Some(size) if size <= plausible => size,
        _ => compressed_len,
    };
    usize::try_from(hint.min(MAX_PREALLOCATED_BYTES)).unwrap_or(0)
}

/// The output buffer hint for a gzip file (see [`gzip_buffer_hint`]); the reader is left at
/// offset 2.
fn gzip_size_hint(file: &mut std::fs::File) -> std::io::Result<usize> {
    use std::io::{Seek, SeekFrom};
    let len = file.seek(SeekFrom::End(0))?;
    // A gzip member is at least 18 bytes (10 header, 8 trailer).
    let declared = if len >= 18 {
        let mut trailer = [0u8; 4];
        file.seek(SeekFrom::End(-4))?;
        file.read_exact(&mut trailer)?;
        Some(u32::from_le_bytes(trailer))
    } else {
        None
    };
    file.seek(SeekFrom::Start(2))?;
    Ok(gzip_buffer_hint(len, declared))
}

/// Decodes the bytes of a weights file (gzip or plain); `file` names it in errors.
pub fn decode_net(bytes: Bytes, file: &str) -> Result<Net, WeightsError> {
    let payload = if bytes.starts_with(&[0x1f, 0x8b]) {
        let declared = bytes
            .len()
            .checked_sub(4)
            .filter(|_| bytes.len() >= 18)
            .map(|at| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]));
        let hint = gzip_buffer_hint(bytes.len() as u64, declared);
        Bytes::from(gunzip(&bytes[..], hint, file)?)
    } else {
        bytes
    };
    decode_payload(payload, file)
}

/// Decodes the decompressed protobuf and checks lc0's header fields.
fn decode_payload(payload: Bytes, file: &str) -> Result<Net, WeightsError> {
    check_payload_kind(&payload, file)?;
    super::repeats::check_repeated(&payload, file)?;
    let net = Net::decode(payload).map_err(|error| WeightsError::Protobuf {
        file: file.to_owned(),
        error,
    })?;
    check_header(&net, file)?;
    Ok(net)
}

/// Decompresses a whole gzip stream into a buffer first sized by `size_hint`. Memory that
/// cannot be had is an error naming the size (the buffer grows with `try_reserve`, never by
/// aborting the process), and output beyond [`MAX_DECOMPRESSED_BYTES`] is refused.
fn gunzip(compressed: impl Read, size_hint: usize, file: &str) -> Result<Vec<u8>, WeightsError> {
    let out_of_memory = |bytes: usize| WeightsError::OutOfMemory {
        file: file.to_owned(),
        bytes,
    };
    let mut out = Vec::new();
    // One byte more than the hint, so that reading the end does not double the buffer.
    let initial = size_hint.saturating_add(1);
    out.try_reserve_exact(initial)
        .map_err(|_| out_of_memory(initial))?;
    // `read_to_end` grows the buffer with `try_reserve` and reports failure as OutOfMemory.
    let read = MultiGzDecoder::new(compressed)
        .take(MAX_DECOMPRESSED_BYTES + 1)
        .read_to_end(&mut out);
    match read {
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::OutOfMemory => {
            return Err(out_of_memory(out.len().saturating_mul(2)));
        }
        Err(error) => {
            return Err(WeightsError::Gzip {
                file: file.to_owned(),
                error,
            });
        }
    }
    if out.len() as u64 > MAX_DECOMPRESSED_BYTES {
        return Err(WeightsError::TooLarge {
            file: file.to_owned(),
            limit: MAX_DECOMPRESSED_BYTES,
        });
    }
    // A hint larger than the data (a wrong trailer) must not stay allocated while decoding.
    if out.capacity() - out.len() > out.len() / 4 {
        out.shrink_to_fit();
    }
    Ok(out)
}

/// lc0 refuses payloads shorter than 2 bytes and its two retired text formats.
fn check_payload_kind(payload: &[u8], file: &str) -> Result<(), WeightsError> {
    let what = if payload.len() < 2 {
        "file is empty or too short to be a network"
    } else if payload.starts_with(b"1\n") {
        "text weights format 1 is no longer supported"
    } else if payload.starts_with(b"2\n") {
        "text weights format 2 is no longer supported"
    } else {
        return Ok(());
    };
    Err(WeightsError::NotWeights {
        file: file.to_owned(),
        what: what.to_owned(),
    })
}

/// The `min_version` a file declares (0.0.0 when absent).
pub fn min_version(net: &Net) -> Version {
    let v = net.min_version.unwrap_or_default();
    Version {
        major: v.major(),
        minor: v.minor(),
        patch: v.patch(),
    }
}

fn check_header(net: &Net, file: &str) -> Result<(), WeightsError> {
    let magic = net.magic();
    if magic != MAGIC {
        return Err(WeightsError::BadMagic {
            file: file.to_owned(),
            found: magic,
            expected: MAGIC,
        });
    }
    let required = min_version(net);
    if required.number() != ALWAYS_ACCEPTED_VERSION && required > SUPPORTED_VERSION {
        return Err(WeightsError::TooNew {
            file: file.to_owned(),
            required: required.to_string(),
            supported: SUPPORTED_VERSION.to_string(),
        });
    }
    if net.onnx_model.is_some() {
        return Err(WeightsError::Unsupported {
            file: file.to_owned(),
            what: "an ONNX model; lc0rs reads lc0's own weights format".to_owned(),
        });
    }
    let encoding = net.format.as_ref().and_then(|f| f.weights_encoding);
    if required < PER_LAYER_ENCODING_VERSION && encoding != Some(FileEncoding::Linear16 as i32) {
        return Err(WeightsError::Field {
            file: file.to_owned(),
            field: "format.weights_encoding".to_owned(),
            problem: format!(
                "is {}, but networks older than {PER_LAYER_ENCODING_VERSION} must be LINEAR16",
                encoding.map_or("absent".to_owned(), |e| e.to_string())
            ),
        });
    }
    Ok(())
}

/// The `min_version` lc0rs writes for a file whose layers use `per_layer_encodings`.
pub fn version_for_writing(per_layer_encodings: bool) -> Version {
    if per_layer_encodings {
        PER_LAYER_ENCODING_VERSION
    } else {
        Version {
            major: 0,
            minor: 30,
            patch: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_plausible_declared_size_sizes_the_buffer() {
        assert_eq!(gzip_buffer_hint(MIB, Some(3 << 20)), 3 << 20);
        assert_eq!(gzip_buffer_hint(MIB, Some(8 << 20)), 8 << 20);
        assert_eq!(gzip_buffer_hint(100, Some(0)), 0);
    }

    #[test]
    fn an_implausible_declared_size_falls_back_to_the_compressed_size() {
        // A truncated 1 MiB file whose last four bytes read as 4 GiB - 1.
        assert_eq!(gzip_buffer_hint(MIB, Some(u32::MAX)), 1 << 20);
        assert_eq!(gzip_buffer_hint(MIB, Some((8 << 20) + 1)), 1 << 20);
        // Only the gzip magic: no trailer at all.
        assert_eq!(gzip_buffer_hint(2, None), 2);
    }

    #[test]
    fn no_hint_exceeds_the_preallocation_cap() {
        let cap = MAX_PREALLOCATED_BYTES as usize;
        assert_eq!(gzip_buffer_hint(3 << 30, Some(u32::MAX)), cap);
        assert_eq!(gzip_buffer_hint(u64::MAX, None), cap);
    }
}
