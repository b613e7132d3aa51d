"""Leela Chess Zero networks from Python, on lc0rs' backends.

    import chess, lc0rs
    net = lc0rs.Net(backend="cpu")              # the bundled tiny net; or a .pb.gz path
    board = chess.Board(); board.push_san("e4")
    result = net.evaluate([board, "8/8/8/8/8/8/8/K1k5 w - - 0 1"])
    result.q, result.wdl, result.policy_logits  # NumPy arrays, one row per position
    result.policy[0]                            # {"e7e5": 0.21, ...} for the first board

Evaluation runs with the GIL released; errors raise :class:`Lc0rsError` with the library's
message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np

from ._native import (
    DEFAULT_POLICY_TEMPERATURE,
    INPUT_PLANES,
    POLICY_SIZE,
    Lc0rsError,
)
from ._native import Net as _NativeNet

__all__ = [
    "DEFAULT_POLICY_TEMPERATURE",
    "INPUT_PLANES",
    "POLICY_SIZE",
    "Evaluation",
    "Lc0rsError",
    "Net",
]


@dataclass
class Evaluation:
    """The outputs of a batch, one row per position."""

    q: np.ndarray  # (n,) W - L for the side to move
    d: np.ndarray  # (n,) draw probability (0 without a WDL head)
    m: np.ndarray  # (n,) moves left in plies (0 without a moves-left head)
    wdl: np.ndarray  # (n, 3) win, draw, loss
    policy_logits: np.ndarray  # (n, 1858) raw logits by lc0's policy index
    # Per position, each legal move (UCI, castling as e1g1) with its probability; empty
    # dicts for positions given as planes.
    policy: List[Dict[str, float]]

    def __len__(self) -> int:
        return len(self.q)


def _array(data: bytes, shape: Tuple[int, ...]) -> np.ndarray:
    return np.frombuffer(data, dtype="<f4").reshape(shape).copy()


def _evaluation(raw: Any) -> Evaluation:
    q, d, m, wdl, policy, moves = raw
    n = len(q) // 4
    return Evaluation(
        q=_array(q, (n,)),
        d=_array(d, (n,)),
        m=_array(m, (n,)),
        wdl=_array(wdl, (n, 3)),
        policy_logits=_array(policy, (n, POLICY_SIZE)),
        policy=[dict(pairs) for pairs in moves],
    )


def _position(item: Any) -> Tuple[Optional[str], List[str]]:
    """(FEN or None, moves) of a python-chess Board, a FEN, a UCI position string
    ("startpos moves e2e4", "fen FEN moves ..."), or a (fen, moves) pair."""
    if isinstance(item, tuple):
        fen, moves = item
        return fen, [str(m) for m in moves]
    if isinstance(item, str):
        text = item.strip()
        if text == "startpos" or text.startswith(("startpos ", "fen ")):
            start, _, moves = text.partition(" moves")
            fen = None if start.strip() == "startpos" else start[len("fen ") :].strip()
            return fen, moves.split()
        return text, []
    # A python-chess Board: its starting position and the moves played since.
    root = getattr(item, "root", None)
    move_stack = getattr(item, "move_stack", None)
    if root is None or move_stack is None:
        raise TypeError(
            f"a position is a chess.Board, a FEN or UCI position string, or a (fen, moves) pair, not {type(item).__name__}"
        )
    return root().fen(), [m.uci() for m in move_stack]


class Net:
    """A network on a backend.

    ``weights``: a weights file (.pb.gz or .pb), ``bundled:tiny``, ``bundled:tiny-dense`` or
    ``preset:NAME``; None is the bundled tiny net. ``backend``: ``cpu``, ``cuda-fp16``,
    ``rocm-fp16``, ``hip-emu``, ...; None is the best this machine runs. ``options``: the
    backend's options as the command line's ``-o`` (``"threads=2,max_batch=64"``).
    """

    def __init__(
        self,
        weights: Optional[str] = None,
        backend: Optional[str] = None,
        options: Optional[str] = None,
    ) -> None:
        self._net = _NativeNet(weights, backend, options)

    backend = property(lambda self: self._net.backend, doc="The backend's name.")
    input_format = property(
        lambda self: self._net.input_format, doc="lc0's input format id."
    )
    has_wdl = property(lambda self: self._net.has_wdl)
    has_moves_left = property(lambda self: self._net.has_moves_left)
    max_batch = property(lambda self: self._net.max_batch)

    def evaluate(
        self,
        positions: Iterable[Any],
        temperature: float = DEFAULT_POLICY_TEMPERATURE,
        history_fill: str = "fen_only",
    ) -> Evaluation:
        """Evaluates positions: python-chess Boards (their move stacks are the history),
        FENs, UCI position strings or (fen, moves) pairs. Batches larger than the backend's
        maximum run in several passes."""
        items = [_position(p) for p in positions]
        return _evaluation(
            self._net.evaluate_positions(items, float(temperature), history_fill)
        )

    def encode(
        self, positions: Iterable[Any], history_fill: str = "fen_only"
    ) -> Tuple[np.ndarray, np.ndarray]:
        """The input planes of positions (as for :meth:`evaluate`) in the net's input
        format: (n, 112) uint64 masks and (n, 112) float32 values."""
        items = [_position(p) for p in positions]
        masks, values = self._net.encode_positions(items, history_fill)
        n = len(items)
        return (
            np.frombuffer(masks, dtype="<u8").reshape((n, INPUT_PLANES)).copy(),
            np.frombuffer(values, dtype="<f4").reshape((n, INPUT_PLANES)).copy(),
        )

    def evaluate_planes(self, masks: Any, values: Any) -> Evaluation:
        """Evaluates lc0 input planes: ``masks`` (n, 112) integers (bit s: square s, a1 = 0)
        and ``values`` (n, 112) floats, encoded in the net's input format."""
        masks = np.ascontiguousarray(masks, dtype="<u8")
        values = np.ascontiguousarray(values, dtype="<f4")
        if masks.ndim != 2 or masks.shape[1] != INPUT_PLANES or values.shape != masks.shape:
            raise ValueError(
                f"planes must be (n, {INPUT_PLANES}) masks and values, not {masks.shape} and {values.shape}"
            )
        return _evaluation(
            self._net.evaluate_planes(masks.tobytes(), values.tobytes())
        )
