#!/usr/bin/env python3
"""Plays one UCI engine against another and reports the result with Elo statistics.

Run with --help for everything. Needs Python 3.11+ and python-chess (`pip install chess`).
"""

import argparse
import datetime
import io
import json
import os
import queue
import random
import re
import shlex
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import chess  # noqa: E402
import chess.pgn  # noqa: E402

import openings as openings_mod  # noqa: E402
import stats  # noqa: E402
from engine import Engine, EngineError, EngineSpec  # noqa: E402

DESCRIPTION = """\
Plays a match between two UCI engines and reports W/D/L from the first engine's point of view,
the score, Elo with 95 % intervals (per game and per game pair) and the likelihood of
superiority. Every opening is played twice, once with either engine as White.
"""

EPILOG = """\
engines:
  --engine KEY=VALUE ...   once per engine, exactly two; the first is the one the results are
                           reported for. Keys:
      name=NAME            name in the PGN and the report (default: the program's file name;
                           equal names get a suffix)
      cmd="PROGRAM ARGS"   the command line, split as a POSIX shell would (shlex)
      dir=PATH             working directory of the process
      option.NAME=VALUE    a UCI option, sent as `setoption name NAME value VALUE` after `uci`;
                           repeatable; an option the engine does not declare is warned about
      nodes=N              this engine's node limit (overrides --nodes)
      tc=BASE+INC          this engine's clock (overrides --tc); time odds
  --each KEY=VALUE ...     the same keys, applied to both engines (an engine's own win)

limits (one kind for both engines):
  --nodes N                every move is `go nodes N` (lc0 and lc0rs may still stop a search
                           early by smart pruning: option.SmartPruningFactor=0 turns it off)
  --tc BASE+INC            a clock in seconds, e.g. 60+0.6 or 1+0.1; every move is
                           `go wtime W btime B winc WI binc BI` (milliseconds) from the clocks the
                           runner keeps: the time from writing `go` to reading `bestmove` is
                           taken off the mover's clock, then the increment is added. A clock
                           below -(time margin) loses on time, unless the opponent has no mating
                           material (then a draw, as FIDE rules have it).

openings:
  The default book is scripts/match/openings.txt (%(count)s lines of `ECO | name | SAN moves`).
  --openings FILE reads another: a .pgn file (each game's main line, FEN header allowed) or a
  text file with one opening a line, either in that format, or as bare moves (SAN or UCI, move
  numbers allowed), or as a FEN/EPD position. Games 2i+1 and 2i+2 play opening i (in file order,
  or shuffled by --seed), the first engine White in the first of them; openings wrap around
  when the match has more games than twice the book.

game end:
  By the rules: checkmate, stalemate, insufficient material (python-chess's definition),
  threefold repetition and the fifty-move rule (both applied as soon as they can be claimed).
  --max-plies N ends a game at N plies (opening included) as a draw; the report counts them.
  --draw-adjudication MOVES CP: a draw once both engines' scores have stayed within +-CP
    centipawns for MOVES consecutive moves each (2*MOVES plies), counting from full move
    --draw-adjudication-start (default 40; opening included); a capture or a pawn move
    restarts the count (cutechess-cli's rule).
  --resign-adjudication MOVES CP: a loss for an engine whose own score has been at or below
    -CP for MOVES consecutive moves of its own (a mate against it counts);
    --resign-two-sided also requires the opponent's score at or above +CP for its last MOVES
    moves. Both are off by default. A move without a score restarts the counts.

failures:
  An engine that crashes, answers an illegal move (or none), or does not answer in time loses
  the game, with the reason in the PGN's Termination/TerminationDetails headers and the report,
  and is restarted for its next game. The watchdog: with --nodes a move may take at most
  --move-timeout seconds; with --tc the engine's clock plus the time margin. `uci`/`isready`
  at start and after `ucinewgame` have --init-timeout seconds. If an engine cannot be started
  three times in a row, the match stops and reports what it has.

concurrency:
  --concurrency K plays K games at once. Each of the K game slots owns one process of each
  engine for the whole match and reuses it from game to game with `ucinewgame`, so no process
  ever serves two games at once; mind that K searching engines share the machine's cores (and
  GPUs): set each engine's threads accordingly (e.g. option.Threads=).

output:
  One line per game as it ends, then a summary. --pgn FILE writes every game (in game order)
  with headers for the engines, their options and limits, the opening, the result and how it
  ended, and a comment on every engine move taken from the last `info` line of the first PV
  the engine sent before `bestmove`:
      {depth=12 seldepth=25 nodes=801 score=cp:35 time=412ms wall=431ms [%%clk 0:00:58.21]}
  (score=mate:N for mates; wdl=W/D/L when the engine sends it; wall is the runner's measure of
  the move, clk the clock left under --tc; book moves say "book").
  --json FILE writes the summary, the settings and every game's result as JSON.

statistics:
  score  = (W + D/2) / N;   Elo(s) = -400 log10(1/s - 1)
  trinomial (per game): var = [W (1-mu)^2 + D (1/2-mu)^2 + L mu^2] / N, se = sqrt(var/N)
  pentanomial (per pair): the five pair results 0, 1/2, 1, 3/2, 2 points of 2 (x = 0, 1/4,
    1/2, 3/4, 1 per game) with frequencies p_i: mu = sum p_i x_i, var = sum p_i (x_i-mu)^2,
    se = sqrt(var/P) over P complete pairs
  95 %% interval: Elo(mu -/+ 1.959964 se). The pentanomial one accounts for the two games of a
  pair sharing an opening and is the one to trust here; the trinomial one is the classic
  (cutechess-cli) figure. LOS = 1/2 [1 + erf((W-L) / sqrt(2(W+L)))]; the pentanomial LOS is
  Phi((mu - 1/2)/se).

gate and exit status:
  --fail-below ELO exits with status 1 if the pentanomial interval lies entirely below ELO (the
  first engine is, at 95 %%, weaker than that); --fail-on-errors exits with 1 if any engine
  crashed, timed out on the watchdog or sent an illegal move. Status 2: bad arguments; 3: the
  match could not go on (an engine would not start); 130: interrupted (Ctrl-C; the summary
  covers the games finished).

example:
  python3 scripts/match/match.py \\
      --engine name=lc0rs cmd="target/release/lc0rs uci -w net.pb.gz -b cuda-fp16" \\
      --engine name=lc0 cmd="lc0 --weights=net.pb.gz --backend=cuda-fp16" \\
      --each option.Threads=2 --nodes 800 --games 256 --concurrency 4 \\
      --pgn match.pgn --json match.json
"""

RESULT_POINTS = {"1-0": (1.0, 0.0), "0-1": (0.0, 1.0), "1/2-1/2": (0.5, 0.5)}
TC_PATTERN = re.compile(r"^(\d+(?:\.\d*)?)(?:\+(\d+(?:\.\d*)?))?$")
MATE_SCORE = 100000

# Kinds of game end, as counted in the report, and the PGN Termination they map to.
TERMINATIONS = {
    "checkmate": "normal",
    "stalemate": "normal",
    "insufficient material": "normal",
    "fifty-move rule": "normal",
    "threefold repetition": "normal",
    "draw adjudication": "adjudication",
    "resign adjudication": "adjudication",
    "max plies": "adjudication",
    "time forfeit": "time forfeit",
    "time forfeit, no mating material": "time forfeit",
    "illegal move": "rules infraction",
    "crash": "abandoned",
    "watchdog timeout": "stalled connection",
}
ENGINE_FAULTS = ("illegal move", "crash", "watchdog timeout")


# Command line ---------------------------------------------------------------------------------


def parse_tc(text):
    m = TC_PATTERN.match(text.strip())
    if not m:
        raise ValueError(f"time control {text!r}: expected BASE+INC in seconds, e.g. 60+0.6")
    base = float(m.group(1))
    inc = float(m.group(2)) if m.group(2) else 0.0
    if base <= 0:
        raise ValueError(f"time control {text!r}: the base time must be positive")
    return base, inc


def tc_text(tc):
    def num(x):
        return f"{x:g}"

    return f"{num(tc[0])}+{num(tc[1])}"


def parse_engine_keys(tokens, what):
    """KEY=VALUE tokens into a dict; options as a list under "options"."""
    out = {"options": []}
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep:
            raise ValueError(f"{what}: {token!r} is not KEY=VALUE")
        if key.startswith("option."):
            name = key[len("option."):]
            if not name:
                raise ValueError(f"{what}: {token!r}: option name missing")
            out["options"].append((name, value))
        elif key in ("name", "cmd", "dir"):
            out[key] = value
        elif key == "nodes":
            try:
                out["nodes"] = int(value)
            except ValueError:
                raise ValueError(f"{what}: nodes={value!r} is not a number") from None
            if out["nodes"] <= 0:
                raise ValueError(f"{what}: nodes must be positive")
        elif key == "tc":
            out["tc"] = parse_tc(value)
        else:
            raise ValueError(f"{what}: unknown key {key!r} "
                             "(name, cmd, dir, option.NAME, nodes, tc)")
    return out


def build_specs(args):
    each = parse_engine_keys(sum(args.each or [], []), "--each")
    if "name" in each or "cmd" in each:
        raise ValueError("--each: name and cmd are per engine")
    specs = []
    for n, tokens in enumerate(args.engine or [], 1):
        own = parse_engine_keys(tokens, f"--engine #{n}")
        if "cmd" not in own:
            raise ValueError(f"--engine #{n}: cmd=... is required")
        cmd = shlex.split(own["cmd"])
        if not cmd:
            raise ValueError(f"--engine #{n}: empty cmd")
        # Options of --each first, the engine's own after them (the later setoption wins).
        own_names = {k.lower() for k, _ in own["options"]}
        options = [(k, v) for k, v in each["options"] if k.lower() not in own_names]
        options += own["options"]
        name = own.get("name") or os.path.basename(cmd[0])
        # The engine's own limit, else --each's, else the global one; nodes= replaces a tc
        # and the other way round.
        for keys in (own, each, {"nodes": args.nodes, "tc": args.tc}):
            if keys.get("nodes") is not None or keys.get("tc") is not None:
                nodes, tc = keys.get("nodes"), keys.get("tc")
                break
        else:
            raise ValueError(f"{name}: no limit: give --nodes or --tc (or nodes=/tc=)")
        if nodes is not None and tc is not None:
            raise ValueError(f"{name}: nodes= and tc= both given; one of them")
        specs.append(EngineSpec(name, cmd, options, own.get("dir", each.get("dir")), nodes, tc))
    if len(specs) != 2:
        raise ValueError(f"exactly two --engine are needed, {len(specs)} given")
    if specs[0].name == specs[1].name:
        specs[1].name += "-2"
    if (specs[0].tc is None) != (specs[1].tc is None):
        raise ValueError("both engines must play on nodes, or both on a clock")
    return specs


def build_parser(book_size="128+"):
    p = argparse.ArgumentParser(
        prog="match.py",
        description=DESCRIPTION,
        epilog=EPILOG % {"count": book_size},
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--engine", action="append", nargs="+", metavar="KEY=VALUE",
                   help="an engine: name=, cmd=, dir=, option.NAME=, nodes=, tc= (see below); "
                        "give it twice")
    p.add_argument("--each", action="append", nargs="+", metavar="KEY=VALUE",
                   help="keys applied to both engines")
    limit = p.add_mutually_exclusive_group()
    limit.add_argument("--nodes", type=int, metavar="N", help="go nodes N for every move")
    limit.add_argument("--tc", type=parse_tc, metavar="BASE+INC",
                       help="clock in seconds, e.g. 1+0.1")
    p.add_argument("--games", type=int, required=True, metavar="N",
                   help="number of games, even (pairs of games on one opening)")
    p.add_argument("--openings", metavar="FILE", default=openings_mod.DEFAULT_FILE,
                   help="opening book (.pgn, or text: ECO | name | moves, bare moves, FEN/EPD); "
                        "default: scripts/match/openings.txt")
    p.add_argument("--seed", type=int, metavar="S",
                   help="shuffle the book's order with this seed (default: file order)")
    p.add_argument("--concurrency", type=int, default=1, metavar="K",
                   help="games played at once (default 1)")
    p.add_argument("--pgn", metavar="FILE", help="write every game here")
    p.add_argument("--json", metavar="FILE", help="write the summary and every result here")
    p.add_argument("--event", default="lc0rs match", help="the PGN Event header")
    p.add_argument("--max-plies", type=int, default=400, metavar="N",
                   help="a draw at N plies, opening included (default 400; 0: no cap)")
    p.add_argument("--draw-adjudication", nargs=2, type=int, metavar=("MOVES", "CP"),
                   help="draw after MOVES moves each within +-CP (off by default)")
    p.add_argument("--draw-adjudication-start", type=int, default=40, metavar="MOVE",
                   help="full moves played before draw adjudication may apply (default 40)")
    p.add_argument("--resign-adjudication", nargs=2, type=int, metavar=("MOVES", "CP"),
                   help="loss after MOVES own moves at or below -CP (off by default)")
    p.add_argument("--resign-two-sided", action="store_true",
                   help="resign adjudication needs the winner's score at +CP too")
    p.add_argument("--time-margin", type=int, default=0, metavar="MS",
                   help="--tc: how far a clock may go below zero before it loses (default 0)")
    p.add_argument("--move-timeout", type=float, default=60.0, metavar="S",
                   help="--nodes: seconds a move may take before the engine forfeits "
                        "(default 60)")
    p.add_argument("--init-timeout", type=float, default=120.0, metavar="S",
                   help="seconds for uci/isready at start and after ucinewgame (default 120)")
    p.add_argument("--fail-below", type=float, metavar="ELO",
                   help="exit 1 if the pentanomial 95%% interval lies below ELO")
    p.add_argument("--fail-on-errors", action="store_true",
                   help="exit 1 if any engine crashed, stalled or moved illegally")
    p.add_argument("--uci-log", metavar="FILE", help="write all UCI traffic here")
    p.add_argument("--quiet", action="store_true", help="no line per game")
    return p


def parse_args(argv):
    try:
        size = str(len(openings_mod.load(openings_mod.DEFAULT_FILE)))
    except (OSError, ValueError):
        size = "128+"
    parser = build_parser(size)
    args = parser.parse_args(argv)
    try:
        args.specs = build_specs(args)
    except ValueError as e:
        parser.error(str(e))
    if args.games <= 0 or args.games % 2:
        parser.error("--games must be a positive even number (games come in pairs)")
    if args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    if args.max_plies < 0:
        parser.error("--max-plies must not be negative")
    for flag in ("draw_adjudication", "resign_adjudication"):
        value = getattr(args, flag)
        if value and (value[0] < 1 or value[1] < 0):
            parser.error(f"--{flag.replace('_', '-')}: MOVES >= 1 and CP >= 0")
    try:
        args.book = openings_mod.load(args.openings)
    except (OSError, ValueError) as e:
        parser.error(f"--openings: {e}")
    if args.seed is not None:
        random.Random(args.seed).shuffle(args.book)
    return args


# One game -------------------------------------------------------------------------------------


def score_value(info):
    """The engine's score in centipawns from its own side, mates as +-(MATE_SCORE - distance),
    or None."""
    score = info.get("score")
    if score is None:
        return None
    kind, value = score
    if kind == "cp":
        return value
    if value > 0:
        return MATE_SCORE - value
    return -MATE_SCORE - value


def move_comment(info, wall):
    parts = []
    for key in ("depth", "seldepth", "nodes"):
        if key in info:
            parts.append(f"{key}={info[key]}")
    if "score" in info:
        parts.append(f"score={info['score'][0]}:{info['score'][1]}")
        if "bound" in info:
            parts.append(f"bound={info['bound']}")
    if "wdl" in info:
        parts.append("wdl=" + "/".join(str(x) for x in info["wdl"]))
    if "time" in info:
        parts.append(f"time={info['time']}ms")
    if not parts:
        parts.append("no info")
    parts.append(f"wall={wall * 1000:.0f}ms")
    return " ".join(parts)


def rules_end(board):
    """(result, kind) if the rules end the game here, else None."""
    if board.is_checkmate():
        return ("0-1" if board.turn == chess.WHITE else "1-0"), "checkmate"
    if board.is_stalemate():
        return "1/2-1/2", "stalemate"
    if board.is_insufficient_material():
        return "1/2-1/2", "insufficient material"
    if board.is_fifty_moves():
        return "1/2-1/2", "fifty-move rule"
    if board.is_repetition(3):
        return "1/2-1/2", "threefold repetition"
    return None


class Adjudicator:
    """cutechess-cli's draw and resign rules, fed one engine move at a time."""

    def __init__(self, args):
        self.draw = args.draw_adjudication
        self.draw_start = args.draw_adjudication_start
        self.resign = args.resign_adjudication
        self.two_sided = args.resign_two_sided
        self.draw_count = 0
        self.low = {chess.WHITE: 0, chess.BLACK: 0}
        self.high = {chess.WHITE: 0, chess.BLACK: 0}

    def after_move(self, board, mover, score):
        """After `mover`'s move (already on `board`) with its score (or None): (result, kind,
        detail) or None."""
        if self.draw:
            moves, cp = self.draw
            inside = score is not None and abs(score) <= cp
            self.draw_count = self.draw_count + 1 if inside else 0
            if board.halfmove_clock == 0:
                self.draw_count = 0
            if (self.draw_count >= 2 * moves
                    and len(board.move_stack) // 2 >= self.draw_start):
                return "1/2-1/2", "draw adjudication", (
                    f"both scores within +-{cp} cp for {moves} moves")
        if self.resign:
            moves, cp = self.resign
            self.low[mover] = self.low[mover] + 1 if score is not None and score <= -cp else 0
            self.high[mover] = self.high[mover] + 1 if score is not None and score >= cp else 0
            for side in (mover, not mover):
                if self.low[side] >= moves and (not self.two_sided or self.high[not side] >= moves):
                    result = "0-1" if side == chess.WHITE else "1-0"
                    return result, "resign adjudication", (
                        f"{'White' if side == chess.WHITE else 'Black'}'s score at or below "
                        f"-{cp} cp for {moves} moves")
        return None


class GameRecord:
    def __init__(self, index, opening, white, black):
        self.index = index
        self.pair = index // 2
        self.opening = opening
        self.white = white  # spec index (0 = the first engine)
        self.black = black
        self.result = None
        self.kind = None
        self.detail = ""
        self.culprit = None  # spec index of the engine that lost by a fault or on time
        self.plies = 0
        self.duration = 0.0
        self.pgn = ""
        self.moves = {0: [], 1: []}  # spec index: [(nodes or None, wall seconds)]

    def points(self, spec_index):
        white_points, black_points = RESULT_POINTS[self.result]
        return white_points if spec_index == self.white else black_points


def position_command(start_fen, moves):
    head = f"position fen {start_fen}" if start_fen else "position startpos"
    if moves:
        return head + " moves " + " ".join(m.uci() for m in moves)
    return head


class Slot:
    """One game at a time: its own process of each engine, reused from game to game."""

    def __init__(self, number, specs, runner):
        self.number = number
        self.runner = runner
        self.engines = [Engine(spec, f"{spec.name}#{number + 1}", runner.log_line)
                        for spec in specs]

    def ready(self, i, timeout):
        """Engine i started (again, if it died or was killed) and told a new game begins."""
        engine = self.engines[i]
        if not engine.alive:
            if engine.proc is not None or self.runner.started[i]:
                self.runner.note(f"restarting {engine.label}")
                self.runner.count_restart(i)
            try:
                engine.start(timeout)
            except EngineError:
                self.runner.start_failed(i, engine)
                raise
            self.runner.start_succeeded(i)
        engine.new_game(timeout)


def play_game(args, slot, index):
    specs = args.specs
    opening = args.book[(index // 2) % len(args.book)]
    white, black = (0, 1) if index % 2 == 0 else (1, 0)
    rec = GameRecord(index, opening, white, black)
    by_colour = {chess.WHITE: white, chess.BLACK: black}
    began = time.monotonic()
    date = datetime.date.today().strftime("%Y.%m.%d")

    board = opening.start_board()
    start_fen = opening.fen
    game = chess.pgn.Game()
    if start_fen:
        game.setup(board)
    node = game
    for move in opening.moves:
        node = node.add_variation(move)
        node.comment = "book"
        board.push(move)

    clocks = {}
    if specs[0].tc:
        clocks = {chess.WHITE: specs[white].tc[0], chess.BLACK: specs[black].tc[0]}
    margin = args.time_margin / 1000.0
    adjudicator = Adjudicator(args)

    def finish(result, kind, detail="", culprit=None):
        rec.result, rec.kind, rec.detail, rec.culprit = result, kind, detail, culprit

    def lose(colour, kind, detail):
        finish("0-1" if colour == chess.WHITE else "1-0", kind, detail, by_colour[colour])

    def time_loss(colour):
        name = specs[by_colour[colour]].name
        if board.has_insufficient_material(not colour):
            finish("1/2-1/2", "time forfeit, no mating material",
                   f"{name} lost on time but the opponent cannot mate", by_colour[colour])
        else:
            lose(colour, "time forfeit", f"{name} lost on time")

    # Both engines ready for a new game; one that fails here loses the game.
    for colour in (chess.WHITE, chess.BLACK):
        i = by_colour[colour]
        try:
            slot.ready(i, args.init_timeout)
        except EngineError as e:
            slot.engines[i].kill()
            kind = "crash" if e.kind == "crash" else "watchdog timeout"
            lose(colour, kind, f"{specs[i].name} before the game: {e.detail}")
            slot.runner.report_failure(slot.engines[i], e)
            break

    while rec.result is None:
        end = rules_end(board)
        if end:
            finish(end[0], end[1])
            break
        if args.max_plies and len(board.move_stack) >= args.max_plies:
            finish("1/2-1/2", "max plies", f"{args.max_plies} plies reached")
            break
        mover = board.turn
        i = by_colour[mover]
        engine = slot.engines[i]
        position = position_command(start_fen, board.move_stack)
        if clocks:
            tc_w, tc_b = specs[by_colour[chess.WHITE]].tc, specs[by_colour[chess.BLACK]].tc
            go = (f"go wtime {max(1, int(clocks[chess.WHITE] * 1000))} "
                  f"btime {max(1, int(clocks[chess.BLACK] * 1000))} "
                  f"winc {int(round(tc_w[1] * 1000))} binc {int(round(tc_b[1] * 1000))}")
            timeout = clocks[mover] + margin
        else:
            go = f"go nodes {specs[i].nodes}"
            timeout = args.move_timeout
        try:
            best, info, took = engine.search(position, go, timeout)
        except EngineError as e:
            engine.kill()
            slot.runner.report_failure(engine, e)
            if e.kind == "timeout" and clocks:
                clocks[mover] -= timeout
                time_loss(mover)
            elif e.kind == "timeout":
                lose(mover, "watchdog timeout",
                     f"{specs[i].name} gave no bestmove within {timeout:g} s")
            else:
                lose(mover, "crash", f"{specs[i].name}: {e.detail}")
            break
        rec.moves[i].append((info.get("nodes"), took))
        if clocks:
            clocks[mover] -= took
            if clocks[mover] < -margin:
                time_loss(mover)
                break
            clocks[mover] += specs[i].tc[1]
        move = None
        try:
            move = chess.Move.from_uci(best) if best else None
        except ValueError:
            pass
        if move is None or move not in board.legal_moves:
            engine.kill()  # in whatever state it is, it starts afresh for its next game
            slot.runner.report_failure(engine, EngineError("illegal move", str(best)))
            said = f" (its last info string: {info['string']})" if "string" in info else ""
            lose(mover, "illegal move", f"{specs[i].name} played {best!r} in {board.fen()}{said}")
            break
        board.push(move)
        node = node.add_variation(move)
        node.comment = move_comment(info, took)
        if clocks:
            node.set_clock(max(0.0, clocks[mover]))
        adjudged = adjudicator.after_move(board, mover, score_value(info))
        if adjudged:
            finish(*adjudged)

    rec.plies = len(board.move_stack)
    rec.duration = time.monotonic() - began

    h = game.headers
    h["Event"] = args.event
    h["Site"] = "?"
    h["Date"] = date
    h["Round"] = str(index + 1)
    h["White"] = specs[white].name
    h["Black"] = specs[black].name
    h["Result"] = rec.result
    if opening.eco:
        h["ECO"] = opening.eco
    if opening.name:
        h["Opening"] = opening.name
    h["TimeControl"] = tc_text(specs[white].tc) if clocks else "-"
    for colour_name, i in (("White", white), ("Black", black)):
        spec = specs[i]
        h[f"{colour_name}Limit"] = (f"tc {tc_text(spec.tc)}" if spec.tc else f"nodes {spec.nodes}")
        h[f"{colour_name}Command"] = shlex.join(spec.cmd)
        if spec.options:
            h[f"{colour_name}Options"] = spec.options_text()
        engine_id = slot.engines[i].id_name
        if engine_id:
            h[f"{colour_name}Engine"] = engine_id
    h["Pair"] = str(index // 2 + 1)
    h["Termination"] = TERMINATIONS[rec.kind]
    h["TerminationDetails"] = rec.kind + (f": {rec.detail}" if rec.detail else "")
    h["PlyCount"] = str(rec.plies)
    h["GameDuration"] = f"{rec.duration:.1f}s"
    out = io.StringIO()
    print(game, file=out, end="\n\n")
    rec.pgn = out.getvalue()
    return rec


# The match ------------------------------------------------------------------------------------


class FatalError(Exception):
    pass


class Runner:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.fatal = None
        self.records = {}
        self.next_pgn = 0
        self.restarts = [0, 0]
        self.failures_in_a_row = [0, 0]
        self.started = [False, False]
        self.log_file = open(args.uci_log, "w", encoding="utf-8") if args.uci_log else None
        self.pgn_file = open(args.pgn, "w", encoding="utf-8") if args.pgn else None
        self.slots = [Slot(k, args.specs, self) for k in range(args.concurrency)]
        self.todo = queue.Queue()
        for index in range(args.games):
            self.todo.put(index)
        self.t0 = time.monotonic()

    # Callbacks from slots and engines (any thread).

    def log_line(self, label, direction, line):
        if self.log_file:
            with self.lock:
                self.log_file.write(f"{time.monotonic() - self.t0:10.3f} {label} {direction} "
                                    f"{line}\n")

    def note(self, text):
        with self.lock:
            print(f"  [{text}]", file=sys.stderr, flush=True)

    def count_restart(self, i):
        with self.lock:
            self.restarts[i] += 1

    def start_failed(self, i, engine):
        with self.lock:
            self.failures_in_a_row[i] += 1
            if self.failures_in_a_row[i] >= 3 and not self.fatal:
                self.fatal = (f"{engine.spec.name} failed to start 3 times in a row; "
                              f"stopping the match")
                self.stop.set()

    def start_succeeded(self, i):
        with self.lock:
            self.failures_in_a_row[i] = 0
            self.started[i] = True

    def report_failure(self, engine, error):
        if self.stop.is_set():
            return
        text = f"{engine.label}: {error.kind}: {error.detail}"
        tail = engine.stderr_text()
        with self.lock:
            print(f"  [{text}]", file=sys.stderr, flush=True)
            if tail and error.kind == "crash":
                print(f"  [last lines of its stderr:]\n{tail}", file=sys.stderr, flush=True)

    # Running.

    def start_all(self):
        """Every slot's engines, started in parallel; FatalError if any cannot start."""
        errors = []

        def start(engine, i):
            try:
                engine.start(self.args.init_timeout)
                self.start_succeeded(i)
            except EngineError as e:
                errors.append((engine, e))

        threads = [threading.Thread(target=start, args=(engine, i), daemon=True)
                   for slot in self.slots for i, engine in enumerate(slot.engines)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            for slot in self.slots:
                for engine in slot.engines:
                    engine.kill()
            engine, e = errors[0]
            tail = engine.stderr_text()
            raise FatalError(f"{engine.spec.name} did not start: {e.detail}"
                             + (f"\n  its stderr:\n{tail}" if tail else ""))
        for i, engine in enumerate(self.slots[0].engines):
            unknown = engine.unknown_options()
            if unknown:
                print(f"warning: {engine.spec.name} does not declare option(s) "
                      f"{', '.join(unknown)}", file=sys.stderr)

    def worker(self, slot):
        while not self.stop.is_set():
            try:
                index = self.todo.get_nowait()
            except queue.Empty:
                return
            try:
                rec = play_game(self.args, slot, index)
            except Exception:  # a bug here must not hang the match
                with self.lock:
                    self.fatal = f"internal error in game {index + 1}:\n{traceback.format_exc()}"
                self.stop.set()
                return
            if self.stop.is_set():
                return  # interrupted: the game was cut short, it does not count
            self.finished(rec)

    def finished(self, rec):
        with self.lock:
            self.records[rec.index] = rec
            while self.pgn_file and self.next_pgn in self.records:
                self.pgn_file.write(self.records[self.next_pgn].pgn)
                self.pgn_file.flush()
                self.next_pgn += 1
            if not self.args.quiet:
                w, d, l_ = wdl(self.records.values())
                specs = self.args.specs
                n = w + d + l_
                print(f"[{len(self.records):>{len(str(self.args.games))}}/{self.args.games}] "
                      f"game {rec.index + 1}: {specs[rec.white].name} - {specs[rec.black].name} "
                      f"{rec.result} ({rec.kind}, {rec.plies} plies, {rec.opening.label()})   "
                      f"{specs[0].name} +{w} ={d} -{l_} [{(w + d / 2) / n:.3f}]", flush=True)

    def run(self):
        self.start_all()
        threads = [threading.Thread(target=self.worker, args=(slot,), daemon=True)
                   for slot in self.slots]
        for t in threads:
            t.start()
        interrupted = False
        try:
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(timeout=0.2)
        except KeyboardInterrupt:
            interrupted = True
            self.stop.set()
            print("\ninterrupted: stopping the engines", file=sys.stderr)
        self.stop.set()
        if interrupted:
            for slot in self.slots:
                for engine in slot.engines:
                    engine.kill()
            for t in threads:
                t.join(timeout=5)
        else:
            closers = [threading.Thread(target=e.quit, daemon=True)
                       for slot in self.slots for e in slot.engines]
            for t in closers:
                t.start()
            for t in closers:
                t.join(timeout=10)
        with self.lock:
            if self.pgn_file:
                # Games after a gap left by an interruption still go out, in order.
                for index in sorted(i for i in self.records if i >= self.next_pgn):
                    self.pgn_file.write(self.records[index].pgn)
                self.pgn_file.close()
            if self.log_file:
                self.log_file.close()
        return interrupted


# Report ---------------------------------------------------------------------------------------


def wdl(records):
    w = d = l_ = 0
    for rec in records:
        p = rec.points(0)
        if p == 1.0:
            w += 1
        elif p == 0.5:
            d += 1
        else:
            l_ += 1
    return w, d, l_


def pair_counts(records):
    """The five pentanomial counts over complete pairs: the first engine's points in the pair
    (0, 1/2, 1, 3/2, 2)."""
    by_index = {rec.index: rec for rec in records}
    counts = [0] * 5
    for rec in records:
        if rec.index % 2 == 0 and rec.index + 1 in by_index:
            points = rec.points(0) + by_index[rec.index + 1].points(0)
            counts[int(round(points * 2))] += 1
    return counts


def summarize(args, records, interrupted, elapsed, restarts):
    specs = args.specs
    records = sorted(records, key=lambda r: r.index)
    w, d, l_ = wdl(records)
    n = w + d + l_
    pairs = pair_counts(records)
    tri = stats.trinomial(w, d, l_)
    penta = stats.pentanomial(pairs)
    kinds = {}
    for rec in records:
        kinds[rec.kind] = kinds.get(rec.kind, 0) + 1
    faults = {spec.name: {k: 0 for k in ENGINE_FAULTS + ("time forfeit",)} for spec in specs}
    for rec in records:
        if rec.culprit is not None:
            kind = "time forfeit" if rec.kind.startswith("time forfeit") else rec.kind
            faults[specs[rec.culprit].name][kind] += 1
    per_engine = []
    for i, spec in enumerate(specs):
        moves = [m for rec in records for m in rec.moves[i]]
        nodes = [m[0] for m in moves if m[0] is not None]
        per_engine.append({
            "name": spec.name,
            "command": spec.cmd,
            "options": dict(spec.options),
            "limit": {"tc": tc_text(spec.tc)} if spec.tc else {"nodes": spec.nodes},
            "moves": len(moves),
            "mean_nodes_per_move": sum(nodes) / len(nodes) if nodes else None,
            "mean_seconds_per_move": sum(m[1] for m in moves) / len(moves) if moves else None,
            "faults": faults[spec.name],
        })
    white_wins = sum(1 for r in records if r.result == "1-0")
    black_wins = sum(1 for r in records if r.result == "0-1")
    gate = None
    if args.fail_below is not None:
        passed = not (penta and penta["elo_high"] < args.fail_below)
        gate = {"fail_below": args.fail_below, "passed": passed}
    if args.fail_on_errors:
        errors = sum(faults[s.name][k] for s in specs for k in ENGINE_FAULTS)
        gate = dict(gate or {}, fail_on_errors=True, engine_errors=errors,
                    passed=(gate or {"passed": True})["passed"] and errors == 0)

    return {
        "engines": per_engine,
        "settings": {
            "games": args.games,
            "concurrency": args.concurrency,
            "nodes": args.nodes,
            "tc": tc_text(args.tc) if args.tc else None,
            "openings": args.openings,
            "openings_count": len(args.book),
            "seed": args.seed,
            "max_plies": args.max_plies,
            "draw_adjudication": (dict(zip(("moves", "cp"), args.draw_adjudication),
                                       start=args.draw_adjudication_start)
                                  if args.draw_adjudication else None),
            "resign_adjudication": (dict(zip(("moves", "cp"), args.resign_adjudication),
                                         two_sided=args.resign_two_sided)
                                    if args.resign_adjudication else None),
            "time_margin_ms": args.time_margin,
            "move_timeout_s": args.move_timeout,
        },
        "interrupted": interrupted,
        "elapsed_s": elapsed,
        "games_played": n,
        "wins": w,
        "draws": d,
        "losses": l_,
        "points": w + d / 2,
        "score": (w + d / 2) / n if n else None,
        "draw_ratio": d / n if n else None,
        "white_wins": white_wins,
        "black_wins": black_wins,
        "trinomial": tri,
        "pentanomial": penta,
        "pairs": {"counts": pairs, "labels": ["0", "0.5", "1", "1.5", "2"],
                  "complete": sum(pairs)},
        "los": stats.los(w, l_),
        "los_pentanomial": penta["los"] if penta else None,
        "terminations": kinds,
        "max_plies_games": kinds.get("max plies", 0),
        "restarts": {spec.name: restarts[i] for i, spec in enumerate(specs)},
        "gate": gate,
        "formulas": {
            "elo": "Elo(s) = -400 * log10(1/s - 1), s the mean score",
            "trinomial": "per game: var = [W(1-mu)^2 + D(1/2-mu)^2 + L mu^2]/N, "
                         "se = sqrt(var/N), 95% = Elo(mu -/+ 1.959964 se)",
            "pentanomial": "per pair of games (same opening, colours reversed): x in "
                           "{0,1/4,1/2,3/4,1}, var = sum p_i (x_i-mu)^2, se = sqrt(var/P), "
                           "95% = Elo(mu -/+ 1.959964 se)",
            "los": "1/2 [1 + erf((W-L)/sqrt(2(W+L)))]; pentanomial: Phi((mu-1/2)/se)",
        },
        "games": [{
            "round": r.index + 1,
            "pair": r.pair + 1,
            "opening": r.opening.label(),
            "white": specs[r.white].name,
            "black": specs[r.black].name,
            "result": r.result,
            "termination": r.kind,
            "detail": r.detail,
            "plies": r.plies,
            "seconds": round(r.duration, 3),
        } for r in records],
    }


def print_summary(s, out=sys.stdout):
    a, b = s["engines"][0]["name"], s["engines"][1]["name"]
    n = s["games_played"]
    p = print
    limits = ", ".join(f"{e['name']} " + " ".join(f"{k} {v}" for k, v in e["limit"].items())
                       for e in s["engines"])
    p("", file=out)
    p(f"=== {a} vs {b}: {n} games ({limits}), {s['settings']['concurrency']} at a time, "
      f"{s['elapsed_s']:.0f} s" + (" - INTERRUPTED" if s["interrupted"] else ""), file=out)
    if n == 0:
        p("no games finished", file=out)
        return
    p(f"Score of {a} vs {b}: +{s['wins']} ={s['draws']} -{s['losses']}  "
      f"{s['points']:g}/{n} = {100 * s['score']:.1f} %   draw ratio {100 * s['draw_ratio']:.1f} %",
      file=out)
    p(f"White wins {s['white_wins']}, black wins {s['black_wins']}, draws {s['draws']}",
      file=out)
    for label, key, unit in (("Elo per game (trinomial):  ", "trinomial", "games"),
                             ("Elo per pair (pentanomial):", "pentanomial", "pairs")):
        m = s[key]
        if not m:
            p(f"{label} no complete {unit}", file=out)
            continue
        p(f"{label} {stats.fmt_elo(m['elo'])} +/- {m['elo_margin']:.1f}  "
          f"95 % [{stats.fmt_elo(m['elo_low'])}, {stats.fmt_elo(m['elo_high'])}]  "
          f"(n={m['n']} {unit}, score {m['score']:.4f}, se {m['stderr']:.4f})", file=out)
    penta = s["pentanomial"]
    if penta and penta["n"] > 1 and penta["stderr"] == 0.0:
        p("  (every pair scored the same, as deterministic engines playing each opening with "
          "both colours do: the pentanomial interval has zero width and says nothing)", file=out)
    pc = s["pairs"]["counts"]
    p(f"Pairs ({a}'s points of 2): 0:{pc[0]}  0.5:{pc[1]}  1:{pc[2]}  1.5:{pc[3]}  2:{pc[4]}",
      file=out)
    los_p = s["los_pentanomial"]
    p(f"LOS: {100 * s['los']:.1f} % (from W/L)"
      + (f", {100 * los_p:.1f} % (pentanomial)" if los_p is not None else ""), file=out)
    p("Game ends: " + ", ".join(f"{k} {v}" for k, v in sorted(s["terminations"].items(),
                                                            key=lambda kv: -kv[1])), file=out)
    p(f"Games capped at max plies ({s['settings']['max_plies']}): {s['max_plies_games']}",
      file=out)
    for e in s["engines"]:
        f = e["faults"]
        mean_nodes = e["mean_nodes_per_move"]
        mean_time = e["mean_seconds_per_move"]
        p(f"{e['name']}: {e['moves']} moves"
          + (f", {mean_nodes:.0f} nodes/move" if mean_nodes is not None else "")
          + (f", {1000 * mean_time:.0f} ms/move" if mean_time is not None else "")
          + f"; time losses {f['time forfeit']}, crashes {f['crash']}, illegal moves "
            f"{f['illegal move']}, watchdog timeouts {f['watchdog timeout']}, "
            f"restarts {s['restarts'][e['name']]}", file=out)
    if s["gate"]:
        g = s["gate"]
        p(f"Gate: {'PASSED' if g['passed'] else 'FAILED'} ({json.dumps(g)})", file=out)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    runner = Runner(args)
    print(f"{args.games} games of {args.specs[0].name} vs {args.specs[1].name}, "
          f"{len(args.book)} openings from {args.openings}, concurrency {args.concurrency}",
          flush=True)
    started = time.monotonic()
    try:
        interrupted = runner.run()
    except FatalError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:  # while the engines were starting
        for slot in runner.slots:
            for engine in slot.engines:
                engine.kill()
        return 130
    summary = summarize(args, runner.records.values(), interrupted, time.monotonic() - started,
                        runner.restarts)
    print_summary(summary)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(stats.json_safe(summary), f, indent=2, allow_nan=False)
            f.write("\n")
    if runner.fatal:
        print(f"error: {runner.fatal}", file=sys.stderr)
        return 3
    if interrupted:
        return 130
    if summary["gate"] and not summary["gate"]["passed"]:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
