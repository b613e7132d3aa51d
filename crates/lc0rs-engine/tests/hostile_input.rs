//! Seeded garbage for the text parsers: position specs (FEN and moves), backend option strings
//! and UCI command lines, each a fixed number of inputs from a fixed seed so a failure is
//! reproducible. Every input is accepted or refused with a message; nothing panics, and every
//! `go` the engine reads is answered with exactly one `bestmove`. The weights parsers have
//! their own corpus in `hostile_weights.rs`.

use std::io::Cursor;
use std::sync::{Arc, Mutex};

use lc0rs::backend::create_backend;
use lc0rs::chess::{HistoryFill, PositionHistory, encode_position};
use lc0rs::netsource::NetSource;
use lc0rs::weights::LoadOptions;
use lc0rs::weights::format::InputFormat;
use lc0rs_engine::uci::{EngineConfig, Output};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SEED: u64 = 20_261_123;

/// Valid specs to damage: castling rights, en passant, promotions, long games.
const SPECS: [&str; 6] = [
    "startpos",
    "startpos moves e2e4 e7e5 g1f3 b8c6 f1b5 a7a6 e1g1",
    "fen r3k2r/pppq1ppp/2n2n2/3pp3/3PP3/2N2N2/PPPQ1PPP/R3K2R w KQkq d6 0 8 moves e1c1 e8g8",
    "fen 8/P7/8/8/8/8/7p/K6k w - - 0 1 moves a7a8q h2h1n",
    "fen 4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2 moves e5d6",
    "fen 7k/5Q2/6K1/8/8/8/8/8 b - - 99 120",
];

/// Characters a damaged spec is made of: FEN pieces, digits, squares, separators, junk.
const ALPHABET: &[u8] = b"pnbrqkPNBRQK12345678/ -wbKQkqabcdefgh0123456789moves\t\x00\xc3\xa9";

fn damaged_spec(rng: &mut ChaCha8Rng) -> String {
    let mut bytes = SPECS[rng.random_range(0..SPECS.len())].as_bytes().to_vec();
    for _ in 0..rng.random_range(1..5) {
        let at = rng.random_range(0..=bytes.len());
        let c = ALPHABET[rng.random_range(0..ALPHABET.len())];
        match rng.random_range(0..3) {
            0 if at < bytes.len() => bytes[at] = c,
            1 if at < bytes.len() => {
                bytes.remove(at);
            }
            _ => bytes.insert(at, c),
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

#[test]
fn damaged_position_specs_are_refused_or_encoded() {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..20_000 {
        let spec = damaged_spec(&mut rng);
        let outcome = std::panic::catch_unwind(|| match PositionHistory::from_spec(&spec) {
            Ok(history) => {
                for format in [InputFormat::Classical112, InputFormat::CanonicalV2] {
                    encode_position(&history, format, HistoryFill::FenOnly);
                }
                true
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                false
            }
        });
        match outcome {
            Ok(true) => accepted += 1,
            Ok(false) => refused += 1,
            Err(_) => panic!("{spec:?} panicked"),
        }
    }
    // The damage is real: most specs are refused, some still describe a position.
    assert!(accepted > 100 && refused > 10_000, "{accepted} / {refused}");
}

const OPTION_WORDS: [&str; 18] = [
    "threads",
    "max_batch",
    "mlh",
    "policy_head",
    "value_head",
    "profile",
    "=",
    "=",
    ",",
    "1",
    "0",
    "-1",
    "true",
    "vanilla",
    "(",
    ")",
    " ",
    "99999999999999999999",
];

#[test]
fn random_backend_option_strings_are_accepted_or_refused() {
    let (network, _) = NetSource::parse(None)
        .unwrap()
        .load(&LoadOptions::default(), &mut |_, _| {})
        .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    for _ in 0..1_000 {
        let text: String = (0..rng.random_range(0..8))
            .map(|_| OPTION_WORDS[rng.random_range(0..OPTION_WORDS.len())])
            .collect();
        let made =
            std::panic::catch_unwind(|| create_backend("cpu", network.clone(), &text).map(drop));
        match made {
            Ok(Ok(())) => {}
            Ok(Err(e)) => assert!(!e.to_string().is_empty(), "{text:?}"),
            Err(_) => panic!("{text:?} panicked"),
        }
    }
}

const UCI_WORDS: [&str; 26] = [
    "position",
    "startpos",
    "fen",
    "moves",
    "e2e4",
    "e7e5",
    "E2E4",
    "8/8/8",
    "setoption",
    "name",
    "value",
    "MinibatchSize",
    "CPuct",
    "Threads",
    "-1",
    "0",
    "nan",
    "ucinewgame",
    "isready",
    "stop",
    "uci",
    "wtime",
    "movetime",
    "ponderhit",
    "\u{0}",
    "é",
];

/// A UCI line: mostly random words, sometimes a searchable `go` (bounded by nodes, or by a
/// clock that `stop` or the next command cuts short).
fn uci_line(rng: &mut ChaCha8Rng) -> String {
    if rng.random_bool(0.15) {
        let limit = [
            "nodes 3",
            "nodes 0",
            "movetime 50",
            "wtime 100 btime 100",
            "nodes x",
        ];
        return format!("go {}", limit[rng.random_range(0..limit.len())]);
    }
    (0..rng.random_range(0..7))
        .map(|_| UCI_WORDS[rng.random_range(0..UCI_WORDS.len())])
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn every_go_among_random_uci_lines_gets_one_bestmove() {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let lines: Vec<String> = (0..1_500).map(|_| uci_line(&mut rng)).collect();
    let gos = lines.iter().filter(|l| l.starts_with("go")).count();
    let written = Arc::new(Mutex::new(Vec::<u8>::new()));
    let out: Output = written.clone();
    let config = EngineConfig {
        weights: None,
        backend: "cpu".to_owned(),
        backend_options: "threads=1".to_owned(),
    };
    let input = lines.join("\n") + "\nisready\n";
    lc0rs_engine::uci::run(Cursor::new(input.clone()), out, config);
    let text = String::from_utf8_lossy(&written.lock().unwrap()).into_owned();
    let answers = text.lines().filter(|l| l.starts_with("bestmove")).count();
    assert_eq!(answers, gos, "one bestmove per go");
    // The lines reach real searches too, not only refusals.
    let searched = text
        .lines()
        .filter(|l| l.starts_with("bestmove") && *l != "bestmove 0000")
        .count();
    assert!(searched >= 10, "{searched} of {gos} searches named a move");
    let first_word = |l: &str| l.split_whitespace().next() == Some("isready");
    let asked = input.lines().filter(|l| first_word(l)).count();
    let ready = text.lines().filter(|l| *l == "readyok").count();
    assert_eq!(ready, asked, "one readyok per isready");
}
