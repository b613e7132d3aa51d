//! The UCI protocol over any backend: a GUI (or a test) writes commands, the engine answers on
//! its output. The search runs on its own thread so the reader never waits for it: `isready` is
//! answered at once, also while searching; a command that changes what the search works on
//! (`position`, `ucinewgame`, `setoption`, `go`) stops it first, and the change reaches the
//! search object when the next `go` takes it back from its thread.

use std::io::{BufRead, Write};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use shakmaty::uci::UciMove;
use shakmaty::{Color, Move, Position};

use crate::backend::{Backend, create_backend};
use crate::chess::PositionHistory;
use crate::netsource::NetSource;
use crate::search::{Limits, Search, SearchInfo, SearchParams, uci};
use crate::weights::LoadOptions;

/// Where the engine's lines go; shared with the search thread.
pub type Output = Arc<Mutex<dyn Write + Send>>;

/// The network and backend to load (the UCI options WeightsFile, Backend, BackendOptions).
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    pub weights: Option<String>,
    pub backend: String,
    pub backend_options: String,
}

/// Time kept back per move for the GUI and the transfer of the move.
const DEFAULT_MOVE_OVERHEAD_MS: u64 = 100;
/// Moves to plan for when the GUI does not say (`movestogo`).
const DEFAULT_MOVES_TO_GO: u64 = 30;

/// How long `stop` waits for the search thread before answering from the last finished
/// batch (a backend call on a slow device can take longer than a GUI should wait).
const STOP_ANSWER_WAIT: Duration = Duration::from_millis(40);
/// How often a running search writes an `info` line.
const INFO_INTERVAL: Duration = Duration::from_secs(1);

/// A search on its thread.
struct Running {
    handle: JoinHandle<Search>,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
}

/// What the search thread shares with the protocol thread: the report after the last batch,
/// and whether `bestmove` has been written (exactly one of the two writes it).
#[derive(Default)]
struct Progress {
    latest: Mutex<Option<SearchInfo>>,
    answered: AtomicBool,
}

impl Progress {
    /// Writes the final `info` and `bestmove` unless the other thread already did.
    fn answer(&self, out: &Output, info: Option<&SearchInfo>, best: &str) {
        if self.answered.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(info) = info {
            say(out, &info_line(info));
        }
        say(out, &format!("bestmove {best}"));
    }

    fn latest(&self) -> Option<SearchInfo> {
        self.latest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

struct Engine {
    out: Output,
    config: EngineConfig,
    params: SearchParams,
    move_overhead: Duration,
    search: Option<Search>,
    /// The configuration `search`'s backend was made from; another one means a reload.
    search_config: Option<EngineConfig>,
    /// The position `search` holds, as its start and its moves, to reuse the tree when the
    /// wanted position extends it.
    search_position: (String, Vec<String>),
    running: Option<Running>,
    /// The last accepted `position`, as its start and its moves.
    position: (String, Vec<String>),
    /// Why the last `position` command was refused: no move is searched until the next
    /// accepted one, since the GUI shows a position the engine does not have.
    refused: Option<String>,
    /// `ucinewgame` arrived: the next search starts with a fresh tree and cache.
    new_game: bool,
}

impl Engine {
    fn new(out: Output, config: EngineConfig) -> Self {
        let startpos = || ("startpos".to_owned(), Vec::new());
        Self {
            out,
            config,
            params: SearchParams::default(),
            move_overhead: Duration::from_millis(DEFAULT_MOVE_OVERHEAD_MS),
            search: None,
            search_config: None,
            search_position: startpos(),
            running: None,
            position: startpos(),
            refused: None,
            new_game: false,
        }
    }
}

/// Runs the protocol until `quit` or the end of `input`.
pub fn run(input: impl BufRead, out: Output, config: EngineConfig) {
    let mut engine = Engine::new(out, config);
    for line in input.lines() {
        let Ok(line) = line else { break };
        if !engine.handle(line.trim()) {
            break;
        }
    }
    engine.stop();
    engine.join();
}

fn say(out: &Output, line: &str) {
    let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
    // A GUI that closed its end cannot be told anything; the loop ends with its input.
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

impl Engine {
    /// Handles one line; false on `quit`.
    fn handle(&mut self, line: &str) -> bool {
        let (command, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        match command {
            "" => {}
            "uci" => self.identify(),
            "isready" => {
                // Loading happens here when idle; a search thread (running, or finishing its
                // last batch after `stop`) must never delay the answer.
                if self.running.is_none() {
                    self.prepare_search();
                }
                say(&self.out, "readyok");
            }
            "ucinewgame" => {
                self.stop();
                self.new_game = true;
                self.position = ("startpos".to_owned(), Vec::new());
                self.refused = None;
            }
            "setoption" => self.set_option(rest),
            "position" => self.set_position(rest),
            "go" => self.go(rest),
            "stop" => self.stop(),
            "ponderhit" => {}
            "quit" => return false,
            _ => self.tell(&format!("unknown command: {}", truncate(line))),
        }
        true
    }

    fn tell(&self, text: &str) {
        say(&self.out, &format!("info string {text}"));
    }

    fn identify(&self) {
        let p = SearchParams::default();
        let lines = [
            format!("id name lc0rs {}", env!("CARGO_PKG_VERSION")),
            "id author the lc0rs authors".to_owned(),
            "option name WeightsFile type string default <bundled>".to_owned(),
            format!(
                "option name Backend type string default {}",
                self.config.backend
            ),
            "option name BackendOptions type string default".to_owned(),
            "option name Threads type spin default 0 min 0 max 128".to_owned(),
            format!(
                "option name MinibatchSize type spin default {} min 1 max 1024",
                p.minibatch
            ),
            format!("option name CPuct type string default {}", p.cpuct),
            format!(
                "option name FpuReduction type string default {}",
                p.fpu_reduction
            ),
            format!(
                "option name PolicyTemperature type string default {}",
                p.policy_temperature
            ),
            format!(
                "option name NNCacheSize type spin default {} min 0 max 100000000",
                p.cache_size
            ),
            format!(
                "option name MoveOverhead type spin default {DEFAULT_MOVE_OVERHEAD_MS} min 0 max 10000"
            ),
            "option name UCI_Chess960 type check default false".to_owned(),
            "uciok".to_owned(),
        ];
        for line in lines {
            say(&self.out, &line);
        }
    }

    /// `setoption name NAME [value VALUE]`.
    fn set_option(&mut self, rest: &str) {
        let Some(rest) = rest.strip_prefix("name ") else {
            return self.tell("setoption needs `name NAME [value VALUE]`");
        };
        let (name, value) = match rest.split_once(" value") {
            Some((n, v)) => (n.trim(), v.trim()),
            None => (rest.trim(), ""),
        };
        self.stop();
        if let Err(reason) = self.apply_option(&name.to_ascii_lowercase(), value) {
            self.tell(&format!("option {}: {reason}", truncate(name)));
        }
    }

    fn apply_option(&mut self, name: &str, value: &str) -> Result<(), String> {
        let mut params = self.params;
        match name {
            "weightsfile" => self.reload(|c| c.weights = non_default(value)),
            "backend" => self.reload(|c| c.backend = value.to_owned()),
            "backendoptions" => self.reload(|c| c.backend_options = value.to_owned()),
            "threads" => params.threads = parse_in(value, 0, 128)?,
            "minibatchsize" => params.minibatch = parse_in(value, 1, 1024)?,
            "cpuct" => params.cpuct = parse_in(value, 0.0, 100.0)?,
            "fpureduction" => params.fpu_reduction = parse_in(value, -10.0, 10.0)?,
            "policytemperature" => params.policy_temperature = parse_in(value, 0.01, 100.0)?,
            "nncachesize" => params.cache_size = parse_in(value, 0, 100_000_000)?,
            "uci_chess960" => params.chess960 = parse_check(value)?,
            "moveoverhead" => {
                self.move_overhead = Duration::from_millis(parse_in(value, 0, 10_000)?)
            }
            _ => return Err("no such option".to_owned()),
        }
        self.params = params;
        Ok(())
    }

    /// Changes the network or backend; it is loaded again at the next `isready` or `go`.
    fn reload(&mut self, change: impl FnOnce(&mut EngineConfig)) {
        change(&mut self.config);
    }

    /// Brings the search object up to date with every command since the last search: takes
    /// it back from its thread, reloads when the configuration changed, starts afresh after
    /// `ucinewgame`, applies the parameters and the position. False (after saying why) when
    /// the network cannot be loaded.
    fn prepare_search(&mut self) -> bool {
        self.join();
        if self.search_config.as_ref() != Some(&self.config) {
            self.search = None;
        }
        if self.search.is_none() && !self.load_search() {
            return false;
        }
        let Some(search) = &mut self.search else {
            return false;
        };
        if std::mem::take(&mut self.new_game) {
            *search = Search::new(search.backend().clone(), self.params);
            self.search_position = ("startpos".to_owned(), Vec::new());
        }
        search.set_params(self.params);
        self.sync_position();
        true
    }

    /// Loads the network and creates the backend and a search on the start position.
    fn load_search(&mut self) -> bool {
        match load_backend(&self.config) {
            Ok(backend) => {
                self.search = Some(Search::new(Arc::from(backend), self.params));
                self.search_config = Some(self.config.clone());
                self.search_position = ("startpos".to_owned(), Vec::new());
                self.new_game = false;
                true
            }
            Err(e) => {
                self.tell(&format!("error: {e}"));
                false
            }
        }
    }

    /// Gives the search the last accepted position; keeps the tree when its moves extend the
    /// position the search holds.
    fn sync_position(&mut self) {
        let Some(search) = &mut self.search else {
            return;
        };
        let (start, moves) = &self.position;
        let (old_start, old_moves) = &self.search_position;
        if (start, moves) == (old_start, old_moves) {
            return;
        }
        let extends = old_start == start && moves.starts_with(old_moves);
        match extends.then(|| moves_between(search.history(), &moves[old_moves.len()..])) {
            Some(Some(played)) => search.advance(&played),
            _ => match position_history(start, moves) {
                Ok(history) => search.set_position(history),
                Err(e) => return self.tell(&e),
            },
        }
        self.search_position = self.position.clone();
    }

    /// `position startpos|fen FEN [moves M...]`: stops a running search and remembers the
    /// position for the next `go`; a position that cannot be set up is refused, and so is
    /// every search until the next accepted one.
    fn set_position(&mut self, rest: &str) {
        self.stop();
        let (start, moves) = match rest.split_once("moves") {
            Some((s, m)) => (s.trim(), m.split_whitespace().map(str::to_owned).collect()),
            None => (rest.trim(), Vec::new()),
        };
        if let Err(e) = position_history(start, &moves) {
            self.tell(&format!("{e}; no search until the next valid position"));
            self.refused = Some(e);
            return;
        }
        self.refused = None;
        self.position = (start.to_owned(), moves);
    }

    fn go(&mut self, rest: &str) {
        self.stop();
        if let Some(reason) = &self.refused {
            self.tell(&format!(
                "not searching: the last position was refused ({reason})"
            ));
            return say(&self.out, "bestmove 0000");
        }
        if !self.prepare_search() {
            return say(&self.out, "bestmove 0000");
        }
        let Some(mut search) = self.search.take() else {
            return say(&self.out, "bestmove 0000");
        };
        let turn = search.history().last().turn;
        let limits = match parse_go(rest, turn, self.move_overhead) {
            Ok(limits) => limits,
            Err(e) => {
                // A GUI waits for the answer to every `go`.
                self.tell(&e);
                self.search = Some(search);
                return say(&self.out, "bestmove 0000");
            }
        };
        let endless = limits == Limits::default();
        let stop = Arc::new(AtomicBool::new(false));
        let progress = Arc::new(Progress::default());
        let (out, flag, shared) = (self.out.clone(), stop.clone(), progress.clone());
        let handle = std::thread::spawn(move || {
            let mut last_info = Instant::now();
            let mut report = |info: &SearchInfo| {
                *shared.latest.lock().unwrap_or_else(|e| e.into_inner()) = Some(info.clone());
                if last_info.elapsed() >= INFO_INTERVAL && !shared.answered.load(Ordering::SeqCst) {
                    last_info = Instant::now();
                    say(&out, &info_line(info));
                }
            };
            match search.run(limits, &flag, &mut report) {
                Ok(result) => {
                    if result.tree_full {
                        say(
                            &out,
                            "info string the search tree is full; searching stopped",
                        );
                        // `go infinite` must not answer before `stop`.
                        while endless && !flag.load(Ordering::Relaxed) {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                    }
                    shared.answer(
                        &out,
                        Some(&result.info),
                        &result.info.move_uci(&result.best_move),
                    )
                }
                Err(e) => {
                    say(&out, &format!("info string {e}"));
                    shared.answer(&out, None, "0000");
                }
            }
            search
        });
        self.running = Some(Running {
            handle,
            stop,
            progress,
        });
    }

    /// Ends a running search without waiting for its thread: where the backend is still busy
    /// with a batch, the answer comes from the last finished batch (or, before the first has
    /// finished, from the search thread itself when its batch ends), and the thread is joined
    /// when the next `go` needs the search.
    fn stop(&mut self) {
        let Some(running) = &self.running else {
            return;
        };
        if running.progress.answered.load(Ordering::SeqCst) {
            // Already answered (stopped before, or finished): nothing to wait for.
            running.stop.store(true, Ordering::Relaxed);
            return;
        }
        running.stop.store(true, Ordering::Relaxed);
        let deadline = Instant::now() + STOP_ANSWER_WAIT;
        while !running.handle.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        if running.handle.is_finished() {
            return self.join();
        }
        let latest = running.progress.latest();
        // Before the first batch has finished there is no move to name: the stopped thread
        // names its own when its batch ends.
        if let Some(best) = latest.as_ref().and_then(|info| info.pv.first()) {
            running
                .progress
                .answer(&self.out, latest.as_ref(), &uci(best, self.params.chess960));
        }
    }

    fn join(&mut self) {
        if let Some(running) = self.running.take() {
            match running.handle.join() {
                Ok(search) => self.search = Some(search),
                Err(_) => self.tell("error: the search thread failed"),
            }
        }
    }
}

fn load_backend(config: &EngineConfig) -> Result<Box<dyn Backend>, String> {
    let source = NetSource::parse(config.weights.as_deref()).map_err(|e| e.to_string())?;
    let (network, _) = source
        .load(&LoadOptions::default(), &mut |_, _| {})
        .map_err(|e| format!("loading {}: {e}", source.display_name()))?;
    create_backend(&config.backend, network, &config.backend_options).map_err(|e| e.to_string())
}

fn position_history(start: &str, moves: &[String]) -> Result<PositionHistory, String> {
    let spec = match start {
        "startpos" => "startpos".to_owned(),
        s if s.starts_with("fen ") => s.to_owned(),
        s => {
            return Err(format!(
                "position: expected startpos or fen, got {:?}",
                truncate(s)
            ));
        }
    };
    let spec = if moves.is_empty() {
        spec
    } else {
        format!("{spec} moves {}", moves.join(" "))
    };
    PositionHistory::from_spec(&spec).map_err(|e| format!("position: {e}"))
}

/// The moves `ucis` as played from the last position of `history`, if all are legal.
fn moves_between(history: &PositionHistory, ucis: &[String]) -> Option<Vec<Move>> {
    let mut position = history.last().position.clone()?;
    let mut played = Vec::with_capacity(ucis.len());
    for text in ucis {
        let m = UciMove::from_str(text).ok()?.to_move(&position).ok()?;
        position.play_unchecked(m);
        played.push(m);
    }
    Some(played)
}

/// The limits of `go`: `nodes`, `movetime`, the clock (`wtime btime winc binc movestogo`),
/// or none for `infinite`.
fn parse_go(rest: &str, turn: Color, overhead: Duration) -> Result<Limits, String> {
    let mut limits = Limits::default();
    let (mut time, mut inc, mut moves_to_go) = (None, 0u64, DEFAULT_MOVES_TO_GO);
    let mut tokens = rest.split_whitespace();
    while let Some(key) = tokens.next() {
        let mut number = || -> Result<u64, String> {
            let value = tokens.next().ok_or(format!("go {key}: missing value"))?;
            // Clocks can run negative in some GUIs; treat that as no time left.
            value
                .parse::<i64>()
                .map(|v| v.max(0) as u64)
                .map_err(|_| format!("go {key}: {:?} is not a number", truncate(value)))
        };
        let ours = |white: bool| (turn == Color::White) == white;
        match key {
            "infinite" | "ponder" => {}
            "nodes" => limits.nodes = Some(number()?),
            "movetime" => {
                limits.time = Some(Duration::from_millis(number()?).saturating_sub(overhead))
            }
            "wtime" | "btime" => {
                let t = number()?;
                if ours(key == "wtime") {
                    time = Some(t);
                }
            }
            "winc" | "binc" => {
                let i = number()?;
                if ours(key == "winc") {
                    inc = i;
                }
            }
            "movestogo" => moves_to_go = number()?.max(1),
            "depth" | "mate" => {
                number()?;
            }
            other => return Err(format!("go: unknown parameter {:?}", truncate(other))),
        }
    }
    if let Some(left) = time {
        limits.time = Some(move_budget(left, inc, moves_to_go, overhead));
    }
    Ok(limits)
}

/// Time for this move: an even share of the clock plus most of the increment, never more than
/// half of what is left, minus the overhead.
fn move_budget(left_ms: u64, inc_ms: u64, moves_to_go: u64, overhead: Duration) -> Duration {
    let share = left_ms / moves_to_go + inc_ms * 3 / 4;
    let budget = share.min(left_ms / 2);
    Duration::from_millis(budget).saturating_sub(overhead)
}

/// `info depth .. seldepth .. time .. nodes .. nps .. score cp|mate .. pv ..`.
fn info_line(info: &SearchInfo) -> String {
    let score = match info.mate {
        Some(m) => format!("mate {m}"),
        None => format!("cp {}", info.centipawns()),
    };
    let mut line = format!(
        "info depth {} seldepth {} time {} nodes {} nps {} score {score}",
        info.depth,
        info.seldepth,
        info.elapsed.as_millis(),
        info.nodes,
        info.nps()
    );
    if !info.pv.is_empty() {
        line.push_str(" pv ");
        line.push_str(&info.pv_uci().join(" "));
    }
    line
}

/// A `check` option's value.
fn parse_check(value: &str) -> Result<bool, String> {
    value
        .parse()
        .map_err(|_| format!("{:?} is not true or false", truncate(value)))
}

fn parse_in<T: FromStr + PartialOrd + std::fmt::Display>(
    value: &str,
    min: T,
    max: T,
) -> Result<T, String> {
    match value.parse::<T>() {
        Ok(v) if v >= min && v <= max => Ok(v),
        _ => Err(format!(
            "{:?} is not a value from {min} to {max}",
            truncate(value)
        )),
    }
}

fn non_default(value: &str) -> Option<String> {
    (!value.is_empty() && value != "<bundled>").then(|| value.to_owned())
}

/// At most 80 characters of untrusted text, for messages.
fn truncate(text: &str) -> &str {
    text.char_indices()
        .nth(80)
        .map_or(text, |(i, _)| &text[..i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_gives_a_share_plus_increment_within_half() {
        let none = Duration::ZERO;
        assert_eq!(
            move_budget(60_000, 0, 30, none),
            Duration::from_millis(2_000)
        );
        assert_eq!(
            move_budget(60_000, 1_000, 30, none),
            Duration::from_millis(2_750)
        );
        assert_eq!(
            move_budget(1_000, 10_000, 30, none),
            Duration::from_millis(500)
        );
        assert_eq!(
            move_budget(3_000, 0, 1, Duration::from_millis(100)),
            Duration::from_millis(1_400)
        );
        assert_eq!(
            move_budget(50, 0, 30, Duration::from_millis(100)),
            Duration::ZERO
        );
    }

    #[test]
    fn go_reads_the_clock_of_the_side_to_move() {
        let o = Duration::ZERO;
        let go = |s, c| parse_go(s, c, o).unwrap();
        let black = go("wtime 1000 btime 60000 movestogo 10", Color::Black);
        assert_eq!(black.time, Some(Duration::from_millis(6_000)));
        let white = go("wtime 1000 btime 60000 movestogo 10", Color::White);
        assert_eq!(white.time, Some(Duration::from_millis(100)));
        assert_eq!(go("nodes 800", Color::White).nodes, Some(800));
        assert_eq!(go("infinite", Color::White), Limits::default());
        assert!(parse_go("nodes many", Color::White, o).is_err());
        assert!(parse_go("nodes", Color::White, o).is_err());
        assert!(parse_go("sideways 3", Color::White, o).is_err());
    }

    /// The bundled tiny net on the cpu backend, made slow: each batch takes at least 300 ms.
    struct Slow(Box<dyn Backend>);

    impl Backend for Slow {
        fn name(&self) -> &str {
            "slow"
        }
        fn attributes(&self) -> crate::backend::BackendAttributes {
            self.0.attributes()
        }
        fn input_format(&self) -> crate::weights::format::InputFormat {
            self.0.input_format()
        }
        fn evaluate(
            &self,
            batch: &[crate::chess::InputPlanes],
        ) -> Result<crate::backend::BatchOutput, crate::backend::BackendError> {
            std::thread::sleep(Duration::from_millis(300));
            self.0.evaluate(batch)
        }
    }

    /// Lines written by the engine with the time each arrived.
    #[derive(Default)]
    struct TimedLines(Vec<u8>, Vec<(Instant, String)>);

    impl Write for TimedLines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.extend_from_slice(buf);
            while let Some(end) = self.0.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.0.drain(..=end).collect();
                let text = String::from_utf8_lossy(&line).trim().to_owned();
                self.1.push((Instant::now(), text));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn cpu_config() -> EngineConfig {
        EngineConfig {
            weights: None,
            backend: "cpu".to_owned(),
            backend_options: String::new(),
        }
    }

    type Lines = Arc<Mutex<TimedLines>>;

    /// An engine whose search is loaded with the [`Slow`] backend, and the lines it writes.
    fn slow_engine() -> (Engine, Lines) {
        let config = cpu_config();
        let backend = Arc::new(Slow(load_backend(&config).unwrap()));
        let lines = Arc::new(Mutex::new(TimedLines::default()));
        let mut engine = Engine::new(lines.clone(), config.clone());
        engine.move_overhead = Duration::ZERO;
        engine.search = Some(Search::new(backend, SearchParams::default()));
        engine.search_config = Some(config);
        (engine, lines)
    }

    fn written(lines: &Lines) -> Vec<String> {
        let seen = lines.lock().unwrap();
        seen.1.iter().map(|(_, l)| l.clone()).collect()
    }

    /// The move of the first `bestmove` line after `skip` of them.
    fn nth_best_move(lines: &Lines, skip: usize) -> Option<String> {
        written(lines)
            .iter()
            .filter_map(|l| l.strip_prefix("bestmove "))
            .nth(skip)
            .map(str::to_owned)
    }

    /// Waits until the running search has reported a principal variation (on a busy machine
    /// the Slow backend's batches take longer than their 300 ms).
    fn wait_for_a_best_move(engine: &Engine) {
        let running = engine.running.as_ref().expect("a search runs");
        let deadline = Instant::now() + Duration::from_secs(30);
        while running.progress.latest().is_none_or(|i| i.pv.is_empty()) {
            assert!(Instant::now() < deadline, "no best move reported");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn isready_is_answered_at_once_after_any_command_during_a_search() {
        for command in [
            "ucinewgame",
            "setoption name CPuct value 2.5",
            "setoption name BackendOptions value threads=1",
            "position startpos moves e2e4",
            "stop",
            "isready",
        ] {
            let (mut engine, lines) = slow_engine();
            engine.handle("go movetime 5000");
            wait_for_a_best_move(&engine);
            let asked = Instant::now();
            engine.handle(command);
            engine.handle("isready");
            let waited = asked.elapsed();
            assert!(
                waited < Duration::from_millis(100),
                "{command}: readyok after {waited:?}"
            );
            assert_eq!(written(&lines).last().unwrap(), "readyok", "{command}");
            engine.stop();
            engine.join();
            let answers = written(&lines)
                .iter()
                .filter(|l| l.starts_with("bestmove"))
                .count();
            assert_eq!(answers, 1, "{command}: {:?}", written(&lines));
        }
    }

    #[test]
    fn a_position_sent_during_a_search_is_the_next_searchs() {
        let (mut engine, lines) = slow_engine();
        engine.handle("go infinite");
        std::thread::sleep(Duration::from_millis(400));
        engine.handle("position startpos moves e2e4 e7e5 g1f3");
        engine.handle("go nodes 1");
        engine.join();
        let reply = nth_best_move(&lines, 1).expect("the second search answers");
        // Legal after 1. e4 e5 2. Nf3 (black to move), checked by the rules library.
        PositionHistory::from_spec(&format!("startpos moves e2e4 e7e5 g1f3 {reply}")).unwrap();
    }

    #[test]
    fn a_refused_position_is_never_searched() {
        let lines = Arc::new(Mutex::new(TimedLines::default()));
        let mut engine = Engine::new(lines.clone(), cpu_config());
        engine.handle("position startpos moves e2e4 e7e5");
        engine.handle("position startpos moves e2e4 e7e5 E2E4");
        engine.handle("go nodes 5");
        engine.join();
        let said = written(&lines);
        assert_eq!(
            nth_best_move(&lines, 0).as_deref(),
            Some("0000"),
            "{said:?}"
        );
        assert!(
            said.iter()
                .any(|l| l.starts_with("info string not searching") && l.contains("E2E4")),
            "{said:?}"
        );
        // The next valid position is searched again.
        engine.handle("position startpos moves e2e4 e7e5");
        engine.handle("go nodes 5");
        engine.join();
        let reply = nth_best_move(&lines, 1).expect("answered");
        PositionHistory::from_spec(&format!("startpos moves e2e4 e7e5 {reply}")).unwrap();
    }

    #[test]
    fn stop_is_answered_while_the_backend_is_busy() {
        let (mut engine, lines) = slow_engine();
        engine.handle("go infinite");
        // A batch with a best move done, the next one under way when `stop` arrives.
        wait_for_a_best_move(&engine);
        let asked = Instant::now();
        engine.handle("stop");
        engine.handle("quit");
        let (at, best) = {
            let seen = lines.lock().unwrap();
            let first = seen
                .1
                .iter()
                .find(|(_, l)| l.starts_with("bestmove"))
                .cloned();
            first.expect("bestmove after stop")
        };
        let waited = at.duration_since(asked);
        assert!(
            waited < Duration::from_millis(100),
            "bestmove after {waited:?}"
        );
        let mv = best.split_whitespace().nth(1).unwrap();
        PositionHistory::from_spec(&format!("startpos moves {mv}")).unwrap();
        // The search thread finishes its batch and is reaped without answering again.
        engine.join();
        assert!(engine.search.is_some());
        let seen = lines.lock().unwrap();
        let answers = seen
            .1
            .iter()
            .filter(|(_, l)| l.starts_with("bestmove"))
            .count();
        assert_eq!(answers, 1, "{:?}", seen.1);
    }

    #[test]
    fn centipawns_follow_lc0s_curve() {
        let info = |q| SearchInfo {
            depth: 1,
            seldepth: 1,
            nodes: 1,
            elapsed: Duration::ZERO,
            q,
            mate: None,
            pv: Vec::new(),
            chess960: false,
            collisions: 0,
            batches: 0,
            evaluated: 0,
        };
        assert_eq!(info(0.0).centipawns(), 0);
        // 90·tan(1.5637541897·0.5) = 90·0.99435… ≈ 89.5
        assert_eq!(info(0.5).centipawns(), 89);
        assert_eq!(info(-0.5).centipawns(), -89);
        assert!(info(1.0).centipawns() > 10_000);
    }
}
