"""A command run in a pseudo-terminal, as a person runs it: it sees a terminal of a given size
(so rich draws its live display), its output is read as it comes, and Ctrl-C is typed, not
signalled."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

# Colours, cursor moves and erases (CSI), window titles (OSC), and carriage returns.
_ESCAPES = re.compile(
    r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][A-Z0-9]|\r"
)


# A new session whose controlling terminal is the pty (so that a typed Ctrl-C reaches it),
# then the command itself: done by a fresh interpreter rather than a preexec_fn, which is
# unsafe in a process with threads (the test runner's).
_IN_ITS_OWN_TERMINAL = (
    "import fcntl, os, sys, termios\n"
    "os.setsid()\n"
    "fcntl.ioctl(0, termios.TIOCSCTTY, 0)\n"
    "os.execvp(sys.argv[1], sys.argv[1:])\n"
)


def plain(text: str) -> str:
    """What a reader sees of terminal output, escape sequences removed."""
    return _ESCAPES.sub("", text)


class Terminal:
    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        columns: int = 250,
        rows: int = 70,
    ) -> None:
        self.argv = list(argv)
        self.cwd = cwd
        self.env = dict(env)
        self.size = (rows, columns)
        self._chunks: list[bytes] = []
        self._lock = threading.Lock()
        self.process: subprocess.Popen[bytes] | None = None
        self._master = -1
        self._reader: threading.Thread | None = None

    def __enter__(self) -> Self:
        master, slave = os.openpty()
        rows, columns = self.size
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))

        self.process = subprocess.Popen(
            [sys.executable, "-c", _IN_ITS_OWN_TERMINAL, *self.argv],
            cwd=self.cwd,
            env=self.env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            close_fds=True,
        )
        os.close(slave)
        self._master = master
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([self._master], [], [], 0.2)
                if not ready:
                    if self.process is not None and self.process.poll() is not None:
                        return
                    continue
                data = os.read(self._master, 65536)
            except OSError:  # EIO: the child closed the terminal
                return
            if not data:
                return
            with self._lock:
                self._chunks.append(data)

    @property
    def raw(self) -> str:
        with self._lock:
            return b"".join(self._chunks).decode("utf-8", errors="replace")

    @property
    def text(self) -> str:
        return plain(self.raw)

    def wait_for(self, pattern: str, *, within: float) -> re.Match[str]:
        deadline = time.monotonic() + within
        while True:
            found = re.search(pattern, self.text)
            if found:
                return found
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(
                    f"exited ({self.process.returncode}) before {pattern!r}:\n{self.text[-5000:]}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"no {pattern!r} within {within} s:\n{self.text[-5000:]}")
            time.sleep(0.2)

    def type_ctrl_c(self) -> None:
        os.write(self._master, b"\x03")

    def wait(self, *, within: float) -> int:
        assert self.process is not None
        return self.process.wait(timeout=within)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        process = self.process
        if process is not None and process.poll() is None:
            # Ctrl-C first (the command stops what it started), then its session.
            with contextlib.suppress(OSError):
                self.type_ctrl_c()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        if self._reader is not None:
            self._reader.join(timeout=5)
        with contextlib.suppress(OSError):
            os.close(self._master)
