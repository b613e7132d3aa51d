//! Prerequisites some tests need beyond the crate: the real Maia 1900 net and python-chess.
//! Where one is missing, a test prints why it did not run; in CI (`CI` set), which provides
//! both, a missing one fails the test with how to get it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root: the workspace's, whichever of its packages this test belongs to (the
/// one folder above the package that holds `Cargo.lock`).
pub fn workspace_root() -> PathBuf {
    let package = Path::new(env!("CARGO_MANIFEST_DIR"));
    package
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").is_file())
        .unwrap_or(package)
        .to_path_buf()
}

/// The Maia 1900 network file (`LC0RS_MAIA_NET`, else `target/maia/maia-1900.pb.gz` at the
/// repository's root).
pub fn maia() -> Option<PathBuf> {
    let path = std::env::var_os("LC0RS_MAIA_NET").map_or_else(
        || workspace_root().join("target/maia/maia-1900.pb.gz"),
        PathBuf::from,
    );
    if path.is_file() {
        return Some(path);
    }
    missing(&format!(
        "{} not found: run scripts/fetch-maia.sh",
        path.display()
    ));
    None
}

/// Whether `python3` imports python-chess.
pub fn python_chess() -> bool {
    let present = Command::new("python3")
        .args(["-c", "import chess.engine"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !present {
        missing("python3 with python-chess not found: pip install chess==1.11.2");
    }
    present
}

fn missing(what: &str) {
    assert!(std::env::var_os("CI").is_none(), "{what} (CI provides it)");
    eprintln!("skipped: {what}");
}
