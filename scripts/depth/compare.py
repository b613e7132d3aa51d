#!/usr/bin/env python3
"""Search depth of UCI engines at equal nodes, across MinibatchSize and Threads.

Each engine searches a fixed set of positions with `go nodes N` (a fresh `ucinewgame` before
each) for every MinibatchSize and Threads asked; the last `info` line of each search gives the
mean depth, seldepth, principal variation and score. The table compares every configuration
with the reference (the first engine at its own defaults): per position the difference of PV
length and depth, then the mean and the worst. lc0 and lc0rs count depth the same way (the
mean of the playouts' node counts from the root, root included, rounded down).

Usage:
  compare.py --engine NAME CMD [--engine NAME CMD ...] [--nodes 800]
             [--minibatch 0,1,16,64,256,1024] [--threads 0,1,2,4] [--option NAME=VALUE ...]
             [--positions FILE] [--csv OUT.csv]

CMD is one shell-quoted command line. MinibatchSize 0 and Threads 0 are each engine's own
default. --option applies to every engine (e.g. SmartPruningFactor=0). Positions: one per line,
`startpos [moves ...]` or `fen FEN [moves ...]` as after UCI's `position`; the default set is
below. Needs only the Python standard library.
"""

import argparse
import csv
import shlex
import subprocess
import sys
import time

POSITIONS = [
    "startpos",
    "startpos moves e2e4 e7e5 g1f3 b8c6 f1b5 a7a6",
    "startpos moves d2d4 g8f6 c2c4 e7e6 b1c3 f8b4 e2e3 e8g8 f1d3 d7d5",
    "startpos moves e2e4 c7c5 g1f3 d7d6 d2d4 c5d4 f3d4 g8f6 b1c3 a7a6 c1e3 e7e5",
    "fen r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/P4PPP/R1BQKB1R w KQ - 1 9",
    "fen r2q1rk1/1b2bppp/p2ppn2/1p6/3NP3/1BN1B3/PPP1QPPP/R4RK1 w - - 0 12",
    "fen 8/5pk1/6p1/3P4/1p3P2/1P4P1/5K2/8 b - - 0 45",
    "fen 2r3k1/5ppp/p3p3/1p6/3R4/P3P3/1P3PPP/6K1 w - - 0 28",
]

SEARCH_TIMEOUT = 300.0  # seconds for one search before the engine is declared hung


class Engine:
    """One UCI engine process, driven line by line."""

    def __init__(self, cmd):
        self.proc = subprocess.Popen(
            shlex.split(cmd),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        self.send("uci")
        self.wait_for("uciok")

    def send(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def wait_for(self, prefix, timeout=SEARCH_TIMEOUT):
        """The lines read until one starting with `prefix` (included)."""
        lines = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the engine exited while waiting for {prefix!r}")
            line = line.strip()
            lines.append(line)
            if line.startswith(prefix):
                return lines
        raise RuntimeError(f"no {prefix!r} within {timeout} s")

    def configure(self, options):
        for name, value in options.items():
            self.send(f"setoption name {name} value {value}")
        self.send("isready")
        self.wait_for("readyok")

    def search(self, position, nodes):
        self.send("ucinewgame")
        self.send("isready")
        self.wait_for("readyok")
        self.send(f"position {position}")
        start = time.monotonic()
        self.send(f"go nodes {nodes}")
        lines = self.wait_for("bestmove")
        elapsed = time.monotonic() - start
        info = last_info(lines)
        info["bestmove"] = lines[-1].split()[1]
        info["seconds"] = elapsed
        return info

    def quit(self):
        try:
            self.send("quit")
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()


def last_info(lines):
    """depth, seldepth, nodes, score and PV of the last `info` line with a PV."""
    for line in reversed(lines):
        words = line.split()
        if not words or words[0] != "info" or "pv" not in words or "depth" not in words:
            continue
        info = {"pv": words[words.index("pv") + 1 :]}
        for key in ("depth", "seldepth", "nodes", "nps"):
            if key in words:
                info[key] = int(words[words.index(key) + 1])
        if "score" in words:
            i = words.index("score")
            info["score"] = f"{words[i + 1]} {words[i + 2]}"
        return info
    raise RuntimeError("no info line with a principal variation")


def parse_list(text):
    return [int(x) for x in text.split(",") if x]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", nargs=2, action="append", metavar=("NAME", "CMD"), required=True)
    parser.add_argument("--nodes", type=int, default=800)
    parser.add_argument("--minibatch", default="0", help="comma-separated MinibatchSize values")
    parser.add_argument("--threads", default="0", help="comma-separated Threads values")
    parser.add_argument("--reference-only-defaults", action="store_true",
                        help="search the first engine at its defaults only")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--positions")
    parser.add_argument("--csv")
    args = parser.parse_args()

    positions = POSITIONS
    if args.positions:
        with open(args.positions) as f:
            positions = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    common = dict(o.split("=", 1) for o in args.option)

    rows = []
    configs = []
    for index, (name, cmd) in enumerate(args.engine):
        pairs = [(m, t) for m in parse_list(args.minibatch) for t in parse_list(args.threads)]
        if index == 0 and args.reference_only_defaults:
            pairs = [(0, 0)]
        for minibatch, threads in pairs:
            options = dict(common)
            if minibatch:
                options["MinibatchSize"] = minibatch
            if threads:
                options["Threads"] = threads
            engine = Engine(cmd)
            try:
                engine.configure(options)
                results = [engine.search(p, args.nodes) for p in positions]
            finally:
                engine.quit()
            label = f"{name} mb={minibatch or 'default'} t={threads or 'default'}"
            configs.append((label, results))
            for position, r in zip(positions, results):
                rows.append({
                    "engine": name, "minibatch": minibatch, "threads": threads,
                    "position": position, "bestmove": r["bestmove"], "depth": r.get("depth"),
                    "seldepth": r.get("seldepth"), "nodes": r.get("nodes"),
                    "pv_length": len(r["pv"]), "score": r.get("score"), "nps": r.get("nps"),
                    "seconds": round(r["seconds"], 3),
                })
            print(f"{label:32} depth {' '.join(str(r.get('depth')) for r in results):24} "
                  f"pv {' '.join(str(len(r['pv'])) for r in results):24} "
                  f"nps {' '.join(str(r.get('nps')) for r in results)}", flush=True)

    reference_label, reference = configs[0]
    print(f"\nagainst {reference_label} (per position: PV length and depth differences)")
    worst_overall = 0
    for label, results in configs[1:]:
        pv_diff = [len(r["pv"]) - len(b["pv"]) for r, b in zip(results, reference)]
        depth_diff = [r.get("depth", 0) - b.get("depth", 0) for r, b in zip(results, reference)]
        same = sum(r["bestmove"] == b["bestmove"] for r, b in zip(results, reference))
        worst = min(depth_diff)
        worst_overall = min(worst_overall, worst)
        print(f"{label:32} depth {' '.join(f'{d:+d}' for d in depth_diff):28} "
              f"mean {sum(depth_diff) / len(depth_diff):+.2f} worst {worst:+d} | "
              f"pv mean {sum(pv_diff) / len(pv_diff):+.2f} worst {min(pv_diff):+d} | "
              f"same move {same}/{len(results)}")
    print(f"\nworst depth difference against the reference: {worst_overall:+d}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    sys.exit(main())
