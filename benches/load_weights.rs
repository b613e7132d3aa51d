//! Loading weights files: T82 (`preset:t82`, LINEAR16 gzip, generated once into the cache) and
//! the bundled tiny net. The T82 figure is recorded in docs/performance.md (goal: under 2 s).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use lc0rs::netsource::{BUNDLED, ensure_preset_file};
use lc0rs::weights::{LoadOptions, load_bytes, load_file};

fn load_weights(c: &mut Criterion) {
    let t82 = ensure_preset_file("t82", &mut |_, _| {}).expect("preset:t82 can be generated");
    let options = LoadOptions::default();
    let mut group = c.benchmark_group("load_weights");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    group.bench_function("t82_linear16_pb_gz", |b| {
        b.iter(|| black_box(load_file(&t82, &options).expect("T82 loads")))
    });
    let tiny = BUNDLED[0].1;
    group.bench_function("tiny_bundled", |b| {
        b.iter(|| black_box(load_bytes(tiny, "tiny", &options).expect("tiny loads")))
    });
    group.finish();
}

criterion_group!(benches, load_weights);
criterion_main!(benches);
