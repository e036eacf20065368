"""Supervised child processes: one per service, restarted like a pod when it dies."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

import structlog

log = structlog.get_logger("kaiwo.stack")

MAX_RESTART_DELAY = 30.0
FIRST_RESTART_DELAY = 1.0
STABLE_SECONDS = 60.0
"""A process that ran this long before exiting starts again after the first delay."""


@dataclass
class RestartBackOff:
    """Like a pod's CrashLoopBackOff: the delay before each new start doubles up to
    :data:`MAX_RESTART_DELAY`, back to :data:`FIRST_RESTART_DELAY` after a stable run."""

    first: float = FIRST_RESTART_DELAY
    delay: float = field(init=False)

    def __post_init__(self) -> None:
        self.delay = self.first

    def after(self, ran_seconds: float) -> float:
        """The delay before starting again what has just ended after ``ran_seconds``."""
        if ran_seconds >= STABLE_SECONDS:
            self.delay = self.first
        delay, self.delay = self.delay, min(self.delay * 2, MAX_RESTART_DELAY)
        return delay


@dataclass
class ServiceProcess:
    """``python -m <module>`` with ``env``; output goes to ``log_path``.

    When the process exits while the stack is running it is started again after a delay that
    doubles up to 30 s (like a pod's CrashLoopBackOff), so one crash never stops the stack.
    """

    name: str
    module: str
    env: dict[str, str]
    log_path: Path
    health_port: int
    pass_fds: tuple[int, ...] = ()
    """Descriptors the process inherits at every start (the console's listening socket)."""
    restarts: int = 0
    last_exit: int | None = None
    """The exit code of the last run that ended (None: none ended yet)."""
    _process: asyncio.subprocess.Process | None = field(default=None, repr=False)
    _stopping: bool = field(default=False, repr=False)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as output:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                self.module,
                env={**os.environ, **self.env},
                stdout=output,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
                pass_fds=self.pass_fds,
            )

    async def supervise(self) -> None:
        """Wait for exits and restart, until :meth:`stop` is called."""
        back_off = RestartBackOff()
        loop = asyncio.get_running_loop()
        while not self._stopping:
            assert self._process is not None
            started = loop.time()
            code = await self._process.wait()
            self.last_exit = code
            if self._stopping:
                return
            delay = back_off.after(loop.time() - started)
            self.restarts += 1
            log.warning("service exited; restarting", service=self.name, code=code, delay=delay)
            await asyncio.sleep(delay)
            if not self._stopping:
                await self.start()

    async def stop(self, *, grace_seconds: float = 10.0) -> None:
        self._stopping = True
        process = self._process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), grace_seconds)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()

    async def kill(self) -> None:
        """Kill without grace (fault tests); the supervisor restarts it."""
        if self._process is not None and self._process.returncode is None:
            self._process.kill()

    async def kill_for_good(self) -> None:
        """Kill without grace and without a restart (a replica lost for good: fault tests)."""
        self._stopping = True
        process = self._process
        if process is not None and process.returncode is None:
            process.kill()
            await process.wait()
