//! Builds `tests/c/api_test.c` with the system's C compiler (`cc`, or `$CC`) against
//! `include/lc0rs.h` and the shared library, runs it on the bundled tiny net with the `cpu`
//! backend, and compares every output it prints with the Rust library's own `cpu` backend
//! evaluating the same positions. The C program also checks the misuse cases (null pointers,
//! freed and wrong-kind handles, out-of-range indices, a second thread on a busy computation)
//! and fails unless each returns its error code, and opens the tiny net's file from memory
//! (`lc0rs_net_open_bytes`), which must give exactly the outputs of the net opened by name.

use std::path::{Path, PathBuf};
use std::process::Command;

use lc0rs::backend::create_backend;
use lc0rs::chess::castling::uci_notation;
use lc0rs::chess::policy_index::entry_moves_with_indices;
use lc0rs::chess::{HistoryFill, InputPlanes, PositionHistory, encode_position};
use lc0rs::netsource::NetSource;
use lc0rs::weights::LoadOptions;

/// Positions given to the C program as FEN and moves (`startpos`: the start position).
const POSITIONS: [(&str, &str); 5] = [
    ("startpos", ""),
    ("startpos", "e2e4 e7e5 g1f3 b8c6 f1b5"),
    (
        "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
        "e1g1",
    ),
    ("8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1", "e2e4"),
    ("4k3/8/8/8/8/8/8/4K2R w K - 0 1", ""),
];

/// Positions given to the C program as planes: encoded here, in the net's input format.
const PLANE_SPECS: [&str; 2] = [
    "startpos moves d2d4 g8f6 c2c4",
    "fen rnbqkbnr/pp1ppppp/8/2p5/4P3/8/PPPP1PPP/RNBQKBNR w KQkq c6 0 2 moves g1f3",
];

fn history(fen: &str, moves: &str) -> PositionHistory {
    let mut history = if fen == "startpos" {
        PositionHistory::startpos()
    } else {
        PositionHistory::from_fen(fen).unwrap()
    };
    for uci in moves.split_whitespace() {
        history.play_uci(uci).unwrap();
    }
    history
}

/// The directory cargo put the shared library in: beside the test executable (`deps/`, where
/// `cargo test` leaves it), else its parent (where `cargo build` copies it).
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    [deps, deps.parent().unwrap()]
        .into_iter()
        .find(|dir| dir.join("liblc0rs_c.so").exists())
        .unwrap_or_else(|| panic!("no liblc0rs_c.so beside {}", exe.display()))
        .to_path_buf()
}

/// Compiles the C program against the shared library, or with `static_lib` against
/// `liblc0rs_c.a` and the system libraries a Rust static library needs.
fn compile(dir: &Path, static_lib: bool) -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib_dir = library_dir();
    let exe = dir.join(if static_lib {
        "api_test_static"
    } else {
        "api_test"
    });
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let mut command = Command::new(&cc);
    command
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-O1",
        ])
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests/c/api_test.c"))
        .arg("-o")
        .arg(&exe);
    if static_lib {
        command.arg(lib_dir.join("liblc0rs_c.a")).args([
            "-lpthread",
            "-ldl",
            "-lm",
            "-lgcc_s",
            "-lc",
        ]);
    } else {
        command
            .arg("-L")
            .arg(&lib_dir)
            .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
            .args(["-llc0rs_c", "-lpthread"]);
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("running {cc}: {e}"));
    assert!(
        output.status.success(),
        "{cc} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    exe
}

fn close(a: f32, b: f32) -> bool {
    (a - b).abs() <= 1e-5 * (1.0 + b.abs())
}

#[test]
fn c_program_matches_the_rust_library_and_survives_misuse() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("lc0rs-c-api-test");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = compile(&dir, false);
    let static_exe = compile(&dir, true);

    // The reference: the Rust library's cpu backend on the same net.
    let (model, _) = NetSource::parse(Some("bundled:tiny"))
        .unwrap()
        .load(&LoadOptions::default(), &mut |_, _| {})
        .unwrap();
    let backend = create_backend("cpu", model, "threads=1").unwrap();
    let format = backend.input_format();

    let plane_histories: Vec<_> = PLANE_SPECS
        .iter()
        .map(|spec| PositionHistory::from_spec(spec).unwrap())
        .collect();
    let fen_histories: Vec<_> = POSITIONS.iter().map(|(f, m)| history(f, m)).collect();
    let encoded: Vec<_> = plane_histories
        .iter()
        .chain(&fen_histories)
        .map(|h| encode_position(h, format, HistoryFill::FenOnly))
        .collect();
    let planes: Vec<InputPlanes> = encoded.iter().map(|e| e.planes).collect();
    let expected = backend.evaluate(&planes).unwrap();

    let planes_file = dir.join("planes.txt");
    let text: String = planes[..PLANE_SPECS.len()]
        .iter()
        .map(|p| {
            let pairs: Vec<String> = p
                .iter()
                .map(|pl| format!("{} {:?}", pl.mask, pl.value))
                .collect();
            pairs.join(" ") + "\n"
        })
        .collect();
    std::fs::write(&planes_file, text).unwrap();
    let positions_file = dir.join("positions.txt");
    let text: String = POSITIONS
        .iter()
        .map(|(fen, moves)| format!("{fen}\t{moves}\n"))
        .collect();
    std::fs::write(&positions_file, text).unwrap();

    let run = |exe: &Path| {
        // The library it was linked against, not another one on cargo's LD_LIBRARY_PATH (which
        // the loader searches before the executable's runpath): a `liblc0rs_c.so` that an
        // earlier `cargo build` left in target/debug may lack newer functions.
        let output = Command::new(exe)
            .env("LD_LIBRARY_PATH", library_dir())
            .arg(&planes_file)
            .arg(&positions_file)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../weights/tiny.pb.gz"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "the C program failed:\n{stderr}");
        assert!(stderr.contains(", 0 failed"), "{stderr}");
        eprintln!("{}: {}", exe.display(), stderr.trim());
        String::from_utf8(output.stdout).unwrap()
    };
    let stdout = run(&exe);
    // Linked statically it is the same program.
    assert_eq!(run(&static_exe), stdout);

    let mut seen = (0, 0, 0, 0);
    for line in stdout.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let numbers = |from: usize| -> Vec<f32> {
            fields[from..].iter().map(|f| f.parse().unwrap()).collect()
        };
        match fields[0] {
            "out" => {
                let i: usize = fields[1].parse().unwrap();
                let got = numbers(2);
                let wdl = expected.wdl_of(i);
                let want = [
                    expected.q[i],
                    expected.d[i],
                    expected.m[i],
                    wdl[0],
                    wdl[1],
                    wdl[2],
                ];
                for (g, w) in got.iter().zip(want) {
                    assert!(close(*g, w), "sample {i}: {got:?} against {want:?}");
                }
                seen.0 += 1;
            }
            "policy" => {
                let i: usize = fields[1].parse().unwrap();
                let got = numbers(2);
                assert_eq!(got.len(), 1858);
                for (k, (g, w)) in got.iter().zip(expected.policy_of(i)).enumerate() {
                    assert!(close(*g, *w), "sample {i} logit {k}: {g} against {w}");
                }
                seen.1 += 1;
            }
            "moves" => {
                let i: usize = fields[1].parse().unwrap();
                let history = &fen_histories[i - PLANE_SPECS.len()];
                let mut want: Vec<(String, usize)> =
                    entry_moves_with_indices(history.last(), encoded[i].transform)
                        .into_iter()
                        .map(|(m, index)| (uci_notation(m, false).to_string(), index))
                        .collect();
                want.sort_by_key(|&(_, index)| index);
                let got: Vec<(String, usize)> = fields[2..]
                    .iter()
                    .map(|f| {
                        let (m, index) = f.split_once(':').unwrap();
                        (m.to_owned(), index.parse().unwrap())
                    })
                    .collect();
                assert_eq!(got, want, "sample {i}");
                assert!(!got.is_empty());
                seen.2 += 1;
            }
            "info" => {
                let attributes = backend.attributes();
                let want = format!(
                    "info {} {} {} {} {}",
                    format.lc0_id(),
                    i32::from(attributes.has_wdl),
                    i32::from(attributes.has_mlh),
                    attributes.max_batch,
                    attributes.recommended_batch
                );
                assert_eq!(line, want);
                seen.3 += 1;
            }
            other => panic!("unexpected line {other:?}"),
        }
    }
    let n = PLANE_SPECS.len() + POSITIONS.len();
    assert_eq!(seen, (n, n, POSITIONS.len(), 1), "{stdout}");
}
