#!/usr/bin/env python3
"""Tests of scripts/match: the book, the statistics, the adjudication rules, the failure paths
(with fake_engine.py) and a real two-game match of lc0rs against itself.

    LC0RS=target/release/lc0rs python3 scripts/match/test_match.py

Needs python-chess. Without LC0RS set the real match is skipped (with the reason printed); the
Rust test crates/lc0rs-cli/tests/match_script.rs sets it to the binary cargo built.
"""

import argparse
import io
import json
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import chess  # noqa: E402
import chess.pgn  # noqa: E402

import match  # noqa: E402
import openings  # noqa: E402
import stats  # noqa: E402
from engine import parse_info  # noqa: E402

MATCH = os.path.join(HERE, "match.py")
FAKE = os.path.join(HERE, "fake_engine.py")
TINY_NET = os.path.join(ROOT, "weights", "tiny.pb.gz")


def run_match(*argv, timeout=120):
    """Runs match.py in a fresh process; returns (completed process, JSON summary, PGN games)."""
    with tempfile.TemporaryDirectory() as tmp:
        out_json = os.path.join(tmp, "m.json")
        out_pgn = os.path.join(tmp, "m.pgn")
        run = subprocess.run(
            [sys.executable, MATCH, *argv, "--json", out_json, "--pgn", out_pgn],
            capture_output=True, text=True, timeout=timeout)
        summary = None
        if os.path.exists(out_json):
            with open(out_json) as f:
                summary = json.load(f)
        games = []
        if os.path.exists(out_pgn):
            with open(out_pgn) as f:
                while (game := chess.pgn.read_game(f)) is not None:
                    games.append(game)
        return run, summary, games


def fake(name, *flags):
    command = shlex.join([sys.executable, FAKE]) + " " + " ".join(flags)
    return ["--engine", f"name={name}", f"cmd={command}"]


class Book(unittest.TestCase):
    """The committed book: legal, 4 to 8 plies, ECO-coded, no two lines alike."""

    def test_every_opening_is_legal_and_distinct(self):
        path = openings.DEFAULT_FILE
        lines, positions, sequences = 0, {}, set()
        with open(path) as f:
            for number, line in enumerate(f, 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                lines += 1
                eco, name, moves = [p.strip() for p in line.split("|")]
                self.assertRegex(eco, r"^[A-E]\d\d$", f"line {number}")
                self.assertTrue(name, f"line {number}")
                # Replayed here with python-chess's SAN parser, independently of openings.py.
                board = chess.Board()
                for san in moves.split():
                    try:
                        board.push_san(san)
                    except ValueError as e:
                        self.fail(f"line {number}: {san} is illegal after "
                                  f"{chess.Board().variation_san(board.move_stack)}: {e}")
                self.assertTrue(4 <= len(board.move_stack) <= 8, f"line {number}: length")
                self.assertFalse(board.is_game_over(claim_draw=True), f"line {number}")
                key = board.epd()
                self.assertNotIn(key, positions,
                                 f"line {number} reaches the position of line {positions.get(key)}")
                positions[key] = number
                sequences.add(moves)
        self.assertGreaterEqual(lines, 128)
        self.assertEqual(len(sequences), lines)
        self.assertEqual(len(openings.load(path)), lines)

    def test_other_book_formats(self):
        where = "test"
        o = openings.parse_line("1. e4 e5 2.Nf3 Nc6 3... Bb5", where)
        self.assertEqual([m.uci() for m in o.moves], ["e2e4", "e7e5", "g1f3", "b8c6", "f1b5"])
        o = openings.parse_line("d2d4 g8f6 c2c4 e7e6", where)
        self.assertEqual(o.board().fen(), chess.Board(
            "rnbqkb1r/pppp1ppp/4pn2/8/2PP4/8/PP2PPPP/RNBQKBNR w KQkq - 0 3").fen())
        o = openings.parse_line("4k3/8/8/8/8/8/4P3/4K3 w - - bm e4; id \"x\";", where)
        self.assertEqual(o.fen, "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1")
        self.assertEqual(o.moves, [])
        with self.assertRaises(openings.OpeningError):
            openings.parse_line("e4 e4", where)
        with self.assertRaises(openings.OpeningError):
            openings.parse_line("f3 e5 g4 Qh4#", where)  # the game is over


class Statistics(unittest.TestCase):
    def test_even_score_is_zero_elo(self):
        self.assertEqual(stats.elo(0.5), 0.0)
        t = stats.trinomial(10, 20, 10)
        self.assertEqual(t["elo"], 0.0)
        self.assertAlmostEqual(t["elo_low"], -t["elo_high"], places=9)
        self.assertEqual(stats.los(7, 7), 0.5)

    def test_elo_of_a_score(self):
        # Elo(3/4) = 400 log10(3) = 190.848502; Elo(1/4) its negative; the ends are infinite.
        self.assertAlmostEqual(stats.elo(0.75), 190.848502, places=5)
        self.assertAlmostEqual(stats.elo(0.25), -190.848502, places=5)
        self.assertEqual(stats.elo(1.0), math.inf)
        self.assertEqual(stats.elo(0.0), -math.inf)
        # All won: no finite estimate, bound or margin.
        t = stats.trinomial(2, 0, 0)
        self.assertEqual((t["elo"], t["elo_low"], t["elo_margin"]), (math.inf, math.inf, math.inf))

    def test_trinomial_by_hand(self):
        # W=6 D=2 L=2, N=10:
        #   mu  = (6 + 2/2)/10 = 0.7
        #   var = [6 (0.3)^2 + 2 (-0.2)^2 + 2 (-0.7)^2] / 10 = (0.54 + 0.08 + 0.98)/10 = 0.16
        #   se  = sqrt(0.16/10) = 0.4/sqrt(10) = 0.1264911
        #   mu -/+ 1.959964 se = 0.7 -/+ 0.2479180 = [0.4520820, 0.9479180]
        #   Elo(0.7)       = 400 log10(0.7/0.3)             = 400 * 0.3679768 = 147.1907
        #   Elo(0.4520820) = 400 log10(0.4520820/0.5479180) = 400 * -0.0834984 = -33.3994
        #   Elo(0.9479180) = 400 log10(0.9479180/0.0520820) = 400 * 1.2600832 = 504.0333
        #   LOS = 1/2 [1 + erf((6-2)/sqrt(2*8))] = 1/2 [1 + erf(1)] = 1/2 (1 + 0.8427008)
        #       = 0.9213504
        t = stats.trinomial(6, 2, 2)
        self.assertAlmostEqual(t["score"], 0.7, places=12)
        self.assertAlmostEqual(t["variance"], 0.16, places=12)
        self.assertAlmostEqual(t["stderr"], 0.1264911, places=6)
        self.assertAlmostEqual(t["score_low"], 0.4520820, places=6)
        self.assertAlmostEqual(t["score_high"], 0.9479180, places=6)
        self.assertAlmostEqual(t["elo"], 147.1907, places=3)
        self.assertAlmostEqual(t["elo_low"], -33.3994, places=3)
        self.assertAlmostEqual(t["elo_high"], 504.0333, places=3)
        self.assertAlmostEqual(stats.los(6, 2), 0.9213504, places=6)

    def test_pentanomial_by_hand(self):
        # Five pairs scoring 1/2, 1, 1, 3/2 and 2 points of 2, i.e. counts [0, 1, 2, 1, 1] and
        # per-game scores x = 1/4, 1/2, 1/2, 3/4, 1:
        #   mu  = 3/5 = 0.6
        #   var = [(0.25-0.6)^2 + 2 (0.5-0.6)^2 + (0.75-0.6)^2 + (1-0.6)^2] / 5
        #       = (0.1225 + 0.02 + 0.0225 + 0.16)/5 = 0.325/5 = 0.065
        #   se  = sqrt(0.065/5) = sqrt(0.013) = 0.1140175
        #   mu -/+ 1.959964 se = 0.6 -/+ 0.2234703 = [0.3765297, 0.8234703]
        #   Elo(0.6) = 400 log10(1.5) = 70.4365
        #   Elo(0.3765297) = 400 log10(0.3765297/0.6234703) = 400 * -0.2190165 = -87.6066
        #   Elo(0.8234703) = 400 log10(0.8234703/0.1765297) = 400 * 0.6688301 = 267.5320
        #   LOS = Phi((0.6-0.5)/0.1140175) = Phi(0.8770580) = 0.8097724
        p = stats.pentanomial([0, 1, 2, 1, 1])
        self.assertEqual(p["n"], 5)
        self.assertAlmostEqual(p["score"], 0.6, places=12)
        self.assertAlmostEqual(p["variance"], 0.065, places=12)
        self.assertAlmostEqual(p["stderr"], 0.1140175, places=6)
        self.assertAlmostEqual(p["elo"], 70.4365, places=3)
        self.assertAlmostEqual(p["elo_low"], -87.6066, places=3)
        self.assertAlmostEqual(p["elo_high"], 267.5320, places=3)
        self.assertAlmostEqual(p["los"], 0.8097724, places=6)

    def test_pairs_are_counted_from_the_first_engine(self):
        book = openings.load(openings.DEFAULT_FILE)

        def rec(index, result):
            r = match.GameRecord(index, book[0], index % 2, 1 - index % 2)
            r.result = result
            return r

        # Pair 1: A wins as White, draws as Black (1.5); pair 2: A loses both (0); pair 3 is
        # incomplete and left out.
        records = [rec(0, "1-0"), rec(1, "1/2-1/2"), rec(2, "0-1"), rec(3, "1-0"), rec(4, "1-0")]
        self.assertEqual(match.pair_counts(records), [1, 0, 0, 1, 0])
        self.assertEqual(match.wdl(records), (2, 1, 2))

    def test_no_games(self):
        self.assertIsNone(stats.trinomial(0, 0, 0))
        self.assertIsNone(stats.pentanomial([0] * 5))
        self.assertEqual(stats.json_safe({"a": [math.inf, 1.0]}), {"a": [None, 1.0]})


class Parsing(unittest.TestCase):
    def test_info_lines(self):
        info = parse_info("info depth 5 seldepth 9 time 12 nodes 801 score cp -23 lowerbound "
                          "wdl 100 800 100 nps 1000 pv e2e4 e7e5")
        self.assertEqual(info, {"depth": 5, "seldepth": 9, "time": 12, "nodes": 801,
                                "score": ("cp", -23), "bound": "lowerbound",
                                "wdl": (100, 800, 100), "nps": 1000, "pv": ["e2e4", "e7e5"]})
        self.assertEqual(parse_info("info depth 3 score mate -2")["score"], ("mate", -2))
        self.assertIsNone(parse_info("info string depth 3"))
        self.assertIsNone(parse_info("info multipv 2 depth 3 score cp 10"))
        self.assertEqual(match.score_value({"score": ("mate", 3)}), match.MATE_SCORE - 3)
        self.assertEqual(match.score_value({"score": ("mate", -3)}), -match.MATE_SCORE + 3)
        self.assertEqual(match.move_comment({"depth": 5, "seldepth": 9, "nodes": 801,
                                             "score": ("cp", 35), "time": 412}, 0.431),
                         "depth=5 seldepth=9 nodes=801 score=cp:35 time=412ms wall=431ms")

    def test_command_line(self):
        self.assertEqual(match.parse_tc("1+0.1"), (1.0, 0.1))
        self.assertEqual(match.parse_tc("60"), (60.0, 0.0))
        with self.assertRaises(ValueError):
            match.parse_tc("1/0.1")
        args = match.parse_args([
            "--engine", "name=a", "cmd=/bin/a uci -w 'my net.pb.gz'", "option.Threads=2",
            "--engine", "cmd=/usr/bin/b", "nodes=100", "option.Threads=4",
            "--each", "option.Threads=1", "option.MinibatchSize=32",
            "--nodes", "800", "--games", "4"])
        a, b = args.specs
        self.assertEqual(a.cmd, ["/bin/a", "uci", "-w", "my net.pb.gz"])
        self.assertEqual(a.options, [("MinibatchSize", "32"), ("Threads", "2")])
        self.assertEqual((a.nodes, b.nodes), (800, 100))
        self.assertEqual(b.name, "b")
        self.assertEqual(b.options, [("MinibatchSize", "32"), ("Threads", "4")])

    def test_bad_command_lines(self):
        base = ["--engine", "cmd=x", "--engine", "cmd=y"]
        for argv in (base + ["--nodes", "10", "--games", "3"],  # odd
                     base + ["--games", "2"],  # no limit
                     ["--engine", "cmd=x", "--nodes", "10", "--games", "2"],  # one engine
                     base + ["--nodes", "10", "--tc", "1+0", "--games", "2"],
                     ["--engine", "cmd=x", "tc=1+0", "--engine", "cmd=y", "--nodes", "5",
                      "--games", "2"],  # nodes against a clock
                     base + ["--nodes", "10", "--games", "2", "--engine", "cmd=z"]):
            with self.subTest(argv=argv), self.assertRaises(SystemExit) as e:
                stderr = sys.stderr
                sys.stderr = io.StringIO()
                try:
                    match.parse_args(argv)
                finally:
                    sys.stderr = stderr
            self.assertEqual(e.exception.code, 2)


class Adjudication(unittest.TestCase):
    def adjudicator(self, draw=None, start=40, resign=None, two_sided=False):
        return match.Adjudicator(argparse.Namespace(
            draw_adjudication=draw, draw_adjudication_start=start,
            resign_adjudication=resign, resign_two_sided=two_sided))

    def play(self, adjudicator, sans, scores):
        board = chess.Board()
        for san, score in zip(sans, scores):
            mover = board.turn
            board.push_san(san)
            out = adjudicator.after_move(board, mover, score)
            if out:
                return out, len(board.move_stack)
        return None, len(board.move_stack)

    def test_draw_after_moves_within_the_margin(self):
        quiet = ["Nf3", "Nf6", "Ng1", "Ng8"] * 3
        out, plies = self.play(self.adjudicator(draw=(2, 10), start=0), quiet, [5] * 12)
        self.assertEqual(out[:2], ("1/2-1/2", "draw adjudication"))
        self.assertEqual(plies, 4)  # 2 moves each
        # Not before the start move: 4 plies are 2 full moves.
        out, plies = self.play(self.adjudicator(draw=(2, 10), start=3), quiet, [5] * 12)
        self.assertEqual(plies, 6)
        # A score outside the margin restarts the count.
        out, plies = self.play(self.adjudicator(draw=(2, 10), start=0), quiet,
                               [5, 5, 5, 50, 5, 5, 5, 5])
        self.assertEqual(plies, 8)
        # So does a pawn move.
        out, plies = self.play(self.adjudicator(draw=(2, 10), start=0),
                               ["Nf3", "Nf6", "e3", "Ng8", "Ng1", "Nf6", "Nf3", "Ng8"], [0] * 8)
        self.assertEqual(plies, 7)
        # No score, no draw.
        out, _ = self.play(self.adjudicator(draw=(2, 10), start=0), quiet, [None] * 12)
        self.assertIsNone(out)

    def test_resign(self):
        quiet = ["Nf3", "Nf6", "Ng1", "Ng8"] * 3
        # Black's own score at -500 for 3 of its moves: White wins at ply 6.
        scores = [0, -500] * 6
        out, plies = self.play(self.adjudicator(resign=(3, 400)), quiet, scores)
        self.assertEqual((out[:2], plies), (("1-0", "resign adjudication"), 6))
        # Two-sided: White must agree (+400) for its last 3 moves too.
        out, _ = self.play(self.adjudicator(resign=(3, 400), two_sided=True), quiet, scores)
        self.assertIsNone(out)
        out, plies = self.play(self.adjudicator(resign=(3, 400), two_sided=True), quiet,
                               [500, -500] * 6)
        self.assertEqual((out[:2], plies), (("1-0", "resign adjudication"), 6))
        # A mate against it counts; White resigns.
        mate = -match.MATE_SCORE + 4
        out, plies = self.play(self.adjudicator(resign=(2, 400)), quiet, [mate, 0] * 6)
        self.assertEqual((out[:2], plies), (("0-1", "resign adjudication"), 3))


class Failures(unittest.TestCase):
    """Each failure loses the game for the engine at fault, which is restarted."""

    def check(self, run, summary, games, kind, loser="bad"):
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertEqual(summary["games_played"], 2)
        self.assertEqual(len(games), 2)
        for g in games:
            self.assertEqual(g.headers["TerminationDetails"].split(":")[0], kind,
                             g.headers["TerminationDetails"])
            white_lost = g.headers["Result"] == "0-1"
            self.assertEqual(g.headers["White" if white_lost else "Black"], loser)
        self.assertEqual(summary["terminations"], {kind: 2})

    def test_crash(self):
        run, summary, games = run_match(*fake("good"), *fake("bad", "--crash-at 4"),
                                        "--nodes", "1", "--games", "2", "--max-plies", "60")
        self.check(run, summary, games, "crash")
        self.assertEqual((summary["wins"], summary["losses"]), (2, 0))
        self.assertEqual(summary["engines"][1]["faults"]["crash"], 2)
        self.assertEqual(summary["restarts"]["bad"], 1)
        self.assertIn("exited with status 3", games[0].headers["TerminationDetails"])
        self.assertEqual(games[0].headers["Termination"], "abandoned")

    def test_illegal_move(self):
        run, summary, games = run_match(*fake("bad", "--illegal-at 2"), *fake("good"),
                                        "--nodes", "1", "--games", "2", "--concurrency", "2")
        self.check(run, summary, games, "illegal move")
        self.assertEqual((summary["wins"], summary["losses"]), (0, 2))
        self.assertEqual(summary["engines"][0]["faults"]["illegal move"], 2)
        self.assertIn("'e1e8'", games[0].headers["TerminationDetails"])
        self.assertIn("its last info string: picked e1e8", games[0].headers["TerminationDetails"])

    def test_watchdog(self):
        run, summary, games = run_match(*fake("good"), *fake("bad", "--hang-at 2"),
                                        "--nodes", "1", "--games", "2", "--move-timeout", "1")
        self.check(run, summary, games, "watchdog timeout")
        self.assertEqual(summary["engines"][1]["faults"]["watchdog timeout"], 2)

    def test_time_forfeit(self):
        run, summary, games = run_match(*fake("good"), *fake("bad", "--sleep 0.15"),
                                        "--tc", "0.5+0", "--games", "2")
        self.check(run, summary, games, "time forfeit")
        self.assertEqual(summary["engines"][1]["faults"]["time forfeit"], 2)
        self.assertEqual(games[0].headers["TimeControl"], "0.5+0")
        self.assertIn("[%clk", games[0].end().comment)

    def test_max_plies_and_resign_adjudication(self):
        run, summary, games = run_match(*fake("good"), *fake("other"), "--nodes", "1",
                                        "--games", "2", "--max-plies", "16")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(summary["max_plies_games"], 2)
        self.assertEqual(summary["draws"], 2)
        self.assertTrue(all(g.end().board().ply() == 16 for g in games))
        run, summary, games = run_match(*fake("good", "--score 500"), *fake("bad", "--score -500"),
                                        "--nodes", "1", "--games", "2",
                                        "--resign-adjudication", "3", "400")
        self.check(run, summary, games, "resign adjudication")

    def test_an_engine_that_cannot_start_stops_the_match(self):
        run, summary, _ = run_match("--engine", "cmd=/nonexistent/engine", *fake("good"),
                                    "--nodes", "1", "--games", "2")
        self.assertEqual(run.returncode, 3)
        self.assertIn("did not start", run.stderr)


@unittest.skipUnless(os.environ.get("LC0RS"),
                     "LC0RS is not set (the lc0rs binary to play a real match with)")
class RealMatch(unittest.TestCase):
    def test_lc0rs_against_itself(self):
        lc0rs = os.environ["LC0RS"]
        cmd = "cmd=" + shlex.join([lc0rs, "uci", "-w", TINY_NET, "-b", "cpu"])
        run, summary, games = run_match(
            "--engine", "name=lc0rs", cmd, "option.Threads=1",
            "--engine", "name=lc0rs-b", cmd, "option.Threads=1",
            "--nodes", "20", "--games", "2", "--concurrency", "2", timeout=300)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        print("\n" + run.stdout.strip(), file=sys.stderr)

        self.assertEqual(summary["wins"] + summary["draws"] + summary["losses"], 2)
        self.assertEqual(summary["games_played"], 2)
        self.assertEqual(sum(summary["pairs"]["counts"]), 1)
        self.assertIsNotNone(summary["trinomial"])
        for engine in summary["engines"]:
            self.assertEqual(sum(engine["faults"].values()), 0, engine)

        self.assertEqual(len(games), 2)
        first, second = games
        self.assertEqual((first.headers["White"], first.headers["Black"]), ("lc0rs", "lc0rs-b"))
        self.assertEqual((second.headers["White"], second.headers["Black"]), ("lc0rs-b", "lc0rs"))
        self.assertEqual(first.headers["Opening"], second.headers["Opening"])
        for game in games:
            h = game.headers
            self.assertEqual(game.errors, [])
            self.assertIn(h["Result"], ("1-0", "0-1", "1/2-1/2"))
            self.assertEqual(h["WhiteLimit"], "nodes 20")
            self.assertEqual(h["WhiteOptions"], "Threads=1")
            self.assertIn("-b cpu", h["WhiteCommand"])
            board = game.end().board()
            self.assertEqual(int(h["PlyCount"]), board.ply())
            kind = h["TerminationDetails"].split(":")[0]
            if kind == "checkmate":
                self.assertTrue(board.is_checkmate())
                self.assertEqual(h["Result"], "0-1" if board.turn == chess.WHITE else "1-0")
            elif kind == "max plies":
                self.assertEqual(h["Result"], "1/2-1/2")
            else:
                self.assertEqual(h["Result"], "1/2-1/2")
                self.assertIn(kind, ("stalemate", "insufficient material", "fifty-move rule",
                                     "threefold repetition"))
                self.assertTrue(board.is_game_over(claim_draw=True))
            # Every engine move is commented with the engine's own report.
            engine_moves = 0
            for node in game.mainline():
                if node.comment == "book":
                    continue
                engine_moves += 1
                for field in ("depth=", "seldepth=", "nodes=", "score=", "time=", "wall="):
                    self.assertIn(field, node.comment, f"{node.move}: {node.comment}")
                nodes = int(re.search(r"nodes=(\d+)", node.comment).group(1))
                self.assertLessEqual(nodes, 21, node.comment)
            self.assertGreater(engine_moves, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
