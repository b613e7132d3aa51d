#!/usr/bin/env bash
# Packs everything needed to build lc0 (LeelaChessZero/lc0) from source on a machine without
# network access into one compressed tarball: lc0 at LC0_REF (default master) and the
# subprojects its meson build would download, at exactly the revisions lc0's wraps pin:
#
#   subprojects/abseil-cpp.wrap  wrap-file  -> abseil-cpp at the release tag in its directory name
#   subprojects/cutlass.wrap     wrap-git   -> NVIDIA cutlass at its `revision` (include/ only)
#   subprojects/zlib.wrap        wrap-file  -> zlib at the tag in its directory name, plus the
#                                              meson files of the wrapdb patch it names (a
#                                              fallback: a system zlib is used when found)
#
# Each subproject's `patch_directory` overlay (subprojects/packagefiles/<dir>) is copied over
# it, as meson's wrap would do after downloading, so `meson setup --wrap-mode=nodownload`
# finds every subproject ready. Wraps not packed (eigen, gtest, perfetto, gaviotatb, protobuf)
# are only reached through options that scripts/lc0/build.sh switches off.
#
# Usage: pack-sources.sh OUT_TARBALL [LC0_GIT] [ABSEIL_GIT] [CUTLASS_GIT]
#   *_GIT: a URL or a local git repository (bare or not); defaults are the GitHub URLs.
#   OUT_TARBALL: .tar.xz (default compression), .tar.zst or .tar.gz.
# Environment:
#   LC0_REF        lc0 branch, tag or commit to pack (default master)
#   ZLIB_GIT       zlib sources (default https://github.com/madler/zlib.git)
#   ZLIB_WRAP_GIT  meson wrap of zlib (default https://github.com/mesonbuild/zlib.git)
#   PACK_ZLIB=0    leave zlib out (the build machine must then have zlib headers)
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 4 ]; then
  sed -n '/^# Usage:/,/^set -euo/p' "$0" | sed '$d' >&2
  exit 2
fi
out=$1
lc0_git=${2:-https://github.com/LeelaChessZero/lc0.git}
absl_git=${3:-https://github.com/abseil/abseil-cpp.git}
cutlass_git=${4:-https://github.com/NVIDIA/cutlass.git}
zlib_git=${ZLIB_GIT:-https://github.com/madler/zlib.git}
zlib_wrap_git=${ZLIB_WRAP_GIT:-https://github.com/mesonbuild/zlib.git}
lc0_ref=${LC0_REF:-master}
pack_zlib=${PACK_ZLIB:-1}

die() { echo "pack-sources.sh: $*" >&2; exit 1; }
for tool in git tar; do
  command -v "$tool" >/dev/null || die "$tool not found"
done
case $out in
  *.tar.xz | *.txz) compress=(xz -9 -T0) ;;
  *.tar.zst | *.tzst) compress=(zstd -19 -T0 -q) ;;
  *.tar.gz | *.tgz) compress=(gzip -9 -n) ;;
  *) die "OUT_TARBALL must end in .tar.xz, .tar.zst or .tar.gz: $out" ;;
esac
command -v "${compress[0]}" >/dev/null || die "${compress[0]} not found"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=lc0-src
stage=$work/stage/$root
mkdir -p "$stage"

# open_repo NAME SRC REF: sets repo (a git dir holding REF) and commit (REF's commit).
# A local repository is read in place; a URL is fetched shallowly into a scratch repository.
open_repo() {
  local name=$1 src=$2 ref=$3 gd
  if gd=$(git -C "$src" rev-parse --absolute-git-dir 2>/dev/null); then
    repo=$gd
    commit=$(git --git-dir="$repo" rev-parse --verify -q "refs/tags/$ref^{commit}" ||
             git --git-dir="$repo" rev-parse --verify -q "$ref^{commit}") ||
      die "$name: $ref not found in $src"
  else
    repo=$work/$name.git
    git init -q --bare "$repo"
    echo "fetching $name $ref from $src" >&2
    git --git-dir="$repo" fetch -q --depth 1 "$src" "$ref" || die "$name: cannot fetch $ref from $src"
    commit=$(git --git-dir="$repo" rev-parse --verify "FETCH_HEAD^{commit}")
  fi
}

# export_tree GITDIR TREEISH DEST: writes TREEISH's files into DEST.
export_tree() {
  mkdir -p "$3"
  git --git-dir="$1" archive --format=tar "$2" | tar -x -C "$3" ||
    die "cannot export $2 from $1"
}

# wrap_get WRAPFILE KEY: KEY's value in the wrap's first section ([wrap-file] or [wrap-git]).
wrap_get() {
  awk -v key="$2" '
    /^\[/ { n++ ; next }
    n == 1 && $0 ~ "^[ \t]*" key "[ \t]*=" {
      sub(/^[^=]*=[ \t]*/, ""); sub(/[ \t\r]+$/, ""); print; exit
    }' "$1"
}
wrap_type() { sed -n '1s/^\[\(wrap-[a-z]*\)\].*/\1/p' "$1"; }

# overlay WRAPFILE DEST: copies the wrap's patch_directory over DEST, as meson does.
overlay() {
  local pd
  pd=$(wrap_get "$1" patch_directory)
  [ -n "$pd" ] || return 0
  [ -d "$stage/subprojects/packagefiles/$pd" ] || die "$1: no subprojects/packagefiles/$pd"
  cp -R "$stage/subprojects/packagefiles/$pd/." "$2/"
  echo "  applied subprojects/packagefiles/$pd"
}

manifest=$stage/LC0_SOURCES.txt

# --- lc0 ---------------------------------------------------------------------------------
open_repo lc0 "$lc0_git" "$lc0_ref"
lc0_commit=$commit
lc0_time=$(git --git-dir="$repo" log -1 --format=%ct "$lc0_commit")
export_tree "$repo" "$lc0_commit" "$stage"
echo "lc0         $lc0_commit ($lc0_ref)" 
{
  echo "Sources packed by scripts/lc0/pack-sources.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "lc0          $lc0_ref  $lc0_commit  ($lc0_git)"
} >"$manifest"
# The archive has no .git, so meson's build identifier would read "git.unknown" (or, inside
# another checkout, that checkout's revision): record lc0's commit instead.
short=${lc0_commit:0:7}
grep -q "^short_rev = 'unknown'\$" "$stage/meson.build" ||
  die "lc0 meson.build: the line short_rev = 'unknown' has moved; update this script"
sed -i "s/^short_rev = 'unknown'\$/short_rev = '$short'  # lc0 commit, set by pack-sources.sh/" \
  "$stage/meson.build"

sub=$stage/subprojects

# --- abseil-cpp ---------------------------------------------------------------------------
wrap=$sub/abseil-cpp.wrap
[ "$(wrap_type "$wrap")" = wrap-file ] || die "$wrap is no longer a wrap-file; update this script"
absl_dir=$(wrap_get "$wrap" directory)
absl_tag=${absl_dir#abseil-cpp-}
[ "$absl_tag" != "$absl_dir" ] || die "$wrap: unexpected directory $absl_dir"
case $(wrap_get "$wrap" source_url) in
  */"$absl_tag"/*) ;;
  *) die "$wrap: source_url does not name tag $absl_tag" ;;
esac
open_repo abseil-cpp "$absl_git" "$absl_tag"
absl_commit=$commit
export_tree "$repo" "$absl_commit" "$sub/$absl_dir"
overlay "$wrap" "$sub/$absl_dir"
echo "abseil-cpp  $absl_commit ($absl_tag)" 
echo "abseil-cpp   $absl_tag  $absl_commit  ($absl_git) -> subprojects/$absl_dir" >>"$manifest"

# --- cutlass (headers only: lc0's packagefile exposes <cutlass>/include, nothing else) ----
wrap=$sub/cutlass.wrap
[ "$(wrap_type "$wrap")" = wrap-git ] || die "$wrap is no longer a wrap-git; update this script"
cutlass_rev=$(wrap_get "$wrap" revision)
cutlass_dir=$(wrap_get "$wrap" directory)
cutlass_dir=${cutlass_dir:-cutlass}
[ -n "$cutlass_rev" ] || die "$wrap: no revision"
grep -q "include_directory = meson.current_source_dir() + '/include'" \
  "$sub/packagefiles/$(wrap_get "$wrap" patch_directory)/meson.build" ||
  die "lc0's cutlass packagefile no longer uses just include/; update this script"
open_repo cutlass "$cutlass_git" "$cutlass_rev"
cutlass_commit=$commit
export_tree "$repo" "$cutlass_commit:include" "$sub/$cutlass_dir/include"
git --git-dir="$repo" show "$cutlass_commit:LICENSE.txt" >"$sub/$cutlass_dir/LICENSE.txt"
overlay "$wrap" "$sub/$cutlass_dir"
# Every cutlass/cute header reachable from the CUDA sources lc0 compiles must be in include/.
if command -v python3 >/dev/null; then
  python3 - "$stage" "$sub/$cutlass_dir/include" <<'PY' || die "cutlass include/ lacks headers lc0 needs"
import os, re, sys
lc0, cutlass = sys.argv[1], sys.argv[2]
cu = re.findall(r"'(src/neural/backends/cuda/[^']+\.cu)'", open(os.path.join(lc0, "meson.build")).read())
search = [os.path.join(lc0, "src"), os.path.join(lc0, "third_party"), cutlass]
include = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
todo, seen, used, missing = [os.path.join(lc0, f) for f in cu], set(), set(), []
while todo:
    path = todo.pop()
    if path in seen:
        continue
    seen.add(path)
    for name in include.findall(open(path, errors="replace").read()):
        hits = [os.path.normpath(os.path.join(d, name)) for d in [os.path.dirname(path)] + search]
        hit = next((h for h in hits if os.path.isfile(h)), None)
        if hit:
            todo.append(hit)
            if hit.startswith(cutlass):
                used.add(hit)
        elif name.startswith(("cutlass/", "cute/")):
            missing.append(f"{name} (from {os.path.relpath(path, lc0)})")
print(f"  {len(cu)} CUDA sources of lc0 reach {len(used)} cutlass headers, none missing"
      if not missing else "\n".join("  missing: " + m for m in missing))
sys.exit(1 if missing or not cu else 0)
PY
fi
echo "cutlass     $cutlass_commit ($cutlass_rev, include/ only)" 
echo "cutlass      $cutlass_rev  $cutlass_commit  ($cutlass_git) -> subprojects/$cutlass_dir (include/, LICENSE.txt)" >>"$manifest"

# --- zlib (fallback for a machine without zlib headers) ----------------------------------
if [ "$pack_zlib" != 0 ]; then
  wrap=$sub/zlib.wrap
  [ "$(wrap_type "$wrap")" = wrap-file ] || die "$wrap is no longer a wrap-file; update this script"
  zlib_dir=$(wrap_get "$wrap" directory)
  zlib_ver=${zlib_dir#zlib-}
  [ "$zlib_ver" != "$zlib_dir" ] || die "$wrap: unexpected directory $zlib_dir"
  open_repo zlib "$zlib_git" "v$zlib_ver"
  zlib_commit=$commit
  export_tree "$repo" "$zlib_commit" "$sub/$zlib_dir"
  rm -rf "$sub/$zlib_dir/contrib" # not built by the wrap's meson.build
  if [ -n "$(wrap_get "$wrap" patch_directory)" ]; then
    overlay "$wrap" "$sub/$zlib_dir"
    zlib_wrap_note="patch_directory $(wrap_get "$wrap" patch_directory)"
  else
    # wrapdb v1 patch zlib-<ver>-<n>-wrap.zip = mesonbuild/zlib at tag <ver>-<n>.
    patch=$(wrap_get "$wrap" patch_filename)
    zlib_wrap_tag=${patch#zlib-}
    zlib_wrap_tag=${zlib_wrap_tag%-wrap.zip}
    case $zlib_wrap_tag in
      "$zlib_ver"-[0-9]*) ;;
      *) die "$wrap: cannot map patch_filename $patch to a wrap revision" ;;
    esac
    open_repo zlib-wrap "$zlib_wrap_git" "$zlib_wrap_tag"
    for f in meson.build meson_options.txt LICENSE.build; do
      git --git-dir="$repo" show "$commit:$f" >"$sub/$zlib_dir/$f" 2>/dev/null || rm -f "$sub/$zlib_dir/$f"
    done
    [ -f "$sub/$zlib_dir/meson.build" ] || die "zlib wrap $zlib_wrap_tag has no meson.build"
    zlib_wrap_note="wrap $zlib_wrap_tag $commit ($zlib_wrap_git)"
  fi
  echo "zlib        $zlib_commit (v$zlib_ver; $zlib_wrap_note)"
  echo "zlib         v$zlib_ver  $zlib_commit  ($zlib_git) -> subprojects/$zlib_dir; $zlib_wrap_note" >>"$manifest"
fi

# --- tarball ------------------------------------------------------------------------------
mkdir -p "$(dirname "$out")"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$lc0_time" \
  -C "$work/stage" -cf - "$root" | "${compress[@]}" >"$out.part" || die "cannot write $out"
mv "$out.part" "$out"

bytes=$(stat -c %s "$out")
echo
cat "$manifest"
echo
echo "$out: $bytes bytes ($(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }') MiB)," \
  "sha256 $(sha256sum "$out" | cut -d' ' -f1)"
if [ "$bytes" -gt $((45 * 1048576)) ]; then
  echo "pack-sources.sh: warning: the tarball is over 45 MiB" >&2
fi
