//! scripts/match, the match runner kept as a strength gate: its own tests (the opening book, the
//! Elo statistics, adjudication, engine failures) and a real two-game match of lc0rs against
//! itself on the bundled tiny net, run with the binary cargo built.

use std::process::Command;

// The root package's shared test helpers.
#[path = "../../../tests/common/prereq.rs"]
mod prereq;

#[test]
fn the_match_runner_passes_its_tests() {
    if !prereq::python_chess() {
        return;
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/match/test_match.py"
    );
    let run = Command::new("python3")
        .arg(script)
        .env("LC0RS", env!("CARGO_BIN_EXE_lc0rs"))
        .output()
        .unwrap();
    // unittest reports on stderr.
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "{}\n{stderr}",
        String::from_utf8_lossy(&run.stdout)
    );
    assert!(stderr.trim_end().ends_with("OK"), "{stderr}");
}
