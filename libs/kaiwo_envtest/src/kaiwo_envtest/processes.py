"""Child processes of the control plane: started with their output in a log file, waited for
until an HTTP endpoint answers, stopped by their own process id."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

STOP_SECONDS: Final = 15.0
LOG_TAIL_LINES: Final = 20
PR_SET_PDEATHSIG: Final = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the test process dies without stopping it
    (killed by a timeout, say), so no etcd or API server outlives the tests. Not SIGTERM:
    an API server and its etcd told to stop at the same moment wait on each other's
    connections for a minute or more, and nothing is left to keep."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))


class ControlPlaneError(RuntimeError):
    """A component did not start; the message carries the end of its log."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Component:
    """One running binary and its log."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(
        cls,
        name: str,
        command: Sequence[str],
        *,
        log: Path,
        environment: Mapping[str, str] | None = None,
    ) -> Component:
        """``environment``: variables set for this binary besides this process's own."""
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            process = subprocess.Popen(  # noqa: S603 - our own binaries, no shell
                list(command),
                env={**os.environ, **environment} if environment else None,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C in the terminal reaches the tests only
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - one system call, no locks
            )
        return cls(name=name, process=process, log=log)

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(STOP_SECONDS)

    def failure(self, what: str) -> ControlPlaneError:
        lines = self.log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        tail = "\n".join(lines)
        return ControlPlaneError(f"{self.name} {what} (log {self.log}):\n{tail}")

    def wait_until(self, ready: Callable[[], bool], *, within: float) -> None:
        deadline = time.monotonic() + within
        while not ready():
            if self.process.poll() is not None:
                raise self.failure(f"exited with code {self.process.returncode}")
            if time.monotonic() > deadline:
                raise self.failure(f"was not ready within {within:g} s")
            time.sleep(0.1)


def answers_ok(url: str, *, context: ssl.SSLContext | None = None) -> bool:
    """Whether ``url`` answers 200 (a refused connection or an error status is ``False``)."""
    with (
        contextlib.suppress(urllib.error.URLError, OSError),
        urllib.request.urlopen(url, timeout=2, context=context) as answer,  # noqa: S310
    ):
        return bool(answer.status == 200)
    return False
