"""The throw-away PostgreSQL server the tests and benchmarks start for themselves."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import asyncpg
import pytest
from kaiwo_eventstore.local_server import (
    BIN_VARIABLE,
    LocalPostgres,
    PostgresUnavailableError,
    account_for_server,
    find_programs,
)
from kaiwo_eventstore.scratch import URL_ENV, scratch_server, why_no_server
from sqlalchemy.engine import make_url


def test_a_directory_without_postgres_is_refused_naming_the_variable(tmp_path: Path) -> None:
    with pytest.raises(PostgresUnavailableError, match=f"{BIN_VARIABLE}=.* holds no postgres"):
        find_programs({BIN_VARIABLE: str(tmp_path)})


def test_the_wheel_provides_the_programs_by_default() -> None:
    programs = find_programs({})
    assert {"initdb", "postgres", "pg_isready"} <= {p.name for p in programs.iterdir()}


def test_root_runs_the_server_as_nobody_and_anyone_else_as_themselves() -> None:
    account = account_for_server()
    if os.geteuid() == 0:
        assert account is not None and account.uid != 0
    else:
        assert account is None


def test_a_given_url_is_used_as_it_is_with_the_asyncpg_driver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(URL_ENV, "postgresql://kaiwo@db.example:6543/events")
    assert why_no_server() is None
    with scratch_server() as url:
        assert url == "postgresql+asyncpg://kaiwo@db.example:6543/events"


@pytest.mark.postgres
def test_a_server_of_its_own_on_a_free_port_even_with_5432_taken() -> None:
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            holder.bind(("127.0.0.1", 5432))
            holder.listen()
        except OSError:
            pass  # something already listens there: the case this test is about
        server = LocalPostgres()
        with server as url:
            directory = server.log_path.parent
            parsed = make_url(url)
            assert parsed.host == "127.0.0.1" and parsed.port != 5432
            assert asyncio.run(_select_one(parsed.port or 0)) == 1
        assert not directory.exists()


async def _select_one(port: int) -> int:
    connection = await asyncpg.connect(host="127.0.0.1", port=port, user="postgres")
    try:
        value: int = await connection.fetchval("SELECT 1")
        return value
    finally:
        await connection.close()
