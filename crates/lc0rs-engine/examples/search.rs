//! For engine authors: load a network, evaluate positions through a backend, then search:
//! threads, MultiPV with W/D/L, limits, per-move statistics, and pondering with a stop flag. `cargo run --release --example search [-- WEIGHTS [BACKEND]]`; by default the
//! bundled tiny net on the cpu backend.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lc0rs::backend::{Backend, DEFAULT_POLICY_TEMPERATURE, create_backend};
use lc0rs::chess::{HistoryFill, PositionHistory};
use lc0rs::evaluate::evaluate_positions;
use lc0rs::netsource::NetSource;
use lc0rs::weights::LoadOptions;
use lc0rs_engine::search::{Limits, Search, SearchParams};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let weights = args.next();
    let backend_name = args.next().unwrap_or_else(|| "cpu".to_owned());

    // A network from a file, `preset:NAME` or the bundled tiny net, and a backend for it.
    let (network, _) =
        NetSource::parse(weights.as_deref())?.load(&LoadOptions::default(), &mut |_, _| {})?;
    let backend: Arc<dyn Backend> = Arc::from(create_backend(&backend_name, network, "")?);

    // One batch of positions straight through the network.
    let positions = ["startpos", "startpos moves e2e4 e7e5 g1f3 b8c6"]
        .map(PositionHistory::from_spec)
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let evals = evaluate_positions(
        &*backend,
        &positions,
        HistoryFill::FenOnly,
        DEFAULT_POLICY_TEMPERATURE,
    )?;
    for eval in &evals {
        let top: Vec<_> = eval.policy.iter().take(3).collect();
        println!(
            "q {:+.3} d {:.3} m {:.1}, top moves {top:?}",
            eval.q, eval.d, eval.m
        );
    }

    // A search with two threads over one tree, three principal variations, and a limit of
    // nodes or time, whichever comes first.
    let params = SearchParams {
        threads: 2,
        multipv: 3,
        ..SearchParams::default()
    };
    let mut search = Search::new(backend, params);
    search.set_position(positions[1].clone());
    let stop = AtomicBool::new(false);
    let limits = Limits {
        nodes: Some(800),
        time: Some(Duration::from_secs(5)),
        ..Limits::default()
    };
    let result = search.run(limits, &stop, &mut |info| {
        println!(
            "{} nodes, {} nps, q {:+.3}, pv {}",
            info.nodes,
            info.nps(),
            info.q,
            info.pv_uci().join(" ")
        );
    })?;
    for (i, line) in result.info.lines.iter().enumerate() {
        let [w, d, l] = line.wdl_per_mille();
        let pv: Vec<_> = line.pv.iter().map(|m| result.info.move_uci(m)).collect();
        println!(
            "multipv {}: wdl {w} {d} {l}, {} visits, pv {}",
            i + 1,
            line.visits,
            pv.join(" ")
        );
    }
    println!(
        "best move {}, {} collisions in {} backend batches",
        result.info.move_uci(&result.best_move),
        result.info.collisions,
        result.info.batches
    );
    for stats in search.move_stats().iter().rev().take(3) {
        println!(
            "{}: N {}, P {:.3}, Q {:+.3}, U {:.3}",
            result.info.move_uci(&stats.mv),
            stats.visits,
            stats.prior,
            stats.q,
            stats.u
        );
    }

    // Pondering: search the position after the expected reply without a limit on another
    // thread; `stop` ends it, and a new `run` on the same position goes on with its tree.
    if let Some(&reply) = result.info.pv.get(1) {
        search.advance(&[result.best_move, reply]);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let pondering = std::thread::spawn(move || {
            let outcome = search.run(Limits::default(), &flag, &mut |_| {});
            (search, outcome)
        });
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
        let (mut search, outcome) = pondering.join().expect("the ponder thread ends");
        println!("pondered {} playouts", outcome?.info.nodes);
        let limits = Limits {
            time: Some(Duration::from_millis(200)),
            ..Limits::default()
        };
        let reused = search.root_visits();
        let result = search.run(limits, &AtomicBool::new(false), &mut |_| {})?;
        println!(
            "after the reply: {} ({} visits kept from pondering)",
            result.info.move_uci(&result.best_move),
            reused
        );
    }
    Ok(())
}
