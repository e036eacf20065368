"""After a relist the planner converges at once: a copy of a version it holds is dropped
before its envelope is decoded, and a new version with the same content plans no one (but the
owner itself while the status its last plan set has not come back). A real change is planned
as before, whatever its version."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kaiwo_contracts.events.envelope import NATS_MSG_ID_HEADER
from kaiwo_contracts.events.subjects import observed_subject
from kaiwo_planner.domain.planning import PlanningResult
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.service import PlannerService

TRAIN_SUBJECT = observed_subject(kind="KaiwoJob", namespace="team-a", uid="uid-train")


def sample(service: PlannerService, name: str, **labels: str) -> float:
    value = service.metrics.registry.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


class CountingPlanner:
    """The toy planner, counting the owners it is asked to plan."""

    def __init__(self, plan: Any) -> None:
        self._plan = plan
        self.planned: list[str] = []

    def __call__(self, *, owner: Any, context: PlanningContext, now: datetime) -> PlanningResult:
        self.planned.append(owner["metadata"]["name"])
        result: PlanningResult = self._plan(owner=owner, context=context, now=now)
        return result


async def settled_train(harness: Any, build: Any, service: PlannerService) -> dict[str, Any]:
    """A KaiwoJob planned, its Job created and its planned status written back (version 12)."""
    job = build.kaiwo_job("train")
    await harness.observe(job, "10", "ADDED")
    await harness.drain(service)
    [plan] = harness.plans()
    await harness.observe(build.batch_job(job), "11", "ADDED")
    settled = {**job, "status": plan.data.plan.status}
    # Under another message id, so that a copy of it as a relist brings it after the bus's
    # duplicate window ("uid-train:12") is not dropped by the bus itself here.
    await harness.observe(settled, "12", event_id="status-written")
    await harness.drain(service)
    assert len(harness.plans()) == 1
    return settled


async def test_a_copy_of_a_held_version_is_dropped_without_decoding_it(
    harness: Any, build: Any
) -> None:
    service = harness.service()
    await service.start()
    await settled_train(harness, build, service)
    stale_before = sample(service, "kaiwo_planner_stale_events_total")
    # Its id says "uid-train at version 12", which the projection holds. The body is not
    # even JSON: read, it would be dead-lettered, so dropping it shows it was not read.
    await harness.watcher.publish_raw(
        TRAIN_SUBJECT, body=b"{not json", headers={NATS_MSG_ID_HEADER: "uid-train:12"}
    )
    assert await harness.drain(service) == 1
    assert harness.dead_letters() == []
    assert len(harness.plans()) == 1
    assert sample(service, "kaiwo_planner_stale_events_total") == stale_before + 1
    last = harness.server.stream_messages("KAIWO_OBS")[-1].sequence
    assert service.projection.last_sequence == last
    # The same bytes under an id of a version the projection does not hold are read.
    await harness.watcher.publish_raw(
        TRAIN_SUBJECT, body=b"{not json", headers={NATS_MSG_ID_HEADER: "uid-train:13"}
    )
    assert await harness.drain(service) == 1
    assert len(harness.dead_letters()) == 1


async def test_a_reobserved_copy_of_a_held_version_is_read(harness: Any, build: Any) -> None:
    service = harness.service()
    await service.start()
    await settled_train(harness, build, service)
    await harness.watcher.publish_raw(
        TRAIN_SUBJECT,
        body=b"{not json",
        headers={NATS_MSG_ID_HEADER: "reobserved:uid-train:12:refused"},
    )
    await harness.drain(service)
    assert len(harness.dead_letters()) == 1


async def test_new_versions_with_the_same_content_plan_no_one(harness: Any, build: Any) -> None:
    planner = CountingPlanner(build.toy_planner)
    service = harness.service(plan_fn=planner)
    await service.start()
    settled = await settled_train(harness, build, service)
    await harness.observe(build.gpu_node("gpu-0"), "13", "ADDED")
    await harness.drain(service)
    # The node changed the planned status; the executor wrote it.
    settled = {**settled, "status": harness.plans()[-1].data.plan.status}
    await harness.observe(settled, "14")
    await harness.drain(service)
    planned, plans = len(planner.planned), len(harness.plans())

    # A relist after a restore: every object again, each at a new version, nothing else new.
    await harness.observe(build.gpu_node("gpu-0"), "101", "SYNC")
    await harness.observe(build.batch_job(settled), "102", "SYNC")
    await harness.observe(settled, "103", "SYNC")
    assert await harness.drain(service) == 3

    assert len(planner.planned) == planned
    assert len(harness.plans()) == plans
    # The projection holds the new versions: plans made later name them as their sources.
    held = service.projection.by_uid("uid-train")
    assert held == {**settled, "metadata": {**settled["metadata"], "resourceVersion": "103"}}
    job = service.projection.by_uid("uid-job-train")
    assert job is not None
    assert job["metadata"]["resourceVersion"] == "102"
    # Taken in all the same: five versions before the relist, three in it.
    assert sample(service, "kaiwo_planner_observations_total", outcome="applied") == 8


async def test_a_new_version_with_new_content_is_planned(harness: Any, build: Any) -> None:
    planner = CountingPlanner(build.toy_planner)
    service = harness.service(plan_fn=planner)
    await service.start()
    settled = await settled_train(harness, build, service)
    planned = len(planner.planned)

    # The Job's parallelism changed by hand: the KaiwoJob is planned again.
    edited_job = build.batch_job(settled)
    edited_job["spec"] = {"parallelism": 3}
    await harness.observe(edited_job, "13")
    await harness.drain(service)
    assert planner.planned[planned:] == ["train"]

    # A spec change of the KaiwoJob: planned, and its new plan published.
    changed = {**settled, "spec": {"image": "pytorch"}}
    await harness.observe(changed, "14")
    await harness.drain(service)
    assert planner.planned[planned:] == ["train", "train"]
    # A label changed along with the version is content too.
    labelled = {**changed, "metadata": {**changed["metadata"], "labels": {"team": "nlp"}}}
    await harness.observe(labelled, "15")
    await harness.drain(service)
    assert planner.planned[planned:] == ["train", "train", "train"]


async def test_an_owner_whose_planned_status_is_still_outstanding_is_planned_again(
    harness: Any, build: Any
) -> None:
    service = harness.service()
    await service.start()
    job = build.kaiwo_job("train")
    await harness.observe(job, "10", "ADDED")
    await harness.drain(service)
    # The owner moves on to version 11 with nothing else new before the executor wrote the
    # status planned from version 10: that write is refused as stale, so the decision goes
    # out again for version 11.
    await harness.observe(job, "11", "SYNC")
    await harness.drain(service)
    first, again = harness.plans()
    assert again.data.fingerprint == first.data.fingerprint
    assert again.data.plan.observed_resource_version == "11"
    # Once the status is there, a new version of the same content publishes nothing.
    settled = {**job, "status": again.data.plan.status}
    await harness.observe(settled, "12")
    await harness.observe(settled, "13", "SYNC")
    await harness.drain(service)
    assert len(harness.plans()) == 2


async def test_a_deletion_after_a_relist_copy_is_taken_in(harness: Any, build: Any) -> None:
    service = harness.service()
    await service.start()
    settled = await settled_train(harness, build, service)
    await harness.observe(settled, "12", "SYNC", event_id="relist-copy")
    await harness.observe(settled, "20", "DELETED")
    await harness.drain(service)
    assert service.projection.by_uid("uid-train") is None
