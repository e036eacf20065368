"""What ``kaiwo up`` leaves in its state directory for the other commands to find.

``<state-dir>/stack.json`` (mode 0600) names the NATS URL, the CLI's credentials file, the
CA to verify the server with (when TLS is on), the event store's URL, the kubeconfig of the
cluster the stack operates and every service's health URL, so that every ``kaiwo`` command
needs no flag after ``kaiwo up``, and never attaches to some other server that happens to
listen on 4222. It also names the credentials of the ``subscriber`` identity, which
reads the public workload events only (``examples/subscriber.py`` connects with them).

Which state directory: ``--state DIR``, else ``$KAIWO_STATE``, else ``.kaiwo`` in the current
directory or the nearest parent that has one with a ``stack.json`` (as git finds ``.git``),
else ``.kaiwo`` here. ``<state-dir>/up.lock`` is held (flock) by the running ``kaiwo up``
and names its pid, so a second one on the same directory is refused.

Everything here is standard library: every command reads this before anything heavy.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

STATE_FILE = "stack.json"
LOCK_FILE = "up.lock"
DEFAULT_STATE_DIR = Path(".kaiwo")
STATE_ENV = "KAIWO_STATE"


class StackStateError(RuntimeError):
    """The state file is missing or unreadable; the message says what to do."""


class StackLockedError(RuntimeError):
    """Another ``kaiwo up`` holds the state directory."""


def _write_private(path: Path, content: bytes) -> Path:
    """Mode 0600 from the first byte, replaced whole (a reader never sees half a file); not
    ``kaiwo_runtime``'s twin, whose module imports the bus contracts (slow to start).

    The temporary file is a new one with a random name (``mkstemp``: ``O_CREAT|O_EXCL``,
    which never follows a symbolic link) in the same directory, renamed over ``path``: a
    link planted at a predictable ``.stack.json.tmp`` would have been written through."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    temporary = Path(name)
    try:
        with os.fdopen(descriptor, "wb") as output:
            output.write(content)
        temporary.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    return path


@dataclass(frozen=True, slots=True)
class StackState:
    nats_url: str
    cli_credentials_file: Path
    event_store_url: str
    nats_tls_ca_file: Path | None = None
    subscriber_credentials_file: Path | None = None
    kubeconfig: Path | None = None
    """The cluster the stack operates (None: the default kubeconfig when it started)."""
    health_urls: Mapping[str, str] = field(default_factory=dict)
    """Each service's ``/readyz``, by service name."""
    pid: int | None = None
    """The ``kaiwo up`` process."""

    def write(self, state_dir: Path) -> Path:
        document: dict[str, Any] = {
            "natsUrl": self.nats_url,
            "cliCredentialsFile": str(self.cli_credentials_file),
            "eventStoreUrl": self.event_store_url,
            "natsTlsCaFile": str(self.nats_tls_ca_file) if self.nats_tls_ca_file else None,
            "subscriberCredentialsFile": (
                str(self.subscriber_credentials_file) if self.subscriber_credentials_file else None
            ),
            "kubeconfig": str(self.kubeconfig) if self.kubeconfig else None,
            "healthUrls": dict(self.health_urls),
            "pid": self.pid,
        }
        return _write_private(state_dir / STATE_FILE, json.dumps(document, indent=2).encode())

    @classmethod
    def read(cls, state_dir: Path) -> StackState:
        path = state_dir / STATE_FILE
        try:
            document = json.loads(path.read_text())
            ca = document.get("natsTlsCaFile")
            subscriber = document.get("subscriberCredentialsFile")
            kubeconfig = document.get("kubeconfig")
            return cls(
                nats_url=str(document["natsUrl"]),
                cli_credentials_file=Path(document["cliCredentialsFile"]),
                event_store_url=str(document["eventStoreUrl"]),
                nats_tls_ca_file=Path(ca) if ca else None,
                subscriber_credentials_file=Path(subscriber) if subscriber else None,
                kubeconfig=Path(kubeconfig) if kubeconfig else None,
                health_urls={str(k): str(v) for k, v in (document.get("healthUrls") or {}).items()},
                pid=int(document["pid"]) if document.get("pid") else None,
            )
        except FileNotFoundError as error:
            raise StackStateError(
                f"no {path}: start the operator with kaiwo up (or pass --state DIR, or "
                "--nats with --credentials)"
            ) from error
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise StackStateError(f"{path} cannot be read: {error}") from error


def resolve_state_dir(given: Path | None, *, environ: Mapping[str, str], cwd: Path) -> Path:
    """The state directory a command uses (see the module's docstring for the order)."""
    if given is not None:
        return given
    if environ.get(STATE_ENV):
        return Path(environ[STATE_ENV])
    if (cwd / STATE_FILE).is_file():
        return cwd
    for directory in (cwd, *cwd.parents):
        if (directory / DEFAULT_STATE_DIR / STATE_FILE).is_file():
            return directory / DEFAULT_STATE_DIR
    return cwd / DEFAULT_STATE_DIR


def state_dir_here(given: Path | None) -> Path:
    """:func:`resolve_state_dir` for this process (its environment and directory)."""
    return resolve_state_dir(given, environ=os.environ, cwd=Path.cwd())


def read_state_if_any(state_dir: Path) -> StackState | None:
    """The stack's state, or None when no ``kaiwo up`` wrote one there."""
    try:
        return StackState.read(state_dir)
    except StackStateError:
        return None


class StateLock:
    """``<state-dir>/up.lock``: held with flock while ``kaiwo up`` runs; the OS drops it when
    the process ends in any way, so a crashed stack never blocks the next one."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LOCK_FILE
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: the lock is truncated and written; a link must not redirect that.
        try:
            descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as error:
            raise StackLockedError(f"cannot open {self.path}: {error}") from error
        handle = os.fdopen(descriptor, "r+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            handle.close()
            raise StackLockedError(
                f"another kaiwo up (pid {holder}) is running on {self.path.parent}; "
                "stop it first, or give this one another --state-dir"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None
