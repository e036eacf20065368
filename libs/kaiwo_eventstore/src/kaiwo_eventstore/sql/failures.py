"""Which database errors mean "the store cannot write now" and which mean "this row is refused".

The difference decides whether events are held or dropped: a full disk, a read-only file
system or a lost connection refuses *every* write, and a caller that took such an error for a
refusal of the rows at hand would dead-letter (and acknowledge) everything it is given until
the disk is freed. A read still works on a full disk, so probing with a read cannot tell; the
error itself must.

SQLite names its result codes (``sqlite3.Error.sqlite_errorname``, Python 3.11+; the message
is the fallback); PostgreSQL gives a SQLSTATE whose class says the same thing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from kaiwo_eventstore.errors import ConcurrencyError, StoreUnavailableError
from kaiwo_eventstore.events import ExpectedVersion, NewEvent, describe_expectation

_SQLITE_UNAVAILABLE = (
    "SQLITE_FULL",  # database or disk is full
    "SQLITE_IOERR",  # disk I/O error (ENOSPC while writing the WAL, a vanished mount...)
    "SQLITE_READONLY",  # attempt to write a readonly database
    "SQLITE_CANTOPEN",  # unable to open database file
    "SQLITE_BUSY",  # database is locked (another writer held it past the busy timeout)
    "SQLITE_LOCKED",
    "SQLITE_NOMEM",
    "SQLITE_PROTOCOL",
    "SQLITE_NOLFS",
)
"""Result-code names (prefixes: extended codes such as SQLITE_IOERR_WRITE included)."""

_SQLITE_MESSAGES = (
    "database or disk is full",
    "disk i/o error",
    "readonly database",
    "unable to open database file",
    "database is locked",
    "out of memory",
)

_POSTGRES_UNAVAILABLE_CLASSES = (
    "08",  # connection exception
    "53",  # insufficient resources: 53100 disk_full, 53200 out_of_memory, 53300 connections
    "57P",  # operator intervention: admin/crash shutdown, cannot connect now
    "58",  # system error: 58030 io_error
    "40",  # transaction rollback: serialization failure, deadlock (retrying is the cure)
)
_POSTGRES_UNAVAILABLE_CODES = (
    "25006",  # read_only_sql_transaction (a standby, or default_transaction_read_only)
    "55P03",  # lock_not_available (lock_timeout)
    "57014",  # query_canceled (statement_timeout)
)


def raise_if_unavailable(error: Exception) -> None:
    """Raise :class:`StoreUnavailableError` when ``error`` refuses every write (full disk,
    read-only, lost connection), from ``error``."""
    reason = unavailable_reason(error)
    if reason is not None:
        raise StoreUnavailableError(reason) from error


def bypassed_lock_conflict(
    events: Sequence[NewEvent], expected_version: ExpectedVersion
) -> ConcurrencyError:
    """What a unique constraint's refusal of an append means: only a writer that bypassed the
    write lock can get there, so it is reported as a conflict on the batch's stream."""
    stream = events[0].stream_id if events else "?"
    return ConcurrencyError(
        stream_id=stream, expected=describe_expectation(expected_version), actual=None
    )


def unavailable_reason(error: BaseException) -> str | None:
    """Why ``error`` (or an error it was raised from) means the store cannot write now, in one
    line; None when it may be about the rows themselves."""
    for cause in _chain(error):
        reason = _reason_of(cause)
        if reason is not None:
            return reason
    return None


def _reason_of(error: BaseException) -> str | None:
    if isinstance(error, sqlite3.Error):
        return _sqlite_reason(error)
    code = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
    if isinstance(code, str) and _postgres_unavailable(code):
        return f"PostgreSQL {code}: {_one_line(error)}"
    if getattr(error, "connection_invalidated", False):
        return f"connection lost: {_one_line(error)}"
    if isinstance(error, (OSError, TimeoutError)):  # ConnectionError is an OSError
        return f"{type(error).__name__}: {_one_line(error)}"
    if type(error).__name__ in ("ConnectionDoesNotExistError", "InterfaceError") and (
        "closed" in str(error).lower() or "connection" in str(error).lower()
    ):
        return f"connection lost: {_one_line(error)}"
    return None


def _sqlite_reason(error: sqlite3.Error) -> str | None:
    name = getattr(error, "sqlite_errorname", None)
    if isinstance(name, str) and name.startswith(_SQLITE_UNAVAILABLE):
        return f"{name}: {_one_line(error)}"
    message = str(error).lower()
    if any(known in message for known in _SQLITE_MESSAGES):
        return f"SQLite: {_one_line(error)}"
    return None


def _postgres_unavailable(code: str) -> bool:
    return code in _POSTGRES_UNAVAILABLE_CODES or code.startswith(_POSTGRES_UNAVAILABLE_CLASSES)


def _chain(error: BaseException) -> list[BaseException]:
    """``error``, what it wraps (SQLAlchemy's ``.orig``) and what it was raised from."""
    seen: list[BaseException] = []
    pending: list[BaseException] = [error]
    while pending and len(seen) < 16:
        current = pending.pop(0)
        if any(current is known for known in seen):
            continue
        seen.append(current)
        linked = (getattr(current, "orig", None), current.__cause__, current.__context__)
        pending.extend(link for link in linked if isinstance(link, BaseException))
    return seen


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:300] or type(error).__name__
