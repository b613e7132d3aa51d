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
