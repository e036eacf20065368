"""How long the planner takes to converge after the watcher relists, at 1,500 workloads.

After a 410 Gone (etcd compaction), a restart without checkpoints or a long outage, the
watcher lists every kind again and publishes each listed object as a ``SYNC`` observation
(and a ``DELETED`` for each known object the list no longer has). Each one reaches the
planner once its ``Nats-Msg-Id`` (``<uid>:<resourceVersion>``) is outside the stream's
duplicate window; inside it JetStream drops the duplicates. This measures the worst case: the
whole relist stored and read by the planner.

The cluster is the one ``bench/planner_service.py`` builds (16 nodes, a KaiwoConfig, a
KaiwoQueueConfig and N KaiwoJobs, each with its batch Job and the status its plan asked for),
settled in a ``PlannerService`` on an in-memory bus. Then every Node, KaiwoJob and Job is
relisted, and the planner steps until it has read everything:

* ``unchanged``: the objects as they were (same resourceVersions: nothing happened); each is
  dropped by its message id before its envelope is decoded (decision 0054);
* ``touched``: every object with a new resourceVersion and the same content (the cluster was
  restored, or another field manager applied them all without a change): each is decoded
  and taken in, and no owner is planned (before decision 0054 every owner was planned again).

Columns: observations relisted; wall and CPU seconds (this process: the planner's work) from
the first read to the last (convergence: nothing left to read, every plan published); plans
published (0 is right: the cluster did not change). On a shared machine wall time includes
waiting for a core; CPU seconds are the planner's own.

Measured at 1,500 workloads on a shared 2-core machine (wall s / CPU s), before and after
decision 0054: unchanged 68.9 / 5.4 -> 0.8 / 0.3; touched 132.7 / 24.2 -> 4.6 / 1.7.

Run: ``uv run python bench/relist.py [--workloads 1500]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from kaiwo_contracts.events.envelope import Envelope, object_subject, observed_event_id
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.streams import PLAN_STREAM
from kaiwo_contracts.events.subjects import observed_subject
from kaiwo_planner.service import PlannerService
from kaiwo_runtime.logging import configure_logging
from kaiwo_runtime.memory_bus import MemoryBus
from kaiwo_runtime.memory_jetstream import MemoryJetStream
from planner_service import NODES, WATCHER
from resync import settled_planner


class Clocks:
    """The planner's wall clock and the bus's monotonic one, moved by hand."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)
        self.monotonic = 0.0

    def wall(self) -> datetime:
        return self.now

    def bus(self) -> float:
        return self.monotonic


async def settled(workloads: int) -> tuple[PlannerService, MemoryJetStream, MemoryBus, Clocks]:
    clocks = Clocks()
    server = MemoryJetStream(clock=clocks.bus)
    service, watcher = await settled_planner(server, clocks.wall, workloads)
    return service, server, watcher, clocks


def relist(service: PlannerService, *, touched: bool, at: datetime) -> list[Any]:
    """The SYNC observations of a relist of every Node, KaiwoJob and Job the planner holds
    (a Job is named as its KaiwoJob)."""
    found = []
    bump = 10**9
    projection = service.projection
    nodes = [projection.find(group="", kind="Node", name=n["metadata"]["name"]) for n in NODES]
    workloads = projection.objects_of_kind(group="kaiwo.silogen.ai", kind="KaiwoJob")
    jobs = [
        projection.find(
            group="batch",
            kind="Job",
            name=w["metadata"]["name"],
            namespace=w["metadata"]["namespace"],
        )
        for w in workloads
    ]
    listed_kinds = [
        [node for node in nodes if node is not None],
        list(workloads),
        [job for job in jobs if job is not None],
    ]
    for objects in listed_kinds:
        for obj in objects:
            kind = obj["kind"]
            meta = obj["metadata"]
            version = meta["resourceVersion"]
            if touched:
                bump += 1
                version = str(bump)
            listed = {**obj, "metadata": {**meta, "resourceVersion": version}}
            payload = ObservedObjectV1(
                kind=kind,
                api_version=obj["apiVersion"],
                namespace=meta.get("namespace"),
                name=meta["name"],
                uid=meta["uid"],
                resource_version=version,
                event_type="SYNC",
                object=listed,
            )
            envelope = Envelope.new(
                data=payload,
                source=WATCHER,
                time=at,
                id=observed_event_id(uid=meta["uid"], resource_version=version),
                subject=object_subject(namespace=meta.get("namespace"), name=meta["name"]),
                correlationid=meta["uid"],
            )
            subject = observed_subject(kind=kind, namespace=meta.get("namespace"), uid=meta["uid"])
            found.append((envelope, subject))
    return found


async def measure(workloads: int, *, touched: bool) -> None:
    service, server, watcher, clocks = await settled(workloads)
    # Past the duplicate window: every relisted observation is stored and read.
    clocks.monotonic += 3600
    clocks.now += timedelta(minutes=5)
    listed = relist(service, touched=touched, at=clocks.now)
    for envelope, subject in listed:
        await watcher.publish(envelope, subject)
    before = len(server.stream_messages(PLAN_STREAM))
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    while await service.step(wait_seconds=0):
        pass
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    published = len(server.stream_messages(PLAN_STREAM)) - before
    label = "touched" if touched else "unchanged"
    print(f"{label:<10} {len(listed):>8}  {wall:7.2f}  {cpu:6.2f}   {published}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, default=1500)
    args = parser.parse_args()
    configure_logging(level="WARNING", json=True)
    print(f"\nrelist, {args.workloads} KaiwoJobs settled; convergence of the planner")
    print("relist     observed  wall s   CPU s   plans")
    for touched in (False, True):
        asyncio.run(measure(args.workloads, touched=touched))


if __name__ == "__main__":
    main()
