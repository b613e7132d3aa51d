//! The `lc0rs` binary as a user runs it.

use std::path::Path;
use std::process::{Command, Output};

fn lc0rs(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lc0rs"))
        .args(args)
        .env("LC0RS_CACHE_DIR", cache)
        .output()
        .expect("the binary runs")
}

fn json_of(output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("info --json prints one JSON object")
}

fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The acceptance: `gen-net --preset t82` then `info --json`.
#[test]
fn t82_gen_net_and_info_report_the_t82_shape() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t82.pb.gz");
    let file = file.to_str().unwrap();
    let out = lc0rs(&["gen-net", "--preset", "t82", "-o", file], dir.path());
    assert!(out.status.success(), "{}", stderr_of(&out));
    let info = json_of(&lc0rs(&["info", file, "--json"], dir.path()));
    assert_eq!(info["embedding"], 768);
    assert_eq!(info["encoders"], 15);
    assert_eq!(info["heads"], 24);
    assert_eq!(info["dff"], 1024);
    assert_eq!(info["parameters"], 94_632_236);
    // docs/lc0-format.md §5, per position: 15 encoders of 286,785,536 MACs, embedding 8,650,752,
    // policy 116,391,936, value 1,835,392 and moves-left 458,880 MACs; 2 FLOP per MAC.
    let macs: u64 = 15 * 286_785_536 + 8_650_752 + 116_391_936 + 1_835_392 + 458_880;
    assert_eq!(info["flops_per_position"], 2 * macs);
    assert_eq!(2 * macs, 8_858_240_000);
    assert_eq!(info["smolgen"]["gen_size"], 256);
    assert_eq!(info["activations"]["ffn"], "relu2");
    assert_eq!(info["input_embedding"], "pe_map");
}

/// `--layers` replaces the preset's depth and nothing else: T82's widths stay, and the FLOPs
/// per position drop by 13 encoders of 286,785,536 MACs each (docs/lc0-format.md §5).
#[test]
fn gen_net_layers_sets_the_depth() {
    let dir = tempfile::tempdir().unwrap();
    let info_of = |layers: Option<&str>| {
        let file = dir
            .path()
            .join(format!("t82-{}.pb.gz", layers.unwrap_or("all")));
        let file = file.to_str().unwrap();
        let mut args = vec!["gen-net", "--preset", "t82", "-o", file];
        args.extend(layers.map(|l| ["--layers", l]).into_iter().flatten());
        let out = lc0rs(&args, dir.path());
        assert!(out.status.success(), "{}", stderr_of(&out));
        json_of(&lc0rs(&["info", file, "--json"], dir.path()))
    };
    let (full, two) = (info_of(None), info_of(Some("2")));
    assert_eq!(
        (full["encoders"].clone(), two["encoders"].clone()),
        (15.into(), 2.into())
    );
    assert_eq!(two["embedding"], 768);
    assert_eq!(two["heads"], 24);
    let per_layer_flops = 2 * 286_785_536u64;
    assert_eq!(
        full["flops_per_position"].as_u64().unwrap() - two["flops_per_position"].as_u64().unwrap(),
        13 * per_layer_flops
    );
    for bad in ["0", "65"] {
        let args = [
            "gen-net", "--preset", "t82", "--layers", bad, "-o", "x.pb.gz",
        ];
        let out = lc0rs(&args, dir.path());
        assert!(
            !out.status.success() && stderr_of(&out).contains("--layers"),
            "{bad}"
        );
    }
}

#[test]
fn info_text_and_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let out = lc0rs(&["info"], dir.path());
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("bundled:tiny"), "{text}");
    assert!(text.contains("64x2x2h"), "{text}");
    let dense = json_of(&lc0rs(
        &["info", "bundled:tiny-dense", "--json"],
        dir.path(),
    ));
    assert_eq!(dense["input_embedding"], "pe_dense");
    assert_eq!(
        dense["policy_heads"],
        serde_json::json!(["vanilla", "optimistic", "soft"])
    );
}

#[test]
fn presets_are_generated_once_into_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let first = json_of(&lc0rs(&["info", "preset:tiny", "--json"], dir.path()));
    let cached = dir.path().join("tiny-seed1-linear16.pb.gz");
    let written = std::fs::metadata(&cached).unwrap().modified().unwrap();
    let second = json_of(&lc0rs(&["info", "preset:tiny", "--json"], dir.path()));
    assert_eq!(
        std::fs::metadata(&cached).unwrap().modified().unwrap(),
        written
    );
    assert_eq!(first["parameters"], second["parameters"]);
    // The preset equals the bundled net of the same name and seed.
    let bundled = json_of(&lc0rs(&["info", "--json"], dir.path()));
    assert_eq!(first["parameters"], bundled["parameters"]);
}

#[test]
fn gen_net_encodings_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f16.pb");
    let file = file.to_str().unwrap();
    let out = lc0rs(
        &[
            "gen-net",
            "--preset",
            "tiny",
            "--seed",
            "4",
            "--encoding",
            "float16",
            "-o",
            file,
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let info = json_of(&lc0rs(&["info", file, "--json"], dir.path()));
    assert_eq!(info["encoding"], serde_json::json!(["float16"]));
    assert_eq!(info["min_version"], "v0.33.0");
}

#[test]
fn bad_input_is_a_clear_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.pb.gz");
    std::fs::write(&junk, b"\x1f\x8b\x08\x00 this is not gzip").unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["info", "/no/such/file.pb.gz"], "/no/such/file.pb.gz"),
        (&["info", junk.to_str().unwrap()], "junk.pb.gz"),
        (&["info", "preset:t99"], "unknown preset"),
        (&["gen-net", "--preset", "t99", "-o", "x.pb.gz"], "t99"),
    ];
    for (args, expected) in cases {
        let out = lc0rs(args, dir.path());
        let err = stderr_of(&out);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

fn eval_json(args: &[&str], dir: &Path) -> Vec<serde_json::Value> {
    let out = lc0rs(args, dir);
    assert!(out.status.success(), "{}", stderr_of(&out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn eval_prints_one_object_per_position() {
    let dir = tempfile::tempdir().unwrap();
    let castle = "fen r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1";
    let results = eval_json(
        &[
            "eval",
            "--position",
            "startpos moves e2e4 e7e5",
            "--position",
            castle,
            "--json",
        ],
        dir.path(),
    );
    assert_eq!(results.len(), 2);
    for r in &results {
        let (q, d) = (r["q"].as_f64().unwrap(), r["d"].as_f64().unwrap());
        let wdl: Vec<f64> = r["wdl"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert!((wdl[0] - wdl[2] - q).abs() < 1e-5 && (wdl[1] - d).abs() < 1e-6);
        assert!((wdl.iter().sum::<f64>() - 1.0).abs() < 1e-5);
        let total: f64 = r["policy"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_f64().unwrap())
            .sum();
        assert!((total - 1.0).abs() < 1e-4, "{total}");
    }
    assert_eq!(
        results[0]["policy"].as_object().unwrap().len(),
        29,
        "legal moves after 1.e4 e5"
    );
    let castling = results[1]["policy"].as_object().unwrap();
    assert!(
        castling.contains_key("e1g1") && castling.contains_key("e1c1"),
        "castling is written e1g1/e1c1"
    );
}

#[test]
fn eval_temperature_flattens_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let top = |temp: &str| {
        let r = &eval_json(
            &["eval", "--position", "startpos", "--temp", temp, "--json"],
            dir.path(),
        )[0];
        r["policy"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_f64().unwrap())
            .fold(0.0, f64::max)
    };
    assert!(top("0.5") > top("1.359") && top("1.359") > top("5"));
}

#[test]
fn eval_rejects_bad_positions_and_options() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["eval", "--position", "startpos moves e2e5"], "e2e5"),
        (
            &["eval", "--position", "fen not/a/fen w - - 0 1"],
            "bad FEN",
        ),
        (
            &["eval", "--position", "startpos", "-o", "threads=0"],
            "threads",
        ),
        (
            &["eval", "--position", "startpos", "-o", "warp=9"],
            "unknown option \"warp\"",
        ),
        (&["eval", "--position", "startpos", "--temp", "0"], "--temp"),
    ];
    for (args, expected) in cases {
        let out = lc0rs(args, dir.path());
        let err = stderr_of(&out);
        assert!(
            !out.status.success() && err.contains(expected),
            "{args:?}: {err}"
        );
        assert!(
            !err.contains("panicked") && !err.contains("backtrace"),
            "{args:?}: {err}"
        );
    }
}

const LC0_HEADER: &str =
    "size, mean nps, mean ms,   sdev,     cv, max nps,  median, min nps, first max, first mean";

fn stdout_of(output: &Output) -> String {
    assert!(output.status.success(), "stderr: {}", stderr_of(output));
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn backendbench_prints_lc0_csv() {
    let dir = tempfile::tempdir().unwrap();
    let out = stdout_of(&lc0rs(
        &[
            "backendbench",
            "-b",
            "cpu",
            "--batches",
            "4",
            "--start-batch-size",
            "1",
            "--max-batch-size",
            "3",
        ],
        dir.path(),
    ));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], LC0_HEADER);
    assert_eq!(lines.len(), 4, "{out}");
    for (i, row) in lines[1..].iter().enumerate() {
        let fields: Vec<&str> = row.split(',').collect();
        let widths: Vec<usize> = fields.iter().map(|f| f.len()).collect();
        assert_eq!(widths, [4, 9, 8, 7, 7, 8, 8, 8, 10, 11], "{row}");
        assert_eq!(fields[0].trim().parse::<usize>().unwrap(), i + 1);
        assert!(
            fields.iter().all(|f| f.trim().parse::<f64>().is_ok()),
            "{row}"
        );
        // max nps ≥ median ≥ min nps.
        let nps: Vec<f64> = [5, 6, 7]
            .iter()
            .map(|&k| fields[k].trim().parse().unwrap())
            .collect();
        assert!(nps[0] >= nps[1] && nps[1] >= nps[2], "{row}");
    }
}

#[test]
fn backendbench_repeats_the_header_every_32_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "backendbench",
        "-b",
        "cpu",
        "--batches",
        "2",
        "--max-batch-size",
        "33",
    ];
    let out = stdout_of(&lc0rs(&args, dir.path()));
    assert_eq!(out.lines().filter(|l| *l == LC0_HEADER).count(), 2);
    assert_eq!(out.lines().count(), 35);
    let once = stdout_of(&lc0rs(
        &[&args[..], &["--header-only-once"]].concat(),
        dir.path(),
    ));
    assert_eq!(once.lines().filter(|l| *l == LC0_HEADER).count(), 1);
}

#[test]
fn backendbench_compares_option_sets() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "backendbench",
        "-b",
        "cpu",
        "--batches",
        "3",
        "--max-batch-size",
        "2",
        "--compare",
        "threads=1,threads=2",
    ];
    let out = stdout_of(&lc0rs(&args, dir.path()));
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].contains("threads=1")
            && lines[0].contains("threads=2")
            && lines[0].contains("ratio"),
        "{out}"
    );
    assert_eq!(lines.len(), 3);
    let ratio: f64 = lines[1].rsplit(',').next().unwrap().trim().parse().unwrap();
    assert!(ratio > 0.0);
}

#[test]
fn cpu_profile_times_every_operation() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.json");
    let chart = dir.path().join("chart.svg");
    let out = lc0rs(
        &[
            "backendbench",
            "-b",
            "cpu",
            "--batches",
            "3",
            "--start-batch-size",
            "2",
            "--max-batch-size",
            "2",
            "--profile",
            "--trace",
            trace.to_str().unwrap(),
            "--plot",
            chart.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &stderr_of(&out);
    // The bundled tiny net: two smolgen layers, every operation kind of the GPU profile.
    for op in [
        "embedding",
        "smolgen compress",
        "smolgen dense1/2+ln",
        "smolgen weight gen",
        "qkv",
        "attention",
        "out proj",
        "residual+ln1",
        "ffn1+act",
        "ffn2",
        "residual+ln2",
        "policy head",
        "value+mlh heads",
    ] {
        assert!(text.contains(op), "{op} missing:\n{text}");
    }
    assert!(text.contains("timed with the host's clock"), "{text}");
    // Three timed passes (the warm-up passes are not profiled), two layers each.
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let qkv = events
        .iter()
        .filter(|e| e["name"] == "qkv [layer 0]")
        .count();
    assert_eq!(qkv, 3, "{trace}");
    assert!(std::fs::read_to_string(&chart).unwrap().starts_with("<svg"));
}

#[test]
fn backendbench_rejects_bad_flags() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 7] = [
        (&["backendbench", "--batch-step", "0"], "batch-step"),
        (
            &["backendbench", "--max-batch-size", "2000"],
            "max-batch-size",
        ),
        (
            &[
                "backendbench",
                "--start-batch-size",
                "5",
                "--max-batch-size",
                "2",
            ],
            "larger than --max-batch-size",
        ),
        (
            &["backendbench", "-b", "cpu", "--batches", "1"],
            "--batches must exceed --threads",
        ),
        (
            &["backendbench", "-b", "cpu", "--compare", "threads=1"],
            "at least two option sets",
        ),
        (
            &[
                "backendbench",
                "-b",
                "cpu",
                "--batches",
                "3",
                "--max-batch-size",
                "1",
                "--compare",
                "threads=1,bogus=1",
            ],
            "--compare, option set bogus=1",
        ),
        (
            &[
                "backendbench",
                "-b",
                "cpu",
                "-o",
                "max_batch=4",
                "--max-batch-size",
                "8",
            ],
            "exceeds the backend's max_batch",
        ),
    ];
    for (args, expected) in cases {
        let out = lc0rs(args, dir.path());
        let err = stderr_of(&out);
        assert!(
            !out.status.success() && err.contains(expected),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// Every bad backend option string is a clear error naming the problem, the same in each
/// command that takes `-o`.
#[test]
fn bad_backend_option_strings_are_clear_errors_in_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("threads=-1", "option threads=\"-1\": invalid digit"),
        ("threads=abc", "option threads=\"abc\": invalid digit"),
        ("threads=0", "option threads=\"0\": must be at least 1"),
        ("max_batch=0", "option max_batch=\"0\": must be at least 1"),
        (
            "threads=99999999999999999999",
            "number too large to fit in target type",
        ),
        ("=5", "\"=5\" has no key before `=`"),
        ("threads", "\"threads\" is not key=value"),
        ("threads=1,threads=2", "\"threads\" is given twice"),
        ("a(b)=1", "nested option groups are not supported"),
        ("warp=9", "unknown option \"warp\""),
        ("policy_head=nope", "no policy head named \"nope\""),
        ("value_head=zz", "no value head named \"zz\""),
        ("mlh=maybe", "option mlh=\"maybe\""),
        ("profile=2", "option profile=\"2\""),
    ];
    let commands: [&[&str]; 3] = [
        &["eval", "--position", "startpos"],
        &["selftest", "--positions", "4", "--batch", "2"],
        &["backendbench", "--batches", "3", "--max-batch-size", "2"],
    ];
    for command in commands {
        for (options, expected) in cases {
            let args: Vec<&str> = command
                .iter()
                .copied()
                .chain(["-b", "cpu", "-o", options])
                .collect();
            let out = lc0rs(&args, dir.path());
            let err = stderr_of(&out);
            assert!(
                !out.status.success() && err.contains(expected),
                "{args:?}: {err}"
            );
            assert!(!err.contains("panicked"), "{args:?}: {err}");
        }
    }
}

/// selftest's oracle evaluates the heads the backend under test was asked for.
#[test]
fn selftest_oracle_uses_the_same_heads() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "selftest",
        "-w",
        "bundled:tiny-dense",
        "-b",
        "cpu",
        "-o",
        "policy_head=soft,value_head=q,threads=1",
        "--positions",
        "16",
        "--batch",
        "8",
    ];
    let out = lc0rs(&args, dir.path());
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        stderr_of(&out)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("PASS"));
}

#[test]
fn rocm_backends_without_a_usable_amd_gpu_end_in_a_clear_error() {
    if lc0rs::gpu::hip::device_count() > 0 {
        eprintln!("skipped: this machine has an AMD GPU (tests/gpu_rocm.rs checks it)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // No ROCm, or ROCm without a GPU as in CI: the answer is an error that says which.
    let reasons = [
        "the HIP runtime is not available",
        "no GPU: AMD GPU 0 requested, the HIP runtime",
    ];
    // `hip`, `hip-fp16` and `hip-auto` are lc0's names for its AMD backend, accepted as aliases.
    for backend in ["rocm-fp16", "rocm", "hip", "hip-fp16", "hip-auto"] {
        let runs: [&[&str]; 2] = [
            &["backendbench", "-b", backend, "--batches", "2"],
            &["eval", "-b", backend, "--position", "startpos"],
        ];
        for args in runs {
            let out = lc0rs(args, dir.path());
            let err = stderr_of(&out);
            assert!(!out.status.success(), "{args:?} succeeded");
            assert!(
                err.contains(&format!("backend {backend}:")),
                "{args:?}: {err}"
            );
            assert!(reasons.iter().any(|r| err.contains(r)), "{args:?}: {err}");
            assert!(!err.contains("panicked"), "{args:?}: {err}");
        }
    }
}
