//! For engine authors: load a network, evaluate positions through a backend, then run a short
//! search. `cargo run --release --example search [-- WEIGHTS [BACKEND]]`; by default the
//! bundled tiny net on the cpu backend.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use lc0rs::backend::{Backend, DEFAULT_POLICY_TEMPERATURE, create_backend};
use lc0rs::chess::{HistoryFill, PositionHistory};
use lc0rs::evaluate::evaluate_positions;
use lc0rs::netsource::NetSource;
use lc0rs::search::{Limits, Search, SearchParams};
use lc0rs::weights::LoadOptions;

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

    // A short search; `stop` could be set from another thread to end it early.
    let mut search = Search::new(backend, SearchParams::default());
    search.set_position(positions[1].clone());
    let stop = AtomicBool::new(false);
    let limits = Limits {
        nodes: Some(800),
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
    println!("best move {}", result.info.move_uci(&result.best_move));
    Ok(())
}
