"""What one periodic resync costs the planner, at 1,000 and 10,000 workloads.

A resync re-plans every owner from the planner's projection (no API calls: the projection is
the watcher's view) and publishes only for owners whose decision changed or whose children
are absent or drifted. In a settled cluster it should publish nothing; its cost is the CPU of
planning every owner once and comparing each desired child with its observed copy.

The cluster is the one ``bench/planner_service.py`` builds: 16 nodes, a KaiwoConfig, a
KaiwoQueueConfig and N KaiwoJobs, each with the batch Job and the status its plan asked for,
fed through a ``PlannerService`` on an in-memory bus until settled. Then ``resync()`` runs
``--runs`` times; a last run follows a hand edit of 1 % of the Jobs (``parallelism`` changed),
which the resync must find and publish.

Columns: CPU seconds of the resync (this process: the planner's work), wall seconds, µs of
CPU per owner, plans published.

Run: ``uv run python bench/resync.py [--workloads 1000 10000] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.streams import PLAN_STREAM, bus_topology
from kaiwo_planner.metrics import PlannerMetrics
from kaiwo_planner.service import PlannerService
from kaiwo_planner.settings import PlannerSettings
from kaiwo_runtime.kv import MemoryKeyValue
from kaiwo_runtime.memory_bus import MemoryBus
from kaiwo_runtime.memory_jetstream import MemoryJetStream
from planner_service import observations


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


async def settled_planner(
    server: MemoryJetStream, clock: Callable[[], datetime], workloads: int
) -> tuple[PlannerService, MemoryBus]:
    """A planner on ``server`` that has taken in a cluster of ``workloads`` (and published its
    first plans), and the watcher's connection that fed it (relist.py feeds it more)."""
    topology = bus_topology()
    watcher = MemoryBus(server=server, topology=topology)
    await watcher.ensure_streams()
    for observed in observations(workloads):
        await watcher.publish(observed.envelope, observed.subject)
    service = PlannerService(
        MemoryBus(server=server, topology=topology),
        MemoryKeyValue(),
        clock=clock,
        settings=PlannerSettings(resync_on_start=False, resync_every_seconds=0),
        metrics=PlannerMetrics(),
    )
    await service.start()
    while await service.step(wait_seconds=0):
        pass
    observe_queue_objects(service, server)
    return service, watcher


async def settled_service(workloads: int) -> tuple[PlannerService, MemoryJetStream, Clock]:
    server, clock = MemoryJetStream(), Clock()
    service, _ = await settled_planner(server, clock, workloads)
    return service, server, clock


def observe_queue_objects(service: PlannerService, server: MemoryJetStream) -> None:
    """What the executor makes of the queue config's plan, as the watcher would report it:
    the Kueue objects created, the nodes carrying the pool labels (and taint)."""
    projection = service.projection
    plans = [
        Envelope[PlanDecidedV1].from_nats(m.headers, m.body)
        for m in server.stream_messages(PLAN_STREAM)
    ]
    queue_plan = next(p for p in reversed(plans) if p.data.plan.owner.kind == "KaiwoQueueConfig")
    for index, manifest in enumerate(queue_plan.data.plan.desired):
        meta = manifest["metadata"]
        observed = dict(manifest)
        if manifest["kind"] == "Node":
            node = projection.find(group="", kind="Node", name=meta["name"])
            assert node is not None
            observed = {
                **node,
                "metadata": {
                    **node["metadata"],
                    "labels": {**node["metadata"].get("labels", {}), **meta["labels"]},
                },
                "spec": {**node.get("spec", {}), **manifest.get("spec", {})},
            }
        version = str(10**8 + index)
        uid = observed["metadata"].get("uid") or f"uid-{manifest['kind']}-{meta['name']}"
        observed["metadata"] = {**observed["metadata"], "uid": uid, "resourceVersion": version}
        projection.apply(
            ObservedObjectV1(
                kind=manifest["kind"],
                api_version=manifest["apiVersion"],
                namespace=meta.get("namespace"),
                name=meta["name"],
                uid=uid,
                resource_version=version,
                event_type="ADDED",
                object=observed,
            ),
            sequence=projection.last_sequence + 1,
        )


def plans_published(server: MemoryJetStream) -> int:
    return len(server.stream_messages(PLAN_STREAM))


def edit_jobs_by_hand(service: PlannerService, *, share: float) -> int:
    """Change ``parallelism`` of a share of the observed Jobs, as ``kubectl edit`` would,
    straight into the projection: the resync, not the observation, is to find them."""
    projection = service.projection
    jobs = projection.objects_of_kind(group="batch", kind="Job")
    edited = jobs[:: max(1, round(1 / share))]
    for index, job in enumerate(edited):
        meta = job["metadata"]
        version = str(10**9 + index)
        changed = {
            **job,
            "metadata": {**meta, "resourceVersion": version},
            "spec": {**job["spec"], "parallelism": 4},
        }
        observed = ObservedObjectV1(
            kind="Job",
            api_version="batch/v1",
            namespace=meta["namespace"],
            name=meta["name"],
            uid=meta["uid"],
            resource_version=version,
            event_type="MODIFIED",
            object=changed,
        )
        projection.apply(observed, sequence=projection.last_sequence + 1)
    return len(edited)


async def measure(workloads: int, runs: int) -> None:
    service, server, clock = await settled_service(workloads)
    owners = workloads + 1
    print(f"\nresync, {workloads} KaiwoJobs ({owners} owners), settled")
    print("run   CPU s   wall s   µs/owner   plans")
    gc.collect()
    for run in range(1, runs + 1):
        before = plans_published(server)
        clock.now += timedelta(minutes=10)
        cpu, wall = time.process_time(), time.perf_counter()
        await service.resync()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        published = plans_published(server) - before
        print(f"{run:<5} {cpu:6.2f}  {wall:7.2f}  {1e6 * cpu / owners:9.0f}   {published}")
    edited = edit_jobs_by_hand(service, share=0.01)
    before = plans_published(server)
    clock.now += timedelta(minutes=10)
    cpu, wall = time.process_time(), time.perf_counter()
    await service.resync()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    new = server.stream_messages(PLAN_STREAM)[before:]
    drifted = sum(
        len(Envelope[PlanDecidedV1].from_nats(m.headers, m.body).data.drifted) for m in new
    )
    print(
        f"drift {cpu:6.2f}  {wall:7.2f}  {1e6 * cpu / owners:9.0f}   {len(new)}"
        f"   ({edited} Jobs edited by hand, {drifted} named drifted)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for workloads in args.workloads:
        asyncio.run(measure(workloads, args.runs))


if __name__ == "__main__":
    main()
