//! Damaged weights files, thousands of them, made from the bundled nets (in every layer
//! encoding) with a fixed seed: truncated and corrupt gzip, lying gzip trailers, truncated
//! protobuf, bit flips, wrong wire types and lengths, unknown fields with big blobs, reshaped,
//! constant, NaN and infinite tensors. Every file must load or give an error naming the file,
//! never panic or abort, load within a bound of a normal load of its size, and (for the gzip
//! damage, where buffers are sized from what the file declares) use at most a small multiple
//! of a normal load's memory.
//!
//! `LC0RS_HOSTILE_FILES` (default 10,000) and `LC0RS_HOSTILE_SEED` choose the corpus;
//! `LC0RS_HOSTILE_OUT=DIR` also writes it there (`NNNNN.pb.gz` or `.pb`, and `index.txt`
//! saying what each file's damage is), to try it on `lc0rs info` or another tool.

#[path = "hostile/mutate.rs"]
mod mutate;
#[path = "hostile/wire.rs"]
mod wire;

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use lc0rs::weights::codec::LayerEncoding;
use lc0rs::weights::export::to_proto;
use lc0rs::weights::{LoadOptions, WeightsError, load_bytes, load_file};
use mutate::{Base, Mutant, mutant};
use prost::Message;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use wire::{Field, Value};

/// The system allocator, counting the bytes in use and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is passed on unchanged to the system allocator, which upholds
// GlobalAlloc's contract; the counters only observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout is passed on as is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` was allocated by `System` with `layout`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The allocator's counters are global: the tests of this file run one at a time, so that a
/// peak measured is the measured load's own.
static ALONE: Mutex<()> = Mutex::new(());

fn alone() -> MutexGuard<'static, ()> {
    ALONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A load may take this many times a normal load of the same size (plus [`SLACK`] for a busy
/// machine), and a slow one is timed again before it counts.
const TIME_FACTOR: u32 = 5;
const SLACK: Duration = Duration::from_millis(250);
/// A gzip file may use this many times the memory a normal load of its net uses.
const MEMORY_FACTOR: usize = 2;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn bundled(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("weights/{name}.pb.gz"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The bundled nets in every layer encoding (LINEAR16 as bundled, the others re-encoded).
fn bases() -> Vec<Base> {
    let mut out = Vec::new();
    for name in ["tiny", "tiny-dense"] {
        let (network, _) = load_bytes(bundled(name), name, &LoadOptions::default()).unwrap();
        for encoding in LayerEncoding::ALL {
            let payload = to_proto(&network, encoding).encode_to_vec();
            out.push(Base::new(format!("{name} {}", encoding.name()), payload));
        }
    }
    out
}

fn load(bytes: Vec<u8>, file: &Path, via_file: bool) -> Result<(), WeightsError> {
    if via_file {
        std::fs::write(file, &bytes).unwrap();
        load_file(file, &LoadOptions::default()).map(drop)
    } else {
        load_bytes(
            Bytes::from(bytes),
            &file.display().to_string(),
            &LoadOptions::default(),
        )
        .map(drop)
    }
}

/// The time and peak memory of loading `bytes`; panics inside the loader are failures.
fn measured(bytes: &[u8], file: &Path, via_file: bool) -> (Result<(), String>, Duration, usize) {
    let bytes = bytes.to_vec();
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let started = Instant::now();
    let result = std::panic::catch_unwind(|| load(bytes, file, via_file));
    let took = started.elapsed();
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(before);
    let result = match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("PANIC".to_owned()),
    };
    (result, took, peak)
}

/// The fastest of three normal loads of a base.
fn normal_load_time(bytes: &[u8], file: &Path, via_file: bool) -> Duration {
    (0..3)
        .map(|_| {
            let (result, took, _) = measured(bytes, file, via_file);
            result.expect("the undamaged net loads");
            took
        })
        .min()
        .unwrap()
}

struct Problem {
    index: usize,
    what: String,
    problem: String,
}

/// Loads one mutant and says what is wrong with how it went, if anything: a panic, an error
/// that does not name the file, a load over the time bound, or (where `memory` is given) a
/// peak over that many bytes.
fn check(
    m: &Mutant,
    base: &Base,
    normal: Duration,
    memory: Option<usize>,
    file: &Path,
) -> Option<String> {
    let scale = (m.bytes.len() as f64 / base.payload.len().min(base.gzip.len()) as f64).max(1.0);
    let bound = normal.mul_f64(scale) * TIME_FACTOR + SLACK;
    let (mut result, mut took, peak) = measured(&m.bytes, file, m.gzip_level);
    if took > bound {
        // A busy machine, or the loader: only a second slow load counts.
        (result, took, _) = measured(&m.bytes, file, m.gzip_level);
    }
    let name = file.display().to_string();
    match result {
        Err(e) if e == "PANIC" => Some("panicked".to_owned()),
        Err(e) if !e.starts_with(&name) => Some(format!("error does not name the file: {e}")),
        _ if took > bound => Some(format!("took {took:?}, over the bound {bound:?}")),
        _ if memory.is_some_and(|limit| peak > limit) => Some(format!(
            "{peak} bytes at the peak, over {}",
            memory.unwrap_or_default()
        )),
        _ => None,
    }
}

/// The mutant of `index`: each has its own generator, so any one can be made again alone.
fn nth_mutant(bases: &[Base], seed: u64, index: usize) -> Mutant {
    let mut rng =
        ChaCha8Rng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    mutant(bases, &mut rng)
}

/// The index of the base a mutant was made from (its description starts with the name).
fn base_index(bases: &[Base], m: &Mutant) -> usize {
    (0..bases.len())
        .filter(|&b| m.what.starts_with(&bases[b].name))
        .max_by_key(|&b| bases[b].name.len())
        .expect("a mutant names its base")
}

#[test]
fn a_seeded_corpus_of_damaged_files_loads_or_errs_within_bounds() {
    let _alone = alone();
    let files = env_or("LC0RS_HOSTILE_FILES", 10_000usize);
    let seed = env_or("LC0RS_HOSTILE_SEED", 20_261_123u64);
    let out_dir = std::env::var_os("LC0RS_HOSTILE_OUT").map(PathBuf::from);
    let bases = bases();
    let dir = tempfile::tempdir().unwrap();
    let normals: Vec<(Duration, Duration)> = bases
        .iter()
        .map(|b| {
            let file = dir.path().join("normal.pb.gz");
            (
                normal_load_time(&b.payload, &file, false),
                normal_load_time(&b.gzip, &file, true),
            )
        })
        .collect();
    let peaks: Vec<usize> = bases
        .iter()
        .map(|b| measured(&b.gzip, &dir.path().join("normal.pb.gz"), true).2)
        .collect();
    let started = Instant::now();
    let out_dir = out_dir.as_deref();
    let look_at = |index: usize, m: Mutant| -> Option<Problem> {
        let b = base_index(&bases, &m);
        let normal = if m.gzip_level {
            normals[b].1
        } else {
            normals[b].0
        };
        let file = dir.path().join(format!("{index:05}.pb.gz"));
        if let Some(out) = out_dir {
            let ext = if m.bytes.starts_with(&[0x1f]) {
                "pb.gz"
            } else {
                "pb"
            };
            std::fs::write(out.join(format!("{index:05}.{ext}")), &m.bytes).unwrap();
        }
        let memory = m
            .gzip_level
            .then(|| MEMORY_FACTOR * peaks[b].max(m.bytes.len()));
        let problem = check(&m, &bases[b], normal, memory, &file);
        let _ = std::fs::remove_file(&file);
        problem.map(|problem| Problem {
            index,
            what: m.what,
            problem,
        })
    };
    // The protobuf damage on all cores; then the gzip damage one file at a time, so that the
    // allocator's peak is that file's own.
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    let (mut problems, gzip_damaged): (Vec<Problem>, Vec<usize>) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let look_at = &look_at;
                let bases = &bases;
                scope.spawn(move || {
                    let (mut found, mut later) = (Vec::new(), Vec::new());
                    for index in (w..files).step_by(workers) {
                        let m = nth_mutant(bases, seed, index);
                        if m.gzip_level {
                            later.push(index);
                        } else {
                            found.extend(look_at(index, m));
                        }
                    }
                    (found, later)
                })
            })
            .collect();
        let (mut found, mut later) = (Vec::new(), Vec::new());
        for handle in handles {
            let (f, l) = handle.join().unwrap();
            found.extend(f);
            later.extend(l);
        }
        (found, later)
    });
    let parallel_part = started.elapsed();
    problems.extend(
        gzip_damaged
            .iter()
            .filter_map(|&i| look_at(i, nth_mutant(&bases, seed, i))),
    );
    eprintln!(
        "{files} files: {} with gzip damage; {parallel_part:?} for the others on {workers} threads, {:?} in all",
        gzip_damaged.len(),
        started.elapsed()
    );
    if let Some(out) = &out_dir {
        let index: String = (0..files)
            .map(|i| format!("{i:05} {}\n", nth_mutant(&bases, seed, i).what))
            .collect();
        std::fs::write(out.join("index.txt"), index).unwrap();
    }
    let report: Vec<String> = problems
        .iter()
        .take(20)
        .map(|p| format!("#{} ({}): {}", p.index, p.what, p.problem))
        .collect();
    assert!(
        problems.is_empty(),
        "{} of {files} files (seed {seed}, {:?}):\n{}",
        problems.len(),
        started.elapsed(),
        report.join("\n")
    );
}

/// Loads `bytes` through a file, checking the time and memory bounds against a normal load of
/// `base`.
fn bounded_load(base: &Base, bytes: &[u8], what: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("damaged.pb.gz");
    let gz = bytes.starts_with(&[0x1f]);
    let reference = if gz { &base.gzip } else { &base.payload };
    let normal = normal_load_time(reference, &file, true);
    let (_, _, normal_peak) = measured(reference, &file, true);
    let scale = (bytes.len() as f64 / reference.len() as f64).max(1.0);
    let bound = normal.mul_f64(scale) * TIME_FACTOR + SLACK;
    let (mut result, mut took, mut peak) = measured(bytes, &file, true);
    if took > bound {
        (result, took, peak) = measured(bytes, &file, true);
    }
    assert!(took <= bound, "{what}: {took:?} over the bound {bound:?}");
    let limit = MEMORY_FACTOR * normal_peak.max(bytes.len());
    assert!(
        peak <= limit,
        "{what}: {peak} bytes at the peak, over {limit}"
    );
    result
}

fn tiny() -> Base {
    let (network, _) = load_bytes(bundled("tiny"), "tiny", &LoadOptions::default()).unwrap();
    Base::new(
        "tiny".to_owned(),
        to_proto(&network, LayerEncoding::Float16).encode_to_vec(),
    )
}

/// Files that once aborted the process (a 4 GiB buffer from the trailer) or loaded slowly.
#[test]
fn damage_that_once_aborted_or_stalled_is_bounded() {
    let _alone = alone();
    let base = tiny();
    let with_isize = |size: u32| {
        let mut gz = base.gzip.clone();
        let at = gz.len() - 4;
        gz[at..].copy_from_slice(&size.to_le_bytes());
        gz
    };
    let mut trailing = base.gzip.clone();
    trailing.push(0);
    let mut cut = base.gzip[..base.gzip.len() / 3].to_vec();
    cut.extend_from_slice(&[0xff; 4]);
    let gzip_cases = [
        ("ISIZE=0xffffffff", with_isize(u32::MAX)),
        ("ISIZE=0x7fffffff", with_isize(0x7fff_ffff)),
        ("a trailing byte", trailing),
        ("only the gzip magic", vec![0x1f, 0x8b]),
        ("truncated, huge ISIZE", cut),
    ];
    for (what, bytes) in gzip_cases {
        let message = bounded_load(&base, &bytes, what).expect_err(what);
        assert!(message.contains("gzip"), "{what}: {message}");
    }
    let raw = |wire: u8| {
        move |f: &mut Field| {
            let bytes = f.value.payload();
            f.value = Value::Raw { wire, bytes };
        }
    };
    // weights(10).encoder(27).mha(1).smolgen(9).compress(1); mha.v_b(6); ffn(4).dense1_w(1).
    let compress = [10, 27, 1, 9, 1];
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "tag of compress 0xa -> 0xe",
            base.changed(&compress, raw(6)),
        ),
        (
            "tag of v_b 0x32 -> 0x2",
            base.changed(&[10, 27, 1, 6], |f| f.number = 0),
        ),
        (
            "constant-valued ffn weight, and NaN (0xffff in FLOAT16)",
            base.changed(&[10, 27, 4, 1, 3], |f| {
                if let Value::Bytes(b) = &mut f.value {
                    b.fill(0xff);
                }
            }),
        ),
        (
            "a million empty encoder layers (3 bytes each, 2 KB each decoded)",
            base.changed(&[10], |weights| {
                let empty = Field {
                    number: 27,
                    value: Value::Bytes(Vec::new()),
                };
                if let Value::Message(fields) = &mut weights.value {
                    fields.extend(std::iter::repeat_n(empty, 1_000_000));
                }
            }),
        ),
        (
            "an unknown 8th field holding a 16 MiB blob",
            base.changed(&compress, |f| {
                if let Value::Message(layer) = &mut f.value {
                    layer.push(Field {
                        number: 8,
                        value: Value::Bytes(vec![0x5a; 16 << 20]),
                    });
                }
            }),
        ),
    ];
    for (what, bytes) in cases {
        match bounded_load(&base, &bytes, what) {
            Err(message) => assert!(message.contains("damaged.pb.gz"), "{what}: {message}"),
            // Unknown fields are skipped, as protobuf readers do.
            Ok(()) => assert!(what.contains("unknown"), "{what} was accepted"),
        }
    }
}

#[test]
fn nan_and_infinity_in_weights_are_refused_with_the_tensor_name() {
    let _alone = alone();
    let base = tiny();
    // FLOAT16 bit patterns: 0x7e00 NaN, 0x7c00 +inf, 0xfc00 -inf.
    for pattern in [[0x00u8, 0x7e], [0x00, 0x7c], [0x00, 0xfc]] {
        let bytes = base.changed(&[10, 27, 4, 1, 3], |f| {
            if let Value::Bytes(b) = &mut f.value {
                b[6..8].copy_from_slice(&pattern);
            }
        });
        let message = load_bytes(bytes, "nan.pb", &LoadOptions::default())
            .map(drop)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("weights.encoder[0].ffn.dense1_w") && message.contains("element 3"),
            "{message}"
        );
    }
}
