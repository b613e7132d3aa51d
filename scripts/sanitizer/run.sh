#!/usr/bin/env bash
# The four compute-sanitizer tools over lc0rs' CUDA path, for a machine with an NVIDIA GPU and
# the CUDA toolkit. Each run is one `lc0rs selftest` (the backend against the cpu oracle) under
# one tool, with small position counts so that the whole set stays within minutes:
#   - the bundled nets at batch 1 and 7 (16 positions);
#   - T82- and BT4-shaped nets (generated once into NETDIR) at batch 1 and 64 (64 positions);
# each with both attention kernels (tensor-core `mma`, `portable`) and both GEMM paths (`lt`,
# `blas`). The tools run side by side (one process each, one GPU), each writing
# LOGDIR/TOOL.txt with one line per run. Exits 1 if any tool reported anything.
#
#   scripts/sanitizer/run.sh [LC0RS_BINARY] [NETDIR] [LOGDIR] [TOOLS]
#     TOOLS: comma-separated subset of memcheck,racecheck,initcheck,synccheck (default: all)
set -u
lc0rs=${1:-target/release/lc0rs}
netdir=${2:-/tmp/lc0rs-nets}
logdir=${3:-/tmp/lc0rs-sanitizer}
tools=${4:-memcheck,racecheck,initcheck,synccheck}
sanitizer=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
[ -x "$sanitizer" ] || { echo "compute-sanitizer not found (put the CUDA toolkit's bin on PATH)"; exit 2; }
"$sanitizer" --version | tail -1
mkdir -p "$netdir" "$logdir"

for preset in t82 bt4; do
  [ -f "$netdir/$preset.pb.gz" ] || "$lc0rs" gen-net --preset "$preset" --seed 82 -o "$netdir/$preset.pb.gz" >/dev/null \
    || { echo "gen-net $preset failed"; exit 2; }
done

option_sets=("attention=mma,gemm=lt" "attention=mma,gemm=blas" "attention=portable,gemm=lt" "attention=portable,gemm=blas")
# net, batch sizes, positions
runs=("bundled:tiny 1,7 16" "bundled:tiny-dense 1,7 16" "$netdir/t82.pb.gz 1,64 64" "$netdir/bt4.pb.gz 1,64 64")

# One tool over every net and option set; one line per run into LOGDIR/TOOL.txt.
run_tool() {
  local tool=$1 failed=0 log
  log=$(mktemp)
  for run in "${runs[@]}"; do
    read -r net batches positions <<<"$run"
    for options in "${option_sets[@]}"; do
      local start status summary passes
      start=$(date +%s)
      "$sanitizer" --tool "$tool" --print-limit 1000 --error-exitcode 3 \
        "$lc0rs" selftest -w "$net" -b cuda-fp16 -o "$options" --batch "$batches" --positions "$positions" >"$log" 2>&1
      status=$?
      summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1 | sed 's/^========= //')
      passes=$(grep -c " PASS$" "$log")
      printf '%-9s %-18s %-28s batch %-5s exit %d  %s  (%d s, selftest PASS %d)\n' \
        "$tool" "$(basename "$net")" "$options" "$batches" "$status" "${summary:-no summary}" \
        "$(( $(date +%s) - start ))" "$passes"
      if [ "$status" -ne 0 ]; then
        failed=1
        grep -E "^========= +(Uninitialized|Invalid|Race|Barrier|Error|   at )" "$log" | sort | uniq -c | sort -rn | head -12
      fi
    done
  done
  rm -f "$log"
  return "$failed"
}

pids=()
for tool in ${tools//,/ }; do
  run_tool "$tool" >"$logdir/$tool.txt" 2>&1 &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
cat "$logdir"/*.txt
[ "$failed" -eq 0 ] && echo "all sanitizer runs clean" || echo "sanitizer runs with findings (above)"
exit "$failed"
