"""What every ``kaiwo events`` subcommand shares: its ``--store`` and ``--state`` options, finding
the stack's event store (and its cluster), opening it, and failing in one clear line."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

import typer
from kaiwo_eventstore import EventStore, EventStoreError, open_event_store, sqlite_file
from kaiwo_eventstore.explain import WorkloadReferenceError
from kaiwo_eventstore.sql.revision import KnowsItsRevision, unreadable_revision
from kaiwo_runtime.redaction import redact_secrets, redact_url
from rich.console import Console
from rich.markup import escape

from kaiwo_cli.stack.cluster_state import recorded_cluster
from kaiwo_cli.stack.state import (
    StackState,
    StackStateError,
    read_state_if_any,
    state_dir_here,
)

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="Event store URL (as the recorder's KAIWO_EVENTSTORE_URL); default: the one "
        "kaiwo up uses in --state-dir.",
    ),
]


StateDirOption = Annotated[
    Path | None,
    typer.Option(
        "--state",
        "--state-dir",
        envvar="KAIWO_STATE",
        help="Where kaiwo up keeps its state (stack.json); default: .kaiwo here or in a parent "
        "directory.",
    ),
]


class CommandError(RuntimeError):
    """A problem to report in one line (exit code 2)."""


def stdout_console() -> Console:
    # Created per call so the width follows the environment (COLUMNS) of this invocation.
    return Console(highlight=False, soft_wrap=True)


def stderr_console() -> Console:
    # soft_wrap: a message is one line however narrow the terminal or pipe (80 columns in a
    # pipe cut a long one into three).
    return Console(stderr=True, highlight=False, soft_wrap=True)


NOTHING_TO_SHOW_EXIT = 1
"""The store holds no such workload: nothing to show, as ``kaiwo status`` says of a workload
the cluster lacks (decision 0141); the store was read and refused nothing."""


def exit_for(error: Exception, *, workload_not_found: int = NOTHING_TO_SHOW_EXIT) -> typer.Exit:
    """One red line; exit ``workload_not_found`` when the store holds no such workload (or
    the name is held by two kinds: which one is the user's to say), else 2."""
    stderr_console().print(f"kaiwo events: {escape(str(error))}", style="red")
    return typer.Exit(workload_not_found if isinstance(error, WorkloadReferenceError) else 2)


def store_errors() -> tuple[type[BaseException], ...]:
    """What reading a store raises when the store, not the command, is at fault: the
    connection (refused, timed out, reset: OSError), a damaged SQLite file, the store's own
    errors, and the drivers' of the SQL store. A driver's classes are named only when its
    module is loaded: one that is not loaded raised nothing (and the SQLite file store loads
    no SQLAlchemy)."""
    errors: list[type[BaseException]] = [OSError, sqlite3.Error, EventStoreError]
    for module, name in (
        ("sqlalchemy.exc", "SQLAlchemyError"),
        ("asyncpg.exceptions", "PostgresError"),
        ("asyncpg.exceptions", "InterfaceError"),
    ):
        found = getattr(sys.modules.get(module), name, None)
        if isinstance(found, type) and issubclass(found, BaseException):
            errors.append(found)
    return tuple(errors)


def unreadable(url: str, error: BaseException) -> CommandError:
    """``error`` of the store at ``url`` in one line, the URL's password masked in both."""
    # SQLAlchemy wraps the driver's error (``orig``) in its class name, the statement and a
    # link, on lines of their own: the driver's words say it.
    lines = redact_secrets(str(getattr(error, "orig", None) or error)).strip().splitlines()
    reason = lines[0] if lines else type(error).__name__
    return CommandError(f"cannot read the event store {redact_url(url)}: {reason}")


@contextlib.asynccontextmanager
async def opened_store(url: str) -> AsyncIterator[EventStore]:
    """The store at ``url`` for reading, at a schema revision this version reads; a missing
    SQLite file is an error, not a new store. What the store raises while it is read (the SQL
    store connects at its first read) is one line naming it (exit 2), never a traceback:
    replay's exit 1 says a plan was not reproduced (decision 0141)."""
    database = sqlite_file(url)
    if database is not None and not database.is_file():
        raise CommandError(f"no event store at {database} (is the recorder running? --store)")
    try:
        store = await open_event_store(url, migrate=False)
    except Exception as error:  # a driver error in any form: one line for the user
        raise CommandError(
            f"cannot open the event store {redact_url(url)}: {redact_secrets(str(error))}"
        ) from error
    try:
        if isinstance(store, KnowsItsRevision):
            problem = unreadable_revision(await store.revision())
            if problem is not None:
                raise CommandError(f"the event store {redact_url(url)} {problem}")
        yield store
    except BrokenPipeError:
        raise  # stdout closed by the reader of a pipe (``| head``): not the store's doing
    except store_errors() as error:
        raise unreadable(url, error) from error
    finally:
        await store.close()


def run_coroutine(coroutine: Any, *, workload_not_found: int = NOTHING_TO_SHOW_EXIT) -> Any:
    try:
        return asyncio.run(coroutine)
    except (CommandError, WorkloadReferenceError, ValueError) as error:
        raise exit_for(error, workload_not_found=workload_not_found) from None


def store_url(given: str | None, state_dir: Path | None) -> str:
    """``--store``, else the store of the stack in the state directory, else the SQLite file
    ``kaiwo up`` would keep there."""
    if given:
        return given
    directory = state_dir_here(state_dir)
    try:
        return StackState.read(directory).event_store_url
    except StackStateError:
        return f"sqlite:///{directory / 'events.db'}"


def cluster_of(given_store: str | None, state_dir: Path | None) -> str | None:
    """The cluster (uid of its kube-system) whose events the store holds, when known: that of
    the stack in the state directory, for its own store (decision 0042)."""
    directory = state_dir_here(state_dir)
    state = read_state_if_any(directory)
    if state is not None and state.cluster_uid and given_store in (None, state.event_store_url):
        return state.cluster_uid
    if given_store is None or sqlite_file(given_store) == directory / "events.db":
        return recorded_cluster(directory)
    return None


def name_the_cluster(given_store: str | None, state_dir: Path | None) -> None:
    """One line on stderr naming the cluster of what the command shows, when it is known
    (stdout stays the command's own: JSON lines, a tree): the stack's, or the one a store
    given by URL records (decision 0042)."""
    cluster = cluster_of(given_store, state_dir)
    if cluster is None and given_store is not None:
        cluster = asyncio.run(recorded_by_store(given_store))
    if cluster is not None:
        typer.echo(f"kaiwo events: cluster {cluster} (uid of its kube-system namespace)", err=True)


async def recorded_by_store(url: str) -> str | None:
    """The cluster the store at ``url`` records; None when it records none or cannot be read
    (the command opens it again and says what is wrong)."""
    try:
        async with opened_store(url) as store:
            return await store.cluster()
    except Exception:  # a missing file, a driver error, a store of an older schema
        return None
