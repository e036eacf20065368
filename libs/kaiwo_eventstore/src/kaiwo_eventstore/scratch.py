"""Throw-away PostgreSQL databases, for the test suites and benchmarks of the event store.

A server is looked for at ``KAIWO_TEST_POSTGRES_URL`` when it is set, else at the local
defaults (TCP 127.0.0.1:5432 as ``postgres``, then the unix socket); each database made on
it has a fresh name and is dropped afterwards, so runs never see each other's events.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from typing import Final

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

URL_ENV: Final = "KAIWO_TEST_POSTGRES_URL"
LOCAL_URLS: Final = (
    "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres",
    "postgresql+asyncpg://postgres@/postgres?host=/var/run/postgresql",
)
NOT_FOUND: Final = (
    f"no PostgreSQL server answers (set {URL_ENV}, or run one on 127.0.0.1:5432 or "
    "/var/run/postgresql accepting user postgres)"
)


async def find_server(given: str | None = None) -> str | None:
    """The first server URL that answers, with the asyncpg driver: ``given``, else
    ``KAIWO_TEST_POSTGRES_URL``, else the local defaults; None when none does."""
    given = given or os.environ.get(URL_ENV)
    for candidate in (given,) if given else LOCAL_URLS:
        url = make_url(candidate).set(drivername="postgresql+asyncpg")
        rendered = url.render_as_string(hide_password=False)
        if await _answers(rendered):
            return rendered
    return None


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


async def _answers(url: str) -> bool:
    engine = create_async_engine(url)
    try:
        async with asyncio.timeout(5), engine.connect() as connection:
            await connection.execute(sa.text("SELECT 1"))
    except Exception:  # any failure to connect means: not this one
        return False
    finally:
        await engine.dispose()
    return True


async def run_admin_statement(server_url: str, statement: str) -> None:
    """One statement outside any transaction (``CREATE DATABASE`` cannot run in one)."""
    engine = create_async_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            await connection.execute(sa.text(statement))
    finally:
        await engine.dispose()
