"""The planner service against a real nats-server: plan out, restart from the bucket, no replay."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_contracts.events.envelope import Envelope, observed_event_id
from kaiwo_contracts.events.observed import ObservedObjectV1, WatchEventType
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.streams import PLAN_STREAM, bus_topology
from kaiwo_contracts.events.subjects import observed_subject
from kaiwo_contracts.plans import ObjectRef, Plan
from kaiwo_planner.domain.planning import PlanningResult
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.metrics import PlannerMetrics
from kaiwo_planner.service import PlannerService
from kaiwo_planner.settings import PlannerSettings
from kaiwo_runtime.kv import NatsKeyValue
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_server import NatsServer

from tests.waiting import Pending, eventually

pytestmark = pytest.mark.nats

WHEN = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def one_job_planner(
    *, owner: Mapping[str, Any], context: PlanningContext, now: datetime
) -> PlanningResult:
    """A KaiwoJob gets a batch Job of its name; the status counts the cluster's nodes."""
    meta = owner["metadata"]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
    }
    plan = Plan(
        owner=ObjectRef(
            api_version=owner["apiVersion"],
            kind=owner["kind"],
            name=meta["name"],
            namespace=meta["namespace"],
            uid=meta["uid"],
        ),
        desired=(job,),
        status={"nodes": len(context.cluster.nodes)},
    )
    return PlanningResult(plan=plan)


@pytest.fixture
async def nats_server() -> AsyncIterator[NatsServer]:
    async with NatsServer() as server:
        yield server


async def publish_observation(
    bus: NatsBus, obj: dict[str, Any], rv: str, event: WatchEventType
) -> None:
    meta = obj["metadata"]
    observed = ObservedObjectV1(
        kind=obj["kind"],
        api_version=obj["apiVersion"],
        namespace=meta.get("namespace"),
        name=meta["name"],
        uid=meta["uid"],
        resource_version=rv,
        event_type=event,
        object={**obj, "metadata": {**meta, "resourceVersion": rv}},
    )
    envelope = Envelope.new(
        data=observed,
        source="/kaiwo/watcher",
        time=WHEN,
        correlationid=meta["uid"],
        id=observed_event_id(uid=meta["uid"], resource_version=rv),
    )
    subject = observed_subject(kind=obj["kind"], namespace=meta.get("namespace"), uid=meta["uid"])
    await bus.publish(envelope, subject)


async def stored_plans(bus: NatsBus) -> list[Envelope[PlanDecidedV1]]:
    plans = []
    sequence = 1
    while (stored := await bus.read_stored(PLAN_STREAM, sequence)) is not None:
        plans.append(Envelope[PlanDecidedV1].from_nats(stored.headers, stored.body))
        sequence += 1
    return plans


async def wait_for_plans(bus: NatsBus, count: int) -> list[Envelope[PlanDecidedV1]]:
    async def enough() -> list[Envelope[PlanDecidedV1]] | Pending:
        plans = await stored_plans(bus)
        return plans if len(plans) >= count else Pending(f"{len(plans)} plans stored")

    return await eventually(enough, what=f"{count} plans stored")


async def start_planner(
    server: NatsServer,
) -> tuple[PlannerService, NatsBus, asyncio.Event, asyncio.Task[None]]:
    bus = await NatsBus.connect(server.url, topology=bus_topology(), name="planner-test")
    await bus.ensure_streams()
    kv = await NatsKeyValue.open(bus.client, "kaiwo-planner")
    service = PlannerService(
        bus,
        kv,
        clock=lambda: datetime.now(UTC),
        plan_fn=one_job_planner,
        settings=PlannerSettings(poll_seconds=0.05),
        metrics=PlannerMetrics(),
    )
    stop = asyncio.Event()
    return service, bus, stop, asyncio.create_task(service.run(stop))


async def test_plans_flow_and_a_restart_resumes_from_the_snapshot(nats_server: NatsServer) -> None:
    watcher = await NatsBus.connect(nats_server.url, topology=bus_topology(), name="watcher")
    await watcher.ensure_streams()
    job = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": "train", "namespace": "team-a", "uid": "uid-train"},
    }
    try:
        service, bus, stop, task = await start_planner(nats_server)
        await publish_observation(watcher, job, "1", "ADDED")
        [plan] = await wait_for_plans(watcher, 1)
        assert plan.correlationid == "uid-train"
        assert plan.causationid == "uid-train:1"
        assert plan.data.planned_at == WHEN
        assert plan.data.absent == (
            ObjectRef(api_version="batch/v1", kind="Job", name="train", namespace="team-a"),
        )
        stop.set()
        await asyncio.wait_for(task, 10)  # writes the snapshot on the way out
        await bus.close()

        # While the planner is down, the Job appears; after the restart the projection
        # has the KaiwoJob from the bucket and takes the Job from the stream.
        child = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "train",
                "namespace": "team-a",
                "uid": "uid-job",
                "ownerReferences": [
                    {
                        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
                        "kind": "KaiwoJob",
                        "name": "train",
                        "uid": "uid-train",
                        "controller": True,
                    }
                ],
            },
        }
        await publish_observation(watcher, child, "2", "ADDED")
        service, bus, stop, task = await start_planner(nats_server)
        await eventually(
            lambda: service.projection.last_sequence == 2, what="both observations projected"
        )
        assert service.projection.by_uid("uid-train") is not None
        assert service.projection.by_uid("uid-job") is not None
        # Same plan, nothing absent any more: nothing new was published.
        await asyncio.sleep(0.2)
        assert len(await stored_plans(watcher)) == 1

        await publish_observation(watcher, child, "3", "DELETED")
        plans = await wait_for_plans(watcher, 2)
        assert plans[1].data.absent == plan.data.absent
        assert plans[1].data.fingerprint == plan.data.fingerprint
        stop.set()
        await asyncio.wait_for(task, 10)
        await bus.close()
    finally:
        await watcher.close()
