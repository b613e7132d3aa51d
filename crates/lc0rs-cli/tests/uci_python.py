"""lc0rs as python-chess drives a UCI engine: games against itself on a clock with pondering,
MultiPV analyses with WDL, every move legal, every clock kept, every info line understood.

Usage: python3 tests/uci_python.py LC0RS [GAMES]. Run by tests/uci.rs where python-chess is
installed. Exits non-zero with the reason on the first failure.
"""

import logging
import sys
import time

import chess
import chess.engine

START_CLOCK = 1.0  # seconds
INCREMENT = 0.05
MAX_PLIES = 160
ANALYSIS_EVERY = 16


class Problems(logging.Handler):
    """python-chess logs a warning or an error for any engine line it cannot parse."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.seen = []

    def emit(self, record):
        self.seen.append(record.getMessage())


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def check_pv(board, pv, where):
    replay = board.copy()
    for move in pv:
        if move not in replay.legal_moves:
            fail(f"{where}: pv move {move} illegal in {replay.fen()}")
        replay.push(move)


def check_analysis(engine, board):
    infos = engine.analyse(board, chess.engine.Limit(nodes=300), multipv=3)
    expected = min(3, board.legal_moves.count())
    if len(infos) != expected:
        fail(f"{board.fen()}: {len(infos)} MultiPV lines, expected {expected}")
    for i, info in enumerate(infos, start=1):
        for key in ("depth", "seldepth", "time", "nodes", "score", "wdl", "hashfull", "nps",
                    "tbhits", "multipv", "pv"):
            if key not in info:
                fail(f"{board.fen()}: MultiPV line {i} without {key}: {info}")
        if info["multipv"] != i:
            fail(f"{board.fen()}: MultiPV line {i} numbered {info['multipv']}")
        wdl = info["wdl"].white()
        if wdl.wins + wdl.draws + wdl.losses != 1000:
            fail(f"{board.fen()}: wdl {wdl} does not sum to 1000")
        check_pv(board, info["pv"], f"analysis line {i}")


def play_game(engine, game):
    board = chess.Board()
    clocks = {chess.WHITE: START_CLOCK, chess.BLACK: START_CLOCK}
    while not board.is_game_over(claim_draw=True) and board.ply() < MAX_PLIES:
        if board.ply() % ANALYSIS_EVERY == 0:
            check_analysis(engine, board)
        limit = chess.engine.Limit(
            white_clock=clocks[chess.WHITE],
            black_clock=clocks[chess.BLACK],
            white_inc=INCREMENT,
            black_inc=INCREMENT,
        )
        asked = time.monotonic()
        result = engine.play(board, limit, ponder=True, info=chess.engine.INFO_ALL)
        took = time.monotonic() - asked
        clocks[board.turn] -= took
        if clocks[board.turn] <= 0:
            fail(f"game {game}, ply {board.ply()}: lost on time ({took:.3f} s)")
        clocks[board.turn] += INCREMENT
        if result.move not in board.legal_moves:
            fail(f"game {game}, ply {board.ply()}: illegal move {result.move}")
        if "pv" in result.info:
            check_pv(board, result.info["pv"], f"game {game}, ply {board.ply()}")
        board.push(result.move)
    print(f"game {game}: {board.ply()} plies, {board.result(claim_draw=True)}, "
          f"clocks {clocks[chess.WHITE]:.2f} / {clocks[chess.BLACK]:.2f} s")


def main():
    binary = sys.argv[1]
    games = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    problems = Problems()
    logger = logging.getLogger("chess.engine")
    logger.addHandler(problems)
    logger.setLevel(logging.WARNING)
    engine = chess.engine.SimpleEngine.popen_uci([binary, "uci", "-b", "cpu"], timeout=60)
    try:
        engine.configure({"UCI_ShowWDL": True})
        for game in range(1, games + 1):
            play_game(engine, game)
    finally:
        engine.quit()
    if problems.seen:
        fail("python-chess could not parse: " + "; ".join(problems.seen[:5]))
    print("OK")


if __name__ == "__main__":
    main()
