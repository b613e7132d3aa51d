#!/usr/bin/env bash
# The Python package (crates/lc0rs-py): builds the abi3 wheel with maturin in a build venv,
# installs it into a fresh venv and runs its pytest suite, which compares it with
# `lc0rs eval --json` (target/debug/lc0rs, built here if missing). Clippy for the crate too
# (it is a workspace member outside default-members: a Python extension does not link as a
# test binary). Set LC0RS_HIP_CPU to also run the hip-emu comparison.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== python: clippy (lc0rs-py)"
cargo clippy -p lc0rs-py --all-targets -- -D warnings

echo "== python: the lc0rs binary for the comparison"
cargo build --bin lc0rs

venvs="$PWD/target/ci-python-venvs"
rm -rf "$venvs"
python3 -m venv "$venvs/build"
"$venvs/build/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.8,<2"

echo "== python: maturin build (abi3 wheel)"
rm -rf target/wheels
"$venvs/build/bin/maturin" build --manifest-path crates/lc0rs-py/Cargo.toml --out target/wheels
wheel=$(ls target/wheels/lc0rs-*-abi3-*.whl)
echo "$wheel"

echo "== python: install into a fresh venv and run pytest"
python3 -m venv "$venvs/test"
"$venvs/test/bin/pip" install --quiet --disable-pip-version-check "$wheel" "pytest>=7" "chess==1.11.2"
LC0RS_BIN="$PWD/target/debug/lc0rs" "$venvs/test/bin/python" -m pytest -q crates/lc0rs-py/tests
