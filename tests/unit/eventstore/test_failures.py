"""Which database errors hold events (the store cannot write now) and which refuse rows."""

from __future__ import annotations

import sqlite3

import pytest
from kaiwo_eventstore.sql.failures import unavailable_reason
from sqlalchemy.exc import DBAPIError, OperationalError


def sqlite_error(message: str, name: str | None) -> sqlite3.Error:
    error = sqlite3.OperationalError(message)
    if name is not None:
        error.sqlite_errorname = name  # type: ignore[attr-defined]
    return error


class PostgresError(Exception):
    """What asyncpg (through SQLAlchemy's adapter) raises: an error with a SQLSTATE."""

    def __init__(self, message: str, sqlstate: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            sqlite_error("database or disk is full", "SQLITE_FULL"),
            "SQLITE_FULL: database or disk is full",
        ),
        (
            sqlite_error("disk I/O error", "SQLITE_IOERR_WRITE"),
            "SQLITE_IOERR_WRITE: disk I/O error",
        ),
        (
            sqlite_error("attempt to write a readonly database", "SQLITE_READONLY"),
            "SQLITE_READONLY: attempt to write a readonly database",
        ),
        (sqlite_error("database or disk is full", None), "SQLite: database or disk is full"),
        (
            PostgresError("could not extend file: No space left on device", "53100"),
            "PostgreSQL 53100: could not extend file: No space left on device",
        ),
        (
            PostgresError("cannot execute INSERT in a read-only transaction", "25006"),
            "PostgreSQL 25006: cannot execute INSERT in a read-only transaction",
        ),
        (
            PostgresError("terminating connection due to administrator command", "57P01"),
            "PostgreSQL 57P01: terminating connection due to administrator command",
        ),
        (ConnectionRefusedError("connect refused"), "ConnectionRefusedError: connect refused"),
        (OSError(28, "No space left on device"), "OSError: [Errno 28] No space left on device"),
    ],
)
def test_errors_that_refuse_every_write_hold_the_events(
    error: BaseException, expected: str
) -> None:
    assert unavailable_reason(error) == expected


def test_the_reason_is_found_inside_sqlalchemys_wrapper() -> None:
    wrapped = OperationalError(
        "INSERT ...", {}, sqlite_error("database or disk is full", "SQLITE_FULL")
    )

    assert unavailable_reason(wrapped) == "SQLITE_FULL: database or disk is full"


def test_a_connection_sqlalchemy_invalidated_holds_the_events() -> None:
    wrapped = DBAPIError(
        "INSERT ...", {}, Exception("connection was closed"), connection_invalidated=True
    )

    assert unavailable_reason(wrapped) is not None


@pytest.mark.parametrize(
    "error",
    [
        PostgresError("unsupported Unicode escape sequence", "22P05"),  # the row's own fault
        PostgresError("duplicate key value violates unique constraint", "23505"),
        sqlite_error("string or blob too big", "SQLITE_TOOBIG"),
        ValueError("not JSON serializable"),
    ],
)
def test_errors_about_the_rows_do_not_hold(error: BaseException) -> None:
    assert unavailable_reason(error) is None
