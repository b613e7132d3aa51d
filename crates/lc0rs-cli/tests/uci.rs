//! The UCI engine driven through stdin/stdout as a GUI drives it, on the cpu backend with the
//! bundled tiny net.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use lc0rs::chess::PositionHistory;
use lc0rs_engine::search::terminal_value;
use shakmaty::Position;

// The root package's shared test helpers.
#[path = "../../../tests/common/prereq.rs"]
mod prereq;

struct Engine {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Engine {
    fn start() -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lc0rs"))
            .args(["uci", "-b", "cpu"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take().unwrap();
        Self {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, line: &str) {
        self.send_raw(&format!("{line}\n"));
    }

    /// Writes `text` as it is, line endings included.
    fn send_raw(&mut self, text: &str) {
        self.stdin.write_all(text.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Lines up to and including the first that starts with `prefix`.
    fn until(&mut self, prefix: &str, timeout: Duration) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let done = line.starts_with(prefix);
                    seen.push(line);
                    if done {
                        return seen;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no {prefix:?} within {timeout:?}: {seen:?}")
                }
                Err(RecvTimeoutError::Disconnected) => panic!("the engine exited: {seen:?}"),
            }
        }
    }

    fn best_move(&mut self, go: &str) -> (String, Vec<String>) {
        self.send(go);
        let lines = self.until("bestmove", Duration::from_secs(60));
        let best = lines
            .last()
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .to_owned();
        (best, lines)
    }

    /// The lines written within `wait`.
    fn lines_within(&mut self, wait: Duration) -> Vec<String> {
        let deadline = Instant::now() + wait;
        let mut seen = Vec::new();
        while let Ok(line) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            seen.push(line);
        }
        seen
    }

    fn quit(mut self) {
        self.send("quit");
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}");
    }
}

const SECOND: Duration = Duration::from_secs(1);

#[test]
fn the_handshake_lists_the_options() {
    let mut engine = Engine::start();
    engine.send("uci");
    let lines = engine.until("uciok", 10 * SECOND);
    assert!(lines[0].starts_with("id name lc0rs"), "{lines:?}");
    for option in [
        "WeightsFile",
        "Backend",
        "BackendOptions",
        "Threads",
        "MinibatchSize",
        "CPuct",
        "FpuReduction",
        "PolicyTemperature",
        "NNCacheSize",
        "MoveOverheadMs",
        "SmartPruningFactor",
        "MaxCollisionVisits",
        "MaxCollisionVisitsScalingStart",
        "MaxCollisionVisitsScalingEnd",
        "MaxCollisionVisitsScalingPower",
        "MaxOutOfOrderEvalsFactor",
        "MultiPV",
        "UCI_ShowWDL",
        "ScoreType",
        "VerboseMoveStats",
        "Ponder",
    ] {
        let needle = format!("option name {option} type");
        assert!(
            lines.iter().any(|l| l.starts_with(&needle)),
            "{option}: {lines:?}"
        );
    }
    engine.send("isready");
    engine.until("readyok", 30 * SECOND);
    engine.quit();
}

#[test]
fn searches_answer_legal_moves_with_info_lines() {
    let mut engine = Engine::start();
    engine.send("setoption name MinibatchSize value 32");
    engine.send("setoption name CPuct value 2.5");
    // Smart pruning would end a `go nodes` search early once the best move is settled.
    engine.send("setoption name SmartPruningFactor value 0");
    engine.send("ucinewgame");
    let spec = "startpos moves e2e4 e7e5 g1f3";
    engine.send(&format!("position {spec}"));
    let (best, lines) = engine.best_move("go nodes 100");
    let history = PositionHistory::from_spec(spec).unwrap();
    let mut after = history.clone();
    after.play_uci(&best).expect("bestmove is legal");
    let info = lines
        .iter()
        .rev()
        .find(|l| l.starts_with("info depth"))
        .unwrap();
    for field in [
        " seldepth ",
        " time ",
        " nodes 100 ",
        " nps ",
        " score cp ",
        " pv ",
    ] {
        assert!(info.contains(field), "{field}: {info}");
    }
    // Clock and fixed time both end with a legal move.
    engine.send("position startpos moves e2e4");
    let (best, _) = engine.best_move("go wtime 2000 btime 2000 winc 10 binc 10");
    PositionHistory::from_spec(&format!("startpos moves e2e4 {best}")).unwrap();
    let (best, _) = engine.best_move("go movetime 200");
    PositionHistory::from_spec(&format!("startpos moves e2e4 {best}")).unwrap();
    engine.quit();
}

/// Windows GUIs end lines with CR LF: the CR must not reach a move, a value or a command name.
#[test]
fn windows_line_endings_are_understood() {
    let mut engine = Engine::start();
    engine.send_raw("uci\r\n");
    engine.until("uciok", 10 * SECOND);
    engine.send_raw("setoption name MinibatchSize value 8\r\nisready\r\n");
    let mut lines = engine.until("readyok", 30 * SECOND);
    engine.send_raw("position startpos moves e2e4 e7e5\r\n");
    engine.send_raw("go nodes 20\r\n");
    lines.extend(engine.until("bestmove", 60 * SECOND));
    let best = lines.last().unwrap().split_whitespace().nth(1).unwrap();
    PositionHistory::from_spec(&format!("startpos moves e2e4 e7e5 {best}"))
        .expect("bestmove is legal after the CR LF position");
    // A rejected option, position or command is reported as an info string.
    assert!(
        !lines.iter().any(|l| l.starts_with("info string")),
        "{lines:?}"
    );
    engine.send_raw("quit\r\n");
    let status = engine.child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn mates_in_one_are_announced() {
    let mut engine = Engine::start();
    engine.send("position fen r1bqkb1r/pppp1ppp/2n2n2/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 4 4");
    let (best, lines) = engine.best_move("go nodes 300");
    assert_eq!(best, "h5f7");
    assert!(
        lines.iter().any(|l| l.contains("score mate 1")),
        "{lines:?}"
    );
    // `go mate 1` has no other limit: it ends, unasked, when the mate is proven.
    let (best, lines) = engine.best_move("go mate 1");
    assert_eq!(best, "h5f7");
    assert!(lines.iter().any(|l| l.contains("score mate 1")));
    // `go depth 3` ends once the playouts reach a mean depth of 3.
    engine.send("position startpos");
    let (_, lines) = engine.best_move("go depth 3");
    let last = lines
        .iter()
        .rev()
        .find(|l| l.starts_with("info depth"))
        .unwrap();
    let depth: u32 = last.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(depth >= 3, "{last}");
    engine.quit();
}

#[test]
fn stop_ends_an_infinite_search_at_once() {
    let mut engine = Engine::start();
    engine.send("isready");
    engine.until("readyok", 30 * SECOND);
    engine.send("position startpos");
    engine.send("go infinite");
    // Once a second a running search reports, with the move it spends most playouts on.
    let running = engine.until("info currmove", 10 * SECOND);
    let current = running.last().unwrap().split_whitespace().nth(2).unwrap();
    PositionHistory::from_spec(&format!("startpos moves {current}")).unwrap();
    let asked = Instant::now();
    engine.send("stop");
    let lines = engine.until("bestmove", 5 * SECOND);
    let waited = asked.elapsed();
    assert!(
        waited < Duration::from_millis(100),
        "bestmove after {waited:?}"
    );
    let best = lines.last().unwrap().split_whitespace().nth(1).unwrap();
    PositionHistory::from_spec(&format!("startpos moves {best}")).unwrap();
    engine.quit();
}

/// `isready` during a long search is answered at once, whatever came before it; the search
/// ends (with one `bestmove`) when a command changes what it works on. The bound is loose for
/// a busy machine: a reader that waits for the search would take the full 5 s.
#[test]
fn isready_is_answered_during_a_search_after_any_command() {
    let mut engine = Engine::start();
    engine.send("isready");
    engine.until("readyok", 30 * SECOND);
    for command in [
        "ucinewgame",
        "setoption name CPuct value 2.0",
        "position startpos moves d2d4",
        "stop",
        "isready",
    ] {
        engine.send("position startpos moves e2e4");
        engine.send("go movetime 5000");
        std::thread::sleep(Duration::from_millis(300));
        let asked = Instant::now();
        engine.send(command);
        engine.send("isready");
        let lines = engine.until("readyok", 5 * SECOND);
        let waited = asked.elapsed();
        assert!(
            waited < Duration::from_millis(1000),
            "{command}: readyok after {waited:?}: {lines:?}"
        );
        if command == "isready" {
            engine.send("stop");
        }
        let answered = lines.iter().any(|l| l.starts_with("bestmove"));
        if !answered {
            engine.until("bestmove", 5 * SECOND);
        }
    }
    engine.send("position startpos moves e2e4");
    let (best, _) = engine.best_move("go nodes 20");
    PositionHistory::from_spec(&format!("startpos moves e2e4 {best}")).unwrap();
    engine.quit();
}

/// A `position` that cannot be set up leaves no old position to search: `go` answers
/// `bestmove 0000` with the reason, until a valid position arrives.
#[test]
fn a_refused_position_is_not_replaced_by_the_previous_one() {
    let mut engine = Engine::start();
    engine.send("position startpos moves e2e4 e7e5");
    engine.send("position startpos moves e2e4 e7e5 E2E4");
    let (best, lines) = engine.best_move("go nodes 20");
    assert_eq!(best, "0000", "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("info string") && l.contains("E2E4")),
        "{lines:?}"
    );
    engine.send("position startpos moves e2e4 e7e5 g1f3");
    let (best, _) = engine.best_move("go nodes 20");
    PositionHistory::from_spec(&format!("startpos moves e2e4 e7e5 g1f3 {best}")).unwrap();
    engine.quit();
}

#[test]
fn a_self_play_game_runs_to_its_end() {
    let mut engine = Engine::start();
    let mut moves: Vec<String> = Vec::new();
    let mut history = PositionHistory::startpos();
    while terminal_value(&history).is_none() {
        assert!(moves.len() < 2000, "the game does not end");
        engine.send(&format!("position startpos moves {}", moves.join(" ")));
        let (best, _) = engine.best_move("go nodes 12");
        history.play_uci(&best).expect("bestmove is legal");
        moves.push(best);
    }
    let last = history.last().position.as_ref().unwrap();
    let over = last.legal_moves().is_empty()
        || history.last().rule50 >= 100
        || history.last().repetitions >= 2
        || last.is_insufficient_material();
    assert!(over, "ended after {} plies without a result", moves.len());
    engine.quit();
}

/// Plays a game against itself on a clock of `start` plus `increment` per move, both measured
/// from writing `go` to reading `bestmove`, and checks no side's clock ever runs out; returns
/// the time each move took.
fn play_on_the_clock(start: Duration, increment: Duration, plies: usize) -> Vec<Duration> {
    let mut engine = Engine::start();
    engine.send("ucinewgame");
    engine.send("isready");
    engine.until("readyok", 30 * SECOND);
    let mut clocks = [start, start];
    let mut history = PositionHistory::startpos();
    let mut moves: Vec<String> = Vec::new();
    let mut used = Vec::new();
    while terminal_value(&history).is_none() && moves.len() < plies {
        engine.send(&format!("position startpos moves {}", moves.join(" ")));
        let ms = |d: Duration| d.as_millis();
        let go = format!(
            "go wtime {} btime {} winc {} binc {}",
            ms(clocks[0]),
            ms(clocks[1]),
            ms(increment),
            ms(increment)
        );
        let asked = Instant::now();
        let (best, _) = engine.best_move(&go);
        let took = asked.elapsed();
        let side = moves.len() % 2;
        clocks[side] = clocks[side].checked_sub(took).unwrap_or_else(|| {
            panic!(
                "ply {}: lost on time, {took:?} with {:?} left",
                moves.len(),
                clocks[side]
            )
        }) + increment;
        used.push(took);
        history.play_uci(&best).expect("bestmove is legal");
        moves.push(best);
    }
    engine.quit();
    used
}

#[test]
fn short_clocks_are_never_lost_on_time() {
    let ms = Duration::from_millis;
    play_on_the_clock(ms(200), ms(50), 60);
    // With a longer clock the time is used, not only the increment: the first move (lc0's
    // first-move bonus, 2.8 times an even share) takes a clear part of it.
    let used = play_on_the_clock(ms(5_000), ms(50), 12);
    assert!(used[0] > ms(150), "first move in {:?}", used[0]);
}

#[test]
fn pondering_waits_for_ponderhit_then_uses_its_time() {
    let mut engine = Engine::start();
    engine.send("setoption name Ponder value true");
    engine.send("position startpos moves e2e4 e7e5");
    engine.send("go ponder wtime 4000 btime 4000 winc 0 binc 0");
    let pondering = engine.lines_within(SECOND);
    assert!(
        !pondering.iter().any(|l| l.starts_with("bestmove")),
        "{pondering:?}"
    );
    let hit = Instant::now();
    engine.send("ponderhit");
    let lines = engine.until("bestmove", 10 * SECOND);
    // The search goes on with the clock's budget: far less than the 4 s left.
    assert!(hit.elapsed() < 3 * SECOND, "{:?}", hit.elapsed());
    let best = lines.last().unwrap().split_whitespace().nth(1).unwrap();
    PositionHistory::from_spec(&format!("startpos moves e2e4 e7e5 {best}")).unwrap();
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("bestmove")).count(),
        1,
        "{lines:?}"
    );
    // A ponder search ended by `stop` (the opponent played another move) answers at once.
    engine.send("go ponder wtime 4000 btime 4000");
    engine.lines_within(SECOND / 2);
    engine.send("stop");
    let lines = engine.until("bestmove", 5 * SECOND);
    let best = lines.last().unwrap().split_whitespace().nth(1).unwrap();
    PositionHistory::from_spec(&format!("startpos moves e2e4 e7e5 {best}")).unwrap();
    engine.quit();
}

/// The `score cp` and `wdl` (as fractions) of the last `info depth` line in `lines`.
fn score_and_wdl(lines: &[String]) -> (i32, [f64; 3]) {
    let line = lines
        .iter()
        .rev()
        .find(|l| l.starts_with("info depth"))
        .unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = |key: &str| words.iter().position(|w| *w == key).unwrap() + 1;
    assert_eq!(words[at("score")], "cp", "{line}");
    let cp = words[at("score") + 1].parse().unwrap();
    let wdl = [0, 1, 2].map(|i| words[at("wdl") + i].parse::<f64>().unwrap() / 1000.0);
    (cp, wdl)
}

/// lc0's ScoreType: listed with its choices and default, each choice printing its formula of
/// the same search's W, D, L (computed here from the printed W − L and W/D/L), a misspelt
/// value refused.
#[test]
fn score_type_chooses_the_scale_of_the_score() {
    let mut engine = Engine::start();
    engine.send("uci");
    let lines = engine.until("uciok", 10 * SECOND);
    let choices = [
        "centipawn",
        "centipawn_with_drawscore",
        "centipawn_2019",
        "centipawn_2018",
        "win_percentage",
        "Q",
        "W-L",
        "WDL_mu",
    ];
    let vars: String = choices.iter().map(|c| format!(" var {c}")).collect();
    let listed = format!("option name ScoreType type combo default WDL_mu{vars}");
    assert!(lines.contains(&listed), "{lines:?}");
    for option in [
        "Threads value 1",
        "SmartPruningFactor value 0",
        "UCI_ShowWDL value true",
    ] {
        engine.send(&format!("setoption name {option}"));
    }
    let position = "position startpos moves e2e4 e7e5 g1f3 b8c6";
    engine.send(position);
    let (_, lines) = engine.best_move("go nodes 64");
    let (default, _) = score_and_wdl(&lines);
    // `go nodes 64` counts the visits kept from the last search: every later search reports
    // the same tree again, without a playout, under another score type.
    let mut score = |score_type: &str| {
        engine.send(&format!("setoption name ScoreType value {score_type}"));
        engine.send(position);
        let (_, lines) = engine.best_move("go nodes 64");
        score_and_wdl(&lines)
    };
    let (x, [w, _, l]) = score("W-L");
    assert_eq!(score("Q").0, x);
    // 10000·(W − L) truncated toward zero: W − L lies in this interval (widened by a hair for
    // the float arithmetic).
    let lo = f64::from(if x > 0 { x } else { x - 1 }) / 10000.0 - 1e-6;
    let hi = f64::from(if x < 0 { x } else { x + 1 }) / 10000.0 + 1e-6;
    type Formula = fn(f64) -> f64;
    let formulas: [(&str, Formula); 5] = [
        ("centipawn", |q| 90.0 * (1.563_754_189_7 * q).tan()),
        // No DrawScore in lc0rs: Q = W − L.
        ("centipawn_with_drawscore", |q| {
            90.0 * (1.563_754_189_7 * q).tan()
        }),
        ("centipawn_2019", |q| {
            295.0 * q / (1.0 - 0.976_953_126 * q.powi(14))
        }),
        ("centipawn_2018", |q| {
            290.680_623_072 * (1.548_090_806 * q).tan()
        }),
        ("win_percentage", |q| 5000.0 * q + 5000.0),
    ];
    for (score_type, formula) in formulas {
        // Each formula increases with W − L.
        let (low, high) = (formula(lo) as i32, formula(hi) as i32);
        let printed = score(score_type).0;
        assert!(
            (low..=high).contains(&printed),
            "{score_type}: {printed} not in {low}..={high} (W − L {x}/10000)"
        );
    }
    // WDL_mu, the default: 100·μ of lc0's logistic WDL model, μ = (a − b)/(a + b) with a =
    // ln(1/L − 1), b = ln(1/W − 1); W and L shown per mille move μ by under 0.01 here.
    let (mu_cp, _) = score("WDL_mu");
    let (a, b) = ((1.0 / l - 1.0).ln(), (1.0 / w - 1.0).ln());
    let mu = (a - b) / (a + b);
    assert!(
        (f64::from(mu_cp) - 100.0 * mu).abs() <= 2.0,
        "WDL_mu {mu_cp}, μ = {mu} from W {w} L {l}"
    );
    assert_eq!(mu_cp, default);
    // lc0's choices are spelt exactly: another spelling is refused and the score type kept.
    engine.send("setoption name ScoreType value wdl_mu");
    let reply = engine.until("info string", 5 * SECOND);
    assert_eq!(
        reply.last().unwrap(),
        &format!(
            "info string option ScoreType: \"wdl_mu\" is not one of {}",
            choices.join(", ")
        )
    );
    engine.send(position);
    let (_, lines) = engine.best_move("go nodes 64");
    assert_eq!(score_and_wdl(&lines).0, mu_cp);
    engine.quit();
}

#[test]
fn multipv_wdl_searchmoves_and_move_stats_are_reported() {
    let mut engine = Engine::start();
    for option in [
        "MultiPV value 3",
        "UCI_ShowWDL value true",
        "VerboseMoveStats value true",
        "SmartPruningFactor value 0",
    ] {
        engine.send(&format!("setoption name {option}"));
    }
    engine.send("position startpos");
    let (best, lines) = engine.best_move("go nodes 200 searchmoves e2e4 d2d4 g1f3");
    assert!(["e2e4", "d2d4", "g1f3"].contains(&best.as_str()), "{best}");
    let last: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("info depth"))
        .rev()
        .take(3)
        .collect();
    for (i, line) in last.iter().rev().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = |key: &str| words.iter().position(|w| *w == key).unwrap() + 1;
        assert_eq!(words[at("multipv")], (i + 1).to_string(), "{line}");
        let wdl: Vec<u32> = words[at("wdl")..at("wdl") + 3]
            .iter()
            .map(|w| w.parse().unwrap())
            .collect();
        assert_eq!(wdl.iter().sum::<u32>(), 1000, "{line}");
        assert_eq!(words[at("tbhits")], "0", "{line}");
        assert!(words[at("hashfull")].parse::<u32>().unwrap() <= 1000);
        assert!(
            ["e2e4", "d2d4", "g1f3"].contains(&words[at("pv")]),
            "{line}"
        );
    }
    // VerboseMoveStats: one line per legal move (20 at the start), with lc0's fields.
    let stats: Vec<&String> = lines.iter().filter(|l| l.contains(" N: ")).collect();
    assert_eq!(stats.len(), 20, "{lines:?}");
    assert!(
        stats
            .iter()
            .all(|l| l.contains("(P: ") && l.contains("(U: "))
    );
    assert!(
        lines.iter().any(|l| l.contains(" collisions, ")),
        "{lines:?}"
    );
    // Fewer root moves than MultiPV lines: the one line is still numbered, as lc0 numbers
    // every line whenever MultiPV is above 1 (a GUI files unnumbered lines under line 1).
    let (best, lines) = engine.best_move("go nodes 50 searchmoves e2e4");
    assert_eq!(best, "e2e4");
    let pv_lines: Vec<&String> = lines.iter().filter(|l| l.contains(" pv ")).collect();
    assert!(!pv_lines.is_empty(), "{lines:?}");
    for line in pv_lines {
        assert!(line.contains(" multipv 1 pv e2e4"), "{line}");
    }
    // A move that is not legal here is refused with the reason, and the `go` answered.
    let (best, lines) = engine.best_move("go nodes 10 searchmoves e2e5");
    assert_eq!(best, "0000");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("info string go searchmoves"))
    );
    engine.send("setoption name MultiPV value 0");
    let reply = engine.until("info string", 5 * SECOND);
    assert!(reply.last().unwrap().contains("MultiPV"), "{reply:?}");
    engine.quit();
}

#[test]
fn malformed_input_never_crashes_the_engine() {
    let mut engine = Engine::start();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let words = [
        "go",
        "position",
        "fen",
        "startpos",
        "moves",
        "setoption",
        "name",
        "value",
        "nodes",
        "wtime",
        "e2e4",
        "e7e5",
        "zz9",
        "-1",
        "99999999999999999999",
        "Threads",
        "\u{0}",
        "infinite",
        "movetime",
        "8/8/8",
        "ucinewgame",
        "isready",
        "x",
        "é",
    ];
    let mut lines = 0;
    // Every `go` gets one `bestmove` and every `isready` one `readyok`, in the order of the
    // commands (a stopped search may answer after later commands were read).
    let first_word_is = |line: &str, word: &str| line.split_whitespace().next() == Some(word);
    let (mut gos, mut readies) = (0, 0);
    while lines < 1000 {
        let count = next() % 7;
        let line: Vec<&str> = (0..count)
            .map(|_| words[(next() % words.len() as u64) as usize])
            .collect();
        let line = line.join(" ");
        // Real searches would be slow to wait for; every other command is fair game.
        if line.starts_with("go") && !line.contains("nodes") {
            continue;
        }
        engine.send(&line);
        gos += usize::from(first_word_is(&line, "go"));
        readies += usize::from(first_word_is(&line, "isready"));
        if line.starts_with("go") {
            engine.send("stop");
        }
        lines += 1;
    }
    engine.send("isready");
    let mut seen = Vec::new();
    for _ in 0..=readies {
        seen.extend(engine.until("readyok", 60 * SECOND));
    }
    let answered = seen.iter().filter(|l| l.starts_with("bestmove")).count();
    engine.send("position startpos");
    engine.send("go nodes 10");
    let mut last = Vec::new();
    for _ in answered..=gos {
        last = engine.until("bestmove", 60 * SECOND);
    }
    let best = last.last().unwrap().split_whitespace().nth(1).unwrap();
    PositionHistory::from_spec(&format!("startpos moves {best}"))
        .unwrap_or_else(|e| panic!("{e}: {last:?}"));
    engine.quit();
}

/// python-chess, a real UCI client, plays games against the engine with pondering, a clock,
/// MultiPV and WDL (`tests/uci_python.py`), where python-chess is installed.
#[test]
fn python_chess_plays_full_games() {
    if !prereq::python_chess() {
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/uci_python.py");
    let run = Command::new("python3")
        .args([script, env!("CARGO_BIN_EXE_lc0rs"), "2"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.trim_end().ends_with("OK"), "{stdout}");
}
