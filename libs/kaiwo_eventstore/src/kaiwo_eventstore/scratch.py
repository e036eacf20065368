"""Throw-away PostgreSQL servers and databases, for the test suites and benchmarks.

:func:`scratch_server` is the server at ``KAIWO_TEST_POSTGRES_URL`` when that is set, else one
of our own (:class:`kaiwo_eventstore.local_server.LocalPostgres`, from the pinned wheel, on a
free port): whatever else runs on the machine, on 5432 or elsewhere, is never used. Each
database made on it has a fresh name and is dropped afterwards, so runs never see each
other's events.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Final

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from kaiwo_eventstore.local_server import LocalPostgres, PostgresUnavailableError, find_programs

URL_ENV: Final = "KAIWO_TEST_POSTGRES_URL"


@contextlib.contextmanager
def scratch_server() -> Iterator[str]:
    """A PostgreSQL server's URL (asyncpg driver) for the block: ``KAIWO_TEST_POSTGRES_URL``,
    else a :class:`LocalPostgres` started now and stopped at the end. Raises
    :class:`~kaiwo_eventstore.local_server.PostgresUnavailableError` when there is neither."""
    given = os.environ.get(URL_ENV)
    if given:
        yield with_asyncpg(given)
        return
    with LocalPostgres() as url:
        yield url


def why_no_server() -> str | None:
    """Why :func:`scratch_server` cannot give a server (no URL and no programs), or None."""
    if os.environ.get(URL_ENV):
        return None
    try:
        find_programs()
    except PostgresUnavailableError as error:
        return f"{error} (or set {URL_ENV})"
    return None


def with_asyncpg(url: str) -> str:
    return make_url(url).set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)


@contextlib.asynccontextmanager
async def scratch_database(server_url: str, *, prefix: str) -> AsyncIterator[str]:
    """A new, empty database named ``<prefix>_<random>`` on the server (dropped, with any
    connection still open to it, afterwards); yields its URL."""
    database_url = await create_scratch_database(server_url, prefix=prefix)
    try:
        yield database_url
    finally:
        await drop_scratch_database(server_url, database_url)


async def create_scratch_database(server_url: str, *, prefix: str) -> str:
    """:func:`scratch_database`'s first half, for a caller that cannot hold a context open
    across event loops (a session fixture); the URL of the new database."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    await run_admin_statement(server_url, f'CREATE DATABASE "{name}"')
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


async def drop_scratch_database(server_url: str, database_url: str) -> None:
    """Drop the database of ``database_url`` from the server, with any connection still
    open to it."""
    name = make_url(database_url).database
    await run_admin_statement(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def run_admin_statement(server_url: str, statement: str) -> None:
    """One statement outside any transaction (``CREATE DATABASE`` cannot run in one)."""
    engine = create_async_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            await connection.execute(sa.text(statement))
    finally:
        await engine.dispose()
