"""The Python package against the command line's `lc0rs eval --json` (an independent path
through the same library: its own parsing, batching and softmax) on the bundled tiny net.

The binary is $LC0RS_BIN, else target/debug/lc0rs of the checkout (`cargo build`).
"""

import json
import os
import subprocess
import threading
from pathlib import Path

import chess
import numpy as np
import pytest

import lc0rs

ROOT = Path(__file__).resolve().parents[3]
SPECS = [
    "startpos",
    "startpos moves e2e4 e7e5 g1f3 b8c6 f1b5 a7a6",
    "fen r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1 moves e1g1",
    "fen 8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1 moves e2e4",
    "fen 4k3/8/8/8/8/8/8/4K2R w K - 0 1",
]


def lc0rs_bin() -> Path:
    path = Path(os.environ.get("LC0RS_BIN", ROOT / "target" / "debug" / "lc0rs"))
    if not path.exists():
        pytest.fail(f"no lc0rs binary at {path}: build it (cargo build) or set LC0RS_BIN")
    return path


def cli_eval(specs, backend="cpu"):
    args = [str(lc0rs_bin()), "eval", "-b", backend, "--json"]
    for spec in specs:
        args += ["--position", spec]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


@pytest.fixture(scope="module")
def net():
    return lc0rs.Net(backend="cpu", options="threads=1")


def test_outputs_match_the_command_line(net):
    want = cli_eval(SPECS)
    got = net.evaluate(SPECS)
    assert len(got) == len(SPECS)
    assert got.policy_logits.shape == (len(SPECS), lc0rs.POLICY_SIZE)
    for i, w in enumerate(want):
        assert got.q[i] == pytest.approx(w["q"], abs=1e-6)
        assert got.d[i] == pytest.approx(w["d"], abs=1e-6)
        assert got.m[i] == pytest.approx(w["m"], abs=1e-5)
        np.testing.assert_allclose(got.wdl[i], w["wdl"], atol=1e-6)
        assert set(got.policy[i]) == set(w["policy"]), SPECS[i]
        for move, p in w["policy"].items():
            assert got.policy[i][move] == pytest.approx(p, abs=1e-6)
        assert sum(got.policy[i].values()) == pytest.approx(1.0, abs=1e-5)


def test_boards_with_history_are_their_moves(net):
    board = chess.Board()
    for san in ["e4", "e5", "Nf3", "Nc6", "Bb5", "a6"]:
        board.push_san(san)
    by_board = net.evaluate([board])
    by_spec = net.evaluate([SPECS[1]])
    np.testing.assert_array_equal(by_board.policy_logits, by_spec.policy_logits)
    assert by_board.policy == by_spec.policy
    # The same position without its history is a different input.
    no_history = net.evaluate([board.fen()])
    assert not np.array_equal(no_history.policy_logits, by_board.policy_logits)
    # Every legal move of the board has a probability, and nothing else does.
    assert set(by_board.policy[0]) == {m.uci() for m in board.legal_moves}


def test_planes_evaluate_as_their_positions(net):
    masks, values = net.encode(SPECS)
    assert masks.shape == (len(SPECS), lc0rs.INPUT_PLANES) and masks.dtype == np.uint64
    # The start position by hand: our pawns on rank 2, theirs on rank 7, our king on e1.
    assert masks[0][0] == 0x000000000000FF00
    assert masks[0][6] == 0x00FF000000000000
    assert masks[0][5] == 1 << 4
    by_planes = net.evaluate_planes(masks, values)
    by_fen = net.evaluate(SPECS)
    np.testing.assert_allclose(by_planes.policy_logits, by_fen.policy_logits, atol=1e-6)
    np.testing.assert_allclose(by_planes.q, by_fen.q, atol=1e-6)
    assert by_planes.policy == [{} for _ in SPECS]


def test_batches_beyond_the_backend_maximum():
    small = lc0rs.Net(backend="cpu", options="max_batch=2")
    assert small.max_batch == 2
    got = small.evaluate(SPECS)
    want = cli_eval(SPECS)
    np.testing.assert_allclose(got.q, [w["q"] for w in want], atol=1e-6)


def test_errors_carry_the_library_message(net):
    with pytest.raises(lc0rs.Lc0rsError, match="FEN"):
        net.evaluate(["not a fen"])
    with pytest.raises(lc0rs.Lc0rsError, match="position 1: bad move \"e1e3\""):
        net.evaluate(["startpos", "startpos moves e2e4 e7e5 e1e3"])
    with pytest.raises(lc0rs.Lc0rsError, match="available: cpu"):
        lc0rs.Net(backend="no-such-backend")
    with pytest.raises(lc0rs.Lc0rsError, match="bogus"):
        lc0rs.Net(backend="cpu", options="bogus=1")
    with pytest.raises(lc0rs.Lc0rsError, match="/nonexistent/net.pb.gz"):
        lc0rs.Net("/nonexistent/net.pb.gz", backend="cpu")
    with pytest.raises(lc0rs.Lc0rsError, match="temperature"):
        net.evaluate(SPECS, temperature=0)
    with pytest.raises(ValueError):
        net.evaluate_planes(np.zeros((2, 3)), np.zeros((2, 3)))
    with pytest.raises(TypeError):
        net.evaluate([42])


def test_the_gil_is_released_while_computing(net):
    positions = SPECS * 80
    counter = [0]
    running = threading.Event()
    stop = threading.Event()

    def count():
        running.set()
        while not stop.is_set():
            counter[0] += 1

    thread = threading.Thread(target=count)
    thread.start()
    running.wait()
    items = [lc0rs._position(p) for p in positions]
    before = counter[0]
    net._net.evaluate_positions(items, 1.0)
    during = counter[0] - before
    stop.set()
    thread.join()
    # With the GIL held for the whole call the counting thread could not run at all.
    assert during > 1000, during


HIP_CPU = os.environ.get("LC0RS_HIP_CPU")


@pytest.mark.skipif(
    not HIP_CPU or not Path(HIP_CPU).is_dir(), reason="LC0RS_HIP_CPU names no HIP-CPU checkout"
)
def test_hip_emu_matches_cpu(net):
    emu = lc0rs.Net(backend="hip-emu")
    got = emu.evaluate(SPECS)
    want = net.evaluate(SPECS)
    # fp16 storage: the tolerances of selftest's tiny-net comparison.
    np.testing.assert_allclose(got.q, want.q, atol=0.02)
    np.testing.assert_allclose(got.policy_logits, want.policy_logits, atol=0.05)
