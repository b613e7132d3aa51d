#!/bin/bash
# Search speed of the UCI engine, for docs/performance.md: two searches of NODES playouts (the
# start position, then six plies later with the tree kept), MinibatchSize 256; prints the last
# info line and bestmove of each.
# Usage: benches/uci_search.sh LOG NET BACKEND NODES [LC0RS]
set -u
log=$1 net=$2 backend=$3 nodes=$4 lc0rs=${5:-target/release/lc0rs}
: > "$log"
( printf 'setoption name MinibatchSize value 256\nisready\nposition startpos\ngo nodes %s\n' "$nodes"
  until grep -q '^bestmove' "$log"; do sleep 0.2; done
  printf 'position startpos moves e2e4 e7e5 g1f3 b8c6 f1b5 a7a6\ngo nodes %s\n' "$nodes"
  until [ "$(grep -c '^bestmove' "$log")" -ge 2 ]; do sleep 0.2; done
  echo quit ) | "$lc0rs" uci -w "$net" -b "$backend" >> "$log" 2>&1
grep -E '^(info depth|bestmove)' "$log" | grep -B1 bestmove
