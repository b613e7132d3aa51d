//! The search's own work per playout (gathering, leaves' encoding and NN cache keys, back-up),
//! with a backend that answers at once, so that what is measured is what sets the speed with
//! small nets on a GPU. One thread, `go nodes 20000` from two positions. Figures go to
//! docs/performance.md.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use lc0rs::backend::{Backend, BackendAttributes, BackendError, BatchOutput};
use lc0rs::chess::{InputPlanes, PositionHistory};
use lc0rs::weights::format::InputFormat;
use lc0rs_engine::search::{Limits, Search, SearchParams};

const NODES: u64 = 20_000;

/// Outputs derived cheaply from the planes: values spread over ±0.3 and a policy of eight
/// levels, so the tree has a shape without the network's cost.
struct Instant;

impl Backend for Instant {
    fn name(&self) -> &str {
        "instant"
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
        let mut out = BatchOutput::default();
        for planes in batch {
            let h = planes.iter().fold(0u64, |h, p| h.rotate_left(5) ^ p.mask);
            out.q.push(((h % 2001) as f32 / 1000.0 - 1.0) * 0.3);
            out.d.push(0.3);
            out.m.push(0.0);
            out.policy
                .extend((0..1858u64).map(|i| ((h ^ i.wrapping_mul(0x9e37)) & 7) as f32 * 0.3));
        }
        Ok(out)
    }
}

fn search_tree(c: &mut Criterion) {
    let mut group = c.benchmark_group("search_tree");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .throughput(Throughput::Elements(NODES));
    let backend: Arc<dyn Backend> = Arc::new(Instant);
    for spec in ["startpos", "startpos moves e2e4 e7e5 g1f3 b8c6 f1b5 a7a6"] {
        let history = PositionHistory::from_spec(spec).expect("valid position");
        group.bench_with_input(BenchmarkId::from_parameter(spec), &history, |b, history| {
            b.iter(|| {
                let params = SearchParams {
                    threads: 1,
                    ..SearchParams::default()
                };
                let mut search = Search::new(backend.clone(), params);
                search.set_position(history.clone());
                let limits = Limits {
                    nodes: Some(NODES),
                    ..Limits::default()
                };
                black_box(search.run(limits, &AtomicBool::new(false), &mut |_| {}))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, search_tree);
criterion_main!(benches);
