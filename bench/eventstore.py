"""Event store throughput: append (batched and single) and replay, on SQLite and PostgreSQL.

Run: ``uv run python bench/eventstore.py``. PostgreSQL is the server at
``KAIWO_TEST_POSTGRES_URL``, else one of our own started for the run from the pinned wheel
(:func:`kaiwo_eventstore.scratch.scratch_server`); a scratch database is created and dropped.
The replay corpus (100,000 events) is loaded with bulk INSERTs, since only reading it is
measured.

Then the bytes per workload: the history of ``bench/history.py`` (200 KaiwoJobs by default,
each created, run, completed and deleted; the real planner and recorder) is recorded into a
fresh store, its size measured compacted (SQLite: the file after VACUUM; PostgreSQL: the
events table with indexes and TOAST after VACUUM FULL), then the store is migrated down to
revision 0001 (JSON columns, as before decision 0052) and measured again: the same events,
before and after, in one run. ``--bytes-only`` skips the throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa
from kaiwo_eventstore import EventStore, InMemoryEventStore, NewEvent, open_event_store
from kaiwo_eventstore.codec import encode_document
from kaiwo_eventstore.scratch import scratch_database, scratch_server, why_no_server
from kaiwo_eventstore.sql.engines import create_engine
from kaiwo_eventstore.sql.migrate import migrate_to, upgrade_to_head
from kaiwo_eventstore.sql.schema import events
from kaiwo_eventstore.sql.store import SqlEventStore
from kaiwo_runtime.logging import configure_logging

BATCHED_EVENTS = 10_000
BATCH = 100
SINGLE_SECONDS = 2.0
REPLAY_EVENTS = 100_000
REPLAY_BATCH = 2_000
BYTES_WORKLOADS = 200
START = datetime(2025, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Figures:
    backend: str
    batched: float
    single: float
    replay: float
    replayed: int


def observed(number: int, *, prefix: str) -> NewEvent:
    """An observation about the size of a small Kubernetes object (~600 bytes of JSON)."""
    uid = f"{prefix}-{number % 200}"
    return NewEvent(
        event_id=f"{uid}:{number}",
        stream_id=f"kaiwojob/{uid}",
        type="ai.silogen.kaiwo.kaiwojob.observed.v1",
        subject=f"team-a/job-{number % 200}",
        time=START + timedelta(milliseconds=number),
        source="/kaiwo/watcher",
        correlation_id=uid,
        data={
            "apiVersion": "kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoJob",
            "metadata": {
                "name": f"job-{number % 200}",
                "namespace": "team-a",
                "uid": uid,
                "resourceVersion": str(number),
                "labels": {"kaiwo.silogen.ai/user": "alice", "team": "a"},
            },
            "spec": {
                "image": "ghcr.io/silogen/rocm-ray:v0.9",
                "gpus": 8,
                "replicas": 2,
                "entrypoint": "python train.py --epochs 3",
                "resources": {"requests": {"cpu": "16", "memory": "128Gi"}},
            },
            "status": {"status": "RUNNING", "conditions": [{"type": "Ready", "status": "True"}]},
        },
        metadata={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
    )


async def measure_appends(store: EventStore) -> tuple[float, float]:
    events = [observed(n, prefix="b") for n in range(BATCHED_EVENTS)]
    started = time.perf_counter()
    for start in range(0, BATCHED_EVENTS, BATCH):
        await store.append(events[start : start + BATCH])
    batched = BATCHED_EVENTS / (time.perf_counter() - started)

    count = 0
    started = time.perf_counter()
    while time.perf_counter() - started < SINGLE_SECONDS:
        await store.append_next([observed(count, prefix="s")])
        count += 1
    single = count / (time.perf_counter() - started)
    return batched, single


async def measure_replay(store: EventStore) -> tuple[float, int]:
    count = 0
    started = time.perf_counter()
    async for batch in store.iter_all(batch_size=REPLAY_BATCH):
        count += len(batch)
    return count / (time.perf_counter() - started), count


def corpus_rows(start: int, stop: int) -> list[dict[str, object]]:
    """Node observations as stored (documents packed), for a bulk INSERT."""
    recorded_at = datetime(2025, 1, 2, tzinfo=UTC)
    return [
        {
            "event_id": f"r-{i}",
            "stream_id": f"node/{i % 500}",
            "stream_version": i // 500 + 1,
            "event_type": "ai.silogen.kaiwo.node.observed.v1",
            "subject": f"node-{i % 500}",
            "source": "/kaiwo/watcher",
            "time": START + timedelta(seconds=i),
            "correlation_id": f"node-{i % 500}",
            "data": encode_document(
                {
                    "kind": "Node",
                    "metadata": {"name": f"node-{i % 500}", "resourceVersion": i},
                    "status": {"allocatable": {"amd.com/gpu": 8, "cpu": "192", "memory": "1536Gi"}},
                }
            ),
            "metadata": encode_document(
                {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
            ),
            "recorded_at": recorded_at,
        }
        for i in range(start, stop)
    ]


async def load_corpus(url: str) -> None:
    """The replay corpus in one transaction of bulk INSERTs (only reading it is measured)."""
    engine = create_engine(url)
    try:
        async with engine.begin() as connection:
            for start in range(1, REPLAY_EVENTS + 1, 10_000):
                stop = min(start + 10_000, REPLAY_EVENTS + 1)
                await connection.execute(sa.insert(events), corpus_rows(start, stop))
            if engine.dialect.name == "postgresql":
                await connection.execute(sa.text("ANALYZE events"))
    finally:
        await engine.dispose()


async def run_sql(name: str, url: str, *, sqlalchemy: bool = False) -> Figures:
    """The store ``open_event_store`` gives for ``url`` (with ``sqlalchemy``: the SQLAlchemy
    one whatever the URL, to compare it with the sqlite3 store on a file)."""

    async def opened() -> EventStore:
        if sqlalchemy:
            return SqlEventStore(create_engine(url))
        return await open_event_store(url, migrate=False)

    await upgrade_to_head(url)
    store = await opened()
    try:
        batched, single = await measure_appends(store)
    finally:
        await store.close()
    await load_corpus(url)
    store = await opened()
    try:
        replay, replayed = await measure_replay(store)
    finally:
        await store.close()
    return Figures(name, batched, single, replay, replayed)


async def run_memory() -> Figures:
    store = InMemoryEventStore()
    batched, single = await measure_appends(store)
    for start in range(0, REPLAY_EVENTS, 1000):
        await store.append([observed(n, prefix="r") for n in range(start, start + 1000)])
    replay, replayed = await measure_replay(store)
    return Figures("memory (fake)", batched, single, replay, replayed)


async def run_sqlite() -> Figures:
    """What ``kaiwo up`` records into: an SQLite file through ``sqlite3`` (decision 0088)."""
    with tempfile.TemporaryDirectory() as directory:
        return await run_sql("sqlite (file, WAL)", f"sqlite:///{Path(directory) / 'bench.db'}")


async def run_sqlite_sqlalchemy() -> Figures:
    """The same file through the SQLAlchemy store, as before decision 0088."""
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{Path(directory) / 'bench.db'}"
        return await run_sql("sqlite (SQLAlchemy)", url, sqlalchemy=True)


async def run_postgres() -> Figures | str:
    reason = why_no_server()
    if reason is not None:
        return f"postgresql skipped: {reason}"
    with scratch_server() as server:
        async with scratch_database(server, prefix="kaiwo_es_bench") as url:
            return await run_sql("postgresql", url)


def table(rows: list[Figures]) -> str:
    header = (
        f"{'backend':<20} {'append batched':>16} {'append single':>15} {'replay':>14}"
        f" {'replayed':>9}"
    )
    lines = [header, f"{'':<20} {f'({BATCH}/tx) ev/s':>16} {'(1/tx) ev/s':>15} {'ev/s':>14}"]
    lines.append("-" * len(header))
    lines.extend(
        f"{row.backend:<20} {row.batched:>16,.0f} {row.single:>15,.0f} {row.replay:>14,.0f}"
        f" {row.replayed:>9,}"
        for row in rows
    )
    return "\n".join(lines)


async def gather_figures() -> tuple[list[Figures], list[str]]:
    runs: list[Callable[[], Awaitable[Figures | str]]] = [
        run_memory,
        run_sqlite,
        run_sqlite_sqlalchemy,
        run_postgres,
    ]
    figures: list[Figures] = []
    notes: list[str] = []
    for run in runs:
        outcome = await run()
        (figures if isinstance(outcome, Figures) else notes).append(outcome)  # type: ignore[arg-type]
    return figures, notes


# --------------------------------------------------------------------------- bytes per workload


def compacted_file_size(path: str) -> int:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("VACUUM")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return Path(path).stat().st_size


async def sqlite_bytes(url: str) -> int:
    """The database file's size once compacted (VACUUM, WAL folded in)."""
    return await asyncio.to_thread(compacted_file_size, url.removeprefix("sqlite:///"))


async def postgres_bytes(url: str) -> int:
    """The events table with its indexes and TOAST, once compacted (VACUUM FULL)."""
    import asyncpg

    connection = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await connection.execute("VACUUM FULL events")
        return int(await connection.fetchval("SELECT pg_total_relation_size('events')"))
    finally:
        await connection.close()


async def bytes_per_workload(
    backend: str, url: str, measure: Callable[[str], Awaitable[int]], workloads: int
) -> str:
    """The same recorded history stored as 0001 did (JSON) and as now (packed)."""
    from history import record_history

    events = await record_history(url, workloads=workloads)
    packed = await measure(url)
    await migrate_to(url, "0001")
    as_json = await measure(url)
    await migrate_to(url, "head")
    return (
        f"{backend:<12} {workloads:,} KaiwoJobs, {events:,} events: "
        f"{as_json / workloads / 1024:.1f} KB per workload as JSON (0001), "
        f"{packed / workloads / 1024:.1f} KB packed (0002): {packed / as_json:.0%}; "
        f"{as_json / events:.0f} -> {packed / events:.0f} bytes per event"
    )


async def gather_bytes(workloads: int) -> list[str]:
    lines = []
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{Path(directory) / 'bytes.db'}"
        lines.append(await bytes_per_workload("sqlite", url, sqlite_bytes, workloads))
    reason = why_no_server()
    if reason is not None:
        lines.append(f"postgresql skipped: {reason}")
        return lines
    with scratch_server() as server:
        async with scratch_database(server, prefix="kaiwo_es_bytes") as url:
            lines.append(await bytes_per_workload("postgresql", url, postgres_bytes, workloads))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bytes-only", action="store_true", help="only the bytes per workload, not throughput"
    )
    parser.add_argument("--workloads", type=int, default=BYTES_WORKLOADS)
    args = parser.parse_args()
    started = time.perf_counter()
    if not args.bytes_only:
        figures, notes = asyncio.run(gather_figures())
        print(table(figures))
        for note in notes:
            print(note)
    configure_logging(level="ERROR")  # the history's two cluster-default results log warnings
    for line in asyncio.run(gather_bytes(args.workloads)):
        print(line)
    print(f"(total {time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
