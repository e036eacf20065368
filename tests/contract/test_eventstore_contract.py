"""One behavioural suite for every event store adapter: in-memory, SQLite file, PostgreSQL.

PostgreSQL: the session's own server (``postgres_server``, ``tests/postgres.py``). A fresh,
uniquely named database is created for the session and dropped afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from kaiwo_eventstore import (
    ANY,
    NO_STREAM,
    STREAM_EXISTS,
    ConcurrencyError,
    EventStore,
    EventStoreError,
    InMemoryEventStore,
    NewEvent,
    StoredEvent,
    Tracking,
)
from kaiwo_eventstore.codec import FORMAT_DEFLATE_V1, decode_document
from kaiwo_eventstore.scratch import (
    create_scratch_database,
    drop_scratch_database,
    run_admin_statement,
)
from kaiwo_eventstore.sql.engines import WRITE_OPTION, create_engine
from kaiwo_eventstore.sql.migrate import VERSION_TABLE, alembic_config, upgrade_to_head
from kaiwo_eventstore.sql.revision import SCHEMA_HEAD, KnowsItsRevision
from kaiwo_eventstore.sql.schema import UtcDateTime, metadata
from kaiwo_eventstore.sql.sqlite_file import SqliteFileEventStore, upgrade_apart
from kaiwo_eventstore.sql.store import SqlEventStore
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
JOB = "kaiwojob/0b7c0a5e-1111-4c1e-9d0a-3f2e8a9c7d01"
QUEUE = "kaiwoqueueconfig/kaiwo"
T = TypeVar("T")
NODE = "node/7f3e9c2a-2222-4b7d-8c55-0e1d2f3a4b5c"


# ---------------------------------------------------------------------- PostgreSQL server


def _run_apart(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion on a loop of its own (the caller's loop may be running)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh database on the session's server, migrated to head; dropped at the end."""
    server_url = postgres_server
    database_url = _run_apart(lambda: create_scratch_database(server_url, prefix="kaiwo_es_test"))
    try:
        _run_apart(lambda: upgrade_to_head(database_url))
        yield database_url
    finally:
        _run_apart(lambda: drop_scratch_database(server_url, database_url))


# ---------------------------------------------------------------------- adapters


@dataclass
class Backend:
    """The store under test and a way to open a second, independent one on the same data."""

    name: str
    store: EventStore
    open_another: Callable[[], Awaitable[EventStore]]


@pytest.fixture(
    params=["memory", "sqlite", "sqlite-file", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """``sqlite``: the SQLAlchemy store on a file; ``sqlite-file``: the sqlite3 one."""
    opened: list[EventStore] = []

    async def opening(store: Awaitable[EventStore]) -> EventStore:
        opened.append(await store)
        return opened[-1]

    if request.param == "memory":
        memory = InMemoryEventStore()

        async def same_memory() -> EventStore:
            return memory

        yield Backend("memory", memory, same_memory)
        return
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        await run_admin_statement(
            url, "TRUNCATE events, consumer_positions, store_cluster RESTART IDENTITY"
        )
    else:
        url = f"sqlite:///{tmp_path / 'events.db'}"
        await upgrade_to_head(url)

    def open_another() -> Awaitable[EventStore]:
        if request.param == "sqlite-file":
            return opening(SqliteFileEventStore.open(tmp_path / "events.db", migrate=False))
        return opening(_as_store(SqlEventStore(create_engine(url))))

    try:
        yield Backend(request.param, await open_another(), open_another)
    finally:
        for store in opened:
            await store.close()


async def _as_store(store: EventStore) -> EventStore:
    return store


def event(
    number: int,
    *,
    stream: str = JOB,
    kind: str = "ai.silogen.kaiwo.kaiwojob.observed.v1",
    time: datetime | None = None,
    correlation: str = "0b7c0a5e-1111-4c1e-9d0a-3f2e8a9c7d01",
    event_id: str | None = None,
) -> NewEvent:
    return NewEvent(
        event_id=event_id or f"{stream}:{number}",
        stream_id=stream,
        type=kind,
        subject=f"team-a/job-{number}",
        time=time or T0 + timedelta(seconds=number),
        source="/kaiwo/watcher",
        correlation_id=correlation,
        causation_id=None,
        data={"number": number, "spec": {"replicas": 2, "labels": {"team": "a"}}},
        metadata={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
    )


def ids(events: list[StoredEvent]) -> list[str]:
    return [stored.event_id for stored in events]


# ---------------------------------------------------------------------- append and read


async def test_appended_events_read_back_by_stream_with_every_field(backend: Backend) -> None:
    store = backend.store
    caused = NewEvent(
        event_id="plan-1",
        stream_id=JOB,
        type="ai.silogen.kaiwo.plan.decided.v1",
        subject="team-a/job-1",
        time=datetime(2025, 3, 1, 14, 30, 0, 250_000, tzinfo=timezone(timedelta(hours=2))),
        source="/kaiwo/planner",
        correlation_id="corr-1",
        causation_id="obs-1",
        data={"objects": [{"kind": "Job", "name": "job-1"}], "ratio": 0.5, "ok": True},
        metadata={"traceparent": "00-aa-bb-01", "attempt": 2},
    )
    result = await store.append([event(1), event(2), caused], expected_version=NO_STREAM)

    assert [stored.stream_version for stored in result.stored] == [1, 2, 3]
    assert result.duplicates == ()
    read = await store.read_stream(JOB)
    assert read == list(result.stored)
    last = read[2]
    assert last.event_id == "plan-1"
    assert last.type == "ai.silogen.kaiwo.plan.decided.v1"
    assert last.subject == "team-a/job-1"
    assert last.source == "/kaiwo/planner"
    assert last.correlation_id == "corr-1"
    assert last.causation_id == "obs-1"
    assert last.time == datetime(2025, 3, 1, 12, 30, 0, 250_000, tzinfo=UTC)
    assert last.time.utcoffset() == timedelta(0)
    assert last.data == {"objects": [{"kind": "Job", "name": "job-1"}], "ratio": 0.5, "ok": True}
    assert last.metadata == {"traceparent": "00-aa-bb-01", "attempt": 2}
    assert last.recorded_at.tzinfo is not None
    assert await store.stream_version(JOB) == 3
    assert await store.stream_version("kaiwojob/unknown") == 0
    assert await store.read_stream("kaiwojob/unknown") == []


async def test_stream_reads_honour_version_bounds(backend: Backend) -> None:
    store = backend.store
    await store.append([event(n) for n in range(1, 6)])

    assert [e.stream_version for e in await store.read_stream(JOB, from_version=3)] == [3, 4, 5]
    window = await store.read_stream(JOB, from_version=2, to_version=3)
    assert [e.stream_version for e in window] == [2, 3]


async def test_global_order_follows_append_order_across_streams(backend: Backend) -> None:
    store = backend.store
    await store.append([event(1, stream=JOB), event(1, stream=QUEUE)])
    await store.append([event(1, stream=NODE)])
    await store.append([event(2, stream=JOB)])

    everything = await store.read_all()
    assert ids(everything) == [f"{JOB}:1", f"{QUEUE}:1", f"{NODE}:1", f"{JOB}:2"]
    positions = [stored.global_position for stored in everything]
    assert positions == sorted(positions)
    assert len(set(positions)) == 4
    assert [(e.stream_id, e.stream_version) for e in everything] == [
        (JOB, 1),
        (QUEUE, 1),
        (NODE, 1),
        (JOB, 2),
    ]
    assert await store.last_position() == positions[-1]
    page = await store.read_all(positions[1], limit=2)
    assert ids(page) == [f"{QUEUE}:1", f"{NODE}:1"]
    assert await store.read_all(positions[-1] + 1) == []


async def test_empty_store_reports_position_zero(backend: Backend) -> None:
    assert await backend.store.last_position() == 0
    assert await backend.store.read_all() == []


# ---------------------------------------------------------------------- idempotency


async def test_redelivered_event_is_reported_as_duplicate_not_stored_twice(
    backend: Backend,
) -> None:
    store = backend.store
    first = await store.append([event(1, event_id="uid-1:100")])
    again = await store.append([event(1, event_id="uid-1:100")])

    assert again.stored == ()
    assert again.duplicates == ("uid-1:100",)
    assert again.only_duplicates
    assert not first.only_duplicates
    assert ids(await store.read_all()) == ["uid-1:100"]


async def test_batch_with_some_duplicates_stores_only_new_events(backend: Backend) -> None:
    store = backend.store
    await store.append([event(1, event_id="a")])
    result = await store.append(
        [event(2, event_id="a"), event(3, event_id="b"), event(4, event_id="b")]
    )

    assert ids(list(result.stored)) == ["b"]
    assert result.stored[0].stream_version == 2
    assert result.duplicates == ("a", "b")
    assert ids(await store.read_stream(JOB)) == ["a", "b"]


async def test_redelivery_with_its_original_expectation_is_a_duplicate_not_a_conflict(
    backend: Backend,
) -> None:
    store = backend.store
    await store.append([event(1)], expected_version=0)
    await store.append([event(2)], expected_version=1)

    replay = await store.append([event(1)], expected_version=0)

    assert replay.only_duplicates
    assert await store.stream_version(JOB) == 2


# ---------------------------------------------------------------------- optimistic concurrency


async def test_stale_expected_version_raises_conflict_naming_stream_and_versions(
    backend: Backend,
) -> None:
    store = backend.store
    await store.append([event(1), event(2)], expected_version=0)

    with pytest.raises(ConcurrencyError) as raised:
        await store.append([event(3)], expected_version=1)

    assert raised.value.stream_id == JOB
    assert raised.value.expected == "version 1"
    assert raised.value.actual == 2
    assert str(raised.value) == f"stream {JOB!r}: expected version 1, found version 2"
    assert await store.stream_version(JOB) == 2


async def test_stream_state_expectations(backend: Backend) -> None:
    store = backend.store
    with pytest.raises(ConcurrencyError, match="expected stream exists, found version 0"):
        await store.append([event(1)], expected_version=STREAM_EXISTS)
    await store.append([event(1)], expected_version=NO_STREAM)
    with pytest.raises(ConcurrencyError, match="expected no stream, found version 1"):
        await store.append([event(2)], expected_version=NO_STREAM)
    await store.append([event(2)], expected_version=STREAM_EXISTS)
    await store.append([event(3)], expected_version=ANY)
    await store.append([event(4)], expected_version=None)

    assert [e.stream_version for e in await store.read_stream(JOB)] == [1, 2, 3, 4]


async def test_failed_append_stores_nothing_and_keeps_tracking(backend: Backend) -> None:
    store = backend.store
    await store.append([event(1)], tracking=Tracking("planner", 7))

    with pytest.raises(ConcurrencyError):
        await store.append(
            [event(2), event(3)], expected_version=0, tracking=Tracking("planner", 9)
        )

    assert ids(await store.read_all()) == [f"{JOB}:1"]
    assert await store.position("planner") == 7


async def test_expectation_on_a_batch_spanning_streams_is_rejected(backend: Backend) -> None:
    with pytest.raises(ValueError, match="one stream"):
        await backend.store.append(
            [event(1, stream=JOB), event(1, stream=NODE)], expected_version=0
        )
    assert await backend.store.last_position() == 0


async def test_concurrent_appenders_get_gapless_versions(backend: Backend) -> None:
    first = backend.store
    second = await backend.open_another()
    appenders = [
        (first if number % 2 else second).append_next([event(number, event_id=f"c-{number}")])
        for number in range(1, 41)
    ]

    results = await asyncio.gather(*appenders)

    versions = sorted(result.stored[0].stream_version for result in results)
    assert versions == list(range(1, 41))
    in_stream = await first.read_stream(JOB)
    assert [e.stream_version for e in in_stream] == list(range(1, 41))
    # Version order is commit order, so it is also global order.
    positions = [e.global_position for e in in_stream]
    assert positions == sorted(positions)
    assert ids(await first.read_all(limit=100)) == ids(in_stream)


async def test_concurrent_writers_expecting_the_same_version_let_exactly_one_win(
    backend: Backend,
) -> None:
    first = backend.store
    second = await backend.open_another()
    attempts = [
        (first if number % 2 else second).append([event(number)], expected_version=0)
        for number in range(1, 11)
    ]

    outcomes = await asyncio.gather(*attempts, return_exceptions=True)

    conflicts = [outcome for outcome in outcomes if isinstance(outcome, ConcurrencyError)]
    assert len(conflicts) == 9
    assert all(conflict.actual == 1 for conflict in conflicts)
    assert await first.stream_version(JOB) == 1


# ---------------------------------------------------------------------- filtered reads


async def test_read_by_time_is_half_open_and_accepts_any_offset(backend: Backend) -> None:
    store = backend.store
    await store.append([event(n, time=T0 + timedelta(minutes=n)) for n in range(5)])

    found = await store.read_by_time(T0 + timedelta(minutes=1), T0 + timedelta(minutes=3))
    assert [e.stream_version for e in found] == [2, 3]
    plus_two = timezone(timedelta(hours=2))
    shifted = await store.read_by_time(
        datetime(2025, 3, 1, 14, 3, tzinfo=plus_two), datetime(2025, 3, 1, 15, 0, tzinfo=plus_two)
    )
    assert [e.stream_version for e in shifted] == [4, 5]
    limited = await store.read_by_time(T0, T0 + timedelta(hours=1), limit=2)
    assert [e.stream_version for e in limited] == [1, 2]
    with pytest.raises(ValueError, match="timezone-aware"):
        await store.read_by_time(datetime(2025, 3, 1), T0)


async def test_read_by_type(backend: Backend) -> None:
    store = backend.store
    observed = "ai.silogen.kaiwo.kaiwojob.observed.v1"
    decided = "ai.silogen.kaiwo.plan.decided.v1"
    applied = "ai.silogen.kaiwo.plan.applied.v1"
    await store.append(
        [
            event(1, kind=observed),
            event(2, kind=decided),
            event(3, kind=applied),
            event(4, kind=decided),
        ]
    )

    assert [e.stream_version for e in await store.read_by_type([decided, applied])] == [2, 3, 4]
    assert [e.stream_version for e in await store.read_by_type(observed)] == [1]
    assert await store.read_by_type([]) == []
    later = await store.read_by_type(
        [decided], from_position=(await store.read_all())[2].global_position
    )
    assert [e.stream_version for e in later] == [4]


async def test_read_by_correlation(backend: Backend) -> None:
    store = backend.store
    await store.append(
        [
            event(1, stream=JOB, correlation="job-1"),
            event(1, stream=NODE, correlation="node-1"),
            event(2, stream=JOB, correlation="job-1"),
        ]
    )

    found = await store.read_by_correlation("job-1")
    assert [(e.stream_id, e.stream_version) for e in found] == [(JOB, 1), (JOB, 2)]
    assert await store.read_by_correlation("nobody") == []
    assert len(await store.read_by_correlation("job-1", limit=1)) == 1


async def test_positions_of_type_split_the_events_of_one_type_by_share(backend: Backend) -> None:
    """A replay splits its plans into spans: the positions only, at shares of their count."""
    store = backend.store
    plan, result = "ai.silogen.kaiwo.plan.decided.v1", "ai.silogen.kaiwo.exec.result.v1"
    assert await store.positions_of_type(plan, [0.0, 0.5]) == []
    # Plans at the 2nd, 4th, 6th, 8th and 10th positions stored, results between them.
    await store.append([event(n, kind=plan if n % 2 == 0 else result) for n in range(1, 11)])
    positions = [e.global_position for e in await store.read_by_type([plan])]
    assert len(positions) == 5

    found = await store.positions_of_type(plan, [0.0, 0.2, 0.5, 0.59, 0.6, 0.99])

    # floor(share * 5): the 0th, 1st, 2nd, 2nd, 3rd and 4th plan.
    assert found == [positions[n] for n in (0, 1, 2, 2, 3, 4)]
    assert await store.positions_of_type("no.such.type", [0.0]) == []
    with pytest.raises(ValueError, match="it must be from 0 to 1, 1 excluded"):
        await store.positions_of_type(plan, [1.0])


async def test_read_by_subject_gives_the_events_of_one_object_and_types(backend: Backend) -> None:
    """Finding a workload by name reads the history of that name only."""
    store = backend.store
    observed, plan = "ai.silogen.kaiwo.obs.observed.v1", "ai.silogen.kaiwo.plan.decided.v1"
    await store.append(
        [
            event(1, kind=observed),  # subject team-a/job-1, as every event(n) is team-a/job-n
            event(2, kind=observed),
            event(3, kind=plan),
            event(4, stream=NODE, kind=observed),
        ]
    )
    later = [
        NewEvent(
            event_id=f"again:{n}",
            stream_id=JOB,
            type=kind,
            subject="team-a/job-1",
            time=T0 + timedelta(minutes=n),
            source="/kaiwo/watcher",
            correlation_id="job-1",
            causation_id=None,
            data={"number": 100 + n},
            metadata={},
        )
        for n, kind in ((1, plan), (2, observed), (3, observed))
    ]
    await store.append(later)

    found = await store.read_by_subject("team-a/job-1", [observed])
    assert [e.data["number"] for e in found] == [1, 102, 103]
    both = await store.read_by_subject("team-a/job-1", [observed, plan])
    assert [e.data["number"] for e in both] == [1, 101, 102, 103]
    assert [e.data["number"] for e in await store.read_by_subject("team-a/job-4", [observed])] == [
        4
    ]
    assert [
        e.data["number"] for e in await store.read_by_subject("team-a/job-1", [observed], limit=2)
    ] == [1, 102]
    after = await store.read_by_subject(
        "team-a/job-1", [observed], from_position=found[1].global_position + 1
    )
    assert [e.data["number"] for e in after] == [103]
    assert await store.read_by_subject("team-a/job-1", []) == []
    assert await store.read_by_subject("team-b/job-1", [observed]) == []
    assert await store.read_by_subject("team-a/job-3", [observed]) == []  # a plan only


# ---------------------------------------------------------------------- tracking


async def test_consumer_positions(backend: Backend) -> None:
    store = backend.store
    assert await store.position("recorder") == 0

    await store.save_position("recorder", 41)
    await store.save_position("planner", 3)
    await store.save_position("recorder", 42)

    assert await store.position("recorder") == 42
    assert await store.position("planner") == 3
    await store.save_position("recorder", 5)  # a rewind for a replay is allowed
    assert await store.position("recorder") == 5


async def test_the_store_records_the_first_cluster_bound_to_it(backend: Backend) -> None:
    store = backend.store
    assert await store.cluster() is None

    assert await store.bind_cluster("uid-of-cluster-a") == "uid-of-cluster-a"
    # Bound again by the same cluster (a restart), or by another: the first one stays.
    assert await store.bind_cluster("uid-of-cluster-a") == "uid-of-cluster-a"
    assert await store.bind_cluster("uid-of-cluster-b") == "uid-of-cluster-a"
    assert await store.cluster() == "uid-of-cluster-a"
    # Kept by the store itself: another connection to it reads the same.
    assert await (await backend.open_another()).cluster() == "uid-of-cluster-a"


async def test_tracking_is_saved_with_the_append(backend: Backend) -> None:
    store = backend.store
    result = await store.append_next([event(1)], tracking=Tracking("recorder", 1001))
    assert result.stored[0].stream_version == 1
    assert await store.position("recorder") == 1001

    redelivered = await store.append_next([event(1)], tracking=Tracking("recorder", 1002))
    assert redelivered.only_duplicates
    assert await store.position("recorder") == 1002


# ---------------------------------------------------------------------- large reads


async def test_iter_all_reads_large_stores_in_batches(backend: Backend) -> None:
    store = backend.store
    for start in range(0, 2500, 500):
        await store.append(
            [
                event(n, stream=f"node/{n % 7}", event_id=f"big-{n}")
                for n in range(start, start + 500)
            ]
        )

    sizes = [len(batch) async for batch in store.iter_all(batch_size=1000)]
    assert sizes == [1000, 1000, 500]

    collected = [e async for batch in store.iter_all(batch_size=999) for e in batch]
    assert [e.event_id for e in collected] == [f"big-{n}" for n in range(2500)]
    positions = [e.global_position for e in collected]
    assert positions == sorted(positions)

    middle = positions[1200]
    tail = [e async for batch in store.iter_all(middle, to_position=positions[1299]) for e in batch]
    assert [e.event_id for e in tail] == [f"big-{n}" for n in range(1200, 1300)]


async def test_iter_all_can_stop_early(backend: Backend) -> None:
    store = backend.store
    await store.append([event(n, event_id=f"s-{n}") for n in range(30)])

    async with contextlib.aclosing(store.iter_all(batch_size=10)) as batches:
        async for batch in batches:
            first = batch
            break

    assert [e.event_id for e in first] == [f"s-{n}" for n in range(10)]
    assert await store.last_position() == (await store.read_all(limit=100))[-1].global_position


@pytest.mark.parametrize("reader", ["iter_all", "iter_by_type"])
async def test_a_batch_iterator_closed_early_leaves_no_read_running(
    backend: Backend, reader: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Replay closes its input streams with the next batch being read: that read must end
    with the iterator, not run on until the loop shuts down and the connection pool logs its
    cancelled rollback as an error."""
    store = backend.store
    await store.append([event(n, event_id=f"c-{n}") for n in range(30)])
    iterators = {
        "iter_all": lambda: store.iter_all(batch_size=10),
        "iter_by_type": lambda: store.iter_by_type(
            "ai.silogen.kaiwo.kaiwojob.observed.v1", batch_size=10
        ),
    }

    async with contextlib.aclosing(iterators[reader]()) as batches:
        first = await anext(batches)
        await asyncio.sleep(0)  # the next batch's read has started

    assert len(first) == 10
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
    assert len(await store.read_all(limit=100)) == 30
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_iter_by_type_reads_one_type_in_batches_from_a_position(backend: Backend) -> None:
    store = backend.store
    plan = "ai.silogen.kaiwo.plan.decided.v1"
    await store.append(
        [
            event(n, kind=plan if n % 3 == 0 else "ai.silogen.kaiwo.obs.observed.v1")
            for n in range(1, 31)
        ]
    )

    batches = [batch async for batch in store.iter_by_type(plan, batch_size=4)]
    assert [len(batch) for batch in batches] == [4, 4, 2]
    plans = [e for batch in batches for e in batch]
    assert [e.data["number"] for e in plans] == [3, 6, 9, 12, 15, 18, 21, 24, 27, 30]
    assert {e.type for e in plans} == {plan}

    later = [e async for batch in store.iter_by_type(plan, plans[5].global_position) for e in batch]
    assert [e.data["number"] for e in later] == [18, 21, 24, 27, 30]
    assert [b async for b in store.iter_by_type("ai.silogen.kaiwo.none.v1")] == []


async def test_iter_by_type_gives_only_the_events_of_the_correlations_asked_for(
    backend: Backend,
) -> None:
    """A replay process reads the plans of its workloads only (by correlation id): in order,
    in batches that are never empty (where a batch ends is the adapter's choice)."""
    store = backend.store
    plan = "ai.silogen.kaiwo.plan.decided.v1"
    await store.append(
        [
            event(
                n,
                kind=plan if n % 2 == 0 else "ai.silogen.kaiwo.obs.observed.v1",
                correlation="workload-a" if n in {2, 4, 10, 16, 18} else "workload-b",
            )
            for n in range(1, 21)
        ]
    )
    asked: list[str] = []

    def workload_a(correlation_id: str) -> bool:
        asked.append(correlation_id)
        return correlation_id == "workload-a"

    batches = [b async for b in store.iter_by_type(plan, batch_size=3, correlated=workload_a)]

    assert [e.data["number"] for batch in batches for e in batch] == [2, 4, 10, 16, 18]
    assert all(0 < len(batch) <= 3 for batch in batches)
    assert sorted(set(asked)) == ["workload-a", "workload-b"]
    assert [b async for b in store.iter_by_type(plan, correlated=lambda _c: False)] == []


# ---------------------------------------------------------------------- schema (SQL adapters)


async def _differences(engine: AsyncEngine, target: sa.MetaData = metadata) -> list[object]:
    def compare(connection: Connection) -> list[object]:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "version_table": VERSION_TABLE}
        )
        return list(compare_metadata(context, target))

    async with engine.connect() as connection:
        return await connection.run_sync(compare)


def _metadata_with_an_extra_index() -> sa.MetaData:
    changed = sa.MetaData()
    for table in metadata.sorted_tables:
        table.to_metadata(changed)
    sa.Index("ix_events_source", changed.tables["events"].c.source)
    return changed


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def migrated_engine(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[AsyncEngine]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'migrated.db'}"
        await upgrade_to_head(url)
    else:
        url = request.getfixturevalue("postgres_url")
    engine = create_engine(url)
    try:
        yield engine
    finally:
        await engine.dispose()


async def test_migrations_produce_exactly_the_declared_schema(
    migrated_engine: AsyncEngine,
) -> None:
    assert await _differences(migrated_engine) == []
    # The comparison does see differences: an index the database lacks is reported.
    reported = await _differences(migrated_engine, _metadata_with_an_extra_index())
    assert [entry[0] for entry in reported] == ["add_index"]  # type: ignore[index]


async def test_upgrading_again_changes_nothing(migrated_engine: AsyncEngine) -> None:
    await upgrade_to_head(migrated_engine)

    async with migrated_engine.connect() as connection:
        versions = (await connection.execute(sa.text(f"SELECT * FROM {VERSION_TABLE}"))).all()
    assert [tuple(row) for row in versions] == [("0003",)]
    assert await _differences(migrated_engine) == []


async def test_in_memory_sqlite_is_migrated_on_its_own_engine() -> None:
    store = await SqlEventStore.open("sqlite://")
    try:
        await store.append([event(1)])
        assert ids(await store.read_all()) == [f"{JOB}:1"]
        assert await _differences(store.engine) == []
    finally:
        await store.close()


# ---------------------------------------------------------------------- schema revision


async def test_a_sql_store_says_which_schema_revision_its_database_is_at(backend: Backend) -> None:
    """``kaiwo events`` opens a store without migrating it and reads it only at a revision
    it reads (decision 0230): both SQL stores answer, the fake has no schema to be at."""
    if backend.name == "memory":
        assert not isinstance(backend.store, KnowsItsRevision)
        return
    assert isinstance(backend.store, KnowsItsRevision)
    assert await backend.store.revision() == SCHEMA_HEAD


async def test_a_database_without_the_schema_is_at_no_revision(tmp_path: Path) -> None:
    store = SqlEventStore(create_engine(f"sqlite:///{tmp_path / 'empty.db'}"))
    try:
        assert await store.revision() is None
    finally:
        await store.close()


# ---------------------------------------------------------------------- the sqlite3 store


def test_the_sqlite3_store_knows_the_head_revision() -> None:
    """It checks the revision itself, to load alembic only when a migration is due."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head == SCHEMA_HEAD


@pytest.mark.parametrize("apart", [False, True], ids=["in-process", "child-process"])
async def test_the_sqlite3_store_migrates_a_new_file_then_finds_it_at_the_head(
    tmp_path: Path, apart: bool
) -> None:
    path = tmp_path / "new.db"
    store = await SqliteFileEventStore.open(path, migrate_apart=apart)
    try:
        assert await store.revision() == SCHEMA_HEAD
        await store.append([event(1)])
        assert ids(await store.read_all()) == [f"{JOB}:1"]
    finally:
        await store.close()
    engine = create_engine(f"sqlite:///{path}")
    try:
        assert await _differences(engine) == []
    finally:
        await engine.dispose()


async def test_a_migration_in_a_child_process_that_fails_says_so(tmp_path: Path) -> None:
    directory = tmp_path / "not-a-database.db"
    directory.mkdir()

    with pytest.raises(EventStoreError, match=r"migrating .*not-a-database\.db failed"):
        await upgrade_apart(directory)


async def test_the_two_sqlite_stores_read_each_others_events_unchanged(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    await upgrade_to_head(url)
    by_sqlalchemy = SqlEventStore(create_engine(url))
    by_sqlite3 = await SqliteFileEventStore.open(tmp_path / "shared.db", migrate=False)
    east = timezone(timedelta(hours=5, minutes=30))
    try:
        first = await by_sqlalchemy.append(
            [event(1, time=datetime(2025, 3, 1, 17, 30, tzinfo=east))]
        )
        second = await by_sqlite3.append([event(2, time=T0 + timedelta(microseconds=7))])
        written = [*first.stored, *second.stored]

        assert await by_sqlite3.read_all() == written
        assert await by_sqlalchemy.read_all() == written
        assert [e.time for e in written] == [T0, T0 + timedelta(microseconds=7)]
        for store in (by_sqlalchemy, by_sqlite3):
            in_range = await store.read_by_time(T0, T0 + timedelta(microseconds=7))
            assert ids(in_range) == [f"{JOB}:1"]
    finally:
        await by_sqlalchemy.close()
        await by_sqlite3.close()


# ---------------------------------------------------------------------- packed documents


async def test_documents_are_stored_deflated_and_read_back_unchanged(
    migrated_engine: AsyncEngine,
) -> None:
    document = {
        "kind": "Pod",
        "object": {
            "metadata": {"name": "train-0", "labels": {"team": "ä-team ✓"}, "annotations": {}},
            "spec": {"containers": [{"name": "main", "args": ["--lr", "0.5"]}] * 4},
            "status": {"phase": "Running", "podIP": None, "restarts": 2**40, "ratio": 0.125},
        },
    }
    store = SqlEventStore(migrated_engine)
    await store.append(
        [
            NewEvent(
                event_id="packed-1",
                stream_id="workload/packed",
                type="ai.silogen.kaiwo.obs.observed.v1",
                time=T0,
                source="/kaiwo/watcher",
                correlation_id="packed",
                data=document,
                metadata={"natsStream": "KAIWO_OBS", "natsSequence": 7},
            )
        ]
    )

    async with migrated_engine.connect() as connection:
        raw_data, raw_metadata = (
            await connection.execute(
                sa.text("SELECT data, metadata FROM events WHERE event_id = 'packed-1'")
            )
        ).one()
    assert bytes(raw_data)[0] == FORMAT_DEFLATE_V1
    assert len(raw_data) < len(json.dumps(document, separators=(",", ":"))) / 2
    assert decode_document(bytes(raw_metadata)) == {"natsStream": "KAIWO_OBS", "natsSequence": 7}
    [read] = await store.read_stream("workload/packed")
    assert read.data == document
    assert read.metadata == {"natsStream": "KAIWO_OBS", "natsSequence": 7}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no schema yet, of its own (the migration test changes its schema)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    server = request.getfixturevalue("postgres_server")
    url = _run_apart(lambda: create_scratch_database(server, prefix="kaiwo_es_migrate"))
    try:
        yield url
    finally:
        _run_apart(lambda: drop_scratch_database(server, url))


async def _migrate_to(engine: AsyncEngine, revision: str, *, down: bool = False) -> None:
    def run(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, revision)

    async with engine.connect() as connection:
        await connection.execution_options(**{WRITE_OPTION: True})
        async with connection.begin():
            await connection.run_sync(run)


async def test_the_migration_packs_rows_stored_as_json_and_unpacks_them_on_downgrade(
    empty_database: str,
) -> None:
    documents = [
        ({"number": n, "object": {"name": f"job-{n}", "labels": {"é": "✓"}}}, {"seq": n})
        for n in range(1, 2502)  # more than one chunk of the conversion
    ]
    json_type = sa.JSON().with_variant(JSONB(), "postgresql")
    insert = sa.text(
        "INSERT INTO events (event_id, stream_id, stream_version, event_type, source, time,"
        " correlation_id, data, metadata) VALUES (:id, 's', :version, 't', '/x', :time, 'c',"
        " :data, :metadata)"
    ).bindparams(
        sa.bindparam("data", type_=json_type),
        sa.bindparam("metadata", type_=json_type),
        sa.bindparam("time", type_=UtcDateTime()),
    )
    # A fresh engine for each schema: PostgreSQL refuses statements prepared on the old one.
    async with _engine(empty_database) as engine:
        await _migrate_to(engine, "0001")
        async with engine.connect() as connection:
            await connection.execution_options(**{WRITE_OPTION: True})
            async with connection.begin():
                await connection.execute(
                    insert,
                    [
                        {"id": f"e{n}", "version": n, "time": T0, "data": d, "metadata": m}
                        for n, (d, m) in enumerate(documents, start=1)
                    ],
                )
        await upgrade_to_head(engine)

    async with _engine(empty_database) as engine:
        assert await _differences(engine) == []
        store = SqlEventStore(engine)
        read = [e async for batch in store.iter_all() for e in batch]
        assert [(e.data, e.metadata) for e in read] == documents
        await _migrate_to(engine, "0001", down=True)

    async with _engine(empty_database) as engine, engine.connect() as connection:
        row = (
            await connection.execute(
                sa.text("SELECT data, metadata FROM events WHERE event_id = 'e2501'")
            )
        ).one()
    assert [json.loads(v) if isinstance(v, str) else v for v in row] == list(documents[-1])


@contextlib.asynccontextmanager
async def _engine(url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(url)
    try:
        yield engine
    finally:
        await engine.dispose()


_REFUSE_POISON = {
    "sqlite": [
        "CREATE TRIGGER refuse_poison BEFORE INSERT ON events WHEN NEW.event_id = 'poison'"
        " BEGIN SELECT RAISE(ABORT, 'poison refused'); END"
    ],
    "postgresql": [
        "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$"
        " BEGIN IF NEW.event_id = 'poison' THEN RAISE EXCEPTION 'poison refused'; END IF;"
        " RETURN NEW; END $$",
        "CREATE TRIGGER refuse_poison BEFORE INSERT ON events FOR EACH ROW"
        " EXECUTE FUNCTION refuse_poison()",
    ],
}


async def test_a_batch_the_database_refuses_midway_stores_none_of_its_events(
    empty_database: str,
) -> None:
    """The recorder appends each fetch in one transaction (decision 0053): rows the
    database took before it refused one in the middle must not stay."""
    async with _engine(empty_database) as engine:
        await upgrade_to_head(engine)
        async with engine.begin() as connection:
            for statement in _REFUSE_POISON[engine.dialect.name]:
                await connection.exec_driver_sql(statement)
    async with _engine(empty_database) as engine:
        await _a_refused_batch_leaves_nothing(SqlEventStore(engine))


async def test_the_sqlite3_store_keeps_none_of_a_batch_the_database_refuses_midway(
    tmp_path: Path,
) -> None:
    path = tmp_path / "refusing.db"
    await upgrade_to_head(f"sqlite:///{path}")
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute(_REFUSE_POISON["sqlite"][0])
    store = await SqliteFileEventStore.open(path)
    try:
        await _a_refused_batch_leaves_nothing(store)
    finally:
        await store.close()


async def _a_refused_batch_leaves_nothing(store: EventStore) -> None:
    await store.append([event(1)])
    batch = [event(2), event(3), event(4, event_id="poison"), event(5)]

    # (SQLite reports a trigger's refusal as a constraint, hence a conflict.)
    with pytest.raises((sa.exc.DBAPIError, ConcurrencyError)):
        await store.append(batch, tracking=Tracking("recorder-obs", 99))

    assert ids(await store.read_all()) == [f"{JOB}:1"]
    assert await store.stream_version(JOB) == 1
    assert await store.position("recorder-obs") == 0
    # The same batch without the refused event is stored whole afterwards.
    stored = await store.append([e for e in batch if e.event_id != "poison"])
    assert [e.stream_version for e in stored.stored] == [2, 3, 4]
