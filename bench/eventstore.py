"""Event store throughput: append (batched and single) and replay, on SQLite and PostgreSQL.

Run: ``uv run python bench/eventstore.py``. PostgreSQL is the server at
``KAIWO_TEST_POSTGRES_URL``, else one of our own started for the run from the pinned wheel
(:func:`kaiwo_eventstore.scratch.scratch_server`); a scratch database is created and dropped.
The replay corpus (100,000 events) is loaded with one set-based INSERT, since only reading it
is being measured. Takes well under a minute.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa
from kaiwo_eventstore import EventStore, InMemoryEventStore, NewEvent
from kaiwo_eventstore.scratch import scratch_database, scratch_server, why_no_server
from kaiwo_eventstore.sql.engines import create_engine
from kaiwo_eventstore.sql.migrate import upgrade_to_head
from kaiwo_eventstore.sql.store import SqlEventStore

BATCHED_EVENTS = 10_000
BATCH = 100
SINGLE_SECONDS = 2.0
REPLAY_EVENTS = 100_000
REPLAY_BATCH = 2_000
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


_CORPUS_SQLITE = """
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :count)
INSERT INTO events (event_id, stream_id, stream_version, event_type, subject, source, time,
                    correlation_id, data, metadata, recorded_at)
SELECT 'r-' || i, 'node/' || (i % 500), i / 500 + 1, 'ai.silogen.kaiwo.node.observed.v1',
       'node-' || (i % 500), '/kaiwo/watcher',
       strftime('%Y-%m-%d %H:%M:%f', '2025-01-01', '+' || i || ' seconds'), 'node-' || (i % 500),
       json_object('kind', 'Node', 'metadata', json_object('name', 'node-' || (i % 500),
                   'resourceVersion', i), 'status', json_object('allocatable',
                   json_object('amd.com/gpu', 8, 'cpu', '192', 'memory', '1536Gi'))),
       json_object('traceparent', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'),
       '2025-01-02 00:00:00.000000'
FROM n
"""

_CORPUS_POSTGRES = """
INSERT INTO events (event_id, stream_id, stream_version, event_type, subject, source, time,
                    correlation_id, data, metadata, recorded_at)
SELECT 'r-' || i, 'node/' || (i % 500), i / 500 + 1, 'ai.silogen.kaiwo.node.observed.v1',
       'node-' || (i % 500), '/kaiwo/watcher', timestamptz '2025-01-01' + i * interval '1 second',
       'node-' || (i % 500),
       jsonb_build_object('kind', 'Node', 'metadata', jsonb_build_object('name', 'node-' ||
                          (i % 500), 'resourceVersion', i), 'status', jsonb_build_object(
                          'allocatable', jsonb_build_object('amd.com/gpu', 8, 'cpu', '192',
                          'memory', '1536Gi'))),
       jsonb_build_object('traceparent',
                          '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'),
       now()
FROM generate_series(1, :count) AS i
"""


async def load_corpus(url: str) -> None:
    engine = create_engine(url)
    corpus = _CORPUS_POSTGRES if engine.dialect.name == "postgresql" else _CORPUS_SQLITE
    try:
        async with engine.begin() as connection:
            await connection.execute(sa.text(corpus), {"count": REPLAY_EVENTS})
            if engine.dialect.name == "postgresql":
                await connection.execute(sa.text("ANALYZE events"))
    finally:
        await engine.dispose()


async def run_sql(name: str, url: str) -> Figures:
    await upgrade_to_head(url)
    store = SqlEventStore(create_engine(url))
    try:
        batched, single = await measure_appends(store)
    finally:
        await store.close()
    await load_corpus(url)
    store = SqlEventStore(create_engine(url))
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
    with tempfile.TemporaryDirectory() as directory:
        return await run_sql("sqlite (file, WAL)", f"sqlite:///{Path(directory) / 'bench.db'}")


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
    runs: list[Callable[[], Awaitable[Figures | str]]] = [run_memory, run_sqlite, run_postgres]
    figures: list[Figures] = []
    notes: list[str] = []
    for run in runs:
        outcome = await run()
        (figures if isinstance(outcome, Figures) else notes).append(outcome)  # type: ignore[arg-type]
    return figures, notes


def main() -> None:
    started = time.perf_counter()
    figures, notes = asyncio.run(gather_figures())
    print(table(figures))
    for note in notes:
        print(note)
    print(f"(total {time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
