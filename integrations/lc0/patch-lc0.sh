#!/usr/bin/env bash
# Adds the lc0rs backend to unpacked lc0 sources: copies the adapter (network_lc0rs.cc), the C
# header and the static library into src/neural/backends/lc0rs/, writes a meson.build there and
# hooks it into lc0's meson.build. Run by integrations/lc0/build.sh (as scripts/lc0/build.sh's
# LC0_SOURCE_HOOK); fails, changing nothing, if lc0's meson.build no longer has the line the
# hook goes before.
#
# Usage: patch-lc0.sh LC0_SRC
# Environment:
#   LC0RS_STATIC_LIB   path of liblc0rs_c.a (required)
#   LC0RS_NATIVE_LIBS  the system libraries it needs, as rustc's native-static-libs prints them
#                      (default: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc)
set -euo pipefail

if [ $# -ne 1 ]; then
  sed -n '/^# Usage:/,/^set -euo/p' "$0" | sed '$d' >&2
  exit 2
fi
die() {
  echo "patch-lc0.sh: $*" >&2
  exit 1
}
src=$1
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
lib=${LC0RS_STATIC_LIB:?LC0RS_STATIC_LIB must name liblc0rs_c.a}
native=${LC0RS_NATIVE_LIBS:--lgcc_s -lutil -lrt -lpthread -lm -ldl -lc}
[ -f "$lib" ] || die "no static library at $lib"
[ -f "$src/meson.build" ] || die "no meson.build in $src"

# The hook goes just before lc0's "no backends" check: after every backend has added its
# files, before the executable is declared. It must be there exactly once.
anchor="if not has_backends and get_option('lc0') and get_option('build_backends')"
count=$(grep -cxF "$anchor" "$src/meson.build" || true)
[ "$count" = 1 ] || die "lc0's meson.build has changed shape: the line \"$anchor\" is there $count times, not once; update $0"
for word in "files +=" "deps +=" "has_backends = false"; do
  grep -qF "$word" "$src/meson.build" || die "lc0's meson.build has changed shape: no \"$word\"; update $0"
done
grep -qF "subdir('src/neural/backends/lc0rs')" "$src/meson.build" && die "$src is already patched"

dest=$src/src/neural/backends/lc0rs
mkdir -p "$dest"
cp "$here/network_lc0rs.cc" "$dest/"
cp "$repo/crates/lc0rs-c/include/lc0rs.h" "$dest/"
cp "$lib" "$dest/liblc0rs_c.a"

# meson list of quoted link arguments.
link_args="'$dest/liblc0rs_c.a'"
for arg in $native; do link_args+=", '$arg'"; done
cat >"$dest/meson.build" <<EOF
# The lc0rs backend (added by lc0rs' integrations/lc0/patch-lc0.sh).
files += 'src/neural/backends/lc0rs/network_lc0rs.cc'
deps += declare_dependency(link_args: [$link_args])
has_backends = true
EOF

tmp=$(mktemp)
awk -v anchor="$anchor" '$0 == anchor { print "subdir('"'"'src/neural/backends/lc0rs'"'"')"; print "" } { print }' \
  "$src/meson.build" >"$tmp"
mv "$tmp" "$src/meson.build"
echo "lc0rs backend added to $src (library $lib, system libraries: $native)"
