"""Public workload events derived from hand-written status transitions of a KaiwoJob."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

from kaiwo_contracts.events import Envelope
from kaiwo_contracts.events.observed import ObservedObjectV1, WatchEventType
from kaiwo_contracts.events.public import PreemptionV1, WorkloadEventV1, WorkloadRef
from kaiwo_contracts.events.streams import PUBLIC_STREAM, bus_topology
from kaiwo_planner.domain.status.public_events import (
    PublicEvent,
    PublicState,
    derive_public_events,
    public_state,
)
from kaiwo_planner.metrics import PlannerMetrics
from kaiwo_planner.publisher import PlanPublisher
from kaiwo_runtime.memory_bus import MemoryBus
from kaiwo_runtime.memory_jetstream import MemoryJetStream

UID = "0b6c3f7e-1d2a-4c5b-9e8f-7a6b5c4d3e2f"
AT = datetime(2026, 3, 1, 12, 30, 5, tzinfo=UTC)


def job(
    resource_version: str,
    phase: str = "",
    *conditions: dict[str, str],
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {
            "name": "llama-sft",
            "namespace": "team-a",
            "uid": UID,
            "resourceVersion": resource_version,
            "creationTimestamp": "2026-03-01T12:00:00Z",
        },
        "spec": spec
        if spec is not None
        else {
            "user": "ada@example.com",
            "clusterQueue": "gpu-a",
            "image": "busybox",
            "env": [{"name": "TOKEN", "value": "s3cr3t"}],
        },
        "status": {"status": phase, "conditions": list(conditions)},
    }


def condition(kind: str, status: str, reason: str, message: str = "") -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": message}


def observed(obj: dict[str, Any], event_type: WatchEventType = "MODIFIED") -> ObservedObjectV1:
    return ObservedObjectV1(
        kind=obj["kind"],
        api_version=obj["apiVersion"],
        namespace=obj["metadata"]["namespace"],
        name=obj["metadata"]["name"],
        uid=obj["metadata"]["uid"],
        resource_version=obj["metadata"]["resourceVersion"],
        event_type=event_type,
        object=obj,
    )


def told(events: tuple[PublicEvent, ...]) -> list[tuple[str, str, str | None, str | None]]:
    """The transitions (a preemption's decision event is checked on its own)."""
    return [
        (e.payload.transition.value, e.payload.phase, e.payload.previous_phase, e.payload.reason)
        for e in events
        if isinstance(e.payload, WorkloadEventV1)
    ]


def derive(
    previous: dict[str, Any] | None, new: dict[str, Any], event_type: WatchEventType = "MODIFIED"
) -> tuple[PublicEvent, ...]:
    before = public_state(previous) if previous is not None else None
    return derive_public_events(
        before, observed(new, event_type), observed_at=AT, default_queue="kaiwo"
    )


ADMITTED = condition("Admitted", "True", "Admitted", "Workload is admitted")
PENDING_ADMISSION = condition("Admitted", "False", "Pending", "Workload is pending admission")


def test_a_new_workload_is_submitted_with_small_payload_and_no_spec() -> None:
    [event] = derive(None, job("10"), event_type="ADDED")

    assert event.id == f"{UID}:submitted"
    assert event.subject == f"kaiwo.public.workload.team-a.kaiwojob.{UID}"
    assert event.payload.model_dump(mode="json") == {
        "transition": "submitted",
        "workload": {"kind": "KaiwoJob", "namespace": "team-a", "name": "llama-sft", "uid": UID},
        "user": "ada@example.com",
        "queue": "gpu-a",
        "phase": "",
        "previousPhase": None,
        "reason": None,
        "message": None,
        "observedAt": "2026-03-01T12:30:05Z",
        "createdAt": "2026-03-01T12:00:00Z",
        "resourceVersion": "10",
    }
    assert "s3cr3t" not in event.payload.model_dump_json()


def test_a_workload_without_a_queue_gets_the_default_one() -> None:
    [event] = derive(None, job("10", spec={"image": "busybox"}), event_type="ADDED")

    assert (event.payload.queue, event.payload.user) == ("kaiwo", None)


def test_the_whole_life_of_a_job_step_by_step() -> None:
    versions = [
        job("10"),
        job("11", "DOWNLOADING"),
        job("12", "PENDING", PENDING_ADMISSION),
        job("13", "STARTING", ADMITTED),
        job("14", "RUNNING", ADMITTED),
        job("15", "RUNNING", ADMITTED),  # e.g. the duration counter moved on
        job("16", "COMPLETE", ADMITTED),
    ]
    steps = [derive(None, versions[0], "ADDED")] + [
        derive(before, after) for before, after in itertools.pairwise(versions)
    ]

    assert [told(step) for step in steps] == [
        [("submitted", "", None, None)],
        [("phase-changed", "DOWNLOADING", "", None)],
        [("phase-changed", "PENDING", "DOWNLOADING", None)],
        [
            ("admitted", "STARTING", None, "Admitted"),
            ("phase-changed", "STARTING", "PENDING", None),
        ],
        [("phase-changed", "RUNNING", "STARTING", None)],
        [],
        [("phase-changed", "COMPLETE", "RUNNING", None), ("completed", "COMPLETE", None, None)],
    ]
    assert [e.id for e in steps[3]] == [f"{UID}:admitted:13", f"{UID}:phase-changed:13"]


def test_the_same_observation_gives_the_same_ids() -> None:
    first = derive(job("12", "PENDING"), job("13", "STARTING", ADMITTED))
    again = derive(job("12", "PENDING"), job("13", "STARTING", ADMITTED))

    assert [e.id for e in first] == [e.id for e in again]
    assert first == again


def test_underutilization_flags_and_recovers() -> None:
    running = job("20", "RUNNING", ADMITTED)
    low = job(
        "21",
        "RUNNING",
        ADMITTED,
        condition("ResourceUnderutilization", "True", "GpuUtilizationLow", "GPUs idle"),
    )
    normal = job(
        "22",
        "RUNNING",
        ADMITTED,
        condition("ResourceUnderutilization", "False", "GpuUtilizationNormal"),
    )

    assert told(derive(running, low)) == [("underutilized", "RUNNING", None, "GpuUtilizationLow")]
    assert derive(running, low)[0].payload.message == "GPUs idle"
    assert told(derive(low, low)) == []
    assert told(derive(low, normal)) == [("recovered", "RUNNING", None, "GpuUtilizationNormal")]
    assert told(derive(normal, normal)) == []


def test_a_ray_job_stopped_on_its_cluster_is_terminated_with_why() -> None:
    """RUNNING to TERMINATED at once, the child stopped by someone (decision 0188): the
    subscribers are told the reason and the message, and no preemption."""
    running = job("40", "RUNNING", ADMITTED)
    stopped = job(
        "41",
        "TERMINATED",
        ADMITTED,
        condition("WorkloadTerminatedEarly", "True", "RayJobStopped", "its Ray job was stopped"),
    )
    events = derive(running, stopped)
    assert told(events) == [
        ("phase-changed", "TERMINATED", "RUNNING", "RayJobStopped"),
        ("terminated", "TERMINATED", None, "RayJobStopped"),
    ]
    assert events[-1].payload.message == "its Ray job was stopped"


def test_termination_for_low_utilization_is_terminated_not_preempted() -> None:
    low = condition("ResourceUnderutilization", "True", "GpuUtilizationLow")
    running = job("30", "RUNNING", ADMITTED, low)
    terminating = job(
        "31",
        "TERMINATING",
        ADMITTED,
        low,
        condition("WorkloadTerminatedEarly", "False", "GpuUtilizationLow", "underused"),
    )
    terminated = job(
        "32",
        "TERMINATED",
        ADMITTED,
        low,
        condition("WorkloadTerminatedEarly", "True", "GpuUtilizationLow", "underused"),
    )

    assert told(derive(running, terminating)) == [
        ("phase-changed", "TERMINATING", "RUNNING", "GpuUtilizationLow")
    ]
    assert told(derive(terminating, terminated)) == [
        ("phase-changed", "TERMINATED", "TERMINATING", "GpuUtilizationLow"),
        ("terminated", "TERMINATED", None, "GpuUtilizationLow"),
    ]


def test_a_preemption_is_told_once_then_the_termination() -> None:
    running = job("40", "RUNNING", ADMITTED)
    terminating = job(
        "41",
        "TERMINATING",
        ADMITTED,
        condition("WorkloadTerminatedEarly", "False", "DurationExceededWithActiveGpuDemand"),
    )
    terminated = job(
        "42",
        "TERMINATED",
        ADMITTED,
        condition("WorkloadTerminatedEarly", "True", "DurationExceededWithActiveGpuDemand"),
    )

    assert told(derive(running, terminating)) == [
        ("phase-changed", "TERMINATING", "RUNNING", "DurationExceededWithActiveGpuDemand"),
        ("preempted", "TERMINATING", None, "DurationExceededWithActiveGpuDemand"),
    ]
    assert told(derive(terminating, terminated)) == [
        ("phase-changed", "TERMINATED", "TERMINATING", "DurationExceededWithActiveGpuDemand"),
        ("terminated", "TERMINATED", None, "DurationExceededWithActiveGpuDemand"),
    ]


def test_a_preemption_reason_naming_preemption_or_a_preempted_condition_counts() -> None:
    running = job("50", "RUNNING", ADMITTED)
    idle_preempted = job(
        "51",
        "TERMINATING",
        ADMITTED,
        condition("WorkloadTerminatedEarly", "False", "PreemptedForPendingGpuDemand"),
    )
    marked = job(
        "52", "RUNNING", ADMITTED, condition("Preempted", "True", "IdleGpus", "for team-b/x")
    )

    assert [e.label for e in derive(running, idle_preempted)] == [
        "phase-changed",
        "preempted",
        "preemption",
    ]
    assert told(derive(running, marked)) == [("preempted", "RUNNING", None, "IdleGpus")]


def test_a_failure_names_the_condition_that_explains_it() -> None:
    pending = job("60", "PENDING", PENDING_ADMISSION)
    failed = job(
        "61",
        "FAILED",
        condition("Valid", "False", "InvalidSpec", "spec.gpus: must be >= 0"),
        condition("Schedulable", "True", "Schedulable"),
    )

    assert told(derive(pending, failed)) == [
        ("phase-changed", "FAILED", "PENDING", "InvalidSpec"),
        ("failed", "FAILED", None, "InvalidSpec"),
    ]


def test_a_deletion_is_told_once_per_uid() -> None:
    running = job("70", "RUNNING", ADMITTED)
    gone = job("71", "RUNNING", ADMITTED)

    [event] = derive(running, gone, event_type="DELETED")
    assert (event.id, event.payload.transition.value) == (f"{UID}:deleted", "deleted")
    [unseen] = derive(None, gone, event_type="DELETED")
    assert unseen.payload.transition.value == "deleted"


def test_a_workload_seen_late_is_told_its_whole_state_at_once() -> None:
    assert told(derive(None, job("80", "RUNNING", ADMITTED), "ADDED")) == [
        ("submitted", "RUNNING", None, None),
        ("admitted", "RUNNING", None, "Admitted"),
        ("phase-changed", "RUNNING", "", None),
    ]


def test_other_kinds_and_cluster_objects_tell_nothing() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a", "uid": "u1", "resourceVersion": "1"},
        "status": {"phase": "Running"},
    }
    assert derive(None, pod, "ADDED") == ()
    assert public_state(job("1")) == PublicState()


def test_a_preemption_names_the_victim_the_beneficiary_and_the_reason() -> None:
    running = job("70", "RUNNING", ADMITTED)
    message = (
        "Preempted to free 4 amd GPU(s) for pending workload KaiwoJob/team-b/next, which needs "
        "4 more: GPUs idle since 2026-03-01T11:30:00Z, longer than the grace period of 600s; "
        "policy OnPressure"
    )
    terminating = job(
        "71",
        "TERMINATING",
        ADMITTED,
        condition("WorkloadTerminatedEarly", "False", "GpuIdlePreemption", message),
    )
    terminating["status"]["preemptedFor"] = {
        "kind": "KaiwoJob",
        "namespace": "team-b",
        "name": "next",
        "uid": "11111111-2222-4333-8444-555555555555",
    }

    events = derive(running, terminating)

    assert [e.label for e in events] == ["phase-changed", "preempted", "preemption"]
    decision = events[2]
    assert decision.id == f"{UID}:preemption:71"
    assert decision.subject == f"kaiwo.public.workload.team-a.kaiwojob.{UID}"
    assert decision.payload == PreemptionV1(
        victim=WorkloadRef(kind="KaiwoJob", namespace="team-a", name="llama-sft", uid=UID),
        beneficiary=WorkloadRef(
            kind="KaiwoJob",
            namespace="team-b",
            name="next",
            uid="11111111-2222-4333-8444-555555555555",
        ),
        reason="GpuIdlePreemption",
        message=message,
        observed_at=AT,
        resource_version="71",
    )
    assert decision.workload == decision.payload.victim  # type: ignore[union-attr]
    # Told once: the next version (TERMINATED) is no new decision.
    terminated = job(
        "72",
        "TERMINATED",
        ADMITTED,
        condition("WorkloadTerminatedEarly", "True", "GpuIdlePreemption", message),
    )
    assert [e.label for e in derive(terminating, terminated)] == ["phase-changed", "terminated"]


def test_a_preemption_for_nobody_in_particular_has_no_beneficiary() -> None:
    running = job("80", "RUNNING", ADMITTED)
    always = job(
        "81",
        "TERMINATING",
        ADMITTED,
        condition("WorkloadTerminatedEarly", "False", "GpuIdlePreemption", "policy Always"),
    )

    decision = derive(running, always)[-1].payload

    assert isinstance(decision, PreemptionV1)
    assert (decision.beneficiary, decision.reason, decision.message) == (
        None,
        "GpuIdlePreemption",
        "policy Always",
    )


def test_a_move_to_pending_after_an_eviction_names_kueues_reason() -> None:
    """READY (a service) or RUNNING (a job) to PENDING because Kueue evicted it: the
    ``phase-changed`` carries the reason and words of the workload's ``Evicted`` condition
    (decision 0180; before, null). A first wait, and a wait once readmitted (the condition
    False), carry none."""
    stopped = condition("Evicted", "True", "ClusterQueueStopped", "The ClusterQueue is stopped")
    events = derive(job("5", "RUNNING"), job("6", "PENDING", stopped))
    assert told(events) == [("phase-changed", "PENDING", "RUNNING", "ClusterQueueStopped")]
    assert events[0].payload.message == "The ClusterQueue is stopped"  # type: ignore[union-attr]
    assert told(derive(job("1", ""), job("2", "PENDING"))) == [
        ("phase-changed", "PENDING", "", None)
    ]
    readmitted = condition("Evicted", "False", "Readmitted", "Kueue admitted the workload again")
    assert told(derive(job("7", "RUNNING", readmitted), job("8", "PENDING", readmitted))) == [
        ("phase-changed", "PENDING", "RUNNING", None)
    ]


async def test_an_event_published_again_is_stored_and_counted_once() -> None:
    """A planner that restarts announces the transitions of the observations it replays
    again; JetStream drops the repeats (same id), and ``kaiwo_planner_public_events_total``
    counted them all the same: two submissions for one (decision 0228)."""
    jetstream = MemoryJetStream()
    bus = MemoryBus(server=jetstream, topology=bus_topology())
    await bus.ensure_streams()
    metrics = PlannerMetrics()
    publisher = PlanPublisher(bus, clock=lambda: AT, metrics=metrics)
    added = observed(job("10"), event_type="ADDED")
    events = derive_public_events(None, added, observed_at=AT, default_queue="kaiwo")
    cause = Envelope.new(
        data=added, source="/kaiwo/watcher", time=AT, correlationid=UID, id=f"{UID}:10"
    )

    await publisher.announce(events, cause=cause)
    await publisher.announce(events, cause=cause)

    assert len(jetstream.stream_messages(PUBLIC_STREAM)) == 1
    counted = metrics.registry.registry.get_sample_value(
        "kaiwo_planner_public_events_total", {"transition": "submitted"}
    )
    assert counted == 1
