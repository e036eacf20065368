"""The planner service over an in-memory bus and bucket, with the toy planner from conftest."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import zlib
from datetime import timedelta
from typing import Any

import structlog
from kaiwo_contracts.events.envelope import plan_event_id
from kaiwo_contracts.events.streams import OBSERVED_STREAM, PLAN_STREAM
from kaiwo_contracts.plans import ObjectRef
from kaiwo_planner.service import CHILD_GONE_GRACE, PlannerService
from kaiwo_planner.snapshot_store import SNAPSHOT_KEY, SnapshotStore
from kaiwo_runtime.bus import BusError, Delivery
from kaiwo_runtime.kv import MemoryKeyValue

from tests.unit.planner_service.conftest import toy_planner
from tests.unreachable_bucket import UnansweredReads
from tests.waiting import HANG_SECONDS, eventually

TRAIN_JOB_REF = ObjectRef(api_version="batch/v1", kind="Job", name="train", namespace="team-a")


def sample(service: PlannerService, name: str, **labels: str) -> float:
    value = service.metrics.registry.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def stored_delivery(harness: Any, sequence: int) -> Delivery:
    stored = harness.server.read(OBSERVED_STREAM, sequence)
    assert stored is not None
    return Delivery(
        stream=stored.stream,
        consumer="planner-obs",
        stream_sequence=stored.sequence,
        attempt=1,
        subject=stored.subject,
        headers=stored.headers,
        body=stored.body,
    )


async def test_an_observation_is_planned_and_published(
    harness: Any, build: Any, clock: Any
) -> None:
    service = harness.service()
    await service.start()
    observation = await harness.observe(build.kaiwo_job("train"), "10", "ADDED")
    clock.advance(5)  # planning uses the observation's time, not the service's clock
    assert await harness.drain(service) == 1

    [plan] = harness.plans()
    assert plan.source == "/kaiwo/planner"
    assert plan.type == "ai.silogen.kaiwo.plan.decided.v1"
    assert plan.subject == "team-a/train"
    assert plan.correlationid == "uid-train"
    assert plan.causationid == observation.id == "uid-train:10"
    assert plan.id == plan_event_id(plan=plan.data.plan, causation_id="uid-train:10")
    assert plan.time == build.start.replace(second=5)
    assert plan.data.planned_at == build.start
    assert plan.data.trigger == "observation"
    assert plan.data.obs_sequence == 1
    assert plan.data.absent == (TRAIN_JOB_REF,)
    assert plan.data.plan.status == {"clusterGpus": 0}
    assert plan.data.plan.observed_resource_version == "10"
    [stored] = harness.server.stream_messages(PLAN_STREAM)
    assert stored.subject == "kaiwo.plan.kaiwojob.team-a.uid-train"
    assert sample(service, "kaiwo_planner_plans_total", kind="KaiwoJob", outcome="published") == 1
    assert sample(service, "kaiwo_planner_projection_objects") == 1


async def test_the_same_observation_again_publishes_nothing(harness: Any, build: Any) -> None:
    service = harness.service()
    await service.start()
    await harness.observe(build.kaiwo_job("train"), "10", "ADDED")
    # A relist after the duplicate window: same version, another message id.
    await harness.observe(build.kaiwo_job("train"), "10", "SYNC", event_id="relist-copy")
    assert await harness.drain(service) == 2
    assert len(harness.plans()) == 1
    assert sample(service, "kaiwo_planner_stale_events_total") == 1


async def test_a_stale_observation_is_dropped(harness: Any, build: Any) -> None:
    service = harness.service()
    await service.start()
    await harness.observe(build.kaiwo_job("train"), "10", "ADDED")
    renamed = build.kaiwo_job("train")
    renamed["spec"] = {"image": "older"}
    await harness.observe(renamed, "9")
    assert await harness.drain(service) == 2
    assert len(harness.plans()) == 1
    assert sample(service, "kaiwo_planner_stale_events_total") == 1
    held = service.projection.by_uid("uid-train")
    assert held is not None
    assert held["spec"] == {"image": "busybox"}
    assert harness.dead_letters() == []


async def test_a_new_version_that_plans_the_same_publishes_nothing(
    harness: Any, build: Any
) -> None:
    service = harness.service()
    await service.start()
    job = build.kaiwo_job("train")
    await harness.observe(job, "10", "ADDED")
    await harness.drain(service)
    # The executor writes the planned status: the owner's next version plans the same.
    written = harness.plans()[0].data.plan.status
    await harness.observe({**job, "status": written}, "11")
    await harness.drain(service)
    assert len(harness.plans()) == 1
    assert sample(service, "kaiwo_planner_plans_total", kind="KaiwoJob", outcome="unchanged") == 1


async def test_an_owner_that_moved_on_before_its_status_was_written_gets_the_plan_again(
    harness: Any, build: Any
) -> None:
    service = harness.service()
    await service.start()
    job = build.kaiwo_job("train")
    await harness.observe(job, "10", "ADDED")
    await harness.drain(service)
    # A label edit lands before the executor writes the status planned from version 10; the
    # executor refuses that write as stale, so the same decision goes out for version 11.
    edited = {**job, "metadata": {**job["metadata"], "labels": {"team": "nlp"}}}
    await harness.observe(edited, "11")
    await harness.drain(service)
    first, again = harness.plans()
    assert again.data.fingerprint == first.data.fingerprint
    assert first.data.plan.observed_resource_version == "10"
    assert again.data.plan.observed_resource_version == "11"
    # Once the owner shows the planned status, a further version publishes nothing.
    await harness.observe({**edited, "status": again.data.plan.status}, "12")
    await harness.drain(service)
    assert len(harness.plans()) == 2


async def test_a_node_change_replans_the_queue_config_and_every_workload(
    harness: Any, build: Any
) -> None:
    service = harness.service()
    await service.start()
    await harness.observe(build.queue_config(), "1", "ADDED")
    await harness.observe(build.kaiwo_job("b"), "2", "ADDED")
    await harness.observe(build.kaiwo_job("a"), "3", "ADDED")
    await harness.drain(service)
    assert len(harness.plans()) == 3

    node = build.gpu_node("gpu-0", gpus=8)
    await harness.observe(node, "4", "ADDED")
    await harness.drain(service)
    new = harness.plans()[3:]
    # One plan per owner, in owner order (KaiwoJob before KaiwoQueueConfig).
    assert [p.subject for p in new] == ["team-a/a", "team-a/b", "kaiwo"]
    assert [p.data.plan.status for p in new] == [{"clusterGpus": 8}] * 3
    assert {p.causationid for p in new} == {"uid-gpu-0:4"}
    assert [p.correlationid for p in new] == ["uid-a", "uid-b", "uid-kqc"]

    # A status update that changes no planning fact re-plans nothing at all ...
    await harness.observe({**node, "status": {**node["status"], "nodeInfo": {"bootID": "x"}}}, "5")
    await harness.drain(service)
    assert sample(service, "kaiwo_planner_plans_total", kind="KaiwoJob", outcome="unchanged") == 0
    # ... a new label re-plans every owner, which publish nothing since the plans are equal.
    await harness.observe(build.gpu_node("gpu-0", extra_labels={"pool": "a"}), "6")
    await harness.drain(service)
    assert len(harness.plans()) == 6
    assert sample(service, "kaiwo_planner_plans_total", kind="KaiwoJob", outcome="unchanged") == 2
    unchanged_kqc = sample(
        service, "kaiwo_planner_plans_total", kind="KaiwoQueueConfig", outcome="unchanged"
    )
    # Once when the first workload of team-a appeared (its LocalQueue may be needed; the
    # second one in the same namespace and queue changes nothing), once for the label.
    assert unchanged_kqc == 2


async def a_planned_job_with_its_job(
    harness: Any, build: Any
) -> tuple[PlannerService, dict[str, Any]]:
    """A started service that planned KaiwoJob ``train`` (observations 1-3): the planned status
    came back on it and its Job was created."""
    service = harness.service()
    await service.start()
    job = build.kaiwo_job("train")
    await harness.observe(job, "1", "ADDED")
    await harness.drain(service)
    await harness.observe({**job, "status": harness.plans()[0].data.plan.status}, "2")
    await harness.observe(build.batch_job(job), "3", "ADDED")
    await harness.drain(service)
    return service, job


async def test_a_child_deleted_by_hand_republishes_the_plan_with_it_absent(
    harness: Any, build: Any, clock: Any
) -> None:
    service, job = await a_planned_job_with_its_job(harness, build)
    # While the Job is being created, owner updates do not publish the plan again.
    assert len(harness.plans()) == 1

    deleted_at = clock.now
    await harness.observe(build.batch_job(job), "4", "DELETED")
    await harness.drain(service)
    assert len(harness.plans()) == 1  # its owner may be going too: planned after the grace
    assert service.next_timer == deleted_at + CHILD_GONE_GRACE
    clock.advance(CHILD_GONE_GRACE.total_seconds())
    await service.step(wait_seconds=0)
    first, again = harness.plans()
    assert again.data.fingerprint == first.data.fingerprint
    assert again.data.absent == (TRAIN_JOB_REF,)
    assert again.data.trigger == "timer"
    assert again.data.planned_at == deleted_at + CHILD_GONE_GRACE
    assert again.data.obs_sequence == 4
    assert again.id != first.id

    recreated = build.batch_job(job)
    recreated["metadata"]["uid"] = "uid-job-train-2"
    await harness.observe(recreated, "5", "ADDED")
    await harness.drain(service)
    assert len(harness.plans()) == 2


def config_map_of(job: dict[str, Any], name: str) -> dict[str, Any]:
    """A ConfigMap the KaiwoJob owns and the toy planner does not ask for."""
    meta = job["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "uid": f"uid-cm-{name}",
            "ownerReferences": [
                {
                    "apiVersion": job["apiVersion"],
                    "kind": "KaiwoJob",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
    }


async def test_a_childs_deletion_that_leaves_nothing_to_make_again_is_planned_at_once(
    harness: Any, build: Any, clock: Any
) -> None:
    """Decision 0181: the grace is for a plan that would make something missing (the owner
    may be going too). A child whose going leaves every desired object in place (a queue
    the KaiwoQueueConfig pruned, here a ConfigMap the plan does not ask for) re-plans its
    owner at once, with no timer; before, its owner waited the grace all the same."""
    service, job = await a_planned_job_with_its_job(harness, build)
    await harness.observe(config_map_of(job, "train-notes"), "4", "ADDED")
    await harness.drain(service)
    unchanged = sample(service, "kaiwo_planner_plans_total", kind="KaiwoJob", outcome="unchanged")

    await harness.observe(config_map_of(job, "train-notes"), "5", "DELETED")
    await harness.drain(service)
    assert (
        sample(service, "kaiwo_planner_plans_total", kind="KaiwoJob", outcome="unchanged")
        == unchanged + 1
    )
    assert sample(service, "kaiwo_planner_plans_total", kind="KaiwoJob", outcome="deferred") == 0
    assert service.next_timer is None
    assert len(harness.plans()) == 1


async def test_a_deleted_owners_children_going_in_any_order_get_it_no_plan(
    harness: Any, build: Any, clock: Any
) -> None:
    """The KaiwoJob is deleted; its Job's deletion, then its ConfigMap's, reach the planner
    before its own. After the Job went, each plan would make the Job again: both wait the
    grace (the ConfigMap's going leaves the Job missing too), and once the owner's deletion
    is in, nothing is published."""
    service, job = await a_planned_job_with_its_job(harness, build)
    await harness.observe(config_map_of(job, "train-notes"), "4", "ADDED")
    await harness.drain(service)

    await harness.observe(build.batch_job(job), "5", "DELETED")
    await harness.observe(config_map_of(job, "train-notes"), "6", "DELETED")
    await harness.drain(service)
    assert sample(service, "kaiwo_planner_plans_total", kind="KaiwoJob", outcome="deferred") == 2
    assert sample(service, "kaiwo_planner_timers_pending") == 1
    await harness.observe(job, "7", "DELETED")
    await harness.drain(service)
    clock.advance(CHILD_GONE_GRACE.total_seconds())
    await service.step(wait_seconds=0)
    assert len(harness.plans()) == 1
    assert harness.dead_letters() == []


async def test_a_timer_replans_at_its_due_time(harness: Any, build: Any, clock: Any) -> None:
    service = harness.service()
    await service.start()
    deadline = build.start.replace(minute=1)
    await harness.observe(build.kaiwo_job("train", deadline=deadline), "1", "ADDED")
    await harness.drain(service)
    [first] = harness.plans()
    assert first.data.plan.status == {"clusterGpus": 0, "expired": False}
    assert service.next_timer == deadline

    clock.advance(30)
    await service.step(wait_seconds=0)
    assert len(harness.plans()) == 1
    clock.advance(45)
    await service.step(wait_seconds=0)
    _, timed = harness.plans()
    assert timed.data.trigger == "timer"
    assert timed.data.planned_at == deadline
    assert timed.data.plan.status == {"clusterGpus": 0, "expired": True}
    assert timed.causationid is None
    assert timed.correlationid == "uid-train"
    assert service.next_timer is None


async def test_a_timer_of_a_deleted_owner_is_dropped(harness: Any, build: Any, clock: Any) -> None:
    service = harness.service()
    await service.start()
    job = build.kaiwo_job("train", deadline=build.start.replace(minute=1))
    await harness.observe(job, "1", "ADDED")
    await harness.observe(job, "2", "DELETED")
    await harness.drain(service)
    assert service.next_timer is None
    assert service.loop.records.fingerprint("uid-train") is None
    clock.advance(120)
    assert await service.loop.fire_due_timers() == 0
    assert len(harness.plans()) == 1


async def test_a_restart_restores_the_snapshot_and_replays_nothing(
    harness: Any, build: Any, clock: Any
) -> None:
    first = harness.service()
    await first.start()
    job = build.kaiwo_job("train", deadline=build.start.replace(hour=13))
    await harness.observe(job, "1", "ADDED")
    await harness.observe(build.batch_job(job), "2", "ADDED")
    await harness.observe(build.gpu_node("gpu-0"), "3", "ADDED")
    await harness.drain(first)
    await first.save_snapshot()
    # Handled and acknowledged after the snapshot, then the process dies without another.
    await harness.observe(build.kaiwo_job("serve"), "4", "ADDED")
    await harness.drain(first)
    published = harness.plans()
    assert len(published) == 3  # train, train re-planned for the node, serve

    second = harness.service()
    await second.start()
    assert second.ready
    # Restored from the snapshot, the one later observation read from the stream.
    assert second.projection.last_sequence == 4
    assert second.projection.by_uid("uid-serve") is not None
    assert second.projection.by_uid("uid-job-train") is not None
    assert second.next_timer == build.start.replace(hour=13)
    # Re-planning serve after the catch-up gives the same event id: JetStream drops it.
    assert [p.id for p in harness.plans()] == [p.id for p in published]
    assert await harness.drain(second) == 0

    # A redelivery of an observation already in the snapshot is skipped.
    await second.handle(await stored_delivery(harness, 1))
    assert sample(second, "kaiwo_planner_observations_total", outcome="skipped") == 1
    # The restored fingerprints hold: an owner update that plans the same publishes nothing.
    await harness.observe({**job, "status": published[1].data.plan.status}, "5")
    await harness.drain(second)
    assert len(harness.plans()) == 3
    # The restored projection knows the Job: deleting it publishes the plan with it absent.
    await harness.observe(build.batch_job(job), "6", "DELETED")
    await harness.drain(second)
    clock.advance(CHILD_GONE_GRACE.total_seconds())
    await second.step(wait_seconds=0)
    assert harness.plans()[-1].data.absent == (TRAIN_JOB_REF,)


async def test_a_restart_without_a_snapshot_reads_the_stream_from_its_start(
    harness: Any, build: Any
) -> None:
    first = harness.service()
    await first.start()
    job = build.kaiwo_job("train")
    await harness.observe(build.gpu_node("gpu-0"), "1", "ADDED")
    await harness.observe(job, "2", "ADDED")
    await harness.drain(first)
    # Handled and acknowledged, then the process dies before its first snapshot.
    second = harness.service()
    await second.start()
    # The consumer delivers nothing again; the stream gives back the node and the job.
    assert await harness.drain(second) == 0
    assert second.projection.last_sequence == 2
    assert second.projection.by_uid("uid-train") is not None
    assert [node.name for node in second.projection.cluster_state().nodes] == ["gpu-0"]


async def test_an_unreadable_snapshot_means_an_empty_start(harness: Any, build: Any) -> None:
    first = harness.service()
    await first.start()
    await harness.observe(build.kaiwo_job("train"), "1", "ADDED")
    await harness.drain(first)
    await first.save_snapshot()
    await harness.kv.put(f"{SNAPSHOT_KEY}.1.0", b"garbage")
    second = harness.service()
    assert not await second.restore()
    assert len(second.projection) == 0


async def test_snapshots_are_written_every_n_observations(harness: Any, build: Any) -> None:
    service = harness.service(snapshot_every_events=2, snapshot_every_seconds=3600)
    await service.start()
    await harness.observe(build.kaiwo_job("a"), "1", "ADDED")
    await harness.drain(service)
    assert await harness.kv.get(SNAPSHOT_KEY) is None
    await harness.observe(build.kaiwo_job("b"), "2", "ADDED")
    await harness.drain(service)
    assert await harness.kv.get(SNAPSHOT_KEY) is not None
    assert sample(service, "kaiwo_planner_snapshots_total", outcome="written") == 1


async def test_snapshots_are_written_after_the_interval(
    harness: Any, build: Any, clock: Any
) -> None:
    service = harness.service(snapshot_every_events=1000, snapshot_every_seconds=30)
    await service.start()
    await harness.observe(build.kaiwo_job("a"), "1", "ADDED")
    await harness.drain(service)
    assert await harness.kv.get(SNAPSHOT_KEY) is None
    clock.advance(31)
    await service.step(wait_seconds=0)
    assert await harness.kv.get(SNAPSHOT_KEY) is not None


async def test_a_large_snapshot_is_split_into_chunks_and_read_back() -> None:
    kv = MemoryKeyValue()
    store = SnapshotStore(kv, chunk_bytes=64)
    document = {"format": 1, "payload": [f"item-{i}" for i in range(200)]}
    await store.save(document)
    keys = [key async for key, _ in kv.items()]
    assert SNAPSHOT_KEY in keys
    assert len(keys) > 3
    assert await SnapshotStore(kv).load() == document
    # A second save replaces the first generation's chunks.
    await store.save({"format": 1, "payload": []})
    assert [key async for key, _ in kv.items()] == [SNAPSHOT_KEY, f"{SNAPSHOT_KEY}.2.0"]
    assert await SnapshotStore(kv).load() == {"format": 1, "payload": []}


async def test_a_snapshot_keeps_any_text_and_number_and_reads_what_the_old_encoder_wrote() -> None:
    """The snapshot's JSON is written by pydantic-core (UTF-8, no escapes): text outside
    ASCII and integers past 64 bits come back as they were, and a snapshot that ``json.dumps``
    wrote (every non-ASCII character escaped) before the change is still read."""
    kv = MemoryKeyValue()
    document = {
        "format": 1,
        "payload": [{"annotation": 'Grüße, 日本語 \u2028 "quoted"', "big": 2**70, "ratio": 0.1}],
    }
    await SnapshotStore(kv).save(document)
    assert await SnapshotStore(kv).load() == document

    earlier = zlib.compress(json.dumps(document, separators=(",", ":")).encode(), 6)
    assert b"\\u00fc" in zlib.decompress(earlier)
    await kv.put(f"{SNAPSHOT_KEY}.9.0", earlier)
    manifest = {
        "format": 1,
        "generation": 9,
        "chunks": 1,
        "sha256": hashlib.sha256(earlier).hexdigest(),
        "bytes": len(earlier),
    }
    await kv.put(SNAPSHOT_KEY, json.dumps(manifest).encode())
    assert await SnapshotStore(kv).load() == document


async def test_a_planning_error_for_one_owner_does_not_stop_the_others(
    harness: Any, build: Any
) -> None:
    service = harness.service()
    await service.start()
    await harness.observe(build.kaiwo_job("broken"), "1", "ADDED")
    await harness.observe(build.kaiwo_job("fine"), "2", "ADDED")
    await harness.observe(build.gpu_node("gpu-0"), "3", "ADDED")
    assert await harness.drain(service) == 3
    assert [p.subject for p in harness.plans()] == ["team-a/fine", "team-a/fine"]
    assert sample(service, "kaiwo_planner_plans_total", kind="KaiwoJob", outcome="error") == 2
    assert harness.dead_letters() == []


async def test_a_malformed_message_is_dead_lettered(harness: Any, build: Any) -> None:
    service = harness.service()
    await service.start()
    await harness.watcher.publish_raw(
        "kaiwo.obs.kaiwojob.team-a.uid-x", body=b"{not json", headers={"ce-id": "x"}
    )
    await harness.observe(build.kaiwo_job("train"), "1", "ADDED")
    assert await harness.drain(service) == 2
    [dead] = harness.dead_letters()
    assert dead.subject == "kaiwo.dlq.KAIWO_OBS.planner-obs"
    assert len(harness.plans()) == 1


async def test_an_object_the_projection_cannot_take_is_dead_lettered(
    harness: Any, build: Any
) -> None:
    service = harness.service()
    await service.start()
    job = build.kaiwo_job("train")
    job["metadata"]["ownerReferences"] = 7
    await harness.observe(job, "1", "ADDED")
    await harness.drain(service)
    assert len(harness.dead_letters()) == 1
    assert sample(service, "kaiwo_planner_observations_total", outcome="rejected") == 1


class FailingOnce:
    """Wraps a bus; the ``fail_at``-th publish on a subject starting with ``prefix`` raises
    once."""

    def __init__(self, bus: Any, *, fail_at: int, prefix: str = "kaiwo.plan.") -> None:
        self._bus = bus
        self._fail_at = fail_at
        self._prefix = prefix
        self._count = 0
        self.topology = bus.topology

    async def publish(self, envelope: Any, subject: str) -> Any:
        if subject.startswith(self._prefix):
            self._count += 1
        if subject.startswith(self._prefix) and self._count == self._fail_at:
            raise BusError("publish timed out")
        return await self._bus.publish(envelope, subject)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bus, name)


async def test_a_failed_publish_is_retried_for_the_owners_not_yet_published(
    harness: Any, build: Any
) -> None:
    bus = FailingOnce(harness.bus(), fail_at=4)
    service = PlannerService(bus, harness.kv, clock=harness.clock, plan_fn=build.toy_planner)
    await service.start()
    for index, name in enumerate(("a", "b", "c"), start=1):
        await harness.observe(build.kaiwo_job(name), str(index), "ADDED")
        await service.handle(await stored_delivery(harness, index))
    await harness.observe(build.gpu_node("gpu-0"), "4", "ADDED")
    node_delivery = await stored_delivery(harness, 4)
    try:
        await service.handle(node_delivery)
        raise AssertionError("the publish failure must reach the bus, which redelivers")
    except BusError:
        pass
    assert [p.subject for p in harness.plans()[3:]] == []
    await service.handle(node_delivery)  # the redelivery
    assert [p.subject for p in harness.plans()[3:]] == ["team-a/a", "team-a/b", "team-a/c"]


async def test_run_serves_until_stopped_and_writes_a_snapshot(harness: Any, build: Any) -> None:
    service = harness.service(poll_seconds=0.02)
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    await harness.observe(build.kaiwo_job("train"), "1", "ADDED")
    for _ in range(200):
        if harness.plans():
            break
        await asyncio.sleep(0.01)
    assert len(harness.plans()) == 1
    assert service.ready
    stop.set()
    await asyncio.wait_for(task, 5)
    assert not service.ready
    assert await harness.kv.get(SNAPSHOT_KEY) is not None


async def snapshot_of_train(harness: Any, build: Any) -> bytes | None:
    """A planner plans the KaiwoJob train and writes its snapshot; the stored manifest."""
    first = harness.service()
    await first.start()
    await harness.observe(build.kaiwo_job("train"), "1", "ADDED")
    await harness.drain(first)
    await first.save_snapshot()
    return await harness.kv.get(SNAPSHOT_KEY)


async def test_a_start_the_bus_interrupts_begins_again_from_the_snapshot(
    harness: Any, build: Any
) -> None:
    await snapshot_of_train(harness, build)
    await harness.observe(build.kaiwo_job("serve"), "2", "ADDED")

    bucket = UnansweredReads(harness.kv, failed_gets=2)
    second = harness.service(kv=bucket, poll_seconds=0.01)
    stop = asyncio.Event()
    running = asyncio.create_task(second.run(stop))
    await asyncio.wait_for(second.started(), HANG_SECONDS)

    assert bucket.gets > 2
    assert second.projection.last_sequence == 2
    assert second.projection.by_uid("uid-train") is not None
    stop.set()
    await asyncio.wait_for(running, HANG_SECONDS)  # no exception: the process ends with 0


async def test_a_planner_stopped_before_it_could_start_keeps_the_stored_snapshot(
    harness: Any, build: Any
) -> None:
    stored = await snapshot_of_train(harness, build)

    bucket = UnansweredReads(harness.kv, failed_gets=1_000_000)
    second = harness.service(kv=bucket, poll_seconds=0.01)
    stop = asyncio.Event()
    running = asyncio.create_task(second.run(stop))
    await eventually(lambda: bucket.gets >= 3, what="the snapshot read, tried again")
    stop.set()
    await asyncio.wait_for(running, HANG_SECONDS)

    assert not second.ready
    # An empty projection written now would replace the stored one.
    assert await harness.kv.get(SNAPSHOT_KEY) == stored


async def test_owners_a_plan_names_are_planned_in_the_same_round_once(
    harness: Any, build: Any
) -> None:
    service = harness.service()
    await service.start()
    victim = build.kaiwo_job("victim")
    victim["metadata"]["annotations"] = {"test/also-replan": "waiting"}
    await harness.observe(victim, "1", "ADDED")
    await harness.drain(service)  # "waiting" is not observed yet: nothing else to plan
    assert [p.subject for p in harness.plans()] == ["team-a/victim"]

    waiting = build.kaiwo_job("waiting")
    waiting["metadata"]["annotations"] = {"test/also-replan": "victim"}
    await harness.observe(waiting, "2", "ADDED")
    await harness.drain(service)
    # waiting is planned and published, victim re-planned once (no change), and the cycle ends.
    assert [p.subject for p in harness.plans()] == ["team-a/victim", "team-a/waiting"]
    assert sample(service, "kaiwo_planner_plans_total", kind="KaiwoJob", outcome="unchanged") == 1


async def test_a_snapshot_waits_for_as_many_observations_as_objects_held(
    harness: Any, build: Any
) -> None:
    service = harness.service(snapshot_every_events=2, snapshot_every_seconds=3600)
    await service.start()

    def written() -> float:
        return sample(service, "kaiwo_planner_snapshots_total", outcome="written")

    names = [f"job-{index}" for index in range(10)]
    for version, name in enumerate(names, start=1):
        await harness.observe(build.kaiwo_job(name), str(version), "ADDED")
        await harness.drain(service)
    # One snapshot at 2 objects; then each needs as many observations as objects are held
    # (every 2, as configured, would have written 5).
    assert written() == 1
    await harness.observe(build.kaiwo_job(names[0]), "11", "MODIFIED")
    await harness.drain(service)
    assert written() == 1  # 9 observations since, 10 objects
    await harness.observe(build.kaiwo_job(names[1]), "12", "MODIFIED")
    await harness.drain(service)
    assert written() == 2


async def test_a_child_still_being_created_is_named_absent_once(
    harness: Any, build: Any, clock: Any
) -> None:
    service = harness.service()
    await service.start()
    job = build.kaiwo_job("train")
    await harness.observe(job, "1", "ADDED")
    await harness.drain(service)
    # A node arrives before the Job's creation is observed: a new decision, same missing Job.
    clock.advance(1)
    await harness.observe(build.gpu_node("gpu-0"), "2", "ADDED")
    await harness.drain(service)
    first, second = harness.plans()
    assert first.data.absent == (TRAIN_JOB_REF,)
    assert second.data.fingerprint != first.data.fingerprint
    assert second.data.absent == ()

    await harness.observe(build.batch_job(job), "3", "ADDED")
    await harness.observe(build.batch_job(job), "4", "DELETED")
    await harness.drain(service)
    clock.advance(CHILD_GONE_GRACE.total_seconds())
    await service.step(wait_seconds=0)
    assert harness.plans()[-1].data.absent == (TRAIN_JOB_REF,)
    assert len(harness.plans()) == 3


async def test_every_line_logged_while_an_owner_is_planned_names_the_owner(
    harness: Any, build: Any
) -> None:
    """A node's observation starts the round (its uid bound), yet a failure planning a
    KaiwoJob, or a time it asks for in the past, is told under the KaiwoJob's uid."""

    def plan_in_the_past(*, owner: Any, context: Any, now: Any) -> Any:
        result = toy_planner(owner=owner, context=context, now=now)
        return dataclasses.replace(result, replan_at=now - timedelta(seconds=1))

    service = harness.service(plan_fn=plan_in_the_past)
    await service.start()
    merging = [structlog.contextvars.merge_contextvars]
    with structlog.testing.capture_logs(processors=merging) as logs:
        await harness.observe(build.kaiwo_job("train"), "1", "ADDED")
        await harness.observe(build.gpu_node("gpu-0"), "2", "ADDED")
        assert await harness.drain(service) == 2
    told = [
        line for line in logs if line["event"] == "planner asked to re-plan in the past; ignored"
    ]
    assert [(line["owner_uid"], line["uid"]) for line in told] == [
        ("uid-train", "uid-train"),
        ("uid-train", "uid-gpu-0"),
    ]
    published = [line for line in logs if line["event"] == "plan published"]
    assert {line["owner_uid"] for line in published} == {"uid-train"}
