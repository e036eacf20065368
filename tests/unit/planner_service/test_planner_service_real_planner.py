"""The planner service with the real planning entry point (``plan_object``).

Besides publication, this checks the replay principle end to end: rebuilding the projection
from the recorded observations up to a plan's ``obs_sequence`` and planning with its
``planned_at`` reproduces the published plan byte for byte.
"""

from __future__ import annotations

from typing import Any

from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.streams import OBSERVED_STREAM
from kaiwo_contracts.plans import ObjectRef, canonical_json, without_admission_gate
from kaiwo_planner.domain.state.projection import Projection
from kaiwo_planner.domain.status.planned_status import owner_with_status
from kaiwo_planner.service import CHILD_GONE_GRACE

from tests.planning_calls import planned

KAIWO = "kaiwo.silogen.ai/v1alpha1"
TRAIN_JOB = ObjectRef(api_version="batch/v1", kind="Job", name="train", namespace="team-a")


def kaiwo_job() -> dict[str, Any]:
    return {
        "apiVersion": KAIWO,
        "kind": "KaiwoJob",
        "metadata": {"name": "train", "namespace": "team-a", "uid": "uid-train", "generation": 1},
        "spec": {"image": "busybox", "entrypoint": "echo hello"},
    }


def queue_config() -> dict[str, Any]:
    return {
        "apiVersion": KAIWO,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo", "uid": "uid-kqc", "generation": 1},
        "spec": {"clusterQueues": [{"name": "kaiwo", "namespaces": ["team-a"], "spec": {}}]},
    }


def namespace(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "uid": f"ns-{name}"},
    }


def desired_kinds(plan: Envelope[PlanDecidedV1]) -> list[tuple[str, str | None, str]]:
    return [
        (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"])
        for d in plan.data.plan.desired
    ]


def owner_plans(harness: Any) -> list[Envelope[PlanDecidedV1]]:
    """The plans of observed owners: without those creating the default KaiwoConfig (these
    tests observe none) and KaiwoQueueConfig."""
    return [plan for plan in harness.plans() if not plan.data.plan.create_only]


def replayed(harness: Any, plan: Envelope[PlanDecidedV1]) -> str:
    """The plan for its owner from the recorded observations, as replay would compute it."""
    projection = Projection()
    for stored in harness.server.stream_messages(OBSERVED_STREAM):
        if stored.sequence > plan.data.obs_sequence:
            break
        observation = Envelope[ObservedObjectV1].from_nats(stored.headers, stored.body)
        projection.apply(observation.data, sequence=stored.sequence)
    owner = projection.by_uid(plan.correlationid)
    assert owner is not None
    owner = owner_with_status(owner, plan.data.assumed_status)
    assert plan.data.planned_at is not None
    again = planned(owner=owner, cluster=projection.cluster_state(), now=plan.data.planned_at)
    assert again is not None
    return canonical_json(again.model_dump(mode="json"))


async def test_the_real_planner_plans_the_queue_config_and_a_job(harness: Any, clock: Any) -> None:
    service = harness.service(plan_fn=None)
    await service.start()
    await harness.observe(namespace("team-a"), "1", "ADDED")
    clock.advance(1)
    await harness.observe(queue_config(), "2", "ADDED")
    clock.advance(1)
    await harness.observe(kaiwo_job(), "3", "ADDED")
    await harness.drain(service)

    plans = owner_plans(harness)
    assert [p.subject for p in plans] == ["kaiwo", "team-a/train"]
    kqc, job = plans
    assert desired_kinds(kqc) == [
        ("ClusterQueue", None, "kaiwo"),
        ("LocalQueue", "team-a", "kaiwo"),
    ]
    assert kqc.data.plan.status is not None
    # Its Kueue objects are not observed yet: not READY (decision 0048).
    assert kqc.data.plan.status["status"] == "PENDING"
    assert kqc.data.absent == (
        ObjectRef(api_version="kueue.x-k8s.io/v1beta1", kind="ClusterQueue", name="kaiwo"),
        ObjectRef(
            api_version="kueue.x-k8s.io/v1beta1",
            kind="LocalQueue",
            name="kaiwo",
            namespace="team-a",
        ),
    )
    assert desired_kinds(job) == [("Job", "team-a", "train")]
    assert job.data.absent == (TRAIN_JOB,)
    assert job.data.plan.status is not None
    assert job.data.plan.status["status"] == "PENDING"
    assert job.data.obs_sequence == 3

    for plan in plans:
        assert replayed(harness, plan) == canonical_json(plan.data.plan.model_dump(mode="json"))


async def test_the_real_planner_recreates_a_job_deleted_by_hand(harness: Any, clock: Any) -> None:
    service = harness.service(plan_fn=None)
    await service.start()
    await harness.observe(namespace("team-a"), "1", "ADDED")
    await harness.observe(queue_config(), "2", "ADDED")
    await harness.observe(kaiwo_job(), "3", "ADDED")
    await harness.drain(service)
    [_, first] = owner_plans(harness)

    child = dict(first.data.plan.desired[0])
    child["metadata"] = {**child["metadata"], "uid": "uid-job-train"}
    clock.advance(5)
    await harness.observe(child, "4", "ADDED")
    await harness.drain(service)
    # The Job exists now, as the first plan said it would: nothing new to publish. (Its
    # status announced ChildSpecApplied from the start, so no second status write either.)
    assert len(owner_plans(harness)) == 2
    assert first.data.absent == (TRAIN_JOB,)
    assert first.data.plan.status is not None
    assert [c["type"] for c in first.data.plan.status["conditions"]] == [
        "Schedulable",
        "Admitted",
        "ChildSpecApplied",
    ]
    assert [e.reason for e in first.data.plan.events] == ["WorkloadPending"]
    # The executor writes that status back: the same facts plan the same, so nothing goes out.
    clock.advance(5)
    await harness.observe({**kaiwo_job(), "status": first.data.plan.status}, "5")
    await harness.observe({**kaiwo_job(), "status": first.data.plan.status}, "6")
    await harness.drain(service)
    assert len(owner_plans(harness)) == 2

    clock.advance(5)
    await harness.observe(child, "7", "DELETED")
    await harness.drain(service)
    assert len(owner_plans(harness)) == 2  # the KaiwoJob may be going too: wait and see
    clock.advance(CHILD_GONE_GRACE.total_seconds())
    await service.step(wait_seconds=0)
    last = owner_plans(harness)[-1]
    assert last.correlationid == "uid-train"
    assert last.data.absent == (TRAIN_JOB,)
    assert last.data.trigger == "timer"
    assert replayed(harness, last) == canonical_json(last.data.plan.model_dump(mode="json"))


async def test_a_deleted_workload_whose_job_is_seen_going_first_gets_no_plan(
    harness: Any, clock: Any
) -> None:
    """kubectl delete kaiwojob: the KaiwoJob goes at once, the garbage collector deletes its
    Job after it, and the two are watched apart, so the Job's deletion can come in first. A
    plan re-creating the Job then would be refused by the executor (no such owner) and
    dead-lettered: a false alarm per deleted workload."""
    service = harness.service(plan_fn=None)
    await service.start()
    await harness.observe(namespace("team-a"), "1", "ADDED")
    await harness.observe(queue_config(), "2", "ADDED")
    await harness.observe(kaiwo_job(), "3", "ADDED")
    await harness.drain(service)
    [_, first] = owner_plans(harness)
    child = dict(first.data.plan.desired[0])
    child["metadata"] = {**child["metadata"], "uid": "uid-job-train"}
    await harness.observe(child, "4", "ADDED")
    await harness.observe({**kaiwo_job(), "status": first.data.plan.status}, "5")
    await harness.drain(service)
    assert len(owner_plans(harness)) == 2

    clock.advance(1)
    await harness.observe(child, "6", "DELETED")
    await harness.drain(service)
    clock.advance(1)
    await harness.observe({**kaiwo_job(), "status": first.data.plan.status}, "7", "DELETED")
    await harness.drain(service)
    clock.advance(CHILD_GONE_GRACE.total_seconds() + 60)
    await service.step(wait_seconds=0)

    workload_plans = [p for p in owner_plans(harness) if p.correlationid == "uid-train"]
    assert len(workload_plans) == 1
    assert service.next_timer is None


async def test_a_child_changed_by_hand_is_published_as_drifted_once(
    harness: Any, clock: Any
) -> None:
    service = harness.service(plan_fn=None)
    await service.start()
    await harness.observe(namespace("team-a"), "1", "ADDED")
    await harness.observe(queue_config(), "2", "ADDED")
    await harness.observe(kaiwo_job(), "3", "ADDED")
    await harness.drain(service)
    [_, first] = owner_plans(harness)
    applied = dict(first.data.plan.desired[0])
    applied["metadata"] = {**applied["metadata"], "uid": "uid-job-train"}
    await harness.observe(applied, "4", "ADDED")
    await harness.drain(service)
    assert len(owner_plans(harness)) == 2

    # Someone runs `kubectl edit job train` and sets parallelism to 8.
    edited = {**applied, "spec": {**applied["spec"], "parallelism": 8}}
    clock.advance(5)
    edit = await harness.observe(edited, "5")
    await harness.observe({**kaiwo_job(), "status": first.data.plan.status}, "6")
    await harness.drain(service)
    [_, _, again] = owner_plans(harness)
    # The same decision (its Events were announced once already; the Job exists, so its
    # suspend is Kueue's), now naming the drift.
    assert again.data.plan.desired == tuple(
        without_admission_gate(m) for m in first.data.plan.desired
    )
    assert again.data.plan.status == first.data.plan.status
    assert again.data.drifted == (TRAIN_JOB,)
    assert again.data.absent == ()
    assert again.causationid == edit.id

    # The executor applies it again; what comes back holds the plan: nothing more to say.
    await harness.observe(applied, "7")
    await harness.drain(service)
    assert len(owner_plans(harness)) == 3


async def test_a_resync_publishes_again_while_a_child_stays_drifted(
    harness: Any, clock: Any
) -> None:
    service = harness.service(plan_fn=None, resync_on_start=False, resync_every_seconds=0)
    await service.start()
    await harness.observe(namespace("team-a"), "1", "ADDED")
    await harness.observe(queue_config(), "2", "ADDED")
    await harness.observe(kaiwo_job(), "3", "ADDED")
    await harness.drain(service)
    [_, first] = owner_plans(harness)
    applied = dict(first.data.plan.desired[0])
    applied["metadata"] = {**applied["metadata"], "uid": "uid-job-train"}
    edited = {**applied, "spec": {**applied["spec"], "parallelism": 8}}
    await harness.observe(edited, "4", "ADDED")
    await harness.drain(service)
    assert len(owner_plans(harness)) == 3  # drifted since its first observation

    # The re-apply failed for good: the drift stays, and only a resync says it again.
    await harness.observe({**kaiwo_job(), "status": first.data.plan.status}, "5")
    await harness.drain(service)
    assert len(owner_plans(harness)) == 3
    clock.advance(600)
    await service.resync()
    resynced = [p for p in owner_plans(harness) if p.data.trigger == "resync"]
    # The queue config's Kueue objects were never observed: absent, so they go out too.
    assert [(p.subject, p.data.drifted, p.data.absent != ()) for p in resynced] == [
        ("kaiwo", (), True),
        ("team-a/train", (TRAIN_JOB,), False),
    ]

    await harness.observe(applied, "6")
    await harness.drain(service)
    clock.advance(600)
    await service.resync()
    assert [p.subject for p in owner_plans(harness) if p.data.trigger == "resync"] == [
        "kaiwo",
        "team-a/train",
        "kaiwo",
    ]


async def test_created_children_coming_back_one_by_one_publish_nothing(
    harness: Any, clock: Any
) -> None:
    service = harness.service(plan_fn=None)
    await service.start()
    await harness.observe(namespace("team-a"), "1", "ADDED")
    await harness.observe(queue_config(), "2", "ADDED")
    await harness.drain(service)
    [kqc] = owner_plans(harness)
    assert len(kqc.data.absent) == 2

    # The executor created both; their observations arrive one at a time.
    for index, created in enumerate(kqc.data.plan.desired):
        observed = {**created, "metadata": {**created["metadata"], "uid": f"uid-q{index}"}}
        clock.advance(1)
        await harness.observe(observed, str(3 + index), "ADDED")
        await harness.drain(service)
    # One plan more: once all are back, the status turns READY (decision 0048); it names
    # none of them while they come, so no plan per object.
    first, ready = owner_plans(harness)
    assert first.data.plan.status is not None and first.data.plan.status["status"] == "PENDING"
    assert ready.data.plan.status is not None and ready.data.plan.status["status"] == "READY"
    assert (ready.data.absent, ready.data.drifted) == ((), ())
    assert ready.data.plan.desired == first.data.plan.desired


async def test_an_older_version_of_our_own_write_is_not_drift_until_a_resync(
    harness: Any, clock: Any
) -> None:
    service = harness.service(plan_fn=None, resync_on_start=False, resync_every_seconds=0)
    await service.start()
    await harness.observe(namespace("team-a"), "1", "ADDED")
    await harness.observe(queue_config(), "2", "ADDED")
    await harness.observe(kaiwo_job(), "3", "ADDED")
    await harness.drain(service)
    [_, first] = owner_plans(harness)
    # What comes back was last written by the operator but holds less than the plan asks
    # (an update of ours still on its way, or one the server refused for good).
    ours = dict(first.data.plan.desired[0])
    ours["metadata"] = {
        **ours["metadata"],
        "uid": "uid-job-train",
        "managedFields": [
            {"manager": "kaiwo", "operation": "Apply", "time": "2026-03-01T12:00:00Z"}
        ],
    }
    ours["spec"] = {**ours["spec"], "parallelism": 8}
    await harness.observe(ours, "4", "ADDED")
    await harness.drain(service)
    assert len(owner_plans(harness)) == 2

    clock.advance(600)
    await service.resync()
    resynced = [p for p in owner_plans(harness) if p.data.trigger == "resync"]
    assert [(p.subject, p.data.drifted) for p in resynced if p.subject != "kaiwo"] == [
        ("team-a/train", (TRAIN_JOB,))
    ]


async def test_a_fresh_cluster_gets_the_default_singletons_created_once(
    harness: Any, clock: Any
) -> None:
    service = harness.service(plan_fn=None)
    await service.start()
    await harness.drain(service)
    assert harness.plans() == []  # nothing listed yet: every singleton would look missing
    await harness.observe(namespace("team-a"), "1", "ADDED")
    await harness.drain(service)
    await harness.drain(service)
    created = harness.plans()
    assert [(p.subject, p.data.plan.create_only, p.data.plan.owner.kind) for p in created] == [
        ("kaiwo", True, "KaiwoConfig"),
        ("kaiwo", True, "KaiwoQueueConfig"),
    ]
    assert [len(p.data.absent) for p in created] == [1, 1]

    queue = {**queue_config(), "spec": {}}
    await harness.observe(queue, "2", "ADDED")
    await harness.drain(service)
    assert [p.data.plan.owner.kind for p in harness.plans()[2:]] == ["KaiwoQueueConfig"]
    assert not harness.plans()[-1].data.plan.create_only  # the queue config's own plan

    # Deleted by someone: it is created again.
    await harness.observe(queue, "3", "DELETED")
    await harness.drain(service)
    assert [p.data.plan.owner.kind for p in harness.plans() if p.data.plan.create_only] == [
        "KaiwoConfig",
        "KaiwoQueueConfig",
        "KaiwoQueueConfig",
    ]


def admitted_kueue_workload(job_uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": "job-train",
            "namespace": "team-a",
            "uid": "uid-kueue-train",
            "labels": {"kueue.x-k8s.io/job-uid": job_uid},
        },
        "status": {"conditions": [{"type": "Admitted", "status": "True"}]},
    }


async def test_a_resync_does_not_rewrite_a_running_workloads_status(
    harness: Any, clock: Any
) -> None:
    """Only ``status.duration`` would change, hours later: nothing a user reads (0043)."""
    service = harness.service(plan_fn=None, resync_on_start=False, resync_every_seconds=0)
    await service.start()
    await harness.observe(namespace("team-a"), "1", "ADDED")
    await harness.observe(queue_config(), "2", "ADDED")
    await harness.observe(kaiwo_job(), "3", "ADDED")
    await harness.drain(service)
    [_, first] = owner_plans(harness)
    child = dict(first.data.plan.desired[0])
    child["metadata"] = {**child["metadata"], "uid": "uid-job-train"}
    child["status"] = {"active": 1, "ready": 1}
    clock.advance(5)
    await harness.observe(child, "4", "ADDED")
    await harness.observe(admitted_kueue_workload("uid-job-train"), "5", "ADDED")
    await harness.drain(service)
    running = owner_plans(harness)[-1]
    assert running.data.plan.status is not None
    assert running.data.plan.status["status"] == "RUNNING"
    # The executor writes it; what comes back holds the plan.
    await harness.observe({**kaiwo_job(), "status": running.data.plan.status}, "6")
    await harness.drain(service)
    published = len(owner_plans(harness))

    for hours in (1, 5, 30):
        clock.advance(hours * 3600)
        await service.resync()
        assert [
            p.data.plan.status for p in owner_plans(harness)[published:] if p.subject != "kaiwo"
        ] == []


def kaiwo_config(head_pod_memory: str, generation: int) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo", "uid": "uid-kc", "generation": generation},
        "spec": {"ray": {"headPodMemory": head_pod_memory}},
    }


def config_warnings(harness: Any) -> list[tuple[int | None, str]]:
    """The generation and Event message of every KaiwoConfig plan published."""
    return [
        (plan.data.plan.observed_generation, event.message)
        for plan in owner_plans(harness)
        if plan.data.plan.owner.kind == "KaiwoConfig"
        for event in plan.data.plan.events
    ]


async def test_an_invalid_kaiwo_config_is_told_once_per_version_and_settles(
    harness: Any, clock: Any
) -> None:
    # Decision 0206: the plan of an invalid KaiwoConfig carries one Warning Event; the same
    # version plans the same (no news, nothing published), a fixed one plans nothing.
    told = (
        "The KaiwoConfig 'kaiwo' is invalid, so until it is fixed workloads are planned with "
        "the defaults and the monitor judges no GPU use (no findings, no preemption): "
        "spec.ray.headPodMemory: must be a non-negative Kubernetes quantity "
        "such as 500m, 16Gi, 100G or 8 (digits with an optional decimal point, then one of the "
        "suffixes n u m k M G T P E Ki Mi Gi Ti Pi Ei or an exponent e3), got 'lots'"
    )
    service = harness.service(plan_fn=None)
    await service.start()
    await harness.observe(kaiwo_config("lots", 1), "1", "ADDED")
    await harness.drain(service)
    assert config_warnings(harness) == [(1, told)]
    (plan,) = [p for p in owner_plans(harness) if p.data.plan.owner.kind == "KaiwoConfig"]
    assert plan.data.plan.status is None and plan.data.plan.desired == ()
    assert replayed(harness, plan) == canonical_json(plan.data.plan.model_dump(mode="json"))

    # Observed again (a relist), resynced: settled, nothing more is published.
    published = len(harness.plans())
    clock.advance(60)
    await harness.observe(kaiwo_config("lots", 1), "2")
    await harness.drain(service)
    await service.resync()
    assert len(harness.plans()) == published

    # Fixed: nothing to say. Broken again: told again, about the new version.
    clock.advance(60)
    await harness.observe(kaiwo_config("32Gi", 2), "3")
    await harness.drain(service)
    assert config_warnings(harness) == [(1, told)]
    clock.advance(60)
    await harness.observe(kaiwo_config("lots", 3), "4")
    await harness.drain(service)
    assert config_warnings(harness) == [(1, told), (3, told)]


async def test_a_kaiwo_config_of_another_name_is_told_once_and_settles(
    harness: Any, clock: Any
) -> None:
    # Decision 0209: never read, so told once per version, and nothing else is planned for it.
    other = kaiwo_config("32Gi", 1)
    other["metadata"] |= {"name": "my-settings", "uid": "uid-other"}
    service = harness.service(plan_fn=None)
    await service.start()
    await harness.observe(kaiwo_config("32Gi", 1), "1", "ADDED")
    await harness.drain(service)
    published = len(harness.plans())
    await harness.observe(other, "2", "ADDED")
    await harness.drain(service)
    assert config_warnings(harness) == [
        (
            1,
            "Only the KaiwoConfig named 'kaiwo' is read, so this one ('my-settings') changes "
            "nothing: put its settings in the KaiwoConfig 'kaiwo' (kubectl edit kaiwoconfig "
            "kaiwo) and delete this one",
        )
    ]
    assert [p.data.plan.owner.name for p in harness.plans()[published:]] == ["my-settings"]
    (plan,) = [p for p in owner_plans(harness) if p.data.plan.owner.name == "my-settings"]
    assert replayed(harness, plan) == canonical_json(plan.data.plan.model_dump(mode="json"))

    # Observed again (a relist), resynced: settled.
    published = len(harness.plans())
    clock.advance(60)
    await harness.observe(other, "3")
    await harness.drain(service)
    await service.resync()
    assert len(harness.plans()) == published


def namespace_config(name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "AIMNamespaceConfig",
        "metadata": {"name": name, "namespace": "team-a", "uid": uid, "generation": 1},
        "spec": {"images": {"imagePullSecrets": ["registry"]}},
    }


def namespace_config_warnings(harness: Any) -> list[tuple[str, str, str]]:
    """The owner, reason and Event message of every AIMNamespaceConfig plan published."""
    return [
        (plan.data.plan.owner.name, event.reason, event.message)
        for plan in owner_plans(harness)
        if plan.data.plan.owner.kind == "AIMNamespaceConfig"
        for event in plan.data.plan.events
    ]


async def test_a_second_namespace_config_is_told_once_it_is_not_in_force_and_settles(
    harness: Any, clock: Any
) -> None:
    # Decision 0209: the one that sorts after the one in force gets one NotInForce Event,
    # planned when the other appears (fan-out), once; the one in force plans nothing.
    told = (
        "Another AIMNamespaceConfig of namespace 'team-a', 'a-first', is in force (the first "
        "valid one by name), so none of this one's settings reach the workloads and Models of "
        "the namespace while it exists: keep one AIMNamespaceConfig per namespace, or delete "
        "'a-first' to put this one in force"
    )
    service = harness.service(plan_fn=None)
    await service.start()
    await harness.observe(namespace_config("b-second", "uid-b"), "1", "ADDED")
    await harness.drain(service)
    assert namespace_config_warnings(harness) == []
    clock.advance(5)
    await harness.observe(namespace_config("a-first", "uid-a"), "2", "ADDED")
    await harness.drain(service)
    assert namespace_config_warnings(harness) == [("b-second", "NotInForce", told)]
    (plan,) = [p for p in owner_plans(harness) if p.data.plan.owner.kind == "AIMNamespaceConfig"]
    assert [source.ref.name for source in plan.data.plan.sources] == ["b-second", "a-first"]
    assert replayed(harness, plan) == canonical_json(plan.data.plan.model_dump(mode="json"))

    # Observed again (a relist), resynced: settled, nothing more is published.
    published = len(harness.plans())
    clock.advance(60)
    await harness.observe(namespace_config("a-first", "uid-a"), "3")
    await harness.observe(namespace_config("b-second", "uid-b"), "4")
    await harness.drain(service)
    await service.resync()
    assert len(harness.plans()) == published

    # The one in force deleted: the other is in force and has nothing to say.
    clock.advance(60)
    await harness.observe(namespace_config("a-first", "uid-a"), "5", "DELETED")
    await harness.drain(service)
    await service.resync()
    assert namespace_config_warnings(harness) == [("b-second", "NotInForce", told)]
