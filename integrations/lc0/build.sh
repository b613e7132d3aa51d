#!/usr/bin/env bash
# Builds lc0 with the lc0rs backend (`--backend=lc0rs`): lc0rs' C library (liblc0rs_c.a,
# release, linked statically so the binary stands alone), then lc0 from a source tarball made by
# scripts/lc0/pack-sources.sh, through scripts/lc0/build.sh, with the adapter added by
# integrations/lc0/patch-lc0.sh.
#
# Usage: integrations/lc0/build.sh TARBALL BUILD_DIR [CUDA_ARCH]
#   TARBALL, BUILD_DIR, CUDA_ARCH: as scripts/lc0/build.sh (CUDA_ARCH `none`: no CUDA, e.g. a
#   machine without a GPU; default 90). The binary is BUILD_DIR/build/lc0.
# Environment:
#   LC0_BLAS           1 (default): also build lc0's own CPU backends `blas` and `eigen` (needs
#                      Eigen 3; OpenBLAS when found), the reference for `--backend=check`; 0: not
#   LC0RS_STATIC_LIB   a liblc0rs_c.a built elsewhere (e.g. on a machine with Rust, for a GPU
#                      machine without it): taken as it is, cargo not run; its system libraries
#                      from LC0RS_NATIVE_LIBS, else beside it in lc0rs-native-static-libs.txt
#   CARGO              cargo to run (default: cargo)
#   CARGO_TARGET_DIR   cargo's target directory (default: the repository's target/)
#   CARGO_BUILD_JOBS   cargo's -j (default: cargo's)
#   and every variable scripts/lc0/build.sh reads (JOBS, CUDA_HOME, LC0_MESON_ARGS, ...).
set -euo pipefail

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  sed -n '/^# Usage:/,/^set -euo/p' "$0" | sed '$d' >&2
  exit 2
fi
die() {
  echo "integrations/lc0/build.sh: $*" >&2
  exit 1
}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
tarball=$1
build_root=$2
arch=${3:-90}
[ -f "$tarball" ] || die "no lc0 source tarball at $tarball (make one with scripts/lc0/pack-sources.sh)"
cargo=${CARGO:-cargo}
target_dir=${CARGO_TARGET_DIR:-$repo/target}

echo "==> [lc0rs static library]"
start=$(date +%s)
if [ -n "${LC0RS_STATIC_LIB:-}" ]; then
  lib=$LC0RS_STATIC_LIB
  [ -f "$lib" ] || die "LC0RS_STATIC_LIB names no file: $lib"
  native=${LC0RS_NATIVE_LIBS:-$(cat "$(dirname "$lib")/lc0rs-native-static-libs.txt" 2>/dev/null || true)}
  [ -n "$native" ] || die "no system libraries for $lib: set LC0RS_NATIVE_LIBS (rustc --print native-static-libs)"
  echo "liblc0rs_c.a: $lib (prebuilt), system libraries: $native"
else
# --print native-static-libs names the system libraries the static library needs; rustc prints
# it only when it compiles the crate, so the list is kept for later runs.
native_file=$target_dir/release/lc0rs-native-static-libs.txt
log=$(mktemp)
(cd "$repo" && CARGO_TARGET_DIR=$target_dir "$cargo" rustc --release -p lc0rs-c \
  --crate-type staticlib -- --print native-static-libs) 2>&1 | tee "$log"
native=$(sed -n 's/.*native-static-libs: //p' "$log" | tail -n 1)
rm -f "$log"
if [ -n "$native" ]; then
  echo "$native" >"$native_file"
elif [ -f "$native_file" ]; then
  native=$(cat "$native_file")
else
  native="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"
  echo "note: rustc printed no native-static-libs (nothing recompiled); using: $native"
fi
lib=$target_dir/release/liblc0rs_c.a
[ -f "$lib" ] || die "cargo built no $lib"
echo "liblc0rs_c.a: $lib ($(du -h "$lib" | cut -f1)), system libraries: $native ($(($(date +%s) - start)) s)"
fi

expect=lc0rs
[ "${LC0_BLAS:-1}" = 0 ] || expect=lc0rs,eigen
LC0_BLAS=${LC0_BLAS:-1} \
  LC0_SOURCE_HOOK="$here/patch-lc0.sh" \
  LC0RS_STATIC_LIB=$lib \
  LC0RS_NATIVE_LIBS=$native \
  LC0_EXPECT_BACKENDS=$expect \
  "$repo/scripts/lc0/build.sh" "$tarball" "$build_root" "$arch"
