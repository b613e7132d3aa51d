#!/bin/bash
# Several GPUs against one, for docs/performance.md, on every GPU `nvidia-smi -L` lists (or the
# first N with GPUS=N), all in one run so that the figures share one machine:
#   1. backendbench positions/s at batch 64, 256 and 1024: one GPU (1 and 2 threads), then
#      gpus=all with policy=split (1 thread) and policy=rr (2 threads a GPU);
#   2. the UCI search, `go nodes NODES` from the start position with the engine's defaults
#      (threads and minibatch from the backend), smart pruning off: one GPU, split and rr, each
#      with its VerboseMoveStats profile (walks, batches, the threads' time);
#   3. with LC0 given, lc0 on the same net: its backendbench over `demux` and its search over
#      `multiplexing` and `roundrobin`, and on one GPU.
# Prints one line a measurement; the logs stay in OUT. BACKEND (default cuda-fp16) and EXTRA
# (options added to every set) let the script run on emulated GPUs for a dry run:
#   GPUS=2 BACKEND=hip-emu EXTRA=emulated_gpus=2,max_batch=64 benches/multi_gpu.sh OUT bundled:tiny
# Usage: benches/multi_gpu.sh OUT NET [LC0RS [LC0 [NODES]]]
set -u
out=$1 net=$2 lc0rs=${3:-target/release/lc0rs} lc0=${4:-} nodes=${5:-200000}
[ -x "$lc0rs" ] || { echo "no lc0rs binary at $lc0rs" >&2; exit 1; }
mkdir -p "$out"
backend=${BACKEND:-cuda-fp16} extra=${EXTRA:+,$EXTRA}
gpus=${GPUS:-$(nvidia-smi -L | wc -l)}
[ "$gpus" -ge 2 ] || { echo "needs two GPUs or more, found $gpus" >&2; exit 1; }
all=$(seq -s, 0 $((gpus - 1)))
echo "GPUs: $gpus ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)), $backend, net $net, $(date -u +%FT%TZ)"

# backendbench at SIZE with OPTIONS and THREADS: the positions/s of the CSV row.
bench() {  # bench LABEL SIZE THREADS OPTIONS
  local log="$out/bb-$1-$2.log"
  "$lc0rs" backendbench -w "$net" -b "$backend" -o "$4$extra" -t "$3" --batches $((${BATCHES:-200} * $3)) \
    --start-batch-size "$2" --max-batch-size "$2" >"$log" 2>&1
  echo "backendbench $1 batch $2 threads $3: $(grep -E "^ *$2," "$log" | head -1 | cut -d, -f2) positions/s"
  grep -E '^GPU [0-9]+: [0-9.]+% of' "$log" | sed 's/^/    /'
}
for size in ${SIZES:-64 256 1024}; do
  bench one-gpu "$size" 1 "gpu=0"
  bench one-gpu-2t "$size" 2 "gpu=0"
  bench split "$size" 1 "gpus=$all,policy=split"
  bench rr "$size" $((2 * gpus)) "gpus=$all,policy=rr"
done

# The UCI search's nodes/s with OPTIONS.
search() {  # search LABEL OPTIONS
  local log="$out/uci-$1.log"
  : >"$log"
  ( printf 'setoption name SmartPruningFactor value 0\nsetoption name VerboseMoveStats value true\nisready\nposition startpos\ngo nodes %s\n' "$nodes"
    until grep -q '^bestmove' "$log"; do sleep 0.2; done
    echo quit ) | "$lc0rs" uci -w "$net" -b "$backend" -o "$2$extra" >>"$log" 2>&1
  echo "uci $1: $(grep '^info depth' "$log" | tail -1 | sed -E 's/.* nps ([0-9]+).*/\1/') nodes/s"
  # Where the search threads spent their time, and the batches they sent.
  grep -E '^info string [0-9]+ playouts' "$log" | sed 's/^info string /    /'
}
search one-gpu "gpu=0"
search split "gpus=$all,policy=split"
search rr "gpus=$all,policy=rr"

[ -n "$lc0" ] || exit 0
[ -x "$lc0" ] || { echo "no lc0 binary at $lc0" >&2; exit 1; }
members=$(for g in $(seq 0 $((gpus - 1))); do printf '(backend=cuda-fp16,gpu=%s),' "$g"; done)
members=${members%,}
for size in 64 256 1024; do
  for kind in one demux; do
    case $kind in
      one) opts=(--backend=cuda-fp16 --backend-opts=gpu=0) ;;
      demux) opts=(--backend=demux "--backend-opts=$members") ;;
    esac
    log="$out/lc0-bb-$kind-$size.log"
    "$lc0" backendbench --weights="$net" "${opts[@]}" --batches=200 \
      --start-batch-size="$size" --max-batch-size="$size" >"$log" 2>&1
    echo "lc0 backendbench $kind batch $size: $(grep -E "^ *$size," "$log" | head -1 | cut -d, -f2) positions/s"
  done
done
for kind in one multiplexing roundrobin; do
  case $kind in
    one) opts=(--backend=cuda-fp16 --backend-opts=gpu=0) ;;
    *) opts=("--backend=$kind" "--backend-opts=$members") ;;
  esac
  log="$out/lc0-uci-$kind.log"
  : >"$log"
  ( printf 'setoption name SmartPruningFactor value 0\nisready\nposition startpos\ngo nodes %s\n' "$nodes"
    until grep -q '^bestmove' "$log"; do sleep 0.2; done
    echo quit ) | "$lc0" --weights="$net" "${opts[@]}" >>"$log" 2>&1
  echo "lc0 uci $kind: $(grep '^info depth' "$log" | tail -1 | sed -E 's/.* nps ([0-9]+).*/\1/') nodes/s"
done
