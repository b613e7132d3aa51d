"""One UCI engine process, driven line by line with a deadline on every wait.

A reader thread timestamps each line the engine writes as it arrives, so that the time a search
took is measured from writing `go` to the arrival of `bestmove`, not to whenever the game's thread
got round to it. Nothing here ever waits without a deadline.
"""

import collections
import os
import queue
import signal
import subprocess
import threading
import time

EOF = None  # what the reader thread queues when the engine's stdout closes


class EngineError(Exception):
    """The engine failed: `kind` is "crash" or "timeout", `detail` says what happened."""

    def __init__(self, kind, detail):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


class EngineSpec:
    """What the command line says about one engine."""

    def __init__(self, name, cmd, options, workdir=None, nodes=None, tc=None):
        self.name = name
        self.cmd = cmd  # argv list
        self.options = options  # list of (name, value), in the order given
        self.workdir = workdir
        self.nodes = nodes
        self.tc = tc  # (base seconds, increment seconds) or None

    def options_text(self):
        return ", ".join(f"{k}={v}" for k, v in self.options)


def parse_info(line):
    """The fields of a UCI `info` line that the PGN and adjudication use, or None for lines that
    carry none (`info string`, lines of MultiPV lines other than the first)."""
    tokens = line.split()
    if len(tokens) < 2 or tokens[1] == "string":
        return None
    out = {}
    i = 1
    while i < len(tokens):
        key = tokens[i]
        if key in ("depth", "seldepth", "time", "nodes", "nps", "multipv", "hashfull", "tbhits"):
            if i + 1 < len(tokens):
                try:
                    out[key] = int(tokens[i + 1])
                except ValueError:
                    pass
            i += 2
        elif key == "score":
            j = i + 1
            while j + 1 < len(tokens) and tokens[j] in ("cp", "mate"):
                try:
                    out["score"] = (tokens[j], int(tokens[j + 1]))
                except ValueError:
                    break
                j += 2
            if j < len(tokens) and tokens[j] in ("lowerbound", "upperbound"):
                out["bound"] = tokens[j]
                j += 1
            i = j
        elif key == "wdl":
            if i + 3 < len(tokens):
                try:
                    out["wdl"] = tuple(int(t) for t in tokens[i + 1:i + 4])
                except ValueError:
                    pass
            i += 4
        elif key == "pv":
            out["pv"] = tokens[i + 1:]
            break
        elif key == "string":
            break
        else:
            i += 1
    if out.get("multipv", 1) != 1:
        return None
    return out or None


class Engine:
    """A started UCI engine. Not thread-safe: one game at a time owns it."""

    def __init__(self, spec, label, log=None):
        self.spec = spec
        self.label = label  # for logs and messages: "lc0rs#2"
        self.log = log  # callable(label, direction, line) or None
        self.proc = None
        self.lines = None
        self.stderr_tail = collections.deque(maxlen=40)
        self.id_name = None
        self.declared_options = {}
        self.alive = False

    # Process life -------------------------------------------------------------------------

    def start(self, timeout):
        """Starts the process, `uci` .. `uciok`, the options, `isready` .. `readyok`."""
        self.kill()
        self.lines = queue.Queue()
        self.stderr_tail.clear()
        try:
            self.proc = subprocess.Popen(
                self.spec.cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.spec.workdir,
                # Its own process group: Ctrl-C in the terminal reaches the runner only, and
                # kill() takes anything the engine started along with it.
                start_new_session=(os.name == "posix"),
            )
        except OSError as e:
            raise EngineError("crash", f"cannot start {self.spec.cmd!r}: {e}") from e
        self.alive = True
        lines = self.lines
        proc = self.proc

        def read_stdout():
            for raw in proc.stdout:
                lines.put((time.monotonic(), raw.decode("utf-8", "replace").rstrip("\r\n")))
            lines.put((time.monotonic(), EOF))

        def read_stderr():
            for raw in proc.stderr:
                self.stderr_tail.append(raw.decode("utf-8", "replace").rstrip("\r\n"))

        threading.Thread(target=read_stdout, daemon=True).start()
        threading.Thread(target=read_stderr, daemon=True).start()

        try:
            self._handshake(time.monotonic() + timeout)
        except EngineError:
            self.kill()
            raise

    def _handshake(self, deadline):
        self.send("uci")
        self.declared_options = {}
        while True:
            _, line = self.next_line(deadline, "uciok")
            if line.startswith("id name "):
                self.id_name = line[len("id name "):].strip()
            elif line.startswith("option name "):
                rest = line[len("option name "):]
                name = rest.split(" type ")[0].strip()
                self.declared_options[name.lower()] = name
            elif line.strip() == "uciok":
                break
        for name, value in self.spec.options:
            self.send(f"setoption name {name} value {value}")
        self.sync(deadline)

    def unknown_options(self):
        """The options given that the engine did not declare after `uci`."""
        return [k for k, _ in self.spec.options if k.lower() not in self.declared_options]

    def kill(self):
        """Ends the process now, whatever it is doing."""
        proc, self.proc = self.proc, None
        self.alive = False
        if proc is None:
            return
        try:
            if os.name == "posix":
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        except (ProcessLookupError, PermissionError, OSError):
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for f in (proc.stdin, proc.stdout, proc.stderr):
            try:
                f.close()
            except OSError:
                pass

    def quit(self, timeout=2.0):
        """Asks the engine to quit, then kills it if it has not after `timeout` seconds."""
        if self.proc is not None and self.alive:
            try:
                self.send("quit")
                self.proc.wait(timeout=timeout)
            except (EngineError, subprocess.TimeoutExpired):
                pass
        self.kill()

    # Talking ------------------------------------------------------------------------------

    def send(self, line):
        if self.proc is None or not self.alive:
            raise EngineError("crash", "the engine is not running")
        if self.log:
            self.log(self.label, ">", line)
        try:
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as e:
            self.alive = False
            raise EngineError("crash", f"{self._exit_text()} (writing {line.split()[0]!r}: {e})")

    def next_line(self, deadline, waiting_for):
        """The next line and its arrival time; EngineError on EOF or at the deadline."""
        left = deadline - time.monotonic()
        try:
            t, line = self.lines.get(timeout=max(0.0, left))
        except queue.Empty:
            raise EngineError("timeout", f"no {waiting_for} within the time allowed") from None
        if line is EOF:
            self.alive = False
            raise EngineError("crash", f"{self._exit_text()} while waiting for {waiting_for}")
        if self.log:
            self.log(self.label, "<", line)
        return t, line

    def _exit_text(self):
        code = None
        if self.proc is not None:
            try:
                code = self.proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        if code is None:
            return "the engine closed its output"
        if code < 0:
            try:
                return f"the engine died of {signal.Signals(-code).name}"
            except ValueError:
                return f"the engine died of signal {-code}"
        return f"the engine exited with status {code}"

    def drain(self):
        """Drops whatever the engine wrote since the last exchange."""
        while True:
            try:
                _, line = self.lines.get_nowait()
            except queue.Empty:
                return
            if line is EOF:
                self.alive = False
                self.lines.put((time.monotonic(), EOF))
                return
            if self.log:
                self.log(self.label, "<", line)

    def sync(self, deadline):
        self.send("isready")
        while self.next_line(deadline, "readyok")[1].strip() != "readyok":
            pass

    def new_game(self, timeout):
        self.drain()
        self.send("ucinewgame")
        self.sync(time.monotonic() + timeout)

    def search(self, position, go, timeout):
        """Sends `position` and `go`, waits for `bestmove` up to `timeout` seconds after `go`.

        Returns (bestmove token or None, merged info of the first PV with the last `info
        string` under "string", seconds from `go` to `bestmove`). Raises EngineError on a crash
        or at the timeout."""
        self.drain()
        self.send(position)
        start = time.monotonic()
        self.send(go)
        deadline = start + timeout
        info = {}
        while True:
            t, line = self.next_line(deadline, "bestmove")
            if line.startswith("info string "):
                info["string"] = line[len("info string "):]
            elif line.startswith("info "):
                parsed = parse_info(line)
                if parsed:
                    info.update(parsed)
            elif line.startswith("bestmove"):
                tokens = line.split()
                return (tokens[1] if len(tokens) > 1 else None), info, t - start

    def stderr_text(self, lines=8):
        tail = list(self.stderr_tail)[-lines:]
        return "\n".join("    " + s for s in tail)
