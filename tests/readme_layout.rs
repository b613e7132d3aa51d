//! Keeps the README's layout table and its links to `docs/` true.
//!
//! The rule, checked against the tree:
//!
//! - every path in the first column of the table under `## Layout` (each `` `code` `` item of
//!   that column) exists;
//! - every entry directly under `src/`, `crates/`, `scripts/` and `benches/` (file or folder),
//!   and every folder directly under `tests/`, is named in that column as its own path
//!   (`src/gpu/`, `crates/lc0rs-engine`, `benches/uci_search.sh`, `tests/common/`);
//! - every top-level folder of the repository (hidden ones and the build outputs `target/` and
//!   `shared/` aside, `.ci/` included) is named, by itself or by a path inside it;
//! - every `docs/...` path the README mentions anywhere exists (a `#fragment` aside).
//!
//! So renaming a module, or adding a top-level module, crate, script, benchmark or test folder,
//! fails here until the README's layout table has a row (or an item in a row) for it.
//! Nothing is built: the test reads files only.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> String {
    fs::read_to_string(root().join("README.md")).expect("README.md is readable")
}

/// A path as the table or the tree names it: without `./` and without a trailing `/`.
fn normalise(path: &str) -> String {
    path.trim_start_matches("./")
        .trim_end_matches('/')
        .to_owned()
}

/// The `` `code` `` items of a piece of Markdown.
fn code_items(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The first-column items of the table under `## Layout`.
fn layout_paths(readme: &str) -> Vec<String> {
    let start = readme
        .find("\n## Layout\n")
        .expect("README.md has a `## Layout` section");
    let section = &readme[start + 1..];
    let section = match section[3..].find("\n## ") {
        Some(end) => &section[..end + 3],
        None => section,
    };
    let rows: Vec<&str> = section
        .lines()
        .filter(|line| line.starts_with('|'))
        .skip(2) // header and separator
        .collect();
    assert!(!rows.is_empty(), "the layout table has no rows");
    let mut paths = Vec::new();
    for row in rows {
        let first = row
            .trim_start_matches('|')
            .split(" | ")
            .next()
            .expect("a row has a first cell");
        let items = code_items(first);
        assert!(
            !items.is_empty(),
            "layout row without a `path` in its first column: {row}"
        );
        paths.extend(items.into_iter().map(normalise));
    }
    paths
}

/// The entries directly under `dir` (relative to the root), as `dir/name`, optionally folders
/// only.
fn entries(dir: &str, folders_only: bool) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|entry| entry.expect("a readable directory entry"))
        .filter(|entry| !folders_only || entry.path().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.') || name == ".ci")
        .map(|name| {
            if dir.is_empty() {
                name
            } else {
                format!("{dir}/{name}")
            }
        })
        .collect();
    names.sort();
    names
}

#[test]
fn every_layout_path_exists() {
    let missing: Vec<String> = layout_paths(&readme())
        .into_iter()
        .filter(|path| !root().join(path).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "README.md's layout table names paths that do not exist: {missing:?}"
    );
}

#[test]
fn every_module_crate_script_benchmark_and_top_level_folder_has_a_row() {
    let named: BTreeSet<String> = layout_paths(&readme()).into_iter().collect();
    let mut required = Vec::new();
    for dir in ["src", "crates", "scripts", "benches"] {
        required.extend(entries(dir, false));
    }
    required.extend(entries("tests", true));
    let mut unnamed: Vec<String> = required
        .into_iter()
        .filter(|path| !named.contains(path))
        .collect();
    // A top-level folder is named by its own row or by a row of something inside it.
    unnamed.extend(
        entries("", true)
            .into_iter()
            .filter(|name| name != "target" && name != "shared")
            .filter(|name| {
                !named
                    .iter()
                    .any(|path| path == name || path.starts_with(&format!("{name}/")))
            }),
    );
    assert!(
        unnamed.is_empty(),
        "not named in README.md's layout table (add a row or an item to a row): {unnamed:?}"
    );
}

/// The `docs/...` paths the README mentions: each runs from `docs/` to the first character that
/// cannot be part of a path (a backtick, bracket, parenthesis, space, comma, `#`).
fn docs_paths(readme: &str) -> BTreeSet<String> {
    let mut paths = BTreeSet::new();
    let mut rest = readme;
    while let Some(at) = rest.find("docs/") {
        let preceded_by_path = rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '/' || c == '_' || c == '-');
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_alphanumeric() || "/._-".contains(c)))
            .unwrap_or(tail.len());
        if !preceded_by_path {
            paths.insert(tail[..end].trim_end_matches('.').to_owned());
        }
        rest = &tail[end..];
    }
    paths
}

#[test]
fn every_docs_path_the_readme_mentions_exists() {
    let readme = readme();
    let paths = docs_paths(&readme);
    assert!(
        paths.contains("docs/performance.md"),
        "expected the README to link docs/performance.md; found {paths:?}"
    );
    let missing: Vec<&String> = paths
        .iter()
        .filter(|path| !root().join(path).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "README.md mentions docs paths that do not exist: {missing:?}"
    );
}

#[test]
fn the_parsers_see_what_they_should() {
    let table = "intro\n## Layout\n\n| path | holds |\n|---|---|\n| `a/`, `b.rs` | x `not/this` |\n\
                 | `./c/` | y |\n\n## Next\n| `d` | z |\n";
    assert_eq!(layout_paths(table), ["a", "b.rs", "c"]);
    let docs = docs_paths("see [x](docs/a.md#part), `docs/b/`, sub/docs/c.md and docs/d.svg.");
    let docs: Vec<&str> = docs.iter().map(String::as_str).collect();
    assert_eq!(docs, ["docs/a.md", "docs/b/", "docs/d.svg"]);
}
