#!/usr/bin/env python3
"""A minimal UCI engine for test_match.py that misbehaves on request.

It plays a legal move chosen from the position (deterministically) and reports a fixed score.
Counts are of `go` commands since the process started, so a restarted engine starts over.

    fake_engine.py [--crash-at N] [--illegal-at N] [--hang-at N] [--sleep S] [--score CP]
"""

import argparse
import os
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import chess  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--crash-at", type=int, help="exit (status 3) at this `go`")
    p.add_argument("--illegal-at", type=int, help="answer an illegal move at this `go`")
    p.add_argument("--hang-at", type=int, help="never answer this `go`")
    p.add_argument("--sleep", type=float, default=0.0, help="seconds spent on every move")
    p.add_argument("--score", type=int, default=0, help="the score reported, in cp")
    args = p.parse_args()

    board = chess.Board()
    searches = 0
    for line in sys.stdin:
        tokens = line.split()
        if not tokens:
            continue
        command = tokens[0]
        if command == "uci":
            print("id name fake_engine")
            print("option name Threads type spin default 1 min 1 max 8")
            print("uciok", flush=True)
        elif command == "isready":
            print("readyok", flush=True)
        elif command == "position":
            if tokens[1] == "startpos":
                board = chess.Board()
                rest = tokens[2:]
            else:
                end = tokens.index("moves") if "moves" in tokens else len(tokens)
                board = chess.Board(" ".join(tokens[2:end]))
                rest = tokens[end:]
            if rest and rest[0] == "moves":
                for uci in rest[1:]:
                    board.push_uci(uci)
        elif command == "go":
            searches += 1
            if searches == args.crash_at:
                sys.exit(3)
            if searches == args.hang_at:
                time.sleep(3600)
            if args.sleep:
                time.sleep(args.sleep)
            moves = sorted(board.legal_moves, key=lambda m: m.uci())
            pick = moves[zlib.crc32(board.fen().encode()) % len(moves)].uci()
            if searches == args.illegal_at:
                pick = "e1e8"  # never legal: a king does not go three squares and more
            print(f"info depth 3 seldepth 5 time 1 nodes {10 + searches} score cp {args.score} "
                  f"pv {pick}")
            print(f"info string picked {pick}")
            print(f"bestmove {pick}", flush=True)
        elif command == "quit":
            return


if __name__ == "__main__":
    main()
