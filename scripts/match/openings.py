"""Opening books: the committed openings.txt format, EPD/FEN lines and PGN files."""

import os
import re

import chess
import chess.pgn

DEFAULT_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "openings.txt")

_MOVE_NUMBER = re.compile(r"^\d+\.+")


class Opening:
    def __init__(self, moves, fen=None, eco=None, name=None, source=None):
        self.fen = fen  # None: the initial position
        self.moves = moves  # list of chess.Move from that position
        self.eco = eco
        self.name = name
        self.source = source  # "file:line" for messages

    def start_board(self):
        return chess.Board(self.fen) if self.fen else chess.Board()

    def board(self):
        """The position after the opening moves, with them on the move stack."""
        board = self.start_board()
        for move in self.moves:
            board.push(move)
        return board

    def san(self):
        return self.start_board().variation_san(self.moves) if self.moves else ""

    def label(self):
        parts = [p for p in (self.eco, self.name) if p]
        text = " ".join(parts)
        if self.moves:
            text = f"{text}: {self.san()}" if text else self.san()
        return text or (self.fen or "initial position")


class OpeningError(ValueError):
    pass


def parse_moves(board, text, where):
    """Moves in SAN or UCI, move numbers ("1.", "1...", "12.e4") and a trailing result allowed;
    returns them as chess.Move, pushing them on `board`."""
    moves = []
    for token in text.split():
        token = _MOVE_NUMBER.sub("", token)
        if not token or token in ("1-0", "0-1", "1/2-1/2", "*"):
            continue
        move = None
        try:
            move = board.parse_san(token)
        except ValueError:
            try:
                candidate = chess.Move.from_uci(token)
                if candidate in board.legal_moves:
                    move = candidate
            except ValueError:
                pass
        if move is None:
            raise OpeningError(f"{where}: {token!r} is not a legal move in {board.fen()}")
        board.push(move)
        moves.append(move)
    return moves


def _looks_like_fen(text):
    fields = text.split()
    return len(fields) >= 4 and fields[0].count("/") == 7


def parse_line(line, where):
    """One line of a text book, or None for blank and comment lines. Forms:
        ECO | name | moves          (the committed format)
        moves                       (SAN or UCI, from the initial position)
        FEN or EPD                  (a start position; EPD operations are ignored)"""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    eco = name = fen = None
    if "|" in line:
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != 3:
            raise OpeningError(f"{where}: expected 'ECO | name | moves'")
        eco, name, text = parts
    elif _looks_like_fen(line):
        fields = line.split(";")[0].split()
        # A FEN has six fields; an EPD four, then operations (ignored here).
        if len(fields) >= 6 and fields[4].isdigit() and fields[5].isdigit():
            fen = " ".join(fields[:6])
        else:
            fen = " ".join(fields[:4]) + " 0 1"
        text = ""
    else:
        text = line
    try:
        board = chess.Board(fen) if fen else chess.Board()
    except ValueError as e:
        raise OpeningError(f"{where}: bad FEN: {e}") from e
    if fen and not board.is_valid():
        raise OpeningError(f"{where}: invalid position {fen}")
    moves = parse_moves(board, text, where)
    if board.is_game_over(claim_draw=True):
        raise OpeningError(f"{where}: the opening ends the game")
    return Opening(moves, fen=fen, eco=eco, name=name, source=where)


def load(path):
    """All openings of a file: a .pgn file's games (their main lines), else one a line."""
    openings = []
    if path.lower().endswith(".pgn"):
        with open(path, encoding="utf-8-sig") as f:
            index = 0
            while True:
                game = chess.pgn.read_game(f)
                if game is None:
                    break
                index += 1
                where = f"{path} game {index}"
                if game.errors:
                    raise OpeningError(f"{where}: {game.errors[0]}")
                board = game.board()
                moves = list(game.mainline_moves())
                fen = board.fen() if game.headers.get("FEN") else None
                replay = board.copy()
                for move in moves:
                    replay.push(move)
                if replay.is_game_over(claim_draw=True):
                    raise OpeningError(f"{where}: the opening ends the game")
                openings.append(Opening(moves, fen=fen, eco=game.headers.get("ECO"),
                                        name=game.headers.get("Opening"), source=where))
    else:
        with open(path, encoding="utf-8-sig") as f:
            for number, line in enumerate(f, 1):
                opening = parse_line(line, f"{path}:{number}")
                if opening is not None:
                    openings.append(opening)
    if not openings:
        raise OpeningError(f"{path}: no openings")
    return openings
