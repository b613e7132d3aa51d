//! Generated networks survive writing and loading: every preset, every layer encoding.

mod common;

use lc0rs::netgen::{PRESET_NAMES, generate, preset};
use lc0rs::weights::codec::{LayerEncoding, round_trip_tolerance};
use lc0rs::weights::container::decode_net;
use lc0rs::weights::export::{to_proto, write_net_file};
use lc0rs::weights::network::Network;
use lc0rs::weights::{LoadOptions, load_bytes, load_file};
use prost::Message;

/// Asserts that `loaded` is `original` up to the encoding's rounding, tensor by tensor.
fn assert_round_trip(original: &Network, loaded: &Network, encoding: LayerEncoding) {
    assert_eq!(loaded.format, original.format);
    assert_eq!(loaded.dims, original.dims);
    assert_eq!(loaded.residual_alpha, original.residual_alpha);
    let (a, b) = (common::tensors(original), common::tensors(loaded));
    let names = |t: &[(String, &[f32])]| {
        t.iter()
            .map(|(n, v)| (n.clone(), v.len()))
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&a), names(&b), "tensor sets differ");
    for ((name, want), (_, got)) in a.iter().zip(&b) {
        let min = want.iter().copied().fold(f32::INFINITY, f32::min);
        let max = want.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        for (i, (w, g)) in want.iter().zip(got.iter()).enumerate() {
            let tol = round_trip_tolerance(encoding, *w, min, max);
            assert!(
                (w - g).abs() <= tol,
                "{name}[{i}]: wrote {w}, read {g}, tolerance {tol} ({encoding:?})"
            );
        }
    }
    // The LayerNorm eps values come from lc0's rules, not from the file.
    for (l, o) in loaded.encoders.iter().zip(&original.encoders) {
        assert_eq!((l.ln1.eps, l.ln2.eps), (o.ln1.eps, o.ln2.eps));
    }
}

fn round_trip_in_memory(name: &str, encodings: &[LayerEncoding]) {
    let original = generate(&preset(name).unwrap(), 7);
    for &encoding in encodings {
        let bytes = to_proto(&original, encoding).encode_to_vec();
        let (loaded, info) = load_bytes(bytes, name, &LoadOptions::default()).unwrap();
        assert_eq!(info.layer_encodings, vec![encoding]);
        assert_round_trip(&original, &loaded, encoding);
    }
}

#[test]
fn tiny_presets_round_trip_every_encoding_through_files() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["tiny", "tiny-dense"] {
        let original = generate(&preset(name).unwrap(), 3);
        for encoding in LayerEncoding::ALL {
            for ext in ["pb.gz", "pb"] {
                let path = dir.path().join(format!("{name}-{}.{ext}", encoding.name()));
                write_net_file(&to_proto(&original, encoding), &path, &mut |_, _| {}).unwrap();
                let loaded = load_file(&path, &LoadOptions::default()).unwrap();
                assert_round_trip(&original, &loaded, encoding);
            }
        }
    }
}

#[test]
fn t82_round_trips_linear16_and_float16() {
    round_trip_in_memory("t82", &[LayerEncoding::Linear16, LayerEncoding::Float16]);
}

#[test]
fn bt4_round_trips_linear16_and_float16() {
    round_trip_in_memory("bt4", &[LayerEncoding::Linear16, LayerEncoding::Float16]);
}

#[test]
fn every_preset_name_resolves() {
    for name in PRESET_NAMES {
        assert!(preset(name).is_some(), "{name}");
    }
    assert!(preset("t83").is_none());
}

#[test]
fn generation_is_deterministic_in_the_seed() {
    let arch = preset("tiny").unwrap();
    assert_eq!(generate(&arch, 5), generate(&arch, 5));
    assert_ne!(
        generate(&arch, 5).encoders[0].q.weights,
        generate(&arch, 6).encoders[0].q.weights
    );
}

/// The shipped nets are exactly what `gen-net --preset NAME --seed 1` writes today.
#[test]
fn bundled_nets_are_reproducible_from_gen_net() {
    for name in ["tiny", "tiny-dense"] {
        let shipped = std::fs::read(format!(
            "{}/weights/{name}.pb.gz",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let shipped = decode_net(shipped.into(), name).unwrap();
        let regenerated = to_proto(
            &generate(&preset(name).unwrap(), 1),
            LayerEncoding::Linear16,
        );
        assert!(
            shipped == regenerated,
            "weights/{name}.pb.gz differs from gen-net's output; regenerate it"
        );
    }
}

#[test]
fn multi_head_nets_select_heads_by_name() {
    let original = generate(&preset("tiny-dense").unwrap(), 9);
    let bytes = to_proto(&original, LayerEncoding::Float32).encode_to_vec();
    let options = LoadOptions {
        policy_head: "soft".into(),
        value_head: "q".into(),
    };
    let (n, _) = load_bytes(bytes.clone(), "x", &options).unwrap();
    assert_eq!((n.policy_head_name(), n.value_head_name()), ("soft", "q"));
    assert_eq!(n.policy(), &original.policy_heads[2].head);
    assert_eq!(n.value(), &original.value_heads[1].head);
    let (n, _) = load_bytes(bytes, "x", &LoadOptions::default()).unwrap();
    assert_eq!(n.policy(), &original.policy_heads[0].head);
    assert_eq!(n.value(), &original.value_heads[0].head);
}
