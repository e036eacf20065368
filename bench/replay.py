"""Replay throughput: ``kaiwo_cli.replay.replay_recorded`` over a recorded history, in memory
and read back from a SQLite event store.

The history is made the way production makes it, minus the processes: observations are
published on an in-memory JetStream and the real planner service plans them (its
projection, fan-out, assumed statuses and publish-only-news rule); every message of the
observation and plan streams then becomes a :class:`StoredEvent` as the recorder stores it
(the payload, and the stream sequence in the metadata). No executor runs, so each workload
walks through the life a cluster would give it, written here by hand: the KaiwoJob is
created, its batch Job and Kueue Workload appear, the status the plan asked for is written
back, the Workload is admitted, the Pod and the Job run, the status is written again,
the Pod and the Job succeed. Sixteen nodes, a KaiwoConfig and the KaiwoQueueConfig come first.

Run: ``uv run python bench/replay.py [--workloads N] [--rounds R]``. Figures: events/s of
``replay_recorded`` alone (pure) and including ``read_by_type`` from SQLite (with reads),
worst and best of the rounds, by the wall clock and per CPU second of this process (the
steadier figure when other work shares the cores). Every replayed plan must be reproduced;
the bench fails otherwise. Target: >= 100,000 events/s pure.

Replay plans every recorded plan with a fresh planning context (decision 0029), so the
settings (KaiwoConfig, KaiwoQueueConfig, node pools) and the owner's spec and children are
worked out again for each plan: a value the planner service kept when it should not have
shows as a difference.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kaiwo_cli.replay import (
    NATS_SEQUENCE_KEY,
    NATS_STREAM_KEY,
    OBSERVED_TYPE,
    PLAN_TYPE,
    replay_recorded,
)
from kaiwo_contracts.events import Envelope, ObservedObjectV1
from kaiwo_contracts.events.streams import OBSERVED_STREAM, PLAN_STREAM, bus_topology
from kaiwo_contracts.events.subjects import observed_subject
from kaiwo_eventstore import NewEvent, StoredEvent, open_event_store
from kaiwo_planner.service import PlannerService
from kaiwo_planner.settings import PlannerSettings
from kaiwo_runtime.bus import StoredMessage
from kaiwo_runtime.kv import MemoryKeyValue
from kaiwo_runtime.logging import configure_logging
from kaiwo_runtime.memory_bus import MemoryBus, MemoryJetStream

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NAMESPACE = "ml-team"
KAIWO = "kaiwo.silogen.ai/v1alpha1"
TARGET = 100_000.0


# --------------------------------------------------------------------------- the cluster


def node(index: int) -> dict[str, Any]:
    capacity = {"cpu": "128", "memory": "1Ti", "pods": "110", "amd.com/gpu": "8"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"mi300x-{index}",
            "uid": f"node-{index}",
            "labels": {
                "kubernetes.io/hostname": f"mi300x-{index}",
                "amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM",
                "beta.amd.com/gpu.family.AI": "8",
            },
        },
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def settings_objects() -> list[dict[str, Any]]:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    kaiwo_config = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo", "uid": "kaiwo-config"},
        "spec": {"storage": {"defaultStorageClass": "rwx"}},
    }
    quota = [
        {"name": "cpu", "nominalQuota": 2048},
        {"name": "memory", "nominalQuota": "16Ti"},
        {"name": "amd.com/gpu", "nominalQuota": 128},
    ]
    queue_config = {
        "apiVersion": KAIWO,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo", "uid": "queue-config", "generation": 1},
        "spec": {
            "resourceFlavors": [{"name": "mi300x", "nodeLabels": {"kaiwo/nodepool": "mi300x"}}],
            "clusterQueues": [
                {
                    "name": "kaiwo",
                    "namespaces": [NAMESPACE],
                    "spec": {
                        "resourceGroups": [
                            {
                                "coveredResources": ["cpu", "memory", "amd.com/gpu"],
                                "flavors": [{"name": "mi300x", "resources": quota}],
                            }
                        ]
                    },
                }
            ],
        },
    }
    return [namespace, kaiwo_config, queue_config]


@dataclass(frozen=True, slots=True)
class Workload:
    """One KaiwoJob and the objects the cluster makes for it."""

    index: int

    @property
    def name(self) -> str:
        return f"train-{self.index}"

    @property
    def uid(self) -> str:
        return f"kaiwojob-{self.index}"

    def kaiwo_job(self, status: dict[str, Any] | None = None) -> dict[str, Any]:
        job: dict[str, Any] = {
            "apiVersion": KAIWO,
            "kind": "KaiwoJob",
            "metadata": {
                "name": self.name,
                "namespace": NAMESPACE,
                "uid": self.uid,
                "generation": 1,
                "creationTimestamp": "2026-03-01T12:00:00Z",
            },
            "spec": {
                "user": "alice@example.com",
                "image": "ghcr.io/silogen/rocm-ray:6.4",
                "entrypoint": "python train.py",
                "gpus": 1,
                "resources": {"requests": {"cpu": "8", "memory": "64Gi"}},
            },
        }
        if status is not None:
            job["status"] = status
        return job

    def batch_job(self, status: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": self.name,
                "namespace": NAMESPACE,
                "uid": f"{self.uid}-job",
                "generation": 1,
                "ownerReferences": [{"uid": self.uid, "kind": "KaiwoJob", "controller": True}],
            },
            "spec": {"suspend": False},
            "status": {**status, "observedGeneration": 1},
        }

    def pod(self, phase: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{self.name}-0",
                "namespace": NAMESPACE,
                "uid": f"{self.uid}-pod",
                "labels": {"kaiwo.silogen.ai/run-id": self.uid, "job-name": self.name},
                "ownerReferences": [{"uid": f"{self.uid}-job", "kind": "Job"}],
            },
            "spec": {"nodeName": f"mi300x-{self.index % 16}"},
            "status": {"phase": phase},
        }

    def kueue_workload(self, *, admitted: bool) -> dict[str, Any]:
        return {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "Workload",
            "metadata": {
                "name": f"job-{self.name}",
                "namespace": NAMESPACE,
                "uid": f"{self.uid}-workload",
                "ownerReferences": [{"uid": f"{self.uid}-job"}],
            },
            "status": {
                "conditions": [{"type": "Admitted", "status": "True" if admitted else "False"}]
            },
        }


def life_stages(workload: Workload) -> list[list[dict[str, Any]]]:
    """The objects each stage of a workload's life changes, in the order a cluster would."""
    return [
        [workload.kaiwo_job()],
        [workload.batch_job({}), workload.kueue_workload(admitted=False)],
        [workload.kaiwo_job({"status": "PENDING"})],
        [workload.kueue_workload(admitted=True), workload.pod("Pending")],
        [workload.pod("Running"), workload.batch_job({"active": 1, "ready": 1})],
        [workload.kaiwo_job({"status": "RUNNING", "startTime": "2026-03-01T12:00:00Z"})],
        [workload.pod("Succeeded"), workload.batch_job({"succeeded": 1})],
    ]


def history(workloads: int) -> Iterator[dict[str, Any]]:
    """Every object version in the order observed: settings, then the workloads stage by
    stage, so many workloads are alive at once."""
    yield from (node(index) for index in range(16))
    yield from settings_objects()
    lives = [life_stages(Workload(index)) for index in range(workloads)]
    for stage in range(len(lives[0])):
        for life in lives:
            yield from life[stage]


# --------------------------------------------------------------------------- recording


async def record(workloads: int) -> tuple[list[StoredEvent], list[StoredEvent]]:
    """(observations, plans) as the recorder would store them, planned by the real service."""
    server = MemoryJetStream()
    bus = MemoryBus(server=server, topology=bus_topology())
    await bus.ensure_streams()
    planner = PlannerService(
        bus,
        MemoryKeyValue(),
        clock=lambda: T0,
        settings=PlannerSettings(resync_on_start=False),
    )
    await planner.start()
    for version, obj in enumerate(history(workloads), start=1):
        await bus.publish(*observed(obj, resource_version=version))
        while await planner.step(wait_seconds=0):
            pass
    observations = [stored(m, OBSERVED_TYPE) for m in server.stream_messages(OBSERVED_STREAM)]
    plans = [stored(m, PLAN_TYPE) for m in server.stream_messages(PLAN_STREAM)]
    return observations, plans


def observed(obj: dict[str, Any], *, resource_version: int) -> tuple[Envelope[Any], str]:
    meta = obj["metadata"]
    uid = meta.get("uid") or f"{obj['kind'].lower()}-{meta['name']}"
    version = str(resource_version)
    payload = ObservedObjectV1(
        kind=obj["kind"],
        api_version=obj["apiVersion"],
        namespace=meta.get("namespace"),
        name=meta["name"],
        uid=uid,
        resource_version=version,
        event_type="MODIFIED",
        object={**obj, "metadata": {**meta, "uid": uid, "resourceVersion": version}},
    )
    envelope = Envelope.new(
        data=payload,
        source="/kaiwo/watcher",
        time=T0 + timedelta(milliseconds=resource_version),
        id=f"{uid}:{version}",
        subject=meta["name"],
        correlationid=uid,
    )
    return envelope, observed_subject(kind=obj["kind"], namespace=meta.get("namespace"), uid=uid)


def stored(message: StoredMessage, event_type: str) -> StoredEvent:
    """A stream message as the recorder stores it: the payload, and where it came from."""
    envelope = Envelope[Any].from_nats(message.headers, message.body)
    return StoredEvent(
        global_position=message.sequence,
        event_id=envelope.id,
        stream_id=f"bench/{envelope.correlationid}",
        stream_version=1,
        type=event_type,
        subject=envelope.subject,
        source=str(envelope.source),
        time=envelope.time,
        correlation_id=envelope.correlationid or envelope.id,
        causation_id=envelope.causationid,
        data=json.loads(message.body),
        metadata={NATS_STREAM_KEY: message.stream, NATS_SEQUENCE_KEY: message.sequence},
        recorded_at=envelope.time,
    )


async def write_store(url: str, events: list[StoredEvent]) -> None:
    store = await open_event_store(url)
    try:
        await store.append(
            [
                NewEvent(
                    event_id=event.event_id,
                    stream_id=event.stream_id,
                    type=event.type,
                    time=event.time,
                    source=event.source,
                    correlation_id=event.correlation_id,
                    data=event.data,
                    subject=event.subject,
                    causation_id=event.causation_id,
                    metadata=event.metadata,
                )
                for event in events
            ]
        )
    finally:
        await store.close()


async def read_store(url: str) -> tuple[list[StoredEvent], list[StoredEvent]]:
    store = await open_event_store(url, migrate=False)
    try:
        return await store.read_by_type([OBSERVED_TYPE]), await store.read_by_type([PLAN_TYPE])
    finally:
        await store.close()


# --------------------------------------------------------------------------- measuring


@dataclass(frozen=True, slots=True)
class Elapsed:
    """Wall-clock and CPU seconds: on a shared machine the CPU time is the steadier figure."""

    wall: float
    cpu: float

    def __add__(self, other: Elapsed) -> Elapsed:
        return Elapsed(wall=self.wall + other.wall, cpu=self.cpu + other.cpu)


class Stopwatch:
    def __init__(self) -> None:
        self._wall = time.perf_counter()
        self._cpu = time.process_time()

    def elapsed(self) -> Elapsed:
        return Elapsed(wall=time.perf_counter() - self._wall, cpu=time.process_time() - self._cpu)


def replay_time(observations: list[StoredEvent], plans: list[StoredEvent]) -> Elapsed:
    stopwatch = Stopwatch()
    report = replay_recorded(observations=observations, plans=plans)
    elapsed = stopwatch.elapsed()
    assert report.reproduced == len(plans), (
        f"{report.differ} differ, {report.skipped} skipped of {len(plans)} plans"
    )
    return elapsed


async def read_and_replay_time(url: str) -> Elapsed:
    stopwatch = Stopwatch()
    observations, plans = await read_store(url)
    return stopwatch.elapsed() + replay_time(observations, plans)


def rates(label: str, events: int, times: list[Elapsed]) -> float:
    """Print events/s (wall clock and per CPU second) over the rounds; return the best."""
    wall = [events / t.wall for t in times]
    cpu = [events / t.cpu for t in times]
    print(
        f"replay, {label:<11} {min(wall):>9,.0f} - {max(wall):>9,.0f} events/s "
        f"(per CPU second: {min(cpu):>9,.0f} - {max(cpu):>9,.0f})"
    )
    return max(wall)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    configure_logging(level="WARNING")  # the planner logs every plan it publishes

    stopwatch = Stopwatch()
    observations, plans = await record(args.workloads)
    events = len(observations) + len(plans)
    print(
        f"history: {args.workloads} KaiwoJobs, {len(observations):,} observations, "
        f"{len(plans):,} plans ({stopwatch.elapsed().wall:.1f} s to record)"
    )
    with tempfile.TemporaryDirectory() as scratch:
        url = f"sqlite:///{Path(scratch) / 'events.db'}"
        await write_store(url, observations + plans)
        pure = [replay_time(observations, plans) for _ in range(args.rounds)]
        del observations, plans  # the reads below build their own copy
        with_reads = [await read_and_replay_time(url) for _ in range(args.rounds)]
    best = rates("pure:", events, pure)
    rates("with reads:", events, with_reads)
    verdict = "meets" if best >= TARGET else "misses"
    print(f"every plan reproduced; pure replay {verdict} the {TARGET:,.0f} events/s target")


if __name__ == "__main__":
    asyncio.run(main())
