//! Bad input gives a clear error naming what and where; nothing panics and no damaged file is
//! silently accepted.

use std::io::Write;

use bytes::Bytes;
use flate2::{Compression, write::GzEncoder};
use lc0rs::netgen::{generate, preset};
use lc0rs::weights::codec::LayerEncoding;
use lc0rs::weights::export::to_proto;
use lc0rs::weights::proto::weights::{Layer, Residual};
use lc0rs::weights::proto::{EngineVersion, Net, OnnxModel};
use lc0rs::weights::{LoadOptions, Network, WeightsError, load_bytes, load_file};
use proptest::prelude::*;
use prost::Message;

fn tiny_proto() -> Net {
    to_proto(
        &generate(&preset("tiny").unwrap(), 1),
        LayerEncoding::Linear16,
    )
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

fn load(bytes: impl Into<Bytes>) -> Result<Network, WeightsError> {
    load_bytes(bytes, "test.pb.gz", &LoadOptions::default()).map(|(n, _)| n)
}

/// Loads `net` (as a plain protobuf) and returns the error message it must produce.
fn error_of(net: &Net) -> String {
    match load(net.encode_to_vec()) {
        Ok(_) => panic!("a bad network was accepted"),
        Err(e) => e.to_string(),
    }
}

fn assert_mentions(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(
            message.contains(part),
            "error {message:?} does not mention {part:?}"
        );
    }
}

#[test]
fn every_truncation_is_an_error() {
    let plain = tiny_proto().encode_to_vec();
    let compressed = gzip(&plain);
    for bytes in [&plain, &compressed] {
        let step = (bytes.len() / 400).max(1);
        let cuts = (0..64.min(bytes.len()))
            .chain((64..bytes.len()).step_by(step))
            .chain([bytes.len() - 1]);
        for cut in cuts {
            assert!(
                load(bytes[..cut].to_vec()).is_err(),
                "truncation to {cut} of {} bytes was accepted",
                bytes.len()
            );
        }
    }
    assert!(load(compressed).is_ok(), "the untruncated file loads");
}

#[test]
fn truncated_gzip_names_the_problem() {
    let compressed = gzip(&tiny_proto().encode_to_vec());
    let message = load(compressed[..compressed.len() / 2].to_vec())
        .unwrap_err()
        .to_string();
    assert_mentions(&message, &["test.pb.gz", "gzip"]);
}

#[test]
fn empty_missing_and_retired_formats() {
    assert_mentions(&load(Vec::new()).unwrap_err().to_string(), &["too short"]);
    assert_mentions(
        &load(b"1\nweights".to_vec()).unwrap_err().to_string(),
        &["text weights format 1"],
    );
    assert_mentions(
        &load(gzip(b"2\n0.5 0.25")).unwrap_err().to_string(),
        &["text weights format 2"],
    );
    let missing = load_file(
        std::path::Path::new("/nonexistent/net.pb.gz"),
        &LoadOptions::default(),
    );
    assert!(matches!(missing, Err(WeightsError::Io { .. })));
    assert_mentions(
        &missing.unwrap_err().to_string(),
        &["/nonexistent/net.pb.gz"],
    );
}

#[test]
fn garbage_after_the_gzip_stream_is_an_error() {
    let mut bytes = gzip(&tiny_proto().encode_to_vec());
    bytes.extend_from_slice(b"trailing garbage");
    assert!(load(bytes).is_err());
}

#[test]
fn wrong_magic() {
    let mut net = tiny_proto();
    net.magic = Some(0x1c1);
    assert_mentions(&error_of(&net), &["magic", "0x1c1", "0x1c0"]);
    net.magic = None;
    assert_mentions(&error_of(&net), &["magic"]);
}

#[test]
fn min_version_is_checked() {
    let version = |major, minor, patch| {
        Some(EngineVersion {
            major: Some(major),
            minor: Some(minor),
            patch: Some(patch),
        })
    };
    let mut net = tiny_proto();
    net.min_version = version(0, 34, 0);
    assert_mentions(&error_of(&net), &["v0.34.0", "v0.33.0"]);
    net.min_version = version(1, 0, 0);
    assert!(matches!(
        load(net.encode_to_vec()),
        Err(WeightsError::TooNew { .. })
    ));
    // lc0's special "97.98.99" is always accepted.
    net.min_version = version(97, 98, 99);
    assert!(load(net.encode_to_vec()).is_ok());
}

#[test]
fn old_files_must_declare_linear16() {
    let mut net = tiny_proto();
    net.format.as_mut().unwrap().weights_encoding = Some(0);
    assert_mentions(&error_of(&net), &["format.weights_encoding", "LINEAR16"]);
}

#[test]
fn unsupported_networks() {
    let mut net = tiny_proto();
    net.weights
        .as_mut()
        .unwrap()
        .residual
        .push(Residual::default());
    assert_mentions(&error_of(&net), &["unsupported", "residual tower"]);

    let mut net = tiny_proto();
    let mha = net.weights.as_mut().unwrap().encoder[1]
        .mha
        .as_mut()
        .unwrap();
    mha.rpe_q = Some(Layer::default());
    assert_mentions(&error_of(&net), &["RPE", "encoder[1]"]);

    let net = Net {
        magic: Some(0x1c0),
        onnx_model: Some(OnnxModel::default()),
        ..Default::default()
    };
    assert_mentions(&error_of(&net), &["ONNX"]);

    // No network format: lc0 treats it as a classical residual network, which this one lacks.
    let mut net = tiny_proto();
    net.format.as_mut().unwrap().network_format = None;
    assert_mentions(&error_of(&net), &["weights.residual", "at least one block"]);

    let mut net = tiny_proto();
    net.format
        .as_mut()
        .unwrap()
        .network_format
        .as_mut()
        .unwrap()
        .policy = Some(2);
    assert_mentions(&error_of(&net), &["POLICY_CONVOLUTION"]);

    let mut net = tiny_proto();
    net.format
        .as_mut()
        .unwrap()
        .network_format
        .as_mut()
        .unwrap()
        .ffn_activation = Some(9);
    assert_mentions(&error_of(&net), &["ffn_activation", "SOFTMAX"]);

    let mut net = tiny_proto();
    net.format
        .as_mut()
        .unwrap()
        .network_format
        .as_mut()
        .unwrap()
        .input = Some(77);
    assert_mentions(&error_of(&net), &["network_format.input", "77"]);
}

#[test]
fn wrong_shapes_name_the_field_and_sizes() {
    let mut net = tiny_proto();
    let w = net.weights.as_mut().unwrap();
    let q_w = w.encoder[1].mha.as_mut().unwrap().q_w.as_mut().unwrap();
    let params = q_w.params.take().unwrap();
    q_w.params = Some(params.slice(..params.len() - 2));
    let message = error_of(&net);
    assert_mentions(
        &message,
        &[
            "weights.encoder[1].mha.q_w",
            "expected 4096",
            "[64][64]",
            "found 4095",
        ],
    );

    let mut net = tiny_proto();
    net.weights.as_mut().unwrap().encoder[0]
        .ffn
        .as_mut()
        .unwrap()
        .dense2_b = None;
    assert_mentions(
        &error_of(&net),
        &["weights.encoder[0].ffn.dense2_b", "missing"],
    );

    let mut net = tiny_proto();
    net.weights.as_mut().unwrap().smolgen_w = None;
    assert_mentions(&error_of(&net), &["weights.smolgen_w", "missing"]);

    let mut net = tiny_proto();
    net.weights.as_mut().unwrap().headcount = Some(3);
    assert_mentions(&error_of(&net), &["weights.headcount", "3 heads"]);

    let mut net = tiny_proto();
    net.weights.as_mut().unwrap().encoder[1]
        .mha
        .as_mut()
        .unwrap()
        .smolgen = None;
    assert_mentions(
        &error_of(&net),
        &["weights.encoder[1].mha.smolgen", "absent"],
    );
}

#[test]
fn bad_layer_data_names_the_field() {
    let mut net = tiny_proto();
    net.weights
        .as_mut()
        .unwrap()
        .ip_emb_b
        .as_mut()
        .unwrap()
        .encoding = Some(42);
    assert_mentions(
        &error_of(&net),
        &["weights.ip_emb_b", "unknown layer encoding 42"],
    );

    let mut net = tiny_proto();
    net.weights
        .as_mut()
        .unwrap()
        .ip2_val_b
        .as_mut()
        .unwrap()
        .max_val = Some(f32::NAN);
    assert_mentions(&error_of(&net), &["weights.ip2_val_b", "LINEAR16 range"]);
}

#[test]
fn unknown_head_names_list_the_available_ones() {
    let bytes = tiny_proto().encode_to_vec();
    let options = LoadOptions {
        policy_head: "optimistic".into(),
        ..Default::default()
    };
    let message = load_bytes(bytes, "x", &options).unwrap_err().to_string();
    assert_mentions(&message, &["policy head", "optimistic", "vanilla"]);
}

fn tiny_gzip() -> &'static [u8] {
    static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BYTES.get_or_init(|| gzip(&tiny_proto().encode_to_vec()))
}

fn tiny_network() -> &'static Network {
    static NET: std::sync::OnceLock<Network> = std::sync::OnceLock::new();
    NET.get_or_init(|| load(tiny_gzip().to_vec()).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A flipped bit anywhere in a gzip file either fails to load or changes nothing that is
    /// loaded (gzip's CRC-32 catches every flip in the data; header flags like the mtime
    /// are harmless).
    #[test]
    fn bit_flips_are_errors_or_harmless(bit in 0usize..(tiny_gzip().len() * 8)) {
        let mut bytes = tiny_gzip().to_vec();
        bytes[bit / 8] ^= 1 << (bit % 8);
        if let Ok(network) = load(bytes) {
            prop_assert!(&network == tiny_network(), "bit {} flipped and a different network loaded", bit);
        }
    }

    #[test]
    fn random_bytes_are_errors(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        prop_assert!(load(bytes.clone()).is_err());
        prop_assert!(load(gzip(&bytes)).is_err());
    }
}
