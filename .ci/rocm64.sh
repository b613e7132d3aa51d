#!/usr/bin/env bash
# ROCm 6.4 (HIP runtime, hipRTC, comgr, rocBLAS 4.4, hipBLASLt 1.x) from Debian unstable, without
# a GPU, beside the system's HIP 5.2. Those libraries need a newer glibc and libstdc++ than this
# Debian 12 machine has, so they are not installed: the packages and their dependency closure are
# fetched with a private apt state (the system's apt configuration and dpkg database untouched),
# only their shared libraries are extracted under target/ci-rocm64, and lc0rs runs under the
# extracted dynamic loader. A second run on the same machine reuses the extracted tree.
# Expects target/debug/lc0rs and the test binaries built (by .ci/run's `cargo test`).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(libamdhip64-6 libhiprtc6 libamd-comgr3 libhsa-runtime64-1 librocblas4 libhipblaslt1 libroctx64-4)
work="$PWD/target/ci-rocm64"
root="$work/root"
libs="$root/usr/lib/x86_64-linux-gnu"
loader="$root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
stamp="$work/extracted-${packages[*]// /+}"

# The Debian archive the machine itself uses (from its own apt sources), so that no host is
# named here.
debian_uri() {
  local file
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    if [ -f "$file" ]; then cat "$file"; fi
  done | awk '/^URIs:/ {for (i = 2; i <= NF; i++) print $i}
              /^deb / {for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) {print $i; break}}' |
    awk '/\/debian\/?$/ && !found {print; found = 1}'
}

# Downloads the packages and their dependency closure from the `sid` suite and extracts the
# shared libraries and the dynamic loader.
fetch_and_extract() {
  local uri apt
  uri=$(debian_uri)
  if [ -z "$uri" ]; then
    echo "no Debian archive in this machine's apt sources"
    exit 1
  fi
  apt="$work/apt"
  rm -rf "$apt" "$root"
  mkdir -p "$apt/sources" "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs" "$apt/empty" "$root"
  : >"$apt/status"
  cat >"$apt/sources/sid.sources" <<EOF
Types: deb
URIs: $uri
Suites: sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  local opts=(
    -o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$apt/sources"
    -o "Dir::Etc::Preferences=/dev/null" -o "Dir::Etc::PreferencesParts=$apt/empty"
    -o "Dir::State::Lists=$apt/lists" -o "Dir::State::status=$apt/status"
    -o "Dir::Cache=$apt/cache" -o "Acquire::Languages=none" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root"
    -o "APT::Architecture=amd64" -o "APT::Architectures=amd64"
  )
  apt-get "${opts[@]}" -qq update
  local closure
  closure=$(apt-cache "${opts[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
    --no-breaks --no-replaces --no-enhances "${packages[@]}" | grep -E '^[a-z0-9]' | sort -u)
  echo "sid: $(echo "$closure" | wc -l) packages (${packages[*]} and their dependencies)"
  (cd "$apt/debs" && apt-get "${opts[@]}" -qq download $closure)
  du -sh "$apt/debs" | awk '{print "downloaded " $1}'
  local deb
  for deb in "$apt/debs"/*.deb; do
    # Only the shared libraries (not rocBLAS' kernel files in subdirectories) and the loader; tar
    # exits non-zero for the packages (data, headers) that have none.
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$root" --wildcards --no-wildcards-match-slash \
      './usr/lib/x86_64-linux-gnu/lib*.so*' './usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2' \
      2>/dev/null || true
  done
  rm -rf "$apt"
  if [ ! -x "$loader" ]; then
    echo "the extracted tree has no dynamic loader at $loader"
    exit 1
  fi
  du -sh "$root" | awk '{print "extracted " $1}'
  touch "$stamp"
}

if [ ! -f "$stamp" ]; then
  started=$SECONDS
  fetch_and_extract
  echo "fetched and extracted in $((SECONDS - started)) s"
else
  echo "reusing $root"
fi

# lc0rs (or a test binary) under the extracted loader and libraries.
run_sid() {
  "$loader" --library-path "$libs" "$@"
}

echo "== ROCm 6.4 through lc0rs' own bindings: runtime, hipRTC, comgr, rocBLAS, hipBLASLt (no GPU)"
devices=$(run_sid target/debug/lc0rs devices)
echo "$devices"
expect() {  # expect WHAT PATTERN: the devices report has a line matching PATTERN
  grep -qE "$2" <<<"$devices" || { echo "ROCm 6.4: $1 was not reported"; exit 1; }
}
expect "the HIP 6.4 runtime" "HIP runtime version 6\.4\."
expect "hipRTC" "hipRTC [0-9.]+ \(libhiprtc\.so\.6\)"
expect "comgr's ISA list" "comgr libamd_comgr\.so\.3: [0-9]+ ISAs: .*gfx90a .*gfx1201"
expect "rocBLAS 4.x" "rocBLAS librocblas\.so\.4$"
expect "hipBLASLt 1.x" "hipBLASLt libhipblaslt\.so\.1 "
expect "the missing GPU" "no GPUs: the HIP runtime reports none"

for arch in gfx90a gfx942 gfx950 gfx1030 gfx1100 gfx1101 gfx1102 gfx1151 gfx1200 gfx1201; do
  run_sid target/debug/lc0rs compile-kernels --vendor hip --arch "$arch" --code-object "$work/$arch.co"
done
# The matrix-core kernels in hipRTC 6.4's code objects: WMMA/MFMA instructions, no scratch, and
# their registers, LDS and waves per SIMD (docs/validation.md).
for arch in gfx90a gfx942 gfx950 gfx1100 gfx1101 gfx1102 gfx1151 gfx1200 gfx1201; do
  .ci/matrix-isa.sh --code-object "$work/$arch.co" "$arch"
done

# An arch comgr does not know: a clear error with close names, not an abort inside hipRTC; under
# ROCm 6.4 and under the system's HIP 5.2 alike.
refuses_unknown_arch() {  # refuses_unknown_arch LABEL FIRST-SUGGESTION COMMAND...
  local label=$1 first=$2 status=0 out
  shift 2
  out=$("$@" compile-kernels --vendor hip --arch gfx1250 2>&1) || status=$?
  echo "$out"
  if [ "$status" -ne 1 ] || ! grep -q "gfx1250 is not among the .* closest: $first" <<<"$out"; then
    echo "$label: gfx1250 was not refused cleanly (exit $status)"; exit 1
  fi
}
refuses_unknown_arch "ROCm 6.4" gfx1200 run_sid target/debug/lc0rs
refuses_unknown_arch "HIP 5.2" gfx1 target/debug/lc0rs

# The rocm-fp16 backend (and an lc0 name for it) loads the whole runtime table and must end in
# a clear no-GPU error.
for backend in rocm-fp16 hip; do
  if rocm_err=$(run_sid target/debug/lc0rs backendbench -b "$backend" --batches 3 2>&1 >/dev/null); then
    echo "$backend ran without a GPU"; exit 1
  fi
  echo "$rocm_err"
  grep -q "backend $backend: no GPU: AMD GPU 0 requested, the HIP runtime libamdhip64.so.6 reports 0" <<<"$rocm_err" \
    || { echo "ROCm 6.4: $backend did not report the missing GPU"; exit 1; }
done

# The GPU tests under this runtime: each must fail on the missing GPU, cleanly (a test failure,
# exit 101, not a crash).
status=0
tests_out=$(CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$loader --library-path $libs" \
  cargo test -q --test gpu_rocm -- --ignored --test-threads 1 2>&1) || status=$?
# Shown without the runner's own closing line, which a log reader would take for a failure of
# CI: here every test is expected to end in the no-GPU error.
echo "$tests_out" | grep -E "no GPU" || true
echo "$tests_out" | grep -E "^test result" | sed 's/^test result: FAILED\./gpu_rocm without a GPU, as expected:/' || true
total=$(grep -c '^#\[ignore' tests/gpu_rocm.rs)
no_gpu=$(echo "$tests_out" | grep -c "AMD GPU 0 requested, the HIP runtime libamdhip64.so.6 reports 0" || true)
if [ "$status" -ne 101 ] || [ "$no_gpu" -lt "$total" ] ||
  ! grep -q "^test result: FAILED\. 0 passed; $total failed;" <<<"$tests_out"; then
  echo "ROCm 6.4: gpu_rocm: exit $status, $no_gpu no-GPU messages for $total tests"; exit 1
fi

# A ROCM_PATH whose runtime cannot load under this machine's glibc: reported with the reason,
# not replaced by the system's HIP 5.2.
mkdir -p "$work/rocm-path"
ln -sfn "$root/usr/lib/x86_64-linux-gnu" "$work/rocm-path/lib"
broken=$(ROCM_PATH="$work/rocm-path" target/debug/lc0rs devices)
echo "$broken" | sed -n '1,2p'
if grep -q "HIP runtime version" <<<"$broken" || ! grep -q "exists but could not be loaded: .*GLIBC" <<<"$broken"; then
  echo "ROCm 6.4: a ROCM_PATH runtime that does not load was not reported"; exit 1
fi
echo "== ROCm 6.4 checks passed"
