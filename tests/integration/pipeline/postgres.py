"""A PostgreSQL database for the pipeline tests, and a TCP proxy to take it away for a while.

The server is the session's own (``postgres_server``, ``tests/postgres.py``).
"""

from __future__ import annotations

import asyncio
import contextlib

from kaiwo_eventstore.scratch import scratch_database
from kaiwo_runtime.nats_server import free_port


def fresh_database(server_url: str) -> contextlib.AbstractAsyncContextManager[str]:
    """A new, empty database on the server (dropped afterwards); yields its URL."""
    return scratch_database(server_url, prefix="kaiwo_pipeline")


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
