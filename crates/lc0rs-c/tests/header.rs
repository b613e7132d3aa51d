//! The committed C header is what cbindgen makes of the source now: regenerates it and
//! compares. `LC0RS_BLESS_HEADER=1 cargo test -p lc0rs-c --test header` rewrites it.

use std::path::Path;

#[test]
fn committed_header_matches_the_source() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).unwrap();
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen reads src/lib.rs")
        .write(&mut generated);
    let generated = String::from_utf8(generated).unwrap();
    let path = crate_dir.join("include/lc0rs.h");
    if std::env::var_os("LC0RS_BLESS_HEADER").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is not what cbindgen generates from src/lib.rs; \
         rerun with LC0RS_BLESS_HEADER=1 and commit it",
        path.display()
    );
}
