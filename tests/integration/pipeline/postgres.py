"""A PostgreSQL database for the pipeline tests, and a TCP proxy to take it away for a while.

The server is found as the event-store contract suite finds it: ``KAIWO_TEST_POSTGRES_URL``,
else the local defaults (TCP 127.0.0.1:5432 as ``postgres``, then the unix socket).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from typing import Final

import pytest
import sqlalchemy as sa
from kaiwo_runtime.nats_server import free_port
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

URL_ENV: Final = "KAIWO_TEST_POSTGRES_URL"
LOCAL_URLS: Final = (
    "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres",
    "postgresql+asyncpg://postgres@/postgres?host=/var/run/postgresql",
)


async def _answers(url: str) -> bool:
    engine = create_async_engine(url)
    try:
        async with asyncio.timeout(5), engine.connect() as connection:
            await connection.execute(sa.text("SELECT 1"))
    except Exception:
        return False
    finally:
        await engine.dispose()
    return True


async def find_server(given: str | None) -> str | None:
    """The first URL that answers (``given`` alone when set), with the asyncpg driver."""
    for candidate in (given,) if given else LOCAL_URLS:
        url = make_url(candidate).set(drivername="postgresql+asyncpg")
        rendered = url.render_as_string(hide_password=False)
        if await _answers(rendered):
            return rendered
    return None


async def postgres_server() -> str:
    """The server's URL; skips the calling test when none answers (a failure under CI)."""
    found = await find_server(os.environ.get(URL_ENV))
    if found is None:
        reason = f"no PostgreSQL server answers (set {URL_ENV} or run one on 127.0.0.1:5432)"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {reason}")
        pytest.skip(reason)
    return found


async def _admin(server_url: str, statement: str) -> None:
    engine = create_async_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            await connection.execute(sa.text(statement))
    finally:
        await engine.dispose()


@contextlib.asynccontextmanager
async def fresh_database(server_url: str) -> AsyncIterator[str]:
    """A new, empty database on the server (dropped afterwards); yields its URL."""
    name = f"kaiwo_pipeline_{uuid.uuid4().hex[:12]}"
    await _admin(server_url, f'CREATE DATABASE "{name}"')
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        await _admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class TcpProxy:
    """Forwards a local port to ``target``; :meth:`cut` drops every connection and refuses
    new ones until :meth:`restore`, as a database restart looks to its clients."""

    def __init__(self, *, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()

    async def restore(self) -> None:
        self._server = await asyncio.start_server(self._link, "127.0.0.1", self.port)

    async def cut(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._links):
            writer.transport.abort()
        self._links.clear()

    async def _link(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.transport.abort()
            return
        self._links |= {client_w, server_w}
        await asyncio.gather(
            _pipe(client_r, server_w), _pipe(server_r, client_w), return_exceptions=True
        )
        self._links -= {client_w, server_w}


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.transport.abort()
