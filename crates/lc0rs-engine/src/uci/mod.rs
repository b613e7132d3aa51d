//! The UCI protocol over any backend: a GUI (or a test) writes commands, the engine answers on
//! its output. The search runs on its own thread so the reader never waits for it: `isready` is
//! answered at once, also while searching; a command that changes what the search works on
//! (`position`, `ucinewgame`, `setoption`, `go`) stops it first, and the change reaches the
//! search object when the next `go` takes it back from its thread. `go ponder` searches until
//! `stop` (answered) or `ponderhit` (the same tree searched on with the clock's budget).

mod go;
mod info;
mod options;
mod score;

use std::io::{BufRead, Write};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use shakmaty::uci::UciMove;
use shakmaty::{Color, Move, Position};

use lc0rs::backend::{Backend, BackendError, create_backend};
use lc0rs::chess::policy_index::move_index;
use lc0rs::chess::transform::Transform;
use lc0rs::chess::{ChessError, PositionHistory};
use lc0rs::netsource::NetSource;
use lc0rs::weights::{LoadOptions, WeightsError};

use crate::search::time::TimeManager;
use crate::search::{Search, SearchInfo, SearchParams};
use go::GoCommand;
use info::{InfoStyle, currmove_line, info_lines, verbose_move_stats};
use options::{DEFAULT_MOVE_OVERHEAD_MS, uci_search_params};

/// Why a command, an option or a network was refused (told to the GUI as `info string`).
#[derive(Debug, thiserror::Error)]
pub enum UciError {
    #[error("{value:?} is not a value from {min} to {max}")]
    OutOfRange {
        value: String,
        min: String,
        max: String,
    },
    #[error("{0:?} is not true or false")]
    NotABool(String),
    #[error("{value:?} is not one of {choices}")]
    NotAChoice { value: String, choices: String },
    #[error("no such option")]
    UnknownOption,
    #[error("{command} {key}: missing value")]
    MissingValue { command: &'static str, key: String },
    #[error("go {key}: {value:?} is not a number")]
    NotANumber { key: String, value: String },
    #[error("go: unknown parameter {0:?}")]
    UnknownGoParameter(String),
    #[error("go searchmoves: {0:?} is not a legal move here")]
    BadSearchMove(String),
    #[error("position: expected startpos or fen, got {0:?}")]
    PositionStart(String),
    #[error("position: {0}")]
    Position(#[from] ChessError),
    #[error("loading {name}: {error}")]
    Weights { name: String, error: WeightsError },
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// Where the engine's lines go; shared with the search thread.
pub type Output = Arc<Mutex<dyn Write + Send>>;

/// The network and backend to load (the UCI options WeightsFile, Backend, BackendOptions).
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    pub weights: Option<String>,
    pub backend: String,
    pub backend_options: String,
}

/// How long `stop` waits for the search thread before answering from the last finished
/// batch (a backend call on a slow device can take longer than a GUI should wait).
const STOP_ANSWER_WAIT: Duration = Duration::from_millis(40);
/// How often a running search writes an `info` line.
const INFO_INTERVAL: Duration = Duration::from_secs(1);

/// A search on its thread.
struct Running {
    /// The search, and the time it ran, once the thread ends.
    handle: JoinHandle<(Search, Duration)>,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
    command: GoCommand,
    /// The time manager's budget for this search, if the clock gave one.
    budget: Option<Duration>,
}

/// What the search thread shares with the protocol thread: the report after the last batch,
/// and whether `bestmove` has been written (exactly one of the two writes it).
#[derive(Default)]
struct Progress {
    latest: Mutex<Option<SearchInfo>>,
    answered: AtomicBool,
    style: InfoStyle,
}

impl Progress {
    /// Writes the final `info` (and `extra` lines) and `bestmove` with its ponder move (the
    /// principal variation's second move) unless the other thread already did; `bestmove 0000`
    /// without a report.
    fn answer(&self, out: &Output, info: Option<&SearchInfo>, extra: &[String]) {
        if self.answered.swap(true, Ordering::SeqCst) {
            return;
        }
        let Some(info) = info.filter(|i| !i.pv.is_empty()) else {
            return say(out, "bestmove 0000");
        };
        for line in extra.iter().chain(&info_lines(info, self.style)) {
            say(out, line);
        }
        let mut best = format!("bestmove {}", info.move_uci(&info.pv[0]));
        if let Some(reply) = info.pv.get(1) {
            best.push_str(&format!(" ponder {}", info.move_uci(reply)));
        }
        say(out, &best);
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
    /// lc0's time manager, one per game (`ucinewgame` starts another).
    time_manager: TimeManager,
    style: InfoStyle,
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
            params: uci_search_params(),
            time_manager: TimeManager::new(Duration::from_millis(DEFAULT_MOVE_OVERHEAD_MS)),
            style: InfoStyle::default(),
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
                // Loading and warming up happen here when idle; a search thread (running, or finishing its
                // last batch after `stop`) must never delay the answer.
                if self.running.is_none() && self.prepare_search() {
                    self.warm_up();
                }
                say(&self.out, "readyok");
            }
            "ucinewgame" => {
                self.stop();
                self.new_game = true;
                self.time_manager = TimeManager::new(self.time_manager.move_overhead());
                self.position = ("startpos".to_owned(), Vec::new());
                self.refused = None;
            }
            "setoption" => self.set_option(rest),
            "position" => self.set_position(rest),
            "go" => self.go(rest),
            "stop" => self.stop(),
            "ponderhit" => self.ponder_hit(),
            "quit" => return false,
            _ => self.tell(&format!("unknown command: {}", truncate(line))),
        }
        true
    }

    fn tell(&self, text: &str) {
        say(&self.out, &format!("info string {text}"));
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

    /// Prepares the backend for the batch sizes the next search starts with (see
    /// [`Search::warm_up`]).
    fn warm_up(&mut self) {
        let Some(search) = &mut self.search else {
            return;
        };
        if let Err(e) = search.warm_up() {
            self.tell(&format!("error: {e}"));
        }
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
                Err(e) => return self.tell(&e.to_string()),
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
            self.refused = Some(e.to_string());
            return;
        }
        self.refused = None;
        self.position = (start.to_owned(), moves);
    }

    fn go(&mut self, rest: &str) {
        let received = Instant::now();
        self.stop();
        if let Some(reason) = &self.refused {
            self.tell(&format!(
                "not searching: the last position was refused ({reason})"
            ));
            return say(&self.out, "bestmove 0000");
        }
        match GoCommand::parse(rest) {
            Ok(command) => self.start_search(command, received),
            Err(e) => {
                // A GUI waits for the answer to every `go`.
                self.tell(&e.to_string());
                say(&self.out, "bestmove 0000");
            }
        }
    }

    /// `ponderhit`: the opponent played the expected move, so the ponder search becomes the
    /// search for our move. It ends without an answer and the same `go` without `ponder`
    /// continues on its tree, with the time manager's budget from the moment of the hit.
    fn ponder_hit(&mut self) {
        let Some(running) = &self.running else {
            return;
        };
        if !running.command.ponder || running.progress.answered.swap(true, Ordering::SeqCst) {
            return;
        }
        running.stop.store(true, Ordering::Relaxed);
        let command = GoCommand {
            ponder: false,
            ..running.command.clone()
        };
        self.join();
        self.start_search(command, Instant::now());
    }

    /// Starts the search `command` asks for; `received` is when it arrived (what the search's
    /// statistics line counts its setup from: tree reuse, threads).
    fn start_search(&mut self, command: GoCommand, received: Instant) {
        if !self.prepare_search() {
            return say(&self.out, "bestmove 0000");
        }
        let Some(mut search) = self.search.take() else {
            return say(&self.out, "bestmove 0000");
        };
        let turn = search.history().last().turn;
        let ply = game_ply(search.history());
        let (mut limits, budget) = command.limits(turn, ply, &mut self.time_manager);
        match root_moves(search.history(), &command.searchmoves) {
            Ok(moves) => limits.searchmoves = moves,
            Err(e) => {
                self.tell(&e.to_string());
                self.search = Some(search);
                return say(&self.out, "bestmove 0000");
            }
        }
        // `go infinite` and `go ponder` must not answer before `stop` (or `ponderhit`).
        let endless = command.infinite || command.ponder;
        let stop = Arc::new(AtomicBool::new(false));
        let style = InfoStyle {
            has_wdl: search.backend().attributes().has_wdl,
            ..self.style
        };
        let progress = Arc::new(Progress {
            style,
            ..Progress::default()
        });
        let (out, flag, shared) = (self.out.clone(), stop.clone(), progress.clone());
        let handle = std::thread::spawn(move || {
            let mut last_info = Instant::now();
            let mut report = |info: &SearchInfo| {
                *shared.latest.lock().unwrap_or_else(|e| e.into_inner()) = Some(info.clone());
                if last_info.elapsed() >= INFO_INTERVAL && !shared.answered.load(Ordering::SeqCst) {
                    last_info = Instant::now();
                    for line in info_lines(info, shared.style) {
                        say(&out, &line);
                    }
                    if let Some(line) = currmove_line(info) {
                        say(&out, &line);
                    }
                }
            };
            let started = Instant::now();
            let setup = started - received;
            match search.run(limits, &flag, &mut report) {
                Ok(result) => {
                    if result.tree_full {
                        say(
                            &out,
                            "info string the search tree is full; searching stopped",
                        );
                    }
                    while endless && !flag.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    let mut extra = Vec::new();
                    if shared.style.verbose_move_stats {
                        extra = verbose_lines(&search);
                        extra.push(statistics_line(&result.info, setup));
                    }
                    shared.answer(&out, Some(&result.info), &extra);
                }
                Err(e) => {
                    say(&out, &format!("info string {e}"));
                    shared.answer(&out, None, &[]);
                }
            }
            let used = started.elapsed();
            // After the answer, off the clock; not after a ponder search, whose tree the
            // search after `ponderhit` goes on growing, nor after analysis (`go infinite`),
            // whose tree can be too large to copy before the next `go` arrives.
            if !endless {
                search.prepare_next_move();
            }
            (search, used)
        });
        self.running = Some(Running {
            handle,
            stop,
            progress,
            command,
            budget,
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
        if latest.as_ref().is_some_and(|info| !info.pv.is_empty()) {
            running.progress.answer(&self.out, latest.as_ref(), &[]);
        }
    }

    fn join(&mut self) {
        if let Some(running) = self.running.take() {
            match running.handle.join() {
                Ok((search, used)) => {
                    if let Some(budget) = running.budget {
                        self.time_manager.search_done(budget, used);
                    }
                    self.search = Some(search);
                }
                Err(_) => self.tell("error: the search thread failed"),
            }
        }
    }
}

fn load_backend(config: &EngineConfig) -> Result<Box<dyn Backend>, UciError> {
    let source =
        NetSource::parse(config.weights.as_deref()).map_err(|error| UciError::Weights {
            name: truncate(config.weights.as_deref().unwrap_or_default()).to_owned(),
            error,
        })?;
    let (network, _) = source
        .load(&LoadOptions::default(), &mut |_, _| {})
        .map_err(|error| UciError::Weights {
            name: source.display_name(),
            error,
        })?;
    Ok(create_backend(
        &config.backend,
        network,
        &config.backend_options,
    )?)
}

fn position_history(start: &str, moves: &[String]) -> Result<PositionHistory, UciError> {
    let spec = match start {
        "startpos" => "startpos".to_owned(),
        s if s.starts_with("fen ") => s.to_owned(),
        s => return Err(UciError::PositionStart(truncate(s).to_owned())),
    };
    let spec = if moves.is_empty() {
        spec
    } else {
        format!("{spec} moves {}", moves.join(" "))
    };
    Ok(PositionHistory::from_spec(&spec)?)
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

/// The `searchmoves` of a `go`, as moves of the last position of `history`.
fn root_moves(history: &PositionHistory, texts: &[String]) -> Result<Vec<Move>, UciError> {
    let position = history.last().position.as_ref();
    texts
        .iter()
        .map(|text| {
            let bad = || UciError::BadSearchMove(truncate(text).to_owned());
            let uci = UciMove::from_str(text).map_err(|_| bad())?;
            position.and_then(|p| uci.to_move(p).ok()).ok_or_else(bad)
        })
        .collect()
}

/// The search's counters for the GUI's log: collisions, backend batches, and where the
/// search threads spent their time, and how long the search took to start after `go`.
fn statistics_line(info: &SearchInfo, setup: Duration) -> String {
    let mean = info.evaluated as f64 / info.batches.max(1) as f64;
    format!(
        "info string {} playouts in {} walks from the root ({} shared among the task workers), \
         {} collisions, {} backend batches of {mean:.1} positions on average; {}; {:.1} ms \
         from go to the search's start",
        info.playouts,
        info.walks,
        info.shared_walks,
        info.collisions,
        info.batches,
        info.times.summary(info.elapsed),
        setup.as_secs_f64() * 1000.0
    )
}

/// lc0's VerboseMoveStats lines for the root of `search`.
fn verbose_lines(search: &Search) -> Vec<String> {
    let Some(position) = search.history().last().position.as_ref() else {
        return Vec::new();
    };
    let stats: Vec<_> = search
        .move_stats()
        .into_iter()
        .map(|s| {
            let index = move_index(position, s.mv, Transform::NONE);
            (s, index)
        })
        .collect();
    verbose_move_stats(&stats, search.params().chess960)
}

/// The game ply of the last position (from its FEN's move number and the moves since).
fn game_ply(history: &PositionHistory) -> u32 {
    let entry = history.last();
    entry
        .position
        .as_ref()
        .map_or(history.len() as u32 - 1, |p| {
            let full_moves = p.fullmoves().get().saturating_sub(1);
            2 * full_moves + u32::from(entry.turn == Color::Black)
        })
}

/// At most 80 characters of untrusted text, for messages.
pub(crate) fn truncate(text: &str) -> &str {
    text.char_indices()
        .nth(80)
        .map_or(text, |(i, _)| &text[..i])
}

#[cfg(test)]
mod tests;
