//! lc0 itself on lc0rs: builds lc0 with the `lc0rs` backend (integrations/lc0/build.sh, CPU
//! only, with lc0's eigen backend) and runs integrations/lc0/test.sh, which compares the two
//! backends inside lc0's search (`--backend=check`) and searches on each.
//!
//! Ignored by default: it builds lc0rs' release library and lc0 from source (see
//! integrations/lc0/README.md for how long) and needs lc0's sources packed by
//! scripts/lc0/pack-sources.sh, found at `LC0_SRC_TARBALL` or `.devcarry/lc0-src.tar.xz`;
//! without them it fails, saying how to get them. Run it with
//! `cargo test -p lc0rs-c --test lc0_backend -- --ignored`; `LC0_BIN` reuses a built lc0.

use std::path::Path;
use std::process::Command;

#[test]
#[ignore = "builds lc0 from source; needs lc0's source tarball (see the module comment)"]
fn lc0_searches_on_lc0rs_and_agrees_with_its_eigen_backend() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let build_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lc0-with-lc0rs");
    let status = Command::new("bash")
        .arg(repo.join("integrations/lc0/test.sh"))
        .arg(&build_dir)
        // cargo test holds the lock on its own target directory while the tests run.
        .env("CARGO_TARGET_DIR", build_dir.join("cargo-target"))
        .current_dir(&repo)
        .status()
        .expect("running integrations/lc0/test.sh");
    assert!(
        status.success(),
        "integrations/lc0/test.sh failed ({status}); see its output above"
    );
}
