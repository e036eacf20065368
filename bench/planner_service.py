"""CPU per observation of the whole planner service: bus, envelopes, projection, planning,
publishing, metrics, logs and garbage collection, against a real nats-server.

``bench/planner.py`` times the pure planning function alone; in the pipeline the planner
process spends several times that per observation. This harness measures the service as
it runs there: a ``PlannerService`` in this process, built as ``python -m kaiwo_planner``
builds it (``NatsBus``, ``NatsKeyValue``, JSON logs at INFO into a file, the same garbage
collector settings), on a nats-server started on a free port.

The observations are what a new KaiwoJob brings in the pipeline, three per workload: the
KaiwoJob as created, its batch Job as the executor created it, and the KaiwoJob with the
status the plan wrote (worked out ahead, untimed, with the same planning function), on a
cluster of 16 nodes with a KaiwoConfig and a KaiwoQueueConfig. By default all are stored
before the service starts; with ``--rate`` a second process publishes them at that many
per second while the service waits for each, as in the pipeline. The measured CPU (user
and system time of this process only: nats-server and the publisher are other processes)
is the service's alone, from its first fetch to the last observation applied.

Columns: CPU ms per observation, split into user and system; ``planning``: time inside the
planning function (the service's histogram; wall time, garbage collections included);
``gc``: CPU in the garbage collector; observations/s; plans published.

Run: ``uv run python bench/planner_service.py [--workloads N] [--runs R] [--rate R]
[--profile FILE]``. The same script runs against older code (``<other tree>/.venv/bin/python
bench/planner_service.py``) for same-run comparisons.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kaiwo_contracts.events.envelope import Envelope, object_subject, observed_event_id
from kaiwo_contracts.events.observed import ObservedObjectV1, WatchEventType
from kaiwo_contracts.events.streams import OBSERVED_STREAM, PLAN_STREAM, bus_topology
from kaiwo_contracts.events.subjects import observed_subject
from kaiwo_planner.domain.planning import plan_object
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.state.projection import Projection
from kaiwo_planner.metrics import PlannerMetrics
from kaiwo_planner.service import PlannerService
from kaiwo_planner.settings import PlannerSettings
from kaiwo_runtime.kv import NatsKeyValue
from kaiwo_runtime.logging import configure_logging
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_server import NatsServer
from planner import KAIWO_CONFIG, NODES

NAMESPACE = "ml-team"
WATCHER = "/kaiwo/watcher"

QUEUE_CONFIG: dict[str, Any] = {
    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoQueueConfig",
    "metadata": {"name": "kaiwo", "uid": "kqc"},
    "spec": {"clusterQueues": [{"name": "kaiwo", "namespaces": [NAMESPACE], "spec": {}}]},
}


@dataclass(frozen=True, slots=True)
class Observed:
    """One observation ready to publish: where it goes and the envelope."""

    subject: str
    envelope: Envelope[ObservedObjectV1]


@dataclass(frozen=True, slots=True)
class RunFigures:
    observations: int
    plans: int
    planning_seconds: float
    """Wall time inside the planning function (the service's own histogram)."""
    gc_seconds: float
    user_seconds: float
    system_seconds: float
    wall_seconds: float

    @property
    def cpu_ms_per_observation(self) -> float:
        return self.user_ms_per_observation + self.system_ms_per_observation

    @property
    def planning_ms_per_observation(self) -> float:
        return 1000 * self.planning_seconds / self.observations

    @property
    def gc_ms_per_observation(self) -> float:
        return 1000 * self.gc_seconds / self.observations

    @property
    def user_ms_per_observation(self) -> float:
        return 1000 * self.user_seconds / self.observations

    @property
    def system_ms_per_observation(self) -> float:
        return 1000 * self.system_seconds / self.observations

    @property
    def observations_per_second(self) -> float:
        return self.observations / self.wall_seconds


class ObservationWriter:
    """Turns objects into the observations the watcher would publish for them."""

    def __init__(self, *, start: datetime) -> None:
        self._resource_version = 1000
        self._time = start

    def observe(self, obj: dict[str, Any], event_type: WatchEventType) -> Observed:
        self._resource_version += 1
        self._time += timedelta(milliseconds=5)
        meta = obj["metadata"]
        version = str(self._resource_version)
        stamped = {**obj, "metadata": {**meta, "resourceVersion": version}}
        payload = ObservedObjectV1(
            kind=obj["kind"],
            api_version=obj["apiVersion"],
            namespace=meta.get("namespace"),
            name=meta["name"],
            uid=meta["uid"],
            resource_version=version,
            event_type=event_type,
            object=stamped,
        )
        envelope = Envelope.new(
            data=payload,
            source=WATCHER,
            time=self._time,
            id=observed_event_id(uid=meta["uid"], resource_version=version),
            subject=object_subject(namespace=meta.get("namespace"), name=meta["name"]),
            correlationid=meta["uid"],
        )
        subject = observed_subject(
            kind=obj["kind"], namespace=meta.get("namespace"), uid=meta["uid"]
        )
        return Observed(subject=subject, envelope=envelope)


def kaiwo_job(index: int, *, created: datetime) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {
            "name": f"job-{index}",
            "namespace": NAMESPACE,
            "uid": f"kaiwojob-{index}",
            "generation": 1,
            "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "spec": {
            "image": "ghcr.io/silogen/rocm-ray:6.4",
            "entrypoint": "python train.py",
            "gpus": 1,
            "gpuVendor": "amd",
        },
    }


def observations(workloads: int) -> Iterator[Observed]:
    """The cluster, then three observations per KaiwoJob (created, its Job, its status).

    The Job and the status are the ones the planner asks for, found by planning each
    KaiwoJob on a projection of the same observations (as the executor would apply them).
    """
    # Observed now, as in the pipeline: the service's timers (deadlines a plan asks for) run
    # on the wall clock, and times months ago would make every one of them fire at once.
    started = datetime.now(UTC)
    writer = ObservationWriter(start=started)
    projection = Projection()
    sequence = 0

    def emit(obj: dict[str, Any], event_type: WatchEventType) -> Observed:
        nonlocal sequence
        sequence += 1
        observed = writer.observe(obj, event_type)
        projection.apply(observed.envelope.data, sequence=sequence)
        return observed

    for obj in (*NODES, KAIWO_CONFIG, QUEUE_CONFIG):
        yield emit(obj, "ADDED")
    for index in range(workloads):
        created = emit(kaiwo_job(index, created=started), "ADDED")
        yield created
        owner = projection.by_uid(f"kaiwojob-{index}")
        context = PlanningContext.of(projection.cluster_state())
        plan = plan_object(owner=owner, context=context, now=created.envelope.time).plan
        assert plan is not None and plan.desired, "the KaiwoJob got no plan"
        for child in plan.desired:
            meta = child["metadata"]
            made = {**child, "metadata": {**meta, "uid": f"{meta['name']}-{child['kind']}-{index}"}}
            yield emit(made, "ADDED")
        yield emit({**owner, "status": plan.status}, "MODIFIED")


async def publish_all(bus: NatsBus, items: list[Observed]) -> None:
    for item in items:
        await bus.publish(item.envelope, item.subject)


class GcClock:
    """CPU time spent in the garbage collector while installed (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def __enter__(self) -> GcClock:
        gc.callbacks.append(self._on_collection)
        return self

    def __exit__(self, *exc_info: object) -> None:
        gc.callbacks.remove(self._on_collection)

    def _on_collection(self, phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.seconds += time.process_time() - self._started


@contextlib.contextmanager
def profiled(path: Path | None) -> Iterator[None]:
    """Profile the block into ``path`` (cProfile stats) when one is given."""
    if path is None:
        yield
        return
    profiler = cProfile.Profile(time.process_time)  # CPU, as the figures: not waits
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()
        profiler.dump_stats(path)


async def publish_at_rate(url: str, *, workloads: int, rate: float) -> None:
    """The publisher process of ``--rate``: the observations of ``workloads``, paced."""
    items = list(observations(workloads))
    bus = await NatsBus.connect(url, topology=bus_topology(), name="bench-publisher")
    try:
        started = time.perf_counter()
        for index, item in enumerate(items):
            await asyncio.sleep(max(0.0, started + index / rate - time.perf_counter()))
            await bus.publish(item.envelope, item.subject)
    finally:
        await bus.close()


async def start_publisher(url: str, *, workloads: int, rate: float) -> asyncio.subprocess.Process:
    """This script as a second process, so its CPU is not counted as the service's."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--publish-to",
        url,
        "--workloads",
        str(workloads),
        "--rate",
        str(rate),
    )


async def measure(
    server: NatsServer,
    items: list[Observed],
    *,
    rate: float = 0.0,
    profile: Path | None = None,
) -> RunFigures:
    """Time the service consuming ``items`` from a fresh stream: all published ahead
    (``rate`` 0), or arriving at ``rate`` per second from another process."""
    bus = await NatsBus.connect(server.url, topology=bus_topology(), name="bench-planner")
    try:
        await bus.ensure_streams()
        if not rate:
            await publish_all(bus, items)
        kv = await NatsKeyValue.open(
            bus.client, f"bench-planner-{os.getpid()}-{time.monotonic_ns()}"
        )
        settings = PlannerSettings(poll_seconds=0.05 if not rate else 1.0)
        service = PlannerService(
            bus, kv, clock=lambda: datetime.now(UTC), settings=settings, metrics=PlannerMetrics()
        )
        await service.start()
        publisher = (
            await start_publisher(server.url, workloads=workloads_of(items), rate=rate)
            if rate
            else None
        )
        before, wall = os.times(), time.perf_counter()
        with profiled(profile), GcClock() as collector:
            while publisher is not None and publisher.returncode is None:
                await service.step()
            last = await stream_last_sequence(bus, OBSERVED_STREAM)
            while service.projection.last_sequence < last:
                await service.step(wait_seconds=0.05)
        after, wall = os.times(), time.perf_counter() - wall
        return RunFigures(
            observations=last,
            plans=await stream_last_sequence(bus, PLAN_STREAM),
            planning_seconds=planning_seconds(service.metrics),
            gc_seconds=collector.seconds,
            user_seconds=after.user - before.user,
            system_seconds=after.system - before.system,
            wall_seconds=wall,
        )
    finally:
        await bus.close()


def planning_seconds(metrics: PlannerMetrics) -> float:
    total = metrics.registry.registry.get_sample_value("kaiwo_planner_plan_duration_seconds_sum")
    return total or 0.0


async def stream_last_sequence(bus: NatsBus, stream: str) -> int:
    info = await bus.client.jetstream().stream_info(stream)
    return int(info.state.last_seq)


def tune_collector_as_the_service_does() -> None:
    """What ``python -m kaiwo_planner`` does to the garbage collector (nothing, before
    ``collect_young_objects_every`` existed: this harness also measures older code)."""
    try:
        from kaiwo_runtime.startup import collect_young_objects_every
    except ImportError:
        return
    collect_young_objects_every(PlannerSettings().gc_young_allocations)


def workloads_of(items: list[Observed]) -> int:
    return sum(
        1
        for item in items
        if item.envelope.data.kind == "KaiwoJob" and item.envelope.data.event_type == "ADDED"
    )


async def run(*, workloads: int, runs: int, rate: float, profile: Path | None) -> list[RunFigures]:
    items = list(observations(workloads))
    results = []
    for number in range(runs):
        async with NatsServer() as server:  # a fresh server: streams start empty
            last_run = number == runs - 1
            figures = await measure(server, items, rate=rate, profile=profile if last_run else None)
            results.append(figures)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=1000, help="KaiwoJobs per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="observations per second from a publisher process (0: all stored ahead)",
    )
    parser.add_argument(
        "--profile", type=Path, help="write cProfile stats of the last run here (slows it)"
    )
    parser.add_argument("--publish-to", help=argparse.SUPPRESS)  # the --rate publisher
    args = parser.parse_args()
    if args.publish_to:
        configure_logging(level="WARNING")
        asyncio.run(publish_at_rate(args.publish_to, workloads=args.workloads, rate=args.rate))
        return
    # JSON logs at INFO into a file, as the services run in the pipeline benchmark.
    with tempfile.TemporaryFile("w") as log_file:
        configure_logging(level="INFO", json=True, stream=log_file)
        tune_collector_as_the_service_does()
        results = asyncio.run(
            run(workloads=args.workloads, runs=args.runs, rate=args.rate, profile=args.profile)
        )
    arrival = f"at {args.rate:g}/s" if args.rate else "stored ahead"
    print(
        f"planner service, {args.workloads} KaiwoJobs "
        f"({results[0].observations} observations, {arrival})"
    )
    print(
        f"{'run':<5}{'CPU ms/obs':>12}{'user':>8}{'system':>8}{'planning':>10}{'gc':>7}"
        f"{'obs/s':>8}{'plans':>7}"
    )
    for number, figures in enumerate(results, start=1):
        print(
            f"{number:<5}{figures.cpu_ms_per_observation:>12.3f}"
            f"{figures.user_ms_per_observation:>8.3f}{figures.system_ms_per_observation:>8.3f}"
            f"{figures.planning_ms_per_observation:>10.3f}{figures.gc_ms_per_observation:>7.3f}"
            f"{figures.observations_per_second:>8.0f}{figures.plans:>7}"
        )
    cpu = [figures.cpu_ms_per_observation for figures in results]
    print(f"CPU ms per observation: min {min(cpu):.3f}, median {statistics.median(cpu):.3f}")


if __name__ == "__main__":
    main()
