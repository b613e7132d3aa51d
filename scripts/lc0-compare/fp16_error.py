#!/usr/bin/env python3
"""The fp16 error of lc0's own GPU backend and of lc0rs' against the same f32 reference.

lc0rs' `selftest` measures its GPU backends against its `cpu` oracle; this measures lc0's
`cuda-fp16` the same way, on the same positions, so that the two errors can be set side by side
(lc0 has no command that prints raw outputs: its UCI search with `go nodes 1` prints the root's
V and each move's P, see compare.py).

  fp16_error.py positions COUNT SEED > positions.txt     random games (python-chess), as UCI
  fp16_error.py lc0 LC0 WEIGHTS BACKEND positions.txt > lc0.jsonl
  fp16_error.py compare REFERENCE.jsonl CANDIDATE.jsonl [--lc0]

`REFERENCE` is `lc0rs eval -b cpu --temp 1 --json` over the positions, a candidate either
lc0rs' `eval` on a GPU backend or lc0's output (`--lc0`: the reference's probabilities then go
through lc0's FastExp softmax and castling notation first, and lc0's rounding to 1e-4 stays).
Prints the largest |ΔP| over each position's legal moves (max and mean over positions) and |ΔQ|.
"""
import json
import random
import subprocess
import sys

from compare import lc0_notation, lc0_softmax, read_root


def positions(count, seed):
    import chess

    rng = random.Random(seed)
    while count > 0:
        board, moves = chess.Board(), []
        for _ in range(rng.randrange(160)):
            legal = list(board.legal_moves)
            if not legal:
                break
            move = rng.choice(legal)
            moves.append(move.uci())
            board.push(move)
        if board.is_game_over(claim_draw=False) or not any(board.legal_moves):
            continue
        print("startpos" + (" moves " + " ".join(moves) if moves else ""))
        count -= 1


def lc0(binary, weights, backend, path):
    proc = subprocess.Popen(
        [binary, f"--weights={weights}", f"--backend={backend}", "--threads=1",
         "--policy-softmax-temp=1", "--verbose-move-stats", "--minibatch-size=1",
         "--smart-pruning-factor=0"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    proc.stdin.write("uci\nisready\n")
    for spec in open(path).read().splitlines():
        proc.stdin.write(f"ucinewgame\nposition {spec}\ngo nodes 1\n")
        proc.stdin.flush()
        value, policy, _ = read_root(proc.stdout)
        print(json.dumps({"position": spec, "q": value, "policy": policy}), flush=True)
    proc.stdin.write("quit\n")
    proc.stdin.close()
    proc.wait(timeout=60)


def compare(reference, candidate, from_lc0):
    refs = [json.loads(line) for line in open(reference)]
    cands = [json.loads(line) for line in open(candidate)]
    assert len(refs) == len(cands), (len(refs), len(cands))
    worst_p, sum_p, worst_q, worst_at = 0.0, 0.0, 0.0, refs[0]["position"]
    for ref, cand in zip(refs, cands):
        assert ref["position"] == cand["position"], (ref["position"], cand["position"])
        probs = ref["policy"]
        if from_lc0:
            probs = lc0_notation(lc0_softmax(probs), cand["policy"])
        assert set(probs) == set(cand["policy"]), ref["position"]
        dp = max(abs(cand["policy"][m] - p) for m, p in probs.items())
        if dp > worst_p:
            worst_p, worst_at = dp, ref["position"]
        sum_p += dp
        worst_q = max(worst_q, abs(cand["q"] - ref["q"]))
    print(f"{candidate}: {len(refs)} positions, max |dP| {worst_p:.2e}, mean of each "
          f"position's max |dP| {sum_p / len(refs):.2e}, max |dQ| {worst_q:.2e}; "
          f"worst at {worst_at[:60]}")


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "positions":
        positions(int(args[0]), int(args[1]))
    elif command == "lc0":
        lc0(*args)
    elif command == "compare":
        compare(args[0], args[1], "--lc0" in args[2:])
    else:
        sys.exit(__doc__)
