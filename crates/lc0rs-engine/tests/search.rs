//! The MCTS on the cpu backend with the bundled tiny net: game rules at the leaves, mates
//! found, batching through virtual loss, and tree reuse.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use lc0rs::backend::{Backend, BackendAttributes, BackendError, BatchOutput, create_backend};
use lc0rs::chess::{InputPlanes, PositionHistory};
use lc0rs::netsource::NetSource;
use lc0rs::weights::LoadOptions;
use lc0rs::weights::format::InputFormat;
use lc0rs_engine::search::tree::ROOT;
use lc0rs_engine::search::{Limits, Search, SearchParams, terminal_value, uci};
use shakmaty::Position;

fn cpu_backend() -> Box<dyn Backend> {
    let (net, _) = NetSource::parse(None)
        .unwrap()
        .load(&LoadOptions::default(), &mut |_, _| {})
        .unwrap();
    create_backend("cpu", net, "").unwrap()
}

/// Counts the backend calls and the largest batch.
struct Counting {
    inner: Box<dyn Backend>,
    calls: AtomicUsize,
    largest: AtomicUsize,
    /// The `prepare` calls seen: (max_batch, callers).
    prepared: std::sync::Mutex<Vec<(usize, usize)>>,
}

/// The cpu backend with the bundled tiny net, counted.
fn counting_cpu() -> Arc<Counting> {
    Arc::new(Counting {
        inner: cpu_backend(),
        calls: AtomicUsize::new(0),
        largest: AtomicUsize::new(0),
        prepared: Default::default(),
    })
}

impl Backend for Counting {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn attributes(&self) -> BackendAttributes {
        self.inner.attributes()
    }
    fn input_format(&self) -> InputFormat {
        self.inner.input_format()
    }
    fn evaluate(&self, batch: &[InputPlanes]) -> Result<BatchOutput, BackendError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.largest.fetch_max(batch.len(), Ordering::Relaxed);
        self.inner.evaluate(batch)
    }
    fn prepare(&self, max_batch: usize, callers: usize) -> Result<(), BackendError> {
        self.prepared.lock().unwrap().push((max_batch, callers));
        Ok(())
    }
}

fn history(spec: &str) -> PositionHistory {
    PositionHistory::from_spec(spec).unwrap()
}

fn search_nodes(search: &mut Search, nodes: u64) -> lc0rs_engine::search::SearchResult {
    let stop = AtomicBool::new(false);
    let limits = Limits {
        nodes: Some(nodes),
        ..Limits::default()
    };
    search.run(limits, &stop, &mut |_| {}).unwrap()
}

#[test]
fn game_ends_are_scored_by_the_rules() {
    // Fool's mate: the side that just moved (black) has mated.
    let mated = history("startpos moves f2f3 e7e5 g2g4 d8h4");
    assert_eq!(terminal_value(&mated), Some(1.0));
    let stalemate = history("fen 7k/5Q2/6K1/8/8/8/8/8 b - - 0 1");
    assert_eq!(terminal_value(&stalemate), Some(0.0));
    let fifty = history("fen 7k/8/6K1/8/8/8/8/R7 b - - 100 80");
    assert_eq!(terminal_value(&fifty), Some(0.0));
    let bare_kings = history("fen 7k/8/6K1/8/8/8/8/8 w - - 0 1");
    assert_eq!(terminal_value(&bare_kings), Some(0.0));
    let shuffle = "g1f3 g8f6 f3g1 f6g8";
    let twice = history(&format!("startpos moves {shuffle}"));
    assert_eq!(
        terminal_value(&twice),
        None,
        "a single repetition is not a draw"
    );
    let thrice = history(&format!("startpos moves {shuffle} {shuffle}"));
    assert_eq!(terminal_value(&thrice), Some(0.0));
    assert_eq!(terminal_value(&history("startpos moves e2e4")), None);
}

#[test]
fn mates_in_one_are_found_with_a_few_hundred_nodes() {
    let backend: Arc<dyn Backend> = Arc::from(cpu_backend());
    let cases = [
        ("fen 6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1", "a1a8"),
        ("fen r5k1/8/8/8/8/8/5PPP/6K1 b - - 0 1", "a8a1"),
        (
            "fen r1bqkb1r/pppp1ppp/2n2n2/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 4 4",
            "h5f7",
        ),
    ];
    for (spec, mate) in cases {
        let mut search = Search::new(backend.clone(), SearchParams::default());
        search.set_position(history(spec));
        let result = search_nodes(&mut search, 300);
        assert_eq!(uci(&result.best_move, false), mate, "{spec}");
        assert_eq!(result.info.mate, Some(1), "{spec}");
        assert!(result.info.q > 0.9, "{spec}: q {}", result.info.q);
    }
}

/// A position of a game against lc0, both engines on the same `random` evaluations, where many
/// of white's moves lose to a mate in one: with 10,000 nodes the search played d1c1, after
/// which f2e1 mates (lc0 played on), until a move proven lost gave up its prior and a proven
/// node its value for all its visits, as in lc0. Whatever the search picks, the rules (not the
/// search) check that no reply mates.
#[test]
fn a_search_does_not_play_into_a_mate_in_one() {
    let spec = "startpos moves e2e4 e7e6 d2d4 d7d5 b1d2 c7c5 e4d5 d8d5 e1e2 d5d8 e2e3 d8c7 a1b1 c7e5 e3d3 f8e7 \
     d1g4 e5d6 f2f3 e7g5 c2c4 c8d7 g4f4 g5h4 f4f6 e6e5 d3e2 d6e6 d2b3 e6h3 f6h6 e8e7 \
     h6a6 h3g3 e2d1 d7f5 b1a1 b8d7 g1e2 d7f6 a6f6 g7f6 c1h6 g3f2 h6f4 e5f4";
    let (network, _) = NetSource::parse(None)
        .unwrap()
        .load(&LoadOptions::default(), &mut |_, _| {})
        .unwrap();
    let backend: Arc<dyn Backend> =
        Arc::from(create_backend("random", network, "policy_spread=8,q_spread=0.2").unwrap());
    for minibatch in [1, 256] {
        let params = SearchParams {
            threads: 1,
            minibatch,
            ..SearchParams::default()
        };
        let mut search = Search::new(backend.clone(), params);
        search.set_position(history(spec));
        let result = search_nodes(&mut search, 10_000);
        let mut after = history(spec);
        after.play(result.best_move);
        let position = after.last().position.clone().expect("a legal position");
        for reply in position.legal_moves() {
            let mut next = position.clone();
            next.play_unchecked(reply);
            assert!(
                !next.is_checkmate(),
                "minibatch {minibatch}: {} lets {} mate",
                uci(&result.best_move, false),
                uci(&reply, false)
            );
        }
    }
}

#[test]
fn leaves_are_batched_and_best_moves_are_legal() {
    let counting = counting_cpu();
    let params = SearchParams {
        minibatch: 16,
        ..SearchParams::default()
    };
    let mut search = Search::new(counting.clone(), params);
    for spec in [
        "startpos",
        "startpos moves e2e4 c7c5 g1f3 d7d6 d2d4 c5d4 f3d4 g8f6 b1c3 a7a6",
        "fen 8/8/8/4k3/8/8/4P3/4K3 w - - 0 1",
        "fen r3k2r/8/8/8/8/8/8/R3K2R b KQkq - 0 1",
    ] {
        let h = history(spec);
        search.set_position(h.clone());
        let result = search_nodes(&mut search, 160);
        assert!(
            h.last()
                .position
                .as_ref()
                .unwrap()
                .is_legal(result.best_move),
            "{spec}: {}",
            uci(&result.best_move, false)
        );
        assert_eq!(result.info.nodes, 160, "{spec}");
        assert!(result.info.depth >= 1 && result.info.seldepth >= result.info.depth);
        assert_eq!(result.info.pv.first(), Some(&result.best_move));
    }
    let calls = counting.calls.load(Ordering::Relaxed);
    assert!(
        calls <= 4 * 160 / 4,
        "{calls} backend calls for 640 playouts"
    );
    assert!(counting.largest.load(Ordering::Relaxed) > 1);
    assert!(counting.largest.load(Ordering::Relaxed) <= 16);
}

#[test]
fn the_subtree_of_the_played_move_is_kept() {
    let backend: Arc<dyn Backend> = Arc::from(cpu_backend());
    let mut search = Search::new(backend, SearchParams::default());
    search.set_position(PositionHistory::startpos());
    let result = search_nodes(&mut search, 400);
    let expected = history("startpos").last().position.clone().unwrap();
    assert!(expected.is_legal(result.best_move));
    search.advance(std::slice::from_ref(&result.best_move));
    assert!(
        search.root_visits() > 0,
        "the best move's visits are reused"
    );
    assert_eq!(search.history().len(), 2);
    let reply = search_nodes(&mut search, 50);
    assert!(
        search
            .history()
            .last()
            .position
            .as_ref()
            .unwrap()
            .is_legal(reply.best_move)
    );
}

#[test]
fn a_full_tree_ends_the_search_with_a_move() {
    let backend: Arc<dyn Backend> = Arc::from(cpu_backend());
    let params = SearchParams {
        minibatch: 8,
        max_tree_nodes: 20_000,
        ..SearchParams::default()
    };
    let mut search = Search::new(backend, params);
    search.set_position(PositionHistory::startpos());
    let stop = AtomicBool::new(false);
    // No limit but the tree's: an endless search must still end.
    let result = search.run(Limits::default(), &stop, &mut |_| {}).unwrap();
    assert!(result.tree_full);
    assert!(result.info.nodes > 8, "{} playouts", result.info.nodes);
    let start = PositionHistory::startpos().last().position.clone().unwrap();
    assert!(start.is_legal(result.best_move));
    let unlimited = search_nodes(
        &mut Search::new(search.backend().clone(), SearchParams::default()),
        50,
    );
    assert!(!unlimited.tree_full);
}

/// `go nodes 0` (a limit already reached before the root has a move to name) still evaluates
/// the root once and names its best move, with one thread and with several, instead of
/// gathering nothing again and again.
#[test]
fn a_zero_node_limit_evaluates_the_root_and_names_a_move() {
    for threads in [1, 3] {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let backend: Arc<dyn Backend> = Arc::from(cpu_backend());
            let params = SearchParams {
                threads,
                ..SearchParams::default()
            };
            let mut search = Search::new(backend, params);
            search.set_position(history("startpos"));
            let result = search_nodes(&mut search, 0);
            done.send((result.best_move, search.root_visits())).unwrap();
        });
        let (best, visits) = finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("a search with a zero node limit ended within 60 s");
        assert!(
            shakmaty::Chess::default().is_legal(best),
            "{threads} threads"
        );
        assert_eq!(visits, 1, "{threads} threads");
    }
}

#[test]
fn a_finished_game_is_an_error_not_a_move() {
    let backend: Arc<dyn Backend> = Arc::from(cpu_backend());
    let mut search = Search::new(backend, SearchParams::default());
    search.set_position(history("startpos moves f2f3 e7e5 g2g4 d8h4"));
    let stop = AtomicBool::new(false);
    let e = search
        .run(Limits::default(), &stop, &mut |_| {})
        .unwrap_err();
    assert!(e.to_string().contains("game is over"), "{e}");
}

/// Checks that every visit of `search`'s tree is accounted for: each playout backed up through
/// the root exactly once (root N = new playouts + reused ones), every expanded node visited
/// once itself plus once per visit of a child, no virtual loss left behind, and every move on
/// the way legal in its position.
fn assert_tree_consistent(search: &Search, reused: u32, playouts: u64) {
    let tree = search.tree();
    let root = tree.node(ROOT);
    assert_eq!(u64::from(root.visits), u64::from(reused) + playouts);
    let mut stack = vec![(ROOT, search.history().last().position.clone().unwrap())];
    while let Some((index, position)) = stack.pop() {
        let node = tree.node(index);
        assert_eq!(node.in_flight(), 0, "node {index}: virtual loss left");
        assert!(
            node.value_sum.abs() <= f64::from(node.visits) + 1e-6,
            "node {index}: value sum {} over {} visits",
            node.value_sum,
            node.visits
        );
        let children: u32 = tree.children(index).map(|e| tree.child(e).visits).sum();
        if node.proof.is_some() && !node.expanded {
            assert!(
                tree.children(index).is_empty(),
                "node {index}: a game end with children"
            );
            continue;
        }
        if node.proof.is_some() {
            // Proven from its children: later playouts stop here, adding visits of its own.
            assert!(node.visits > children, "node {index}");
        } else if node.expanded {
            assert_eq!(node.visits, children + 1, "node {index}");
        } else {
            assert_eq!(node.visits, 0, "node {index}: visited but not expanded");
        }
        for edge in tree.children(index) {
            let m = tree.edge(edge).mv;
            assert!(position.is_legal(m), "edge {edge}: illegal move {m}");
            let Some(child) = tree.child_node(edge) else {
                continue;
            };
            assert_eq!(tree.mv(child), Some(m), "node {child}");
            let mut next = position.clone();
            next.play_unchecked(m);
            stack.push((child, next));
        }
    }
}

#[test]
fn many_threads_lose_no_visit() {
    let backend: Arc<dyn Backend> = Arc::from(cpu_backend());
    for (threads, minibatch) in [(8, 4), (3, 16)] {
        let params = SearchParams {
            threads,
            minibatch,
            ..SearchParams::default()
        };
        let mut search = Search::new(backend.clone(), params);
        assert_eq!(search.threads(), threads);
        for (spec, nodes) in [
            ("startpos", 1_500),
            ("fen 6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1", 600),
            ("fen 8/8/8/4k3/8/8/4P3/4K3 w - - 0 1", 800),
        ] {
            let h = history(spec);
            search.set_position(h.clone());
            let result = search_nodes(&mut search, nodes);
            assert_eq!(result.info.nodes, nodes, "{spec}");
            assert_tree_consistent(&search, 0, nodes);
            assert!(
                h.last()
                    .position
                    .as_ref()
                    .unwrap()
                    .is_legal(result.best_move)
            );
            // The next move's search starts from the kept subtree.
            search.advance(&result.info.pv[..1]);
            let reused = search.root_visits();
            if search
                .history()
                .last()
                .position
                .as_ref()
                .unwrap()
                .legal_moves()
                .is_empty()
            {
                continue;
            }
            // `nodes` limits the root's visits, the kept ones included (lc0's `go nodes`).
            let result = search_nodes(&mut search, u64::from(reused) + 300);
            assert_eq!(result.info.playouts, 300, "{spec}");
            assert_eq!(result.info.nodes, u64::from(reused) + 300, "{spec}");
            assert_tree_consistent(&search, reused, 300);
        }
    }
}

/// The bundled net, made slow, counting the calls under way at once.
struct Overlapping {
    inner: Box<dyn Backend>,
    running: AtomicUsize,
    most_at_once: AtomicUsize,
}

impl Backend for Overlapping {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn attributes(&self) -> BackendAttributes {
        BackendAttributes {
            runs_on_cpu: false,
            recommended_threads: 2,
            ..self.inner.attributes()
        }
    }
    fn input_format(&self) -> InputFormat {
        self.inner.input_format()
    }
    fn evaluate(&self, batch: &[InputPlanes]) -> Result<BatchOutput, BackendError> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_at_once.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let out = self.inner.evaluate(batch);
        self.running.fetch_sub(1, Ordering::SeqCst);
        out
    }
}

#[test]
fn a_gpu_like_backend_gets_two_threads_whose_calls_overlap() {
    let backend = Arc::new(Overlapping {
        inner: cpu_backend(),
        running: AtomicUsize::new(0),
        most_at_once: AtomicUsize::new(0),
    });
    let params = SearchParams {
        minibatch: 8,
        ..SearchParams::default()
    };
    let mut search = Search::new(backend.clone(), params);
    assert_eq!(search.threads(), 2, "lc0's default for a GPU backend");
    search.set_position(PositionHistory::startpos());
    let result = search_nodes(&mut search, 400);
    assert_tree_consistent(&search, 0, 400);
    assert_eq!(backend.most_at_once.load(Ordering::SeqCst), 2);
    assert!(
        result.info.batches >= 400 / 8,
        "{} batches",
        result.info.batches
    );
}

#[test]
fn below_single_thread_visits_a_second_thread_waits_and_then_joins() {
    let run = |threads, single_thread_visits| {
        let backend = Arc::new(Overlapping {
            inner: cpu_backend(),
            running: AtomicUsize::new(0),
            most_at_once: AtomicUsize::new(0),
        });
        let params = SearchParams {
            threads,
            single_thread_visits,
            minibatch: 8,
            ..SearchParams::default()
        };
        let mut search = Search::new(backend.clone(), params);
        search.set_position(history("startpos moves e2e4 e7e5"));
        let result = search_nodes(&mut search, 120);
        assert_tree_consistent(&search, 0, 120);
        let most_at_once = backend.most_at_once.load(Ordering::SeqCst);
        (tree_dump(&search), result.best_move, most_at_once)
    };
    // Below the threshold the second thread never gathers: the first gathers as if alone (the
    // idling rule, which ends a batch early for the other thread's sake, does not apply), so
    // the tree is the one-thread search's, node for node.
    let alone = run(1, 0);
    assert_eq!(alone.2, 1);
    assert_eq!(run(2, 200), alone);
    // From the threshold on it gathers while the first thread's call is under way.
    assert_eq!(run(2, 40).2, 2);
}

#[test]
fn proven_mates_are_scored_as_mates() {
    let backend: Arc<dyn Backend> = Arc::from(cpu_backend());
    let params = SearchParams {
        minibatch: 16,
        ..SearchParams::default()
    };
    // 1. Ra7 Kg8 2. Rb8#: black's reply is forced, and no mate in one exists (Ra8+ and
    // Rb8+ leave h7). Searched alone (searchmoves), so the tiny net's priors do not matter.
    let mut search = Search::new(backend.clone(), params);
    let spec = "fen 7k/8/8/8/8/8/R7/1R4K1 w - - 0 1";
    let h = history(spec);
    search.set_position(h.clone());
    let ra7 = "a2a7"
        .parse::<shakmaty::uci::UciMove>()
        .unwrap()
        .to_move(h.last().position.as_ref().unwrap())
        .unwrap();
    let stop = AtomicBool::new(false);
    let limits = Limits {
        nodes: Some(1_000),
        searchmoves: vec![ra7],
        ..Limits::default()
    };
    let result = search.run(limits, &stop, &mut |_| {}).unwrap();
    assert_eq!(
        result.info.mate,
        Some(2),
        "{spec}: {:?}",
        result.info.pv_uci()
    );
    assert_eq!(result.info.pv_uci(), ["a2a7", "h8g8", "b1b8"]);
    assert_tree_consistent(&search, 0, 1_000);
    // The other side: its only move is mated at once.
    let spec = "fen 7k/R7/8/8/8/8/8/1R4K1 b - - 0 1";
    search.set_position(history(spec));
    let result = search_nodes(&mut search, 500);
    assert_eq!(
        result.info.mate,
        Some(-1),
        "{spec}: {:?}",
        result.info.pv_uci()
    );
    assert_eq!(result.info.pv_uci()[..2], ["h8g8", "b1b8"]);
}

#[test]
fn multipv_and_searchmoves_shape_the_report() {
    let backend: Arc<dyn Backend> = Arc::from(cpu_backend());
    let params = SearchParams {
        multipv: 3,
        minibatch: 16,
        ..SearchParams::default()
    };
    let mut search = Search::new(backend, params);
    search.set_position(PositionHistory::startpos());
    let stop = AtomicBool::new(false);
    let result = search
        .run(
            Limits {
                nodes: Some(300),
                ..Limits::default()
            },
            &stop,
            &mut |_| {},
        )
        .unwrap();
    let lines = &result.info.lines;
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0].pv, result.info.pv);
    assert!(lines.windows(2).all(|w| w[0].visits >= w[1].visits));
    let firsts: Vec<_> = lines.iter().map(|l| l.pv[0]).collect();
    assert!(firsts[0] != firsts[1] && firsts[1] != firsts[2] && firsts[0] != firsts[2]);
    for line in lines {
        let [w, d, l] = line.wdl;
        assert!((w + d + l - 1.0).abs() < 1e-4 && (w - l - line.q).abs() < 1e-4);
    }
    // Only the two moves asked for are searched and reported.
    let start = history("startpos").last().position.clone().unwrap();
    let asked: Vec<_> = ["a2a3", "h2h4"]
        .iter()
        .map(|t| {
            t.parse::<shakmaty::uci::UciMove>()
                .unwrap()
                .to_move(&start)
                .unwrap()
        })
        .collect();
    search.set_position(PositionHistory::startpos());
    let limits = Limits {
        nodes: Some(200),
        searchmoves: asked.clone(),
        ..Limits::default()
    };
    let result = search.run(limits, &stop, &mut |_| {}).unwrap();
    assert!(asked.contains(&result.best_move));
    assert_eq!(result.info.lines.len(), 2);
    let tree = search.tree();
    let visited: u32 = tree
        .children(ROOT)
        .filter(|&e| asked.contains(&tree.edge(e).mv))
        .map(|e| tree.child(e).visits)
        .sum();
    drop(tree);
    assert_eq!(visited + 1, search.root_visits());
    assert_eq!(search.move_stats().len(), 20);
    // Two playouts: the root's, then one move's, which holds exactly the network's value of
    // its position, found again in the NN cache.
    search.set_position(PositionHistory::startpos());
    search_nodes(&mut search, 2);
    let stats = search.move_stats();
    let once: Vec<_> = stats.iter().filter(|s| s.visits == 1).collect();
    assert_eq!(once.len(), 1);
    let v = once[0]
        .network_value
        .expect("evaluated positions are cached");
    assert!((once[0].q - v).abs() < 1e-5, "{} vs {v}", once[0].q);
    // A move of another position is refused by name, not searched.
    let after_e4 = history("startpos moves e2e4")
        .last()
        .position
        .clone()
        .unwrap();
    let e5 = "e7e5"
        .parse::<shakmaty::uci::UciMove>()
        .unwrap()
        .to_move(&after_e4)
        .unwrap();
    let limits = Limits {
        nodes: Some(10),
        searchmoves: vec![e5],
        ..Limits::default()
    };
    let e = search.run(limits, &stop, &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("e7e5"), "{e}");
}

#[test]
fn warming_up_prepares_the_minibatch_for_every_thread_once() {
    let counting = counting_cpu();
    let params = SearchParams {
        threads: 3,
        minibatch: 12,
        ..SearchParams::default()
    };
    let mut search = Search::new(counting.clone(), params);
    search.warm_up().unwrap();
    let prepared = || counting.prepared.lock().unwrap().clone();
    assert_eq!(prepared(), [(12, 3)]);
    search.warm_up().unwrap();
    assert_eq!(prepared(), [(12, 3)], "done once");
    search.set_params(SearchParams {
        minibatch: 20,
        ..params
    });
    search.warm_up().unwrap();
    assert_eq!(prepared(), [(12, 3), (20, 3)], "again for a new minibatch");
    assert_eq!(
        counting.calls.load(Ordering::Relaxed),
        0,
        "nothing evaluated"
    );
}

#[test]
fn a_position_searched_again_is_answered_from_the_nn_cache() {
    // One thread, one playout a batch and a node limit: the second search of the same
    // position, on a new tree, takes the same playouts in the same order (a leaf answered from
    // the cache changes the tree as its evaluation did), so every leaf it starts was
    // evaluated by the first one and must be found in the NN cache, with no backend call.
    // (With larger batches the answers that come at once change the rest of a gathering.)
    let counting = counting_cpu();
    let params = SearchParams {
        threads: 1,
        minibatch: 1,
        ..SearchParams::default()
    };
    let mut search = Search::new(counting.clone(), params);
    let position = history("startpos moves e2e4 e7e5");
    search.set_position(position.clone());
    let first = search_nodes(&mut search, 300);
    assert!(first.info.evaluated > 0);
    // Another position in between: the tree is not kept, the cache is.
    search.set_position(history("fen 8/8/8/4k3/8/8/4P3/4K3 w - - 0 1"));
    search_nodes(&mut search, 20);
    search.set_position(position);
    let calls = counting.calls.load(Ordering::Relaxed);
    let again = search_nodes(&mut search, 300);
    assert_eq!(
        again.info.evaluated, 0,
        "positions sent to the backend again"
    );
    assert_eq!(counting.calls.load(Ordering::Relaxed), calls);
    assert_eq!(again.info.pv, first.info.pv);
    assert_eq!(search.root_visits(), 300);
}

#[test]
fn task_workers_count_per_search_thread_and_none_beside_a_cpu_backend() {
    let backend: Arc<dyn Backend> = Arc::from(cpu_backend());
    let with = |threads, task_workers| {
        Search::new(
            backend.clone(),
            SearchParams {
                threads,
                task_workers,
                ..SearchParams::default()
            },
        )
    };
    // As lc0's TaskWorkers: a count for each search thread, in one pool.
    assert_eq!(with(2, Some(3)).task_workers(), 6);
    assert_eq!(with(1, Some(0)).task_workers(), 0);
    // lc0's default gives none beside a backend that computes on the CPU.
    assert_eq!(with(2, None).task_workers(), 0);
    // A search runs with workers set beside the cpu backend too.
    let mut search = with(2, Some(2));
    search.set_position(history("startpos"));
    let result = search_nodes(&mut search, 200);
    assert!(result.info.nodes >= 200, "{:?}", result.info.nodes);
}

#[test]
fn lc0s_cache_key_answers_transpositions_without_the_backend() {
    // From the start position a few plies deep, many positions are reached by several move
    // orders. With lc0's key the cache answers every arrival after the first, with the exact
    // key (the history in the network's input differs) none.
    let evaluated = |exact_cache_key| {
        let params = SearchParams {
            threads: 1,
            minibatch: 16,
            exact_cache_key,
            ..SearchParams::default()
        };
        let mut search = Search::new(counting_cpu(), params);
        search.set_position(history("startpos"));
        let result = search_nodes(&mut search, 3000);
        assert_eq!(result.info.nodes, 3000);
        result.info.evaluated
    };
    let (lc0s, exact) = (evaluated(false), evaluated(true));
    assert!(
        lc0s < exact && exact <= 3000,
        "evaluated with lc0's key {lc0s}, with the exact key {exact}"
    );
}

/// The tree under the root as (move into the node, visits, value sum) in depth-first order.
fn tree_dump(search: &Search) -> Vec<(Option<shakmaty::Move>, u32, f64)> {
    let tree = search.tree();
    let mut out = Vec::new();
    let mut stack = vec![ROOT];
    while let Some(index) = stack.pop() {
        let node = tree.node(index);
        out.push((
            (index != ROOT).then(|| tree.mv(index)).flatten(),
            node.visits,
            node.value_sum,
        ));
        stack.extend(tree.children(index).filter_map(|e| tree.child_node(e)));
    }
    out
}

#[test]
fn a_tree_prepared_for_the_expected_reply_equals_the_one_reuse_copies() {
    let run = |prepare: bool, played: &dyn Fn(&[shakmaty::Move]) -> Vec<shakmaty::Move>| {
        let backend: Arc<dyn Backend> = Arc::from(cpu_backend());
        let mut search = Search::new(backend, SearchParams::default());
        search.set_position(history("startpos moves e2e4 e7e5 g1f3"));
        let result = search_nodes(&mut search, 600);
        assert!(result.info.pv.len() >= 2, "{:?}", result.info.pv);
        if prepare {
            search.prepare_next_move();
            assert_eq!(search.prepared_moves(), Some(&result.info.pv[..2]));
        }
        search.advance(&played(&result.info.pv));
        let kept = tree_dump(&search);
        let next = search_nodes(&mut search, 200);
        (kept, next.best_move, search.root_visits())
    };
    // The expected two moves (what the preparation copies), and another reply.
    let expected = |pv: &[shakmaty::Move]| pv[..2].to_vec();
    let other = |pv: &[shakmaty::Move]| {
        let mut position = history("startpos moves e2e4 e7e5 g1f3")
            .last()
            .position
            .clone()
            .unwrap();
        position.play_unchecked(pv[0]);
        let reply = position
            .legal_moves()
            .into_iter()
            .find(|m| *m != pv[1])
            .unwrap();
        vec![pv[0], reply]
    };
    let copied = run(false, &expected);
    assert!(copied.0.len() > 1, "the expected reply's subtree is kept");
    assert_eq!(run(true, &expected), copied);
    assert_eq!(run(true, &other), run(false, &other));
}
