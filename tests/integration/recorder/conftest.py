"""Fixtures for the recorder over a real nats-server: the server, the event store (SQLite file,
and PostgreSQL), and envelopes to publish.

PostgreSQL is the session's own server (``postgres_server``, ``tests/postgres.py``); a fresh
database is created per test and dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kaiwo_contracts.events import Envelope, ObservedObjectV1
from kaiwo_contracts.events.subjects import observed_subject
from kaiwo_eventstore.scratch import scratch_database
from kaiwo_runtime.nats_server import NatsServer

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


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
    server_url: str = request.getfixturevalue("postgres_server")
    async with scratch_database(server_url, prefix="kaiwo_rec_test") as url:
        yield url


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
