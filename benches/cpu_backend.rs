//! The cpu backend's forward pass: the bundled tiny net and T82 (`preset:t82`) at batch 1 and
//! 8, start-position inputs. Figures go to docs/performance.md.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use lc0rs::backend::create_backend;
use lc0rs::chess::{HistoryFill, PositionHistory, encode_position};
use lc0rs::netsource::NetSource;
use lc0rs::weights::LoadOptions;

fn cpu_backend(c: &mut Criterion) {
    let mut group = c.benchmark_group("cpu_backend");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(15));
    for net in ["bundled:tiny", "preset:t82"] {
        let source = NetSource::parse(Some(net)).expect("known net");
        let (network, _) = source
            .load(&LoadOptions::default(), &mut |_, _| {})
            .expect("net loads");
        let backend = create_backend("cpu", network, "").expect("cpu backend");
        let planes = encode_position(
            &PositionHistory::startpos(),
            backend.input_format(),
            HistoryFill::FenOnly,
        )
        .planes;
        for batch in [1usize, 8] {
            let inputs = vec![planes; batch];
            group.throughput(Throughput::Elements(batch as u64));
            group.bench_with_input(BenchmarkId::new(net, batch), &inputs, |b, inputs| {
                b.iter(|| black_box(backend.evaluate(inputs).expect("evaluates")))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, cpu_backend);
criterion_main!(benches);
