#!/usr/bin/env bash
# Builds lc0 with the lc0rs backend (CPU only: CUDA_ARCH none, with lc0's eigen backend) and
# checks it inside lc0's own search:
#   1. `lc0 benchmark --backend=check`: every batch of a real search evaluated by lc0rs (cpu)
#      and by lc0's eigen backend; fails when the largest difference of Q or of a softmaxed
#      policy entry exceeds MAX_VALUE_ERROR / MAX_POLICY_ERROR, or when nothing was checked;
#   2. the same UCI search (`go nodes`, one search thread, one minibatch size, no smart
#      pruning) on each backend: fails without a bestmove from lc0rs, or when both searched
#      the same number of nodes (then the same tree: the backends differ by about 1e-6) and
#      still differ in bestmove or score. lc0 stops a search from a watchdog thread, so the
#      node count, and on a net with flat evaluations the move, can differ with the speed.
#
# Usage: integrations/lc0/test.sh BUILD_DIR [NET...]
#   BUILD_DIR: where lc0 is built (see integrations/lc0/build.sh); NETs: weights files lc0 and
#   lc0rs both read (default: the bundled weights/tiny.pb.gz and weights/tiny-dense.pb.gz).
# Environment:
#   LC0_SRC_TARBALL    lc0's sources packed by scripts/lc0/pack-sources.sh (default:
#                      .devcarry/lc0-src.tar.xz in the repository); required unless LC0_BIN
#   LC0_BIN            an lc0 already built with the lc0rs backend: skips the build
#   LC0RS_OPTS         lc0rs' backend options (default: threads=2)
#   CHECK_NODES        nodes of the checked benchmark per position (default: 100)
#   CHECK_POSITIONS    positions of the checked benchmark (default: 3)
#   SEARCH_NODES       node limits of the UCI searches (default: "100 800")
#   SEARCH_MINIBATCH   lc0's --minibatch-size for it (default: 8; lc0 otherwise takes each
#                      backend's preferred size, which differs: eigen 7, lc0rs cpu 8)
#   MAX_VALUE_ERROR    largest |Q difference| allowed (default: 1e-3)
#   MAX_POLICY_ERROR   largest |policy difference| allowed (default: 1e-3)
set -euo pipefail

if [ $# -lt 1 ]; then
  sed -n '/^# Usage:/,/^set -euo/p' "$0" | sed '$d' >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build_root=$1
shift
nets=("$@")
[ ${#nets[@]} -gt 0 ] || nets=("$repo/weights/tiny.pb.gz" "$repo/weights/tiny-dense.pb.gz")
opts=${LC0RS_OPTS:-threads=2}
check_nodes=${CHECK_NODES:-100}
check_positions=${CHECK_POSITIONS:-3}
search_limits=${SEARCH_NODES:-100 800}
minibatch=${SEARCH_MINIBATCH:-8}
max_value=${MAX_VALUE_ERROR:-1e-3}
max_policy=${MAX_POLICY_ERROR:-1e-3}
failed=0
fail() {
  echo "FAIL: $*" >&2
  failed=1
}

if [ -n "${LC0_BIN:-}" ]; then
  lc0=$LC0_BIN
else
  tarball=${LC0_SRC_TARBALL:-$repo/.devcarry/lc0-src.tar.xz}
  if [ ! -f "$tarball" ]; then
    echo "test.sh: no lc0 source tarball at $tarball." >&2
    echo "  Make one with scripts/lc0/pack-sources.sh (see scripts/lc0/README.md) and pass it" >&2
    echo "  as LC0_SRC_TARBALL, or set LC0_BIN to an lc0 built by integrations/lc0/build.sh." >&2
    exit 1
  fi
  start=$(date +%s)
  "$here/build.sh" "$tarball" "$build_root" none
  echo "build: $(($(date +%s) - start)) s"
  lc0=$build_root/build/lc0
fi
[ -x "$lc0" ] || {
  echo "test.sh: no lc0 binary at $lc0" >&2
  exit 1
}

# uci_search LOG NODES ARGS...: a UCI search of NODES nodes; prints "BESTMOVE SCORE NODES".
uci_search() {
  local log=$1 search_nodes=$2 i
  shift 2
  # The feeder reads lc0's output to know when to quit: reading the file lc0 writes is the point.
  # shellcheck disable=SC2094
  {
    printf 'uci\nisready\nposition startpos moves e2e4 e7e5 g1f3 b8c6 f1b5\ngo nodes %s\n' "$search_nodes"
    for ((i = 0; i < 1200; i++)); do
      grep -q '^bestmove' "$log" 2>/dev/null && break
      sleep 0.25
    done
    echo quit
  } | "$lc0" --threads=1 --minibatch-size="$minibatch" --smart-pruning-factor=0 "$@" >"$log" 2>"$log.err" || true
  local best score nodes
  best=$(sed -n 's/^bestmove \([^ ]*\).*/\1/p' "$log" | tail -n 1)
  score=$(grep '^info depth' "$log" | tail -n 1 | sed -n 's/.* score \(cp [-0-9]*\|mate [-0-9]*\).*/\1/p')
  nodes=$(grep '^info depth' "$log" | tail -n 1 | sed -n 's/.* nodes \([0-9]*\).*/\1/p')
  echo "${best:-none} ${score// /=} nodes=${nodes:-0}"
}

for net in "${nets[@]}"; do
  echo
  echo "==> $net"
  [ -f "$net" ] || {
    fail "no net at $net"
    continue
  }
  log=$(mktemp)
  # 1. Every batch of the benchmark's search evaluated by both backends. check takes its
  # option groups in name order: the first (lc0rs) is the one the search runs on.
  "$lc0" benchmark --weights="$net" --backend=check --threads=1 \
    --backend-opts="mode=display,freq=1.0,a(backend=lc0rs,lc0rs_backend=cpu,$opts),b(backend=eigen)" \
    --nodes="$check_nodes" --num-positions="$check_positions" >"$log" 2>&1 ||
    fail "lc0 benchmark --backend=check failed: $(tail -n 5 "$log")"
  batches=$(grep -c 'maximum error for a batch' "$log" || true)
  value=$(sed -n 's/.*value: absolute: \([^,]*\),.*/\1/p' "$log" | sort -g | tail -n 1)
  policy=$(sed -n 's/.*policy: absolute: \([^,]*\),.*/\1/p' "$log" | sort -g | tail -n 1)
  positions=$(sed -n 's/.*maximum error for a batch of \([0-9]*\).*/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
  echo "check (lc0rs cpu against eigen): $batches batches, $positions positions; largest differences: value $value, policy $policy"
  if [ "$batches" = 0 ]; then
    fail "the check backend checked no batch: $(tail -n 5 "$log")"
  else
    awk -v v="$value" -v p="$policy" -v mv="$max_value" -v mp="$max_policy" \
      'BEGIN { exit !(v + 0 <= mv + 0 && p + 0 <= mp + 0) }' ||
      fail "differences beyond value $max_value / policy $max_policy"
  fi

  # 2. The same search on each backend alone.
  for search_nodes in $search_limits; do
    lc0rs_result=$(uci_search "$log.lc0rs" "$search_nodes" --weights="$net" --backend=lc0rs --backend-opts="backend=cpu,$opts")
    eigen_result=$(uci_search "$log.eigen" "$search_nodes" --weights="$net" --backend=eigen)
    echo "go nodes $search_nodes (minibatch $minibatch, no smart pruning): lc0rs(cpu) $lc0rs_result | eigen $eigen_result"
    if [ "${lc0rs_result%% *}" = none ]; then
      fail "no bestmove from lc0rs: $(tail -n 5 "$log.lc0rs.err")"
    elif [ "${lc0rs_result##* }" = "${eigen_result##* }" ]; then
      [ "$lc0rs_result" = "$eigen_result" ] || fail "the same number of nodes, different results"
    else
      echo "  (different node counts: not compared)"
    fi
    grep -h 'nps' "$log.lc0rs" | tail -n 1 | sed 's/^/  lc0rs: /' || true
    grep -h 'nps' "$log.eigen" | tail -n 1 | sed 's/^/  eigen: /' || true
  done
  rm -f "$log" "$log".*
done

echo
if [ $failed = 0 ]; then
  echo "test.sh: passed"
else
  echo "test.sh: FAILED" >&2
  exit 1
fi
