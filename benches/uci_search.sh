#!/bin/bash
# Search speed of the UCI engine, for docs/performance.md: two `go nodes NODES` searches (the
# start position, then six plies later with the tree kept; as in lc0, NODES counts the root's
# visits, so the second search adds NODES minus the kept visits), MinibatchSize 256, smart
# pruning off, THREADS search threads (default 0: the engine's choice, 2 on a GPU backend, 1 on
# the cpu backend); prints the last info line and bestmove of each, where each search's threads
# spent their time (VerboseMoveStats' statistics line), then the nodes/s (new playouts per
# second, as lc0's nps) of each search.
# A binary named `lc0` is run as lc0 (`--weights=NET --backend=BACKEND`), so that lc0 gets the
# same commands; THREADS 0 then leaves lc0's own default.
# Usage: benches/uci_search.sh LOG NET BACKEND NODES [LC0RS [THREADS]]
set -u
log=$1 net=$2 backend=$3 nodes=$4 lc0rs=${5:-target/release/lc0rs} threads=${6:-0}
[ -x "$lc0rs" ] || { echo "no lc0rs binary at $lc0rs" >&2; exit 1; }
engine=("$lc0rs" uci -w "$net" -b "$backend")
threads_option="setoption name Threads value $threads"
if [ "$(basename "$lc0rs")" = lc0 ]; then
  engine=("$lc0rs" --weights="$net" --backend="$backend")
  [ "$threads" = 0 ] && threads_option=
fi
: > "$log"
( printf 'setoption name MinibatchSize value 256\nsetoption name SmartPruningFactor value 0\n%s\nsetoption name VerboseMoveStats value true\nisready\nposition startpos\ngo nodes %s\n' "$threads_option" "$nodes"
  until grep -q '^bestmove' "$log"; do sleep 0.2; done
  printf 'position startpos moves e2e4 e7e5 g1f3 b8c6 f1b5 a7a6\ngo nodes %s\n' "$nodes"
  until [ "$(grep -c '^bestmove' "$log")" -ge 2 ]; do sleep 0.2; done
  echo quit ) | "${engine[@]}" >> "$log" 2>&1
grep -E '^(info depth|bestmove)' "$log" | grep -B1 bestmove
grep -E '^info string [0-9]+ playouts' "$log"
grep -E '^(info depth|bestmove)' "$log" | grep -B1 bestmove | grep '^info depth' \
  | sed -E 's/.* nps ([0-9]+).*/\1/' | paste -sd' ' | sed "s/^/threads $threads nodes\/s (1st 2nd): /"
