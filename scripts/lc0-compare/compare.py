#!/usr/bin/env python3
"""lc0rs `eval` against a real lc0 binary on the same network and positions.

lc0 has no command that prints raw network outputs, so this runs its UCI search with
`go nodes 1 --verbose-move-stats --policy-softmax-temp=1`: the root line's V is the network's
value (4 decimals) and each move's P its policy share (2 decimals in percent). lc0's search
computes that softmax with FastExp (src/utils/fastmath.h), a quadratic approximation of exp
with a relative error up to ~2e-3, so lc0rs' exact probabilities are passed through the same
approximation before comparing. lc0 writes castling as king-takes-rook (e1h1).

usage: compare.py LC0 WEIGHTS LC0RS POSITION...   (POSITION as UCI: "startpos moves e2e4")
"""
import json
import math
import re
import struct
import subprocess
import sys
import time

CASTLING = {"e1g1": "e1h1", "e1c1": "e1a1", "e8g8": "e8h8", "e8c8": "e8a8"}


def fast_exp2(a):
    """lc0's FastExp2 in f32 arithmetic."""
    if a < 0:
        if a < -126:
            return 0.0
        e = int(a - 1)
    else:
        e = int(a)
    out = a - e
    out = 1.0 + out * (0.6602339 + 0.33976606 * out)
    bits = struct.unpack("<i", struct.pack("<f", out))[0] + (e << 23)
    return struct.unpack("<f", struct.pack("<i", bits))[0]


def lc0_softmax(probs):
    """The temperature-1 softmax as lc0's search computes it, from exact probabilities."""
    top = max(math.log(p) for p in probs.values())
    e = {m: fast_exp2(1.442695040 * (math.log(p) - top)) for m, p in probs.items()}
    total = sum(e.values())
    return {m: v / total for m, v in e.items()}


def lc0_notation(probs, lc0_moves):
    """`probs` with castling renamed as lc0 prints it (king takes rook), where lc0 did: a move
    lc0 lists under the same name (a queen's e8c8) keeps it."""
    return {CASTLING[m] if m not in lc0_moves and CASTLING.get(m) in lc0_moves else m: p
            for m, p in probs.items()}


def read_root(lines):
    """The root's V, each move's P and the best move from lc0's verbose output of one `go`,
    read up to its `bestmove`."""
    value, policy, best = None, {}, None
    for line in lines:
        m = re.match(r"info string (\S+)\s+\(.*?\(P:\s*([\d.]+)%\).*\(V:\s*(\S+)\)", line)
        if m and m.group(1) == "node":
            value = float(m.group(3))
        elif m:
            policy[m.group(1)] = float(m.group(2)) / 100
        elif line.startswith("bestmove"):
            best = line.split()[1]
            break
    return value, policy, best


def lc0_root(lc0, weights, position):
    script = f"uci\nisready\nposition {position}\ngo nodes 1\n"
    proc = subprocess.Popen(
        [lc0, f"--weights={weights}", "--backend=blas", "--threads=1",
         "--policy-softmax-temp=1", "--verbose-move-stats", "--minibatch-size=1"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    proc.stdin.write(script)
    proc.stdin.flush()
    value, policy, best = read_root(proc.stdout)
    proc.stdin.write("quit\n")
    proc.stdin.close()
    proc.wait(timeout=30)
    return value, policy, best


def main():
    lc0, weights, lc0rs, positions = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    args = [lc0rs, "eval", "-w", weights, "-b", "cpu", "--temp", "1", "--json"]
    for p in positions:
        args += ["--position", p]
    ours = [json.loads(l) for l in subprocess.run(args, check=True, capture_output=True,
                                                  text=True).stdout.splitlines()]
    worst_q = worst_p = 0.0
    for position, mine in zip(positions, ours):
        value, policy, best = lc0_root(lc0, weights, position)
        probs = lc0_notation(lc0_softmax(mine["policy"]), policy)
        assert set(probs) == set(policy), (position, set(probs) ^ set(policy))
        dq = abs(value - mine["q"])
        dp = max(abs(policy[m] - p) for m, p in probs.items())
        top = max(probs, key=probs.get)
        worst_q, worst_p = max(worst_q, dq), max(worst_p, dp)
        print(f"{position[:70]:70} moves {len(policy):2} |dQ| {dq:.5f} max|dP| {dp:.5f} "
              f"top {top} lc0 bestmove {best}")
    print(f"worst |dQ| {worst_q:.2e} (lc0 prints 4 decimals), "
          f"worst |dP| {worst_p:.2e} (lc0 prints 1e-4)")


if __name__ == "__main__":
    main()
