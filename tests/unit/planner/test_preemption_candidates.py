"""The preemption candidates a projection's states share: read once per workload version."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kaiwo_contracts.plans import ObjectRef, RefKey
from kaiwo_planner.domain.scheduling import preemption_candidates as candidates_module
from kaiwo_planner.domain.scheduling.gpu_allocation import releasing_job
from kaiwo_planner.domain.scheduling.preemption import PendingWorkload, RunningWorkload
from kaiwo_planner.domain.scheduling.preemption_candidates import (
    freed_gpus_settle_for,
    preemption_candidates,
    preemption_decision,
    preemption_victims,
)
from kaiwo_planner.domain.state.context_keeper import PlanningContextKeeper
from kaiwo_planner.domain.state.projection import Projection

from tests.unit.planner.observations import observed

KAIWO = "kaiwo.silogen.ai/v1alpha1"


def kaiwo_job(name: str, status: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": KAIWO,
        "kind": "KaiwoJob",
        "metadata": {
            "name": name,
            "namespace": "team",
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-01-01T10:00:00Z",
        },
        "spec": {"image": "busybox", "gpus": 4, **spec},
        "status": status,
    }


PENDING = {"status": "PENDING"}
RUNNING = {"status": "RUNNING", "startTime": "2026-01-01T11:00:00Z"}


def config(default_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo", "uid": "config-uid"},
        "spec": {"defaultClusterQueueName": default_queue},
    }


def batch_job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}-job"},
    }


def projection_of(*objects: dict[str, Any]) -> Projection:
    projection = Projection()
    for version, obj in enumerate(objects, start=1):
        projection.apply(observed(obj, version), sequence=version)
    return projection


def key(name: str) -> RefKey:
    return (KAIWO, "KaiwoJob", "team", name, f"uid-{name}")


def test_running_and_pending_workloads_are_read_from_the_objects() -> None:
    contexts = PlanningContextKeeper()
    projection = projection_of(
        config("gpu-queue"),
        kaiwo_job("waits", PENDING),
        kaiwo_job("runs", RUNNING, duration="1h", clusterQueue="own-queue"),
        kaiwo_job("done", {"status": "COMPLETE"}),
    )

    candidates = preemption_candidates(contexts.context(projection))

    assert candidates.running == (
        RunningWorkload(
            key=key("runs"),
            gpu_vendor="amd",
            gpus=4,
            cluster_queue="own-queue",
            start_time=datetime(2026, 1, 1, 11, 0, tzinfo=UTC),
            duration=timedelta(hours=1),
        ),
    )
    assert candidates.pending == (
        PendingWorkload(
            key=key("waits"),
            gpu_vendor="amd",
            gpus=4,
            cluster_queue="gpu-queue",
            pending_since=datetime(2026, 1, 1, 10, 0, tzinfo=UTC),
        ),
    )


def test_a_change_to_another_kind_keeps_the_candidates() -> None:
    contexts = PlanningContextKeeper()
    projection = projection_of(kaiwo_job("a", PENDING), kaiwo_job("b", RUNNING))
    first = preemption_candidates(contexts.context(projection))

    projection.apply(observed(batch_job("a"), 10), sequence=10)

    assert preemption_candidates(contexts.context(projection)) is first


def test_a_changed_workload_is_read_again_and_the_others_are_not() -> None:
    contexts = PlanningContextKeeper()
    projection = projection_of(kaiwo_job("a", PENDING), kaiwo_job("b", PENDING))
    first = preemption_candidates(contexts.context(projection))

    projection.apply(observed(kaiwo_job("a", RUNNING), 10), sequence=10)
    second = preemption_candidates(contexts.context(projection))

    assert [w.key for w in second.running] == [key("a")]
    assert [w.key for w in second.pending] == [key("b")]
    assert second.pending[0] is first.pending[1]  # b: the very read of the first snapshot


def test_which_job_of_a_workload_releases_pods_is_worked_out_once_per_object(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A waiting workload's plan reads every workload of the cluster, once per state. Whether
    a workload's Job may have pods released (decision 0152) is a function of the workload
    object, so it is worked out once per object and kept with its read: a new state costs a
    lookup per unchanged workload. Worked out for every workload in every state, it was 42%
    of such a plan (bench/planner.py, the Waiting shape: 1,681 µs at p50, now about 800)."""
    asked: list[str] = []

    def counted(workload: Any) -> Any:
        asked.append(workload["metadata"]["name"])
        return releasing_job(workload)

    monkeypatch.setattr(candidates_module, "releasing_job", counted)
    contexts = PlanningContextKeeper()
    sweep = {"spec": {"parallelism": 2}}
    projection = projection_of(
        kaiwo_job("a", PENDING), kaiwo_job("b", PENDING), kaiwo_job("c", RUNNING, job=sweep)
    )
    preemption_candidates(contexts.context(projection))
    assert sorted(asked) == ["a", "b", "c"]

    asked.clear()
    projection.apply(observed(kaiwo_job("a", RUNNING), 10), sequence=10)
    second = preemption_candidates(contexts.context(projection))

    assert asked == ["a"]
    assert [w.key for w in second.running] == [key("a"), key("c")]


def test_a_new_kaiwo_config_reads_every_workload_again() -> None:
    contexts = PlanningContextKeeper()
    projection = projection_of(config("first"), kaiwo_job("a", PENDING))
    assert preemption_candidates(contexts.context(projection)).pending[0].cluster_queue == "first"

    projection.apply(observed(config("second"), 10), sequence=10)

    assert preemption_candidates(contexts.context(projection)).pending[0].cluster_queue == "second"


def test_a_deleted_workload_leaves_the_candidates() -> None:
    contexts = PlanningContextKeeper()
    projection = projection_of(kaiwo_job("a", PENDING), kaiwo_job("b", PENDING))
    preemption_candidates(contexts.context(projection))

    gone = observed(kaiwo_job("a", PENDING), 10).model_copy(update={"event_type": "DELETED"})
    projection.apply(gone, sequence=10)

    pending = preemption_candidates(contexts.context(projection)).pending
    assert [w.key for w in pending] == [key("b")]


def test_the_victims_at_a_time_are_the_expired_workloads_a_long_waiter_needs() -> None:
    contexts = PlanningContextKeeper()
    projection = projection_of(
        config("gpu-queue"),
        kaiwo_job("waits", PENDING),  # pending since 10:00
        kaiwo_job("runs", RUNNING, duration="1h"),  # started 11:00: expired at 12:00
    )
    context = contexts.context(projection)

    before_expiry = datetime(2026, 1, 1, 11, 30, tzinfo=UTC)
    after_expiry = datetime(2026, 1, 1, 12, 30, tzinfo=UTC)
    assert preemption_victims(context, now=before_expiry) == ()
    assert preemption_victims(context, now=after_expiry) == (ObjectRef.of_key(key("runs")),)


def test_a_workload_kueue_admitted_again_is_expired_a_duration_after_its_readmission() -> None:
    """Kueue evicted it and admitted it again at 11:40 (its Admitted condition turned True
    then): its pods started over, so its hour counts from 11:40, not from its first start
    (decision 0169). Counted from 11:00, it was a victim at 12:30 after 50 minutes of run."""
    contexts = PlanningContextKeeper()
    readmitted = {
        **RUNNING,
        "conditions": [
            {"type": "Admitted", "status": "True", "lastTransitionTime": "2026-01-01T11:40:00Z"}
        ],
    }
    projection = projection_of(
        config("gpu-queue"),
        kaiwo_job("waits", PENDING),
        kaiwo_job("runs", readmitted, duration="1h"),
    )
    context = contexts.context(projection)

    [running] = preemption_candidates(context).running
    assert running.start_time == datetime(2026, 1, 1, 11, 40, tzinfo=UTC)
    assert preemption_victims(context, now=datetime(2026, 1, 1, 12, 30, tzinfo=UTC)) == ()
    assert preemption_victims(context, now=datetime(2026, 1, 1, 12, 41, tzinfo=UTC)) == (
        ObjectRef.of_key(key("runs")),
    )


def test_a_workload_counts_the_gpus_its_pods_hold_on_these_nodes(make_node: Any) -> None:
    """Decision 0118: a Ray job asking for 30 on 8-GPU nodes is split 4 x 7 and holds 28; a
    node that changes the split changes the count, a node that does not keeps the reads."""
    contexts = PlanningContextKeeper()
    nodes = [make_node(f"mi300x-{i}", gpu="mi300x", gpus=8) for i in range(4)]
    projection = projection_of(*nodes, kaiwo_job("big", PENDING, gpus=30, ray=True))
    first = preemption_candidates(contexts.context(projection))
    assert [w.gpus for w in first.pending] == [28]

    projection.apply(observed(make_node("cpu-0"), 20), sequence=20)
    same_split = preemption_candidates(contexts.context(projection))
    assert same_split.pending[0] is first.pending[0]

    # A 6-GPU node is now the smallest: 5 x 6 = 30.
    projection.apply(observed(make_node("mi300x-6", gpu="mi300x", gpus=6), 21), sequence=21)
    assert [w.gpus for w in preemption_candidates(contexts.context(projection)).pending] == [30]


def running_ray_job_of(owner: str, replicas: int, gpus: int, made_from: int) -> dict[str, Any]:
    """The running RayJob of KaiwoJob ``owner``: ``replicas`` workers of ``gpus``, split by
    node size from ``spec.gpus`` ``made_from``."""
    worker = {
        "containers": [{"name": "ray-worker", "resources": {"limits": {"amd.com/gpu": str(gpus)}}}]
    }
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": owner,
            "namespace": "team",
            "uid": f"uid-{owner}-rayjob",
            "ownerReferences": [{"uid": f"uid-{owner}", "controller": True}],
            "annotations": {"kaiwo.silogen.ai/gpus-split-by-node-size": str(made_from)},
        },
        "spec": {
            "suspend": False,
            "rayClusterSpec": {
                "workerGroupSpecs": [{"replicas": replicas, "template": {"spec": worker}}]
            },
        },
    }


def test_a_running_workload_counts_the_split_its_child_was_made_with(make_node: Any) -> None:
    """Decision 0137: made 4 x 7 on 8-GPU nodes, it holds 28 after a 6-GPU node joined,
    though the nodes of now would split 30 into 5 x 6; waiting, it would be counted so."""
    contexts = PlanningContextKeeper()
    nodes = [make_node(f"mi300x-{i}", gpu="mi300x", gpus=8) for i in range(4)]
    projection = projection_of(
        *nodes,
        kaiwo_job("big", RUNNING, gpus=30, ray=True),
        running_ray_job_of("big", replicas=4, gpus=7, made_from=30),
        kaiwo_job("next", PENDING, gpus=30, ray=True),
    )
    projection.apply(observed(make_node("mi300x-6", gpu="mi300x", gpus=6), 21), sequence=21)
    candidates = preemption_candidates(contexts.context(projection))
    assert [w.gpus for w in candidates.running] == [28]
    assert [w.gpus for w in candidates.pending] == [30]


def test_a_waiting_workload_being_deleted_stops_no_expired_one() -> None:
    """Deleted in the foreground, it stays PENDING until its Job is gone: counted as GPU
    demand meanwhile, it had an expired workload terminated for GPUs nobody wanted."""
    contexts = PlanningContextKeeper()
    waits = kaiwo_job("waits", PENDING)
    waits["metadata"] |= {"deletionTimestamp": "2026-01-01T12:29:00Z"}
    projection = projection_of(
        config("gpu-queue"), waits, kaiwo_job("runs", RUNNING, duration="1h")
    )
    context = contexts.context(projection)

    assert preemption_candidates(context).pending == ()
    assert preemption_victims(context, now=datetime(2026, 1, 1, 12, 30, tzinfo=UTC)) == ()


def namespace(name: str, **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, **metadata}}


def test_a_waiting_workload_in_a_namespace_being_deleted_stops_no_expired_one() -> None:
    """The namespace controller removes it within seconds; the candidates follow the
    Namespace, which changes apart from the workload."""
    contexts = PlanningContextKeeper()
    projection = projection_of(
        config("gpu-queue"),
        namespace("team", uid="ns-uid"),
        kaiwo_job("waits", PENDING),
        kaiwo_job("runs", RUNNING, duration="1h"),
    )
    after_expiry = datetime(2026, 1, 1, 12, 30, tzinfo=UTC)
    assert [w.key for w in preemption_candidates(contexts.context(projection)).pending] == [
        key("waits")
    ]

    deleting = namespace("team", uid="ns-uid", deletionTimestamp="2026-01-01T12:29:00Z")
    projection.apply(observed(deleting, 10), sequence=10)
    context = contexts.context(projection)

    assert preemption_candidates(context).pending == ()
    assert [w.key for w in preemption_candidates(context).running] == [key("runs")]
    assert preemption_victims(context, now=after_expiry) == ()


def test_the_namespace_of_many_waiting_workloads_is_asked_of_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whether a Namespace is being deleted is asked once per namespace in each state, not
    once per waiting workload: with 300 waiting, asking each was a third of a pressing
    waiter's plan (bench/planner.py, the Waiting shape: 814 -> 558 µs at p50)."""
    asked: list[str] = []

    def counted(cluster: Any, name: str) -> bool:
        asked.append(name)
        return name == "leaving"

    monkeypatch.setattr(candidates_module, "namespace_being_deleted", counted)
    contexts = PlanningContextKeeper()
    elsewhere = {**kaiwo_job("elsewhere", PENDING)}
    elsewhere["metadata"] = {**elsewhere["metadata"], "namespace": "leaving"}
    projection = projection_of(*(kaiwo_job(f"waits-{i}", PENDING) for i in range(5)), elsewhere)

    pending = preemption_candidates(contexts.context(projection)).pending

    assert sorted(asked) == ["leaving", "team"]
    assert [w.key[3] for w in pending] == [f"waits-{i}" for i in range(5)]


def test_a_batch_jobs_parallel_pods_count_for_the_victim_and_the_waiter() -> None:
    """Decision 0147: a Job of 2 pods x 4 GPUs holds 8, and one of 4 pods x 4 waits for 16.
    Counted as one pod each (4 and 4) before, the waiter of 8 had two expired workloads
    terminated where one frees enough, and the waiter of 16 one where it needs two."""
    contexts = PlanningContextKeeper()
    two_pods = {"spec": {"parallelism": 2}}
    projection = projection_of(
        config("gpu-queue"),
        # Expired at 12:00, 2 pods x 4 GPUs: 8 held.
        kaiwo_job("parallel", RUNNING, gpus=4, duration="1h", job=two_pods),
        # Expired at 12:10, one pod of 8.
        kaiwo_job(
            "single", {**RUNNING, "startTime": "2026-01-01T11:10:00Z"}, gpus=8, duration="1h"
        ),
        kaiwo_job("waits-for-8", PENDING, gpus=8),
    )
    context = contexts.context(projection)
    after_expiry = datetime(2026, 1, 1, 12, 30, tzinfo=UTC)

    candidates = preemption_candidates(context)
    assert {w.key[3]: w.gpus for w in candidates.running} == {"parallel": 8, "single": 8}
    assert preemption_victims(context, now=after_expiry) == (ObjectRef.of_key(key("parallel")),)

    four_pods = {"spec": {"parallelism": 4, "completions": 8}}
    wide = kaiwo_job("waits-for-16", PENDING, gpus=4, job=four_pods)
    gone = observed(kaiwo_job("waits-for-8", PENDING), 10).model_copy(
        update={"event_type": "DELETED"}
    )
    projection.apply(gone, sequence=10)
    projection.apply(observed(wide, 11), sequence=11)
    context = contexts.context(projection)

    assert [w.gpus for w in preemption_candidates(context).pending] == [16]
    assert preemption_victims(context, now=after_expiry) == (
        ObjectRef.of_key(key("parallel")),
        ObjectRef.of_key(key("single")),
    )


def test_a_waiter_kueue_may_start_with_fewer_pods_presses_for_every_pod() -> None:
    """A sweep of 4 pods x 4 GPUs that Kueue may start with 1 waits for its 16, not for the 4
    of its minimum, as Kueue's own scheduler tries the whole count, preemption included,
    before fewer pods (decision 0157): both expired workloads of 8 are terminated for it, so
    Kueue can start it with every pod. Taking one would leave the sweep running 2 pods beside
    a workload past its duration."""
    contexts = PlanningContextKeeper()
    sweep = {
        "metadata": {"annotations": {"kueue.x-k8s.io/job-min-parallelism": "1"}},
        "spec": {"parallelism": 4, "completions": 4},
    }
    projection = projection_of(
        config("gpu-queue"),
        kaiwo_job("first", RUNNING, gpus=8, duration="1h"),
        kaiwo_job(
            "second", {**RUNNING, "startTime": "2026-01-01T11:10:00Z"}, gpus=8, duration="1h"
        ),
        kaiwo_job("sweep", PENDING, gpus=4, job=sweep),
    )
    context = contexts.context(projection)

    assert [w.gpus for w in preemption_candidates(context).pending] == [16]
    assert preemption_victims(context, now=datetime(2026, 1, 1, 12, 30, tzinfo=UTC)) == (
        ObjectRef.of_key(key("first")),
        ObjectRef.of_key(key("second")),
    )


# ------------------------------------------------------------ GPUs on their way (decision 0148)

AFTER_EXPIRY = datetime(2026, 1, 1, 12, 30, tzinfo=UTC)


def terminated_for(
    beneficiary: str | None,
    phase: str,
    at: str,
    reason: str = "DurationExceededWithActiveGpuDemand",
) -> dict[str, Any]:
    """The status of a workload preempted (for duration unless ``reason`` says otherwise) for
    ``beneficiary`` (None: for nobody, an ``Always`` idle victim), as the planner writes it
    (TERMINATING: the condition False; TERMINATED: True since ``at``)."""
    status: dict[str, Any] = {
        "status": phase,
        "startTime": "2026-01-01T11:00:00Z",
        "conditions": [
            {
                "type": "WorkloadTerminatedEarly",
                "status": "True" if phase == "TERMINATED" else "False",
                "reason": reason,
                "message": "Terminated early",
                "lastTransitionTime": at,
            }
        ],
    }
    if beneficiary is not None:
        status["preemptedFor"] = {
            "kind": "KaiwoJob",
            "namespace": "team",
            "name": beneficiary,
            "uid": f"uid-{beneficiary}",
        }
    return status


def pod_of(owner: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{owner}-pod",
            "namespace": "team",
            "uid": f"uid-{owner}-pod",
            "labels": {"kaiwo.silogen.ai/run-id": f"uid-{owner}"},
        },
    }


def two_expired_and_a_waiter(first_status: dict[str, Any]) -> Projection:
    """``first`` (its status given) and ``second``, 4 GPUs each, expired at 12:00 and 12:10;
    ``waits`` for 4 since 10:00."""
    return projection_of(
        config("gpu-queue"),
        kaiwo_job("first", first_status, duration="1h"),
        kaiwo_job("second", {**RUNNING, "startTime": "2026-01-01T11:10:00Z"}, duration="1h"),
        kaiwo_job("waits", PENDING),
    )


def test_a_workload_terminating_for_a_waiter_covers_it_and_the_other_expired_one_runs() -> None:
    """Real stack: the first expired workload was terminated for the waiter; seen
    TERMINATING, the waiter still PENDING, the second was terminated too."""
    contexts = PlanningContextKeeper()
    projection = two_expired_and_a_waiter(
        terminated_for("waits", "TERMINATING", "2026-01-01T12:29:58Z")
    )
    context = contexts.context(projection)

    assert preemption_victims(context, now=AFTER_EXPIRY) == ()
    assert (
        preemption_decision(context, now=AFTER_EXPIRY).termination_for(
            ObjectRef.of_key(key("second"))
        )
        is None
    )


def test_gpus_freed_for_a_waiter_count_for_it_until_they_settle() -> None:
    """TERMINATED at 12:29:59, its pods gone: Kueue has its quota back and admits the waiter
    on its next pass. Until 12:31:59 (two minutes) that counts as the waiter served; still
    PENDING after that, it presses again, and is planned again at that moment."""
    contexts = PlanningContextKeeper()
    projection = two_expired_and_a_waiter(
        terminated_for("waits", "TERMINATED", "2026-01-01T12:29:59Z")
    )
    context = contexts.context(projection)
    settled = datetime(2026, 1, 1, 12, 31, 59, tzinfo=UTC)

    assert preemption_victims(context, now=AFTER_EXPIRY) == ()
    assert preemption_victims(context, now=settled - timedelta(seconds=1)) == ()
    assert freed_gpus_settle_for("uid-waits", context) == settled
    assert freed_gpus_settle_for("uid-second", context) is None
    assert preemption_victims(context, now=settled) == (ObjectRef.of_key(key("second")),)


def test_gpus_freed_for_a_waiter_count_while_the_victims_pods_are_still_there() -> None:
    contexts = PlanningContextKeeper()
    projection = two_expired_and_a_waiter(
        terminated_for("waits", "TERMINATED", "2026-01-01T12:29:59Z")
    )
    projection.apply(observed(pod_of("first"), 20), sequence=20)
    long_after = datetime(2026, 1, 1, 13, 0, tzinfo=UTC)

    assert preemption_victims(contexts.context(projection), now=long_after) == ()


def test_gpus_freed_for_another_waiter_serve_not_this_one() -> None:
    """Terminated for a workload that is no longer waiting (admitted, deleted): its GPUs are
    nobody's to count for ``waits``, which has the second expired one terminated."""
    contexts = PlanningContextKeeper()
    projection = two_expired_and_a_waiter(
        terminated_for("gone-by", "TERMINATING", "2026-01-01T12:29:58Z")
    )

    assert preemption_victims(contexts.context(projection), now=AFTER_EXPIRY) == (
        ObjectRef.of_key(key("second")),
    )


def test_a_preemption_decided_and_not_yet_observed_covers_the_waiter() -> None:
    """``first`` still RUNNING as observed, its termination published (for idleness here, or
    duration): the planner's own preemption under way covers the waiter, so the expired
    ``second`` is not terminated for it as well (decision 0148; for idleness, 0076)."""
    contexts = PlanningContextKeeper()
    projection = projection_of(
        config("gpu-queue"),
        kaiwo_job("first", RUNNING),  # no duration: stopped for idleness
        kaiwo_job("second", {**RUNNING, "startTime": "2026-01-01T11:10:00Z"}, duration="1h"),
        kaiwo_job("waits", PENDING),
    )
    context = contexts.context(projection)
    assert preemption_victims(context, now=AFTER_EXPIRY) == (ObjectRef.of_key(key("second")),)

    under_way = context.with_preempting(frozenset({"uid-first"}))

    assert preemption_victims(under_way, now=AFTER_EXPIRY) == ()
    assert preemption_decision(under_way, now=AFTER_EXPIRY).preemptions == ()


# ------------------------------------ pods whose quota Kueue released (decision 0152)


def sweeps_job(reclaimable: int | None) -> list[dict[str, Any]]:
    """The Job of the KaiwoJob ``sweep`` and its admitted Kueue Workload (2 pods x 4 GPUs),
    with ``reclaimablePods`` as Kueue 0.17 writes it once fewer completions are left than
    the Job's parallelism (``None``: not yet)."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "sweep",
            "namespace": "team",
            "uid": "uid-sweep-job",
            "ownerReferences": [{"kind": "KaiwoJob", "name": "sweep", "uid": "uid-sweep"}],
        },
    }
    status: dict[str, Any] = {
        "admission": {
            "clusterQueue": "gpu-queue",
            "podSetAssignments": [{"name": "main", "count": 2}],
        }
    }
    if reclaimable is not None:
        status["reclaimablePods"] = [{"name": "main", "count": reclaimable}]
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": "job-sweep-1a2b3",
            "namespace": "team",
            "uid": "uid-sweep-workload",
            "ownerReferences": [{"kind": "Job", "name": "sweep", "uid": "uid-sweep-job"}],
        },
        "status": status,
    }
    return [job, workload]


def test_a_jobs_pods_whose_quota_kueue_released_free_nothing_when_it_is_terminated() -> None:
    """A sweep of 2 pods x 4 GPUs (3 completions) ran its first 2: one pod is left, and
    Kueue's Workload says 1 pod reclaimable, its quota released. It holds 4, not 8: for a
    waiter of 8, terminating it frees 4, so the next expired workload is terminated too, in
    the same decision. Before, it was counted as 8 and terminated alone; the waiter still
    waited, and the 8 counted as on their way kept anyone else from being terminated for
    it for two minutes (FREED_GPUS_SETTLE)."""
    contexts = PlanningContextKeeper()
    sweep = {"spec": {"parallelism": 2, "completions": 3}}
    job, workload = sweeps_job(reclaimable=None)
    projection = projection_of(
        config("gpu-queue"),
        # Expired at 12:00.
        kaiwo_job("sweep", RUNNING, gpus=4, duration="1h", job=sweep),
        job,
        workload,
        # Expired at 12:10.
        kaiwo_job("single", {**RUNNING, "startTime": "2026-01-01T11:10:00Z"}, duration="1h"),
        kaiwo_job("waits-for-8", PENDING, gpus=8),
    )
    context = contexts.context(projection)
    # Both pods run: the sweep holds 8, enough for the waiter alone.
    assert {w.key[3]: w.gpus for w in preemption_candidates(context).running} == {
        "sweep": 8,
        "single": 4,
    }
    assert preemption_victims(context, now=AFTER_EXPIRY) == (ObjectRef.of_key(key("sweep")),)

    _, released = sweeps_job(reclaimable=1)
    projection.apply(observed(released, 20), sequence=20)
    context = contexts.context(projection)

    assert {w.key[3]: w.gpus for w in preemption_candidates(context).running} == {
        "sweep": 4,
        "single": 4,
    }
    assert preemption_victims(context, now=AFTER_EXPIRY) == (
        ObjectRef.of_key(key("sweep")),
        ObjectRef.of_key(key("single")),
    )


def test_a_workload_without_quota_releases_nothing() -> None:
    """Kueue's reclaimablePods count only on a Workload that holds quota: an evicted one
    (no admission) holds none at all, and a running sweep's count is its spec's."""
    contexts = PlanningContextKeeper()
    job, workload = sweeps_job(reclaimable=1)
    del workload["status"]["admission"]
    projection = projection_of(
        config("gpu-queue"),
        kaiwo_job("sweep", RUNNING, gpus=4, job={"spec": {"parallelism": 2, "completions": 3}}),
        job,
        workload,
    )
    [running] = preemption_candidates(contexts.context(projection)).running
    assert running.gpus == 8


# ------------------------------------- the other preemption's victims (decision 0150)

IDLE = "GpuIdlePreemption"


def idle_victim_expired_one_and_a_waiter(idle_status: dict[str, Any]) -> Projection:
    """``idle`` (4 GPUs, no duration: preempted for idleness, its status given), ``expired``
    (4, expired at 12:10) and ``waits`` for 4 since 10:00."""
    return projection_of(
        config("gpu-queue"),
        kaiwo_job("idle", idle_status),
        kaiwo_job("expired", {**RUNNING, "startTime": "2026-01-01T11:10:00Z"}, duration="1h"),
        kaiwo_job("waits", PENDING),
    )


def test_an_idle_victim_stopping_for_the_waiter_covers_it_and_the_expired_one_runs() -> None:
    """Observed TERMINATING, the idle workload preempted for ``waits`` left ``preempting``;
    read for its own reason only, the waiter looked unserved and the expired one was
    terminated for the same GPUs."""
    contexts = PlanningContextKeeper()
    projection = idle_victim_expired_one_and_a_waiter(
        terminated_for("waits", "TERMINATING", "2026-01-01T12:29:58Z", reason=IDLE)
    )

    assert preemption_victims(contexts.context(projection), now=AFTER_EXPIRY) == ()


def test_gpus_an_idle_victim_freed_for_the_waiter_count_until_they_settle() -> None:
    contexts = PlanningContextKeeper()
    projection = idle_victim_expired_one_and_a_waiter(
        terminated_for("waits", "TERMINATED", "2026-01-01T12:29:59Z", reason=IDLE)
    )
    context = contexts.context(projection)
    settled = datetime(2026, 1, 1, 12, 31, 59, tzinfo=UTC)

    assert preemption_victims(context, now=AFTER_EXPIRY) == ()
    assert preemption_victims(context, now=settled - timedelta(seconds=1)) == ()
    assert freed_gpus_settle_for("uid-waits", context) == settled
    assert preemption_victims(context, now=settled) == (ObjectRef.of_key(key("expired")),)


def test_an_idle_victim_freed_for_another_waiter_serves_not_this_one() -> None:
    contexts = PlanningContextKeeper()
    projection = idle_victim_expired_one_and_a_waiter(
        terminated_for("gone-by", "TERMINATING", "2026-01-01T12:29:58Z", reason=IDLE)
    )

    assert preemption_victims(contexts.context(projection), now=AFTER_EXPIRY) == (
        ObjectRef.of_key(key("expired")),
    )


def test_an_always_idle_victim_covers_a_waiter_while_it_stops() -> None:
    """Preempted for nobody (policy ``Always``): its GPUs serve the first waiter it competes
    with while it is TERMINATING or its pods are there, and no longer (no settle time: it
    was stopped for nobody's wait)."""
    contexts = PlanningContextKeeper()
    stopping = idle_victim_expired_one_and_a_waiter(
        terminated_for(None, "TERMINATING", "2026-01-01T12:29:58Z", reason=IDLE)
    )
    assert preemption_victims(contexts.context(stopping), now=AFTER_EXPIRY) == ()

    stopped = idle_victim_expired_one_and_a_waiter(
        terminated_for(None, "TERMINATED", "2026-01-01T12:29:59Z", reason=IDLE)
    )
    assert preemption_victims(contexts.context(stopped), now=AFTER_EXPIRY) == (
        ObjectRef.of_key(key("expired")),
    )
    assert freed_gpus_settle_for("uid-waits", contexts.context(stopped)) is None

    stopped.apply(observed(pod_of("idle"), 20), sequence=20)
    assert preemption_victims(contexts.context(stopped), now=AFTER_EXPIRY) == ()


def test_a_pending_workload_waits_since_its_admitted_condition_turned_false() -> None:
    # The seed: "pending for longer than this threshold". A workload that downloaded for an
    # hour, or that Kueue evicted after running for hours, has waited only since then; a
    # status with no such condition (written before it) falls back to the creation time.
    evicted = {
        "status": "PENDING",
        "conditions": [
            {
                "type": "Admitted",
                "status": "False",
                "reason": "Pending",
                "lastTransitionTime": "2026-01-01T13:30:00Z",
            }
        ],
    }
    contexts = PlanningContextKeeper()
    projection = projection_of(kaiwo_job("evicted", evicted), kaiwo_job("older", PENDING))

    candidates = preemption_candidates(contexts.context(projection))

    assert {w.key[3]: w.pending_since for w in candidates.pending} == {
        "evicted": datetime(2026, 1, 1, 13, 30, tzinfo=UTC),
        "older": datetime(2026, 1, 1, 10, 0, tzinfo=UTC),
    }
