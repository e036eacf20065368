"""Fixtures for the recorder over a real nats-server: the server, the event store (SQLite file,
and PostgreSQL when one answers), and envelopes to publish.

PostgreSQL is found the way the event store's contract suite finds it:
``KAIWO_TEST_POSTGRES_URL``, else 127.0.0.1:5432 as ``postgres``, then the unix socket; a
fresh database is created per test and dropped afterwards; skipped when none answers
(a failure under ``CI``).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from kaiwo_contracts.events import Envelope, ObservedObjectV1
from kaiwo_contracts.events.subjects import observed_subject
from kaiwo_runtime.nats_server import NatsServer
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

LOCAL_POSTGRES_URLS = (
    "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres",
    "postgresql+asyncpg://postgres@/postgres?host=/var/run/postgresql",
)
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


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


async def _find_postgres() -> str | None:
    given = os.environ.get("KAIWO_TEST_POSTGRES_URL")
    for candidate in (given,) if given else LOCAL_POSTGRES_URLS:
        url = make_url(candidate).set(drivername="postgresql+asyncpg")
        rendered = url.render_as_string(hide_password=False)
        if await _answers(rendered):
            return rendered
    return None


async def _admin(server_url: str, statement: str) -> None:
    engine = create_async_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            await connection.execute(sa.text(statement))
    finally:
        await engine.dispose()


@pytest.fixture
async def nats_server() -> AsyncIterator[NatsServer]:
    async with NatsServer() as server:
        yield server


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A URL for a store that does not exist yet (the recorder creates the schema)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'events.db'}"
        return
    server_url = await _find_postgres()
    if server_url is None:
        reason = "no PostgreSQL server answers (set KAIWO_TEST_POSTGRES_URL)"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {reason}")
        pytest.skip(reason)
    name = f"kaiwo_rec_test_{uuid.uuid4().hex[:12]}"
    await _admin(server_url, f'CREATE DATABASE "{name}"')
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        await _admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def observation(number: int) -> tuple[Envelope[Any], str]:
    """The observation of pod ``number`` of one of ten workloads (distinct ids and uids)."""
    uid = str(uuid.UUID(int=number + 1))
    workload = str(uuid.UUID(int=10**6 + number % 10))
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"pod-{number}",
            "namespace": "team-a",
            "uid": uid,
            "resourceVersion": str(1000 + number),
            "labels": {"kaiwo.silogen.ai/run-id": workload},
        },
        "spec": {"containers": [{"name": "main", "image": "busybox", "args": ["sleep", "60"]}]},
    }
    envelope = Envelope.new(
        data=ObservedObjectV1(
            kind="Pod",
            api_version="v1",
            namespace="team-a",
            name=f"pod-{number}",
            uid=uid,
            resource_version=str(1000 + number),
            event_type="ADDED",
            object=obj,
        ),
        source="/kaiwo/watcher",
        time=T0 + timedelta(milliseconds=number),
        id=f"{uid}:{1000 + number}",
        subject=f"team-a/pod-{number}",
        correlationid=workload,
    )
    return envelope, observed_subject(kind="Pod", namespace="team-a", uid=uid)


@pytest.fixture
def make_observation() -> Any:
    return observation
