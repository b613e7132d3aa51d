//! The search with large minibatches and several threads: every node gets the outputs of its
//! own position (a backend whose outputs are a function of each position's planes), and the
//! real Maia 1900 net searched with minibatches of 1, 16 and 256 reaches the same depth and
//! mostly the same move (the tree must not spread into breadth as the minibatch grows).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use lc0rs::backend::{
    Backend, BackendAttributes, BackendError, BatchOutput, create_backend, legal_move_probabilities,
};
use lc0rs::board::POLICY_SIZE;
use lc0rs::chess::policy_index::entry_moves_with_indices;
use lc0rs::chess::{HistoryFill, InputPlanes, PositionHistory, encode_position};
use lc0rs::netsource::NetSource;
use lc0rs::weights::LoadOptions;
use lc0rs::weights::format::InputFormat;
use lc0rs_engine::search::tree::{ROOT, Tree};
use lc0rs_engine::search::{Limits, Search, SearchParams, SearchResult, uci};

// The root package's shared test helpers.
#[path = "../../../tests/common/prereq.rs"]
mod prereq;

/// A splitmix64 step: the outputs below are derived from each position's planes through it.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// What the double's outputs are derived from: the whole input, or only the planes that
/// describe the current position (its pieces and repetitions, castling rights, side to move),
/// which is all the NN cache's default key (lc0's) tells apart.
#[derive(Clone, Copy, Debug)]
enum Derive {
    WholeInput,
    CurrentPosition,
}

impl Derive {
    fn uses(self, plane: usize) -> bool {
        match self {
            Derive::WholeInput => true,
            Derive::CurrentPosition => plane <= 12 || (104..=108).contains(&plane),
        }
    }
}

fn planes_hash(planes: &InputPlanes, derive: Derive) -> u64 {
    planes
        .iter()
        .enumerate()
        .filter(|(i, _)| derive.uses(*i))
        .fold(0, |h, (_, p)| {
            mix(h ^ p.mask) ^ mix(u64::from(p.value.to_bits()).wrapping_add(h))
        })
}

/// The value (W − L) the double gives a position: in (−0.9, 0.9).
fn derived_q(planes: &InputPlanes, derive: Derive) -> f32 {
    (planes_hash(planes, derive) % 1801) as f32 / 1000.0 - 0.9
}

/// The policy logits the double gives a position: in [0, 4).
fn derived_logits(planes: &InputPlanes, derive: Derive) -> Vec<f32> {
    let h = planes_hash(planes, derive);
    (0..POLICY_SIZE as u64)
        .map(|i| (mix(h ^ i) % 400) as f32 / 100.0)
        .collect()
}

/// A GPU-like backend (several search threads by default) whose outputs depend on nothing but
/// each position's planes, so that a node given another position's outputs shows; each call
/// takes `call` (long enough for another thread's gathering to overlap it).
struct PlaneDerived {
    call: Duration,
    derive: Derive,
}

impl Backend for PlaneDerived {
    fn name(&self) -> &str {
        "plane-derived"
    }
    fn attributes(&self) -> BackendAttributes {
        BackendAttributes {
            has_wdl: true,
            has_mlh: false,
            runs_on_cpu: false,
            max_batch: 1024,
            recommended_batch: 256,
            recommended_threads: 2,
        }
    }
    fn input_format(&self) -> InputFormat {
        InputFormat::Classical112
    }
    fn evaluate(&self, batch: &[InputPlanes]) -> Result<BatchOutput, BackendError> {
        std::thread::sleep(self.call);
        let mut out = BatchOutput::default();
        for planes in batch {
            out.q.push(derived_q(planes, self.derive));
            out.d.push(0.1);
            out.m.push(0.0);
            out.policy.extend(derived_logits(planes, self.derive));
        }
        Ok(out)
    }
}

/// Walks the tree from `index` (whose position `history` holds) and checks each expanded
/// node: its children's priors are the policy of its own position, a node evaluated once and
/// never searched below holds its own position's value, and nothing is left in flight.
fn check_outputs_reach_their_nodes(
    tree: &Tree,
    index: u32,
    history: &mut PositionHistory,
    derive: Derive,
) -> u32 {
    let node = tree.node(index);
    assert_eq!(node.in_flight(), 0, "visits left in flight");
    if !node.expanded || node.proof.is_some() {
        return 0;
    }
    let encoded = encode_position(history, InputFormat::Classical112, HistoryFill::FenOnly);
    let legal = entry_moves_with_indices(history.last(), encoded.transform);
    let mut expected: Vec<_> = legal
        .iter()
        .map(|(m, _)| *m)
        .zip(legal_move_probabilities(
            &derived_logits(&encoded.planes, derive),
            &legal,
            SearchParams::default().policy_temperature,
        ))
        .collect();
    expected.sort_by(|a, b| b.1.total_cmp(&a.1));
    let edges = tree.edges_of(index);
    assert_eq!(edges.len(), expected.len());
    for (edge_index, (edge, (m, p))) in tree.children(index).zip(edges.iter().zip(&expected)) {
        // A move proven lost for its mover keeps no prior (lc0's rule).
        let lost = tree.child(edge_index).proof.is_some_and(|p| p.value == -1);
        let p = if lost { &0.0 } else { p };
        let prior_ok = (edge.prior - p).abs() < 1e-6;
        assert!(
            prior_ok,
            "prior of {m:?}: {} vs its position's {p}",
            edge.prior
        );
    }
    if node.visits == 1 && index != ROOT {
        let own = -f64::from(derived_q(&encoded.planes, derive));
        let value_ok = (node.value_sum - own).abs() < 1e-6;
        assert!(value_ok, "value {} vs its position's {own}", node.value_sum);
    }
    let mut checked = 1;
    let len = history.len();
    for edge in tree.children(index) {
        let Some(child) = tree.child_node(edge) else {
            continue;
        };
        history.play(tree.edge(edge).mv);
        checked += check_outputs_reach_their_nodes(tree, child, history, derive);
        history.truncate(len);
    }
    checked
}

fn search_nodes(search: &mut Search, nodes: u64) -> SearchResult {
    let stop = AtomicBool::new(false);
    let limits = Limits {
        nodes: Some(nodes),
        ..Limits::default()
    };
    search.run(limits, &stop, &mut |_| {}).unwrap()
}

#[test]
fn every_node_gets_the_outputs_of_its_own_position() {
    // With the exact key, a node's outputs are those of its whole input (its history too);
    // with lc0's key, a transposition may be answered by the cache with the evaluation its
    // position got by another move order, so the double derives its outputs from the current
    // position alone, and each node must get those of its own position.
    for (exact_cache_key, derive) in [(true, Derive::WholeInput), (false, Derive::CurrentPosition)]
    {
        let backend: Arc<dyn Backend> = Arc::new(PlaneDerived {
            call: Duration::from_micros(200),
            derive,
        });
        for (minibatch, threads) in [(1, 1), (64, 2), (256, 3), (1024, 4)] {
            let params = SearchParams {
                minibatch,
                threads,
                exact_cache_key,
                ..SearchParams::default()
            };
            let mut search = Search::new(backend.clone(), params);
            for spec in [
                "startpos",
                "startpos moves e2e4 e7e5 g1f3 b8c6 f1b5 a7a6",
                "fen 8/5pk1/6p1/3P4/1p3P2/1P4P1/5K2/8 b - - 0 45",
            ] {
                let case = format!("{spec}, {derive:?}, {minibatch} / {threads}");
                search.set_position(PositionHistory::from_spec(spec).unwrap());
                let result = search_nodes(&mut search, 3000);
                assert_eq!(result.info.nodes, 3000, "{case}");
                let mut history = search.history().clone();
                let checked =
                    check_outputs_reach_their_nodes(&search.tree(), ROOT, &mut history, derive);
                assert!(checked > 100, "{case}: only {checked} nodes expanded");
                // The tree kept after a move is checked the same way.
                search.advance(&[result.best_move]);
                search_nodes(&mut search, 3000);
                let mut history = search.history().clone();
                check_outputs_reach_their_nodes(&search.tree(), ROOT, &mut history, derive);
            }
        }
    }
}

/// A pass shared among the task workers deals what one thread's walk deals (the same leaves,
/// the same collisions), so that a search with one thread ends with the same tree, bit for
/// bit, with or without workers to walk its passes' subtrees.
#[test]
fn walks_shared_among_task_workers_deal_as_one_thread() {
    let backend: Arc<dyn Backend> = Arc::new(PlaneDerived {
        call: Duration::ZERO,
        derive: Derive::WholeInput,
    });
    let search_with = |task_workers, spec| {
        let params = SearchParams {
            minibatch: 256,
            threads: 1,
            task_workers: Some(task_workers),
            ..SearchParams::default()
        };
        let mut search = Search::new(backend.clone(), params);
        search.set_position(PositionHistory::from_spec(spec).unwrap());
        let info = search_nodes(&mut search, 20_000).info;
        let tree = search.tree();
        let root_children: Vec<(u32, u64, u32)> = tree
            .children(ROOT)
            .map(|edge| {
                let child = tree.child(edge);
                (
                    child.visits,
                    child.value_sum.to_bits(),
                    child.draw.to_bits(),
                )
            })
            .collect();
        (
            root_children,
            info.pv,
            info.walks,
            info.shared_walks,
            tree.size(),
        )
    };
    for spec in [
        "startpos",
        "startpos moves e2e4 e7e5 g1f3 b8c6 f1b5 a7a6",
        "fen 8/5pk1/6p1/3P4/1p3P2/1P4P1/5K2/8 b - - 0 45",
    ] {
        let (alone, shared) = (search_with(0, spec), search_with(3, spec));
        assert_eq!(alone.3, 0, "{spec}: a walk shared without workers");
        assert!(shared.3 > 10, "{spec}: only {} walks shared", shared.3);
        assert_eq!(alone.0, shared.0, "{spec}: the root's children differ");
        assert_eq!(alone.1, shared.1, "{spec}: the principal variations differ");
        assert_eq!(
            (alone.2, alone.4),
            (shared.2, shared.4),
            "{spec}: walks or tree sizes differ"
        );
    }
}

/// A thread whose gathering meets only leaves of another thread's batch (in a backend call, or
/// still being prepared without the lock) waits for that batch to be backed up instead of
/// gathering again at once: each gathering that finds nothing adds a collision budget's worth
/// of collisions, so with a flat budget the collisions per backend call count the gatherings.
/// A thread that spun (gathered again at once while the other prepared its leaves) took the
/// lock from it dozens of times a batch.
#[test]
fn a_thread_that_only_collides_waits_for_the_other_batch() {
    let backend: Arc<dyn Backend> = Arc::new(PlaneDerived {
        call: Duration::from_millis(3),
        derive: Derive::WholeInput,
    });
    let budget = 500;
    let params = SearchParams {
        minibatch: 256,
        threads: 2,
        max_collision_visits: budget,
        collision_scaling_end: 0,
        ..SearchParams::default()
    };
    for spec in [
        "startpos",
        "startpos moves d2d4 g8f6 c2c4 e7e6 b1c3 f8b4 e2e3 e8g8 f1d3 d7d5",
    ] {
        let mut search = Search::new(backend.clone(), params);
        search.set_position(PositionHistory::from_spec(spec).unwrap());
        let info = search_nodes(&mut search, 20_000).info;
        let per_call = info.collisions as f64 / info.batches as f64;
        println!(
            "{spec}: {} collisions over {} backend calls",
            info.collisions, info.batches
        );
        assert!(
            per_call <= 4.0 * f64::from(budget),
            "{spec}: {per_call:.0} collisions a backend call with a budget of {budget} a \
             gathering ({} calls): a thread gathered again and again while the other's batch \
             was out",
            info.batches
        );
    }
}

/// Openings, middlegames and endgames, both sides to move.
const POSITIONS: [&str; 8] = [
    "startpos",
    "startpos moves e2e4 e7e5 g1f3 b8c6 f1b5 a7a6",
    "startpos moves d2d4 g8f6 c2c4 e7e6 b1c3 f8b4 e2e3 e8g8 f1d3 d7d5",
    "startpos moves e2e4 c7c5 g1f3 d7d6 d2d4 c5d4 f3d4 g8f6 b1c3 a7a6 c1e3 e7e5",
    "fen r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/P4PPP/R1BQKB1R w KQ - 1 9",
    "fen r2q1rk1/1b2bppp/p2ppn2/1p6/3NP3/1BN1B3/PPP1QPPP/R4RK1 w - - 0 12",
    "fen 8/5pk1/6p1/3P4/1p3P2/1P4P1/5K2/8 b - - 0 45",
    "fen 2r3k1/5ppp/p3p3/1p6/3R4/P3P3/1P3PPP/6K1 w - - 0 28",
];

/// A search of 800 nodes (smart pruning off): the best move, lc0's mean depth and the
/// principal variation's length.
fn maia_search(
    backend: &Arc<dyn Backend>,
    spec: &str,
    minibatch: usize,
    threads: usize,
) -> (String, u32, usize) {
    let params = SearchParams {
        minibatch,
        threads,
        ..SearchParams::default()
    };
    let mut search = Search::new(backend.clone(), params);
    search.set_position(PositionHistory::from_spec(spec).unwrap());
    let result = search_nodes(&mut search, 800);
    (
        uci(&result.best_move, false),
        result.info.depth,
        result.info.pv.len(),
    )
}

#[test]
fn large_minibatches_keep_the_depth_and_the_move() {
    let Some(path) = prereq::maia() else {
        return;
    };
    let (net, _) = NetSource::parse(Some(path.to_str().unwrap()))
        .unwrap()
        .load(&LoadOptions::default(), &mut |_, _| {})
        .unwrap();
    let backend: Arc<dyn Backend> = Arc::from(create_backend("cpu", net, "").unwrap());
    let mut same_move = 0;
    let mut report = Vec::new();
    for spec in POSITIONS {
        let (base_move, base_depth, base_pv) = maia_search(&backend, spec, 1, 1);
        let mut moves_agree = true;
        for (minibatch, threads) in [(16, 1), (256, 1), (256, 2)] {
            let (m, depth, pv) = maia_search(&backend, spec, minibatch, threads);
            report.push(format!(
                "{spec}: minibatch 1 {base_move} depth {base_depth} pv {base_pv}; \
                 minibatch {minibatch} threads {threads} {m} depth {depth} pv {pv}"
            ));
            assert!(
                depth + 1 >= base_depth && depth <= base_depth + 1,
                "{spec}: depth {depth} at minibatch {minibatch}, threads {threads}, \
                 against {base_depth} at minibatch 1\n{}",
                report.join("\n")
            );
            moves_agree &= m == base_move;
        }
        same_move += usize::from(moves_agree);
    }
    println!("{}", report.join("\n"));
    assert!(
        same_move >= POSITIONS.len() * 3 / 4,
        "the best move changed with the minibatch in {} of {} positions\n{}",
        POSITIONS.len() - same_move,
        POSITIONS.len(),
        report.join("\n")
    );
}
