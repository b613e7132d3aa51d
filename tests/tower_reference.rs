//! Residual-tower networks on the cpu backend against a naive f64 forward pass written only
//! for this test: plain loops over the stored (unfolded) batch norm, its own 3×3 convolution,
//! squeeze-excitation, heads and policy maps; only the file's values and the input planes are
//! shared. Also the loader's field-named errors for broken tower files.

mod common;

use common::naive_tower::{move_keys, naive_forward};
use common::tower::{SMALL_SE_TOWER, TowerSpec, raw_tower, to_net};
use lc0rs::backend::create_backend;
use lc0rs::chess::{HistoryFill, InputPlanes, PositionHistory, encode_position};
use lc0rs::weights::format::InputFormat;
use lc0rs::weights::proto::Net;
use lc0rs::weights::proto::network_format::{NetworkStructure, PolicyFormat};
use lc0rs::weights::{LoadOptions, Model, load_model_bytes};
use prost::Message;

/// Positions from seeded random games: both colours, opening to endgame.
fn random_positions(count: usize, seed: u64) -> Vec<InputPlanes> {
    let mut rng = common::tower::Rng(seed);
    (0..count)
        .map(|_| {
            let mut history = PositionHistory::startpos();
            let plies = rng.next() % 90;
            for _ in 0..plies {
                let legal = history.last().legal_moves();
                if legal.is_empty() {
                    break;
                }
                history.play(legal[(rng.next() % legal.len() as u64) as usize]);
            }
            encode_position(&history, InputFormat::Classical112, HistoryFill::FenOnly).planes
        })
        .collect()
}

fn load(net: &Net) -> Model {
    load_model_bytes(net.encode_to_vec(), "tower.pb", &LoadOptions::default())
        .unwrap()
        .0
}

/// Evaluates `spec` on the cpu backend and compares every output with the naive pass.
fn compare(spec: TowerSpec, structure: NetworkStructure, seed: u64) {
    let raw = raw_tower(&spec, seed);
    let model = load(&to_net(&raw, structure));
    assert!(matches!(model, Model::Residual(_)));
    let backend = create_backend("cpu", model, "threads=2").unwrap();
    let inputs = random_positions(5, seed);
    let out = backend.evaluate(&inputs).unwrap();
    let keys = move_keys();
    for (i, planes) in inputs.iter().enumerate() {
        let want = naive_forward(&raw, planes, &keys);
        // f32 against f64: the cpu backend's sums run in the order of the SIMD width the CPU
        // has (an AVX-512 machine measured 2.6e-5 on one policy logit of the classical head,
        // whose FC sums 2,048 products after the tower); a wrong weight, index or formula is
        // off by orders of magnitude more.
        let close = |got: f32, want: f64| (got as f64 - want).abs() <= 1e-4 * want.abs().max(1.0);
        assert!(close(out.q[i], want.q), "q {} vs {}", out.q[i], want.q);
        assert!(close(out.d[i], want.d), "d {} vs {}", out.d[i], want.d);
        assert!(close(out.m[i], want.m), "m {} vs {}", out.m[i], want.m);
        for (j, (&got, &w)) in out.policy_of(i).iter().zip(&want.policy).enumerate() {
            assert!(close(got, w), "position {i} policy[{j}]: {got} vs {w}");
        }
    }
}

/// The GPU tests' small SE tower with ReLU.
const SE: TowerSpec = TowerSpec {
    mish: false,
    ..SMALL_SE_TOWER
};

#[test]
fn se_tower_with_convolution_policy_wdl_and_moves_left() {
    compare(SE, NetworkStructure::NetworkSeWithHeadformat, 11);
}

#[test]
fn mish_se_tower_with_attention_policy() {
    let spec = TowerSpec {
        policy: PolicyFormat::PolicyAttention,
        mish: true,
        ..SE
    };
    compare(spec, NetworkStructure::NetworkSeWithHeadformat, 12);
}

#[test]
fn classical_tower_with_classical_heads_and_old_batch_norm() {
    let spec = TowerSpec {
        se_channels: None,
        policy: PolicyFormat::PolicyClassical,
        wdl: false,
        moves_left: false,
        old_batch_norm: true,
        ..SE
    };
    compare(spec, NetworkStructure::NetworkClassicalWithHeadformat, 13);
}

#[test]
fn old_network_formats_become_classical_heads() {
    // NETWORK_SE (and NETWORK_CLASSICAL) files get classical policy and value heads whatever
    // the file says (lc0's fix-ups): the classical heads are read, the WDL flag is dropped.
    let spec = TowerSpec {
        policy: PolicyFormat::PolicyClassical,
        wdl: false,
        moves_left: false,
        ..SE
    };
    let raw = raw_tower(&spec, 14);
    let mut net = to_net(&raw, NetworkStructure::NetworkSe);
    let nf = net
        .format
        .as_mut()
        .unwrap()
        .network_format
        .as_mut()
        .unwrap();
    nf.policy = Some(PolicyFormat::PolicyConvolution as i32);
    nf.value = Some(2);
    let Model::Residual(tower) = load(&net) else {
        panic!("not a tower")
    };
    assert_eq!(tower.policy.kind(), "classical");
    assert!(!tower.format.wdl);
    assert!(tower.has_se());
}

fn error_of(net: &Net) -> String {
    match load_model_bytes(net.encode_to_vec(), "tower.pb", &LoadOptions::default()) {
        Ok(_) => panic!("a broken tower was accepted"),
        Err(e) => e.to_string(),
    }
}

fn assert_mentions(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(
            message.contains(part),
            "{message:?} does not mention {part:?}"
        );
    }
}

#[test]
fn broken_towers_name_the_field() {
    let good = to_net(
        &raw_tower(&SE, 15),
        NetworkStructure::NetworkSeWithHeadformat,
    );
    let edit = |f: &dyn Fn(&mut lc0rs::weights::proto::Weights)| {
        let mut net = good.clone();
        f(net.weights.as_mut().unwrap());
        error_of(&net)
    };
    assert_mentions(&edit(&|w| w.input = None), &["weights.input", "missing"]);
    assert_mentions(
        &edit(&|w| {
            let conv2 = w.residual[1].conv2.as_mut().unwrap();
            let mut values =
                lc0rs::weights::codec::decode_layer(conv2.weights.as_ref().unwrap()).unwrap();
            values.pop();
            conv2.weights = Some(lc0rs::weights::codec::encode_layer(
                &values,
                lc0rs::weights::codec::LayerEncoding::Float32,
                &[],
            ));
        }),
        &["weights.residual[1].conv2.weights", "[8][8][3][3]"],
    );
    assert_mentions(
        &edit(&|w| {
            let conv1 = w.residual[0].conv1.as_mut().unwrap();
            conv1.bn_stddivs = Some(lc0rs::weights::codec::encode_layer(
                &[-1.0; 8],
                lc0rs::weights::codec::LayerEncoding::Float32,
                &[],
            ));
        }),
        &["weights.residual[0].conv1.bn_stddivs[0]", "variance"],
    );
    assert_mentions(
        &edit(&|w| w.residual[0].se.as_mut().unwrap().w2 = None),
        &["weights.residual[0].se.w2", "missing"],
    );
    assert_mentions(&edit(&|w| w.residual.clear()), &["weights.residual"]);
    assert_mentions(
        &edit(&|w| w.policy1 = None),
        &["weights.policy1", "missing"],
    );
    assert_mentions(
        &edit(&|w| w.ip2_val_b = None),
        &["weights.ip2_val_b", "missing"],
    );
    assert_mentions(
        &edit(&|w| w.moves_left = None),
        &["weights.moves_left", "missing"],
    );
}

#[test]
fn towers_have_only_lc0s_default_head_names() {
    let net = to_net(
        &raw_tower(&SE, 16),
        NetworkStructure::NetworkSeWithHeadformat,
    );
    let options = LoadOptions {
        policy_head: "optimistic".to_owned(),
        ..LoadOptions::default()
    };
    let message = load_model_bytes(net.encode_to_vec(), "tower.pb", &options)
        .unwrap_err()
        .to_string();
    assert_mentions(&message, &["optimistic", "vanilla"]);
    let model = load(&net);
    let error = create_backend("cpu", model, "value_head=q").err().unwrap();
    assert_mentions(&error.to_string(), &["\"q\"", "winner"]);
}

#[test]
fn generated_towers_round_trip_exactly_and_match_the_naive_pass() {
    use lc0rs::netgen::{generate_tower, tower_preset};
    use lc0rs::weights::codec::LayerEncoding;
    use lc0rs::weights::tower_export::tower_to_proto;
    let tower = generate_tower(&tower_preset("tiny-se").unwrap(), 3);
    let net = tower_to_proto(&tower, LayerEncoding::Float32);
    assert_eq!(load(&net), Model::Residual(tower.clone()));

    let raw = common::tower::from_net(&net);
    let backend = create_backend("cpu", tower, "").unwrap();
    let inputs = random_positions(3, 21);
    let out = backend.evaluate(&inputs).unwrap();
    let keys = move_keys();
    for (i, planes) in inputs.iter().enumerate() {
        let want = naive_forward(&raw, planes, &keys);
        assert!((out.q[i] as f64 - want.q).abs() < 2e-5);
        assert!((out.m[i] as f64 - want.m).abs() < 2e-5 * want.m.abs().max(1.0));
        for (&got, &w) in out.policy_of(i).iter().zip(&want.policy) {
            assert!((got as f64 - w).abs() < 2e-5 * w.abs().max(1.0));
        }
    }
}

#[test]
fn tower_presets_have_their_published_shapes() {
    use lc0rs::netgen::tower_preset;
    let t78 = tower_preset("t78").unwrap();
    assert_eq!(
        (t78.blocks, t78.filters, t78.se_channels),
        (40, 512, Some(32))
    );
    assert!(t78.format.wdl && t78.format.moves_left);
    let tiny = tower_preset("tiny-se").unwrap();
    assert!(tiny.se_channels.is_some() && tiny.format.moves_left);
    assert!(tower_preset("t79").is_none());
}

/// The GPU backends take towers: where there is no such GPU, the error is about the device,
/// never a refusal of the network.
#[test]
fn gpu_backends_take_towers() {
    let net = to_net(
        &raw_tower(&SE, 17),
        NetworkStructure::NetworkSeWithHeadformat,
    );
    for backend in ["cuda-fp16", "rocm-fp16"] {
        if let Err(error) = create_backend(backend, load(&net), "") {
            let message = error.to_string();
            assert_mentions(&message, &[backend]);
            assert!(!message.contains("residual-tower"), "{message}");
        }
    }
    let error = create_backend("rocm-fp16", load(&net), "policy_head=optimistic")
        .err()
        .unwrap()
        .to_string();
    assert_mentions(&error, &["optimistic", "vanilla"]);
}

#[test]
fn profiling_a_tower_times_each_block() {
    let net = to_net(
        &raw_tower(&SE, 18),
        NetworkStructure::NetworkSeWithHeadformat,
    );
    let backend = create_backend("cpu", load(&net), "profile=true").unwrap();
    backend.evaluate(&random_positions(2, 18)).unwrap();
    let report = backend.profile_reports().pop().unwrap();
    let ops = &report.passes[0].ops;
    let blocks: Vec<_> = ops.iter().filter(|o| o.op == "residual block").collect();
    assert_eq!(blocks.len(), SE.blocks);
    // Two 3×3 convolutions of 8 → 8 channels over 2 positions: 2 · 2·64 · 8·8·9 multiply-adds.
    assert_eq!(blocks[0].flops, 2 * 2 * (2 * 64) * (8 * 8 * 9));
    assert!(ops.iter().any(|o| o.op == "input conv"));
    assert!(ops.iter().any(|o| o.op == "policy head"));
}

/// Weights far outside any trained range overflow inside the block that holds them: the pass
/// is an error naming that block, never NaN or infinite outputs.
#[test]
fn an_overflowing_block_is_named_instead_of_returning_nan() {
    use lc0rs::netgen::{generate_tower, tower_preset};
    let mut tower = generate_tower(&tower_preset("tiny-se").unwrap(), 3);
    // 1e30 in both convolutions of the block: ~1e31 after the first, beyond f32's range
    // (3.4e38) after the second.
    tower.blocks[1].conv1.weights.fill(1e30);
    tower.blocks[1].conv2.weights.fill(1e30);
    let backend = create_backend("cpu", tower, "threads=1").unwrap();
    let message = backend
        .evaluate(&random_positions(3, 7))
        .unwrap_err()
        .to_string();
    assert!(message.contains("residual[1]"), "{message}");
    assert!(message.contains("non-finite"), "{message}");
}
