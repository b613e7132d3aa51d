#!/bin/bash
# lc0rs' backendbench beside lc0's, for docs/performance.md's tables: for every net and batch
# size, one process per cell (as the tables are measured), first each lc0rs binary given (with
# `--compare SETS` where SETS is not empty, e.g. conv=winograd2,conv=winograd4), then lc0's own
# backendbench with BACKEND on the same net and size. Fewer batches from size 256 on (BATCHES
# below it, LARGE_BATCHES from it) keep a cell of a large net within seconds. Prints one CSV
# line a cell, `net,batch,program,positions/s...` (one column a set), and keeps every process's
# whole output in LOG.
# Usage: benches/backendbench_vs_lc0.sh LOG "NET..." "BATCH..." "LC0RS..." [LC0 [SETS [BACKEND]]]
#   LC0: an lc0 binary (scripts/lc0/build.sh builds one), or - for none.
# Environment: BATCHES (default 300), LARGE_BATCHES (default 60).
set -u
if [ $# -lt 4 ]; then
  sed -n '/^# Usage:/,/^set -u/p' "$0" | sed '$d' >&2
  exit 2
fi
log=$1 nets=$2 sizes=$3 binaries=$4 lc0=${5:--} sets=${6:-} backend=${7:-cuda-fp16}
small=${BATCHES:-300} large=${LARGE_BATCHES:-60}
for bin in $binaries; do
  [ -x "$bin" ] || { echo "no lc0rs binary at $bin" >&2; exit 1; }
done
[ "$lc0" = - ] || [ -x "$lc0" ] || { echo "no lc0 binary at $lc0" >&2; exit 1; }
: > "$log"

# The positions/s columns of a backendbench CSV row for `size`: lc0rs' --compare row holds one
# a set (then their ratio), its plain row and lc0's the mean first.
rates() {
  grep -E "^ *$1," | tail -n 1 | tr -d ' ' | cut -d, -f2- | sed -E 's/,[0-9.]+$//' \
    | if [ -n "$2" ]; then cat; else cut -d, -f1; fi
}

for net in $nets; do
  for size in $sizes; do
    batches=$small
    [ "$size" -ge 256 ] && batches=$large
    for bin in $binaries; do
      compare=()
      [ -n "$sets" ] && compare=(--compare "$sets")
      out=$("$bin" backendbench -b "$backend" -w "$net" --batches "$batches" \
        --start-batch-size "$size" --max-batch-size "$size" "${compare[@]}" 2>&1)
      printf '== %s %s %s\n%s\n' "$bin" "$net" "$size" "$out" >> "$log"
      echo "$net,$size,$bin,$(rates "$size" "$sets" <<< "$out")"
    done
    if [ "$lc0" != - ]; then
      out=$("$lc0" backendbench --backend="$backend" --weights="$net" --batches="$batches" \
        --start-batch-size="$size" --max-batch-size="$size" 2>&1)
      printf '== %s %s %s\n%s\n' "$lc0" "$net" "$size" "$out" >> "$log"
      echo "$net,$size,$lc0,$(rates "$size" "" <<< "$out")"
    fi
  done
done
