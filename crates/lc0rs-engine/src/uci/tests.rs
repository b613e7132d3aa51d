//! The engine driven command by command, with a slow backend to catch it mid-search.

use super::*;

/// The bundled tiny net on the cpu backend, made slow: each batch takes at least 300 ms.
struct Slow(Box<dyn Backend>);

impl Backend for Slow {
    fn name(&self) -> &str {
        "slow"
    }
    fn attributes(&self) -> lc0rs::backend::BackendAttributes {
        self.0.attributes()
    }
    fn input_format(&self) -> lc0rs::weights::format::InputFormat {
        self.0.input_format()
    }
    fn evaluate(
        &self,
        batch: &[lc0rs::chess::InputPlanes],
    ) -> Result<lc0rs::backend::BatchOutput, lc0rs::backend::BackendError> {
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
    engine.time_manager = TimeManager::new(Duration::ZERO);
    engine.search = Some(Search::new(backend, SearchParams::default()));
    engine.search_config = Some(config);
    (engine, lines)
}

fn written(lines: &Lines) -> Vec<String> {
    let seen = lines.lock().unwrap();
    seen.1.iter().map(|(_, l)| l.clone()).collect()
}

/// The move of the first `bestmove` line after `skip` of them.
/// The move of the `skip`+1-th `bestmove` line (without its `ponder` move).
fn nth_best_move(lines: &Lines, skip: usize) -> Option<String> {
    written(lines)
        .iter()
        .filter_map(|l| l.strip_prefix("bestmove "))
        .nth(skip)
        .and_then(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
}

/// How many `bestmove` lines were written.
fn best_moves(lines: &Lines) -> usize {
    written(lines)
        .iter()
        .filter(|l| l.starts_with("bestmove"))
        .count()
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
        assert_eq!(best_moves(&lines), 1, "{command}: {:?}", written(&lines));
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
fn task_workers_take_lc0s_range_with_minus_one_for_its_default() {
    let (mut engine, lines) = slow_engine();
    engine.handle("setoption name TaskWorkers value 3");
    assert_eq!(engine.params.task_workers, Some(3));
    engine.handle("setoption name TaskWorkers value -1");
    assert_eq!(engine.params.task_workers, None);
    engine.handle("setoption name TaskWorkers value 2");
    for refused in ["-2", "129", "many"] {
        engine.handle(&format!("setoption name TaskWorkers value {refused}"));
        assert_eq!(engine.params.task_workers, Some(2), "{refused}");
        let told = written(&lines).last().cloned().unwrap_or_default();
        assert!(
            told.contains("TaskWorkers") && told.contains(refused),
            "{told}"
        );
    }
    // A search runs with the count set, and with the default again.
    for count in ["0", "-1"] {
        engine.handle(&format!("setoption name TaskWorkers value {count}"));
        engine.handle("go nodes 1");
        engine.join();
    }
    assert_eq!(best_moves(&lines), 2, "{:?}", written(&lines));
}

#[test]
fn the_nn_cache_key_is_lc0s_unless_the_exact_one_is_asked_for() {
    let (mut engine, lines) = slow_engine();
    assert!(!engine.params.exact_cache_key);
    engine.handle("setoption name NNCacheExactKey value true");
    assert!(engine.params.exact_cache_key);
    engine.handle("setoption name NNCacheExactKey value false");
    assert!(!engine.params.exact_cache_key);
    engine.handle("setoption name NNCacheExactKey value maybe");
    assert!(!engine.params.exact_cache_key);
    let told = written(&lines).last().cloned().unwrap_or_default();
    assert!(told.contains("NNCacheExactKey"), "{told}");
    engine.handle("setoption name NNCacheExactKey value true");
    assert!(engine.params.exact_cache_key);
}

#[test]
fn one_thread_gathers_alone_up_to_single_thread_visits_unless_set_to_zero() {
    let (mut engine, lines) = slow_engine();
    assert_eq!(engine.params.single_thread_visits, 256);
    engine.handle("setoption name SingleThreadVisits value 0");
    assert_eq!(engine.params.single_thread_visits, 0);
    engine.handle("setoption name SingleThreadVisits value -5");
    assert_eq!(engine.params.single_thread_visits, 0);
    let told = written(&lines).last().cloned().unwrap_or_default();
    assert!(told.contains("SingleThreadVisits"), "{told}");
    engine.handle("setoption name SingleThreadVisits value 1000");
    assert_eq!(engine.params.single_thread_visits, 1000);
}
