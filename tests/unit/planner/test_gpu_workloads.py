"""GPU workloads no Kaiwo kind owns (decision 0047): the root's plan makes its GpuWorkload, the
GpuWorkload's plan judges, preempts and forgets. Expected plans written by hand."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from kaiwo_planner.domain.gpu_workload_record import whole_percent
from kaiwo_planner.domain.planning import plan_object
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.state.workload_finding import WorkloadFinding

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
KAIWO = "kaiwo.silogen.ai/v1alpha1"
OPT_IN = "kaiwo.silogen.ai/gpu-preemption."
ALWAYS = {f"{OPT_IN}policy": "Always", f"{OPT_IN}grace-period": "10m"}
GPU = {"limits": {"amd.com/gpu": "2"}}


def namespace(name: str = "team-a", **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "uid": f"ns-{name}", "annotations": annotations},
    }


def job(
    name: str = "train", *, annotations: dict[str, str] | None = None, **meta: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"{name}-0123456789",
            "resourceVersion": "11",
            "annotations": annotations or {},
            **meta,
        },
        "spec": {"template": {"spec": {"containers": [{"name": "main", "resources": GPU}]}}},
    }


def deployment(replicas: int, *, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    found = job("serve", annotations=annotations)
    found["apiVersion"], found["kind"] = "apps/v1", "Deployment"
    found["spec"]["replicas"] = replicas
    return found


def record(
    root: dict[str, Any], *, status: dict[str, Any] | None = None, name: str | None = None
) -> dict[str, Any]:
    meta = root["metadata"]
    return {
        "apiVersion": KAIWO,
        "kind": "GpuWorkload",
        "metadata": {
            "name": name or f"{root['kind'].lower()}-{meta['name']}-{meta['uid'][:8]}",
            "namespace": "team-a",
            "uid": "record-uid",
            "generation": 1,
            "resourceVersion": "21",
        },
        "spec": {
            "workloadRef": {
                "apiVersion": root["apiVersion"],
                "kind": root["kind"],
                "name": meta["name"],
                "uid": meta["uid"],
            }
        },
        "status": status or {},
    }


def finding(
    uid: str,
    *,
    percent: float,
    idle_since: datetime | None = None,
    at: datetime = NOW,
    aggregation: str = "Max",
    judged_against: float = 0.05,
) -> WorkloadFinding:
    return WorkloadFinding(
        uid=uid,
        at=at,
        measured=True,
        vendor="amd",
        gpu_count=2,
        idle_threshold_ratio=judged_against,
        idle_since=idle_since,
        utilization_ratio=percent / 100,
        idle_utilization_ratio=percent / 100,
        idle_aggregation=aggregation,
    )


def cluster(*objects: dict[str, Any], findings: tuple[WorkloadFinding, ...] = ()) -> ClusterState:
    state = ClusterState.from_wire(objects=[namespace(), *objects], namespaces=["team-a"])
    return dataclasses.replace(state, findings={f.uid: f for f in findings})


def plan_of(owner: dict[str, Any], state: ClusterState, *, now: datetime = NOW) -> Any:
    return plan_object(owner=owner, context=PlanningContext.of(state), now=now)


def dumped(result: Any) -> dict[str, Any] | None:
    return None if result.plan is None else result.plan.model_dump(mode="json", exclude_unset=True)


# ------------------------------------------------------------------ the root


def test_an_opted_in_gpu_job_gets_its_record_created() -> None:
    root = job(annotations=ALWAYS)
    result = plan_of(root, cluster(root))
    assert dumped(result) == {
        "owner": {
            "apiVersion": KAIWO,
            "kind": "GpuWorkload",
            "name": "job-train-train-01",
            "namespace": "team-a",
        },
        "desired": [
            {
                "apiVersion": KAIWO,
                "kind": "GpuWorkload",
                "metadata": {
                    "name": "job-train-train-01",
                    "namespace": "team-a",
                    "labels": {
                        "app.kubernetes.io/managed-by": "kaiwo",
                        "kaiwo.silogen.ai/workload-uid": "train-0123456789",
                    },
                },
                "spec": {
                    "workloadRef": {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": "train",
                        "uid": "train-0123456789",
                    }
                },
            },
        ],
        "createOnly": True,
    }
    assert result.also_replan == ()


def test_a_root_is_tracked_when_its_namespace_opted_in_and_not_when_nobody_did() -> None:
    root = job()
    assert plan_of(root, cluster(root)).plan is None
    opted = ClusterState.from_wire(objects=[namespace(**{f"{OPT_IN}enabled": "true"}), root])
    assert plan_of(root, opted).plan.create_only
    # The workload's own "enabled: false" wins over its namespace.
    out = job(annotations={f"{OPT_IN}enabled": "false"})
    opted_out = ClusterState.from_wire(objects=[namespace(**{f"{OPT_IN}enabled": "true"}), out])
    assert plan_of(out, opted_out).plan is None


def test_a_controlled_job_or_one_made_by_kaiwo_is_no_root() -> None:
    owned = job(
        annotations=ALWAYS,
        ownerReferences=[
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "name": "c",
                "uid": "c",
                "controller": True,
            }
        ],
    )
    ours = job("ours", annotations=ALWAYS, labels={"kaiwo.silogen.ai/owner-uid": "kj"})
    assert plan_of(owned, cluster(owned)).plan is None
    assert plan_of(ours, cluster(ours)).plan is None


def test_a_cronjobs_job_is_a_root_of_its_own_deleted_when_preempted() -> None:
    """Decision 0056: each run of a CronJob is tracked; preempting it deletes that run."""
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly", "uid": "cron-uid"}
    run = job(
        "nightly-29000000",
        annotations=ALWAYS,
        ownerReferences=[{**cron, "controller": True}],
    )
    run["metadata"]["uid"] = "5f2c1a9e-0000-4000-8000-000000000001"
    created = plan_of(run, cluster(run)).plan
    assert created is not None and created.create_only
    [manifest] = created.desired
    assert manifest["metadata"]["name"] == "job-nightly-29000000-5f2c1a9e"
    read = finding(run["metadata"]["uid"], percent=0.0, idle_since=NOW - timedelta(minutes=15))
    name = manifest["metadata"]["name"]
    preempting = plan_of(
        record(run, name=name), cluster(run, record(run, name=name), findings=(read,))
    ).plan
    assert preempting.preempt is not None
    assert (preempting.preempt.target.kind, preempting.preempt.target.name) == (
        "Job",
        "nightly-29000000",
    )
    assert preempting.preempt.action == "delete"


def test_a_root_with_its_record_plans_the_record_too() -> None:
    root = job(annotations=ALWAYS)
    tracked = record(root)
    result = plan_of(root, cluster(root, tracked))
    assert result.plan.create_only  # level-triggered: the record must exist
    assert [ref.name for ref in result.also_replan] == ["job-train-train-01"]


# ------------------------------------------------------------------ the record


def test_idle_past_its_grace_under_always_is_preempted_by_deleting_the_job() -> None:
    root = job(annotations=ALWAYS)
    since = NOW - timedelta(minutes=11)
    state = cluster(
        root,
        record(root),
        findings=(finding(root["metadata"]["uid"], percent=1.5, idle_since=since),),
    )
    plan = plan_of(record(root), state).plan
    assert plan.preempt.model_dump(mode="json") == {
        "target": {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "train",
            "namespace": "team-a",
            "uid": "train-0123456789",
        },
        "action": "delete",
        "fromReplicas": None,
    }
    message = (
        "Preempted: GPUs idle since 2026-03-01T11:49:00Z, longer than the grace period of "
        "600s; policy Always"
    )
    assert plan.status == {
        "phase": "Preempting",
        "gpus": 2,
        "vendor": "amd",
        "policy": "Always",
        "threshold": 5.0,
        "aggregation": "Max",
        "gracePeriod": "10m0s",
        "ttl": "24h0m0s",
        "utilization": 2,
        "idleSince": "2026-03-01T11:49:00Z",
        "verdict": message,
        "preemptedAt": "2026-03-01T12:00:00Z",
        "preemptionReason": message,
    }
    assert [(e.type, e.reason, e.message) for e in plan.events] == [
        ("Warning", "GpuIdlePreemption", message)
    ]
    assert plan.delete_owner is False


def test_idle_within_its_grace_is_idle_and_says_when_it_may_go() -> None:
    root = job(annotations=ALWAYS)
    since = NOW - timedelta(minutes=3)
    state = cluster(
        root,
        record(root),
        findings=(finding(root["metadata"]["uid"], percent=0.0, idle_since=since),),
    )
    plan = plan_of(record(root), state).plan
    assert plan.preempt is None
    assert plan.status["phase"] == "Idle"
    assert plan.status["idleSince"] == "2026-03-01T11:57:00Z"
    assert plan.status["verdict"] == (
        "Idle below 5%: preempted once idle until 2026-03-01T12:07:00Z (policy Always)"
    )
    assert [(e.reason, e.message) for e in plan.events] == [
        ("WorkloadIdle", "GPU utilization below 5% since 2026-03-01T11:57:00Z")
    ]


def test_on_pressure_waits_for_a_pending_workload_and_names_it() -> None:
    root = job(annotations={f"{OPT_IN}grace-period": "1m"})
    since = NOW - timedelta(minutes=5)
    read = finding(root["metadata"]["uid"], percent=0.0, idle_since=since)
    alone = plan_of(record(root), cluster(root, record(root), findings=(read,))).plan
    assert alone.preempt is None
    assert alone.status["verdict"] == (
        "Idle below 5%: from 2026-03-01T11:56:00Z preempted when a pending workload needs amd "
        "GPUs (policy OnPressure)"
    )
    pending = {
        "apiVersion": KAIWO,
        "kind": "KaiwoJob",
        "metadata": {
            "name": "next",
            "namespace": "team-b",
            "uid": "next-uid",
            "creationTimestamp": "2026-03-01T11:00:00Z",
        },
        "spec": {"gpus": 2},
        "status": {"status": "PENDING"},
    }
    pressed = plan_of(record(root), cluster(root, record(root), pending, findings=(read,))).plan
    assert pressed.preempt is not None and pressed.preempt.action == "delete"
    assert pressed.status["preemptedFor"] == {
        "kind": "KaiwoJob",
        "name": "next",
        "namespace": "team-b",
        "uid": "next-uid",
    }
    assert (
        "for pending workload KaiwoJob/team-b/next, which needs 2 more"
        in (pressed.status["preemptionReason"])
    )


def test_a_reading_the_workload_does_not_judge_by_is_no_idle_stretch() -> None:
    # The monitor averaged (Avg) and judged against 50 %; the workload says Max and 5 %.
    root = job(annotations=ALWAYS)
    since = NOW - timedelta(hours=1)
    for read in (
        finding(root["metadata"]["uid"], percent=1.0, idle_since=since, aggregation="Avg"),
        finding(root["metadata"]["uid"], percent=1.0, idle_since=since, judged_against=0.5),
        finding(
            root["metadata"]["uid"], percent=1.0, idle_since=since, at=NOW - timedelta(minutes=6)
        ),
    ):
        plan = plan_of(record(root), cluster(root, record(root), findings=(read,))).plan
        assert plan.preempt is None
        assert plan.status["phase"] in ("Active", "Unknown")


def test_a_deployment_is_scaled_to_zero_kept_and_judged_anew_when_scaled_up() -> None:
    root = deployment(3, annotations=ALWAYS)
    uid = root["metadata"]["uid"]
    old_stretch = finding(uid, percent=0.0, idle_since=NOW - timedelta(minutes=30))
    plan = plan_of(record(root), cluster(root, record(root), findings=(old_stretch,))).plan
    assert plan.preempt.action == "scale-to-zero"
    assert plan.preempt.from_replicas == 3
    assert plan.status["gpus"] == 6
    preempting = dict(plan.status)

    # Still 3 replicas: the same preemption asked again, the status kept.
    again = plan_of(record(root, status=preempting), cluster(root, record(root, status=preempting)))
    assert again.plan.preempt == plan.preempt
    assert again.plan.status == preempting

    # At zero: Preempted, the object kept.
    stopped = deployment(0, annotations=ALWAYS)
    later = NOW + timedelta(minutes=1)
    done = plan_of(
        record(stopped, status=preempting),
        cluster(stopped, record(stopped, status=preempting)),
        now=later,
    ).plan
    assert done.preempt is None
    assert done.status["phase"] == "Preempted"
    assert done.status["finishedAt"] == "2026-03-01T12:01:00Z"
    assert done.status["gpus"] == 0
    assert [e.reason for e in done.events] == ["WorkloadPreempted"]
    preempted = dict(done.status)
    kept = plan_of(
        record(stopped, status=preempted),
        cluster(stopped, record(stopped, status=preempted)),
        now=later + timedelta(minutes=5),
    ).plan
    assert kept.status == preempted and kept.events == ()

    # Scaled up by hand: the old stretch (begun before the preemption) no longer counts.
    back = deployment(1, annotations=ALWAYS)
    state = cluster(
        back, record(back, status=preempted), findings=(dataclasses.replace(old_stretch, at=later),)
    )
    judged = plan_of(record(back, status=preempted), state, now=later).plan
    assert judged.preempt is None
    assert judged.status["phase"] == "Active"
    assert judged.status["preemptedAt"] == "2026-03-01T12:00:00Z"


def test_a_workload_gone_keeps_its_record_for_the_ttl_then_the_record_goes() -> None:
    root = job(annotations={**ALWAYS, f"{OPT_IN}ttl": "1h"})
    preempting = {
        "phase": "Preempting",
        "ttl": "1h0m0s",
        "preemptedAt": "2026-03-01T11:59:00Z",
        "preemptionReason": "idle",
    }
    gone = cluster(record(root, status=preempting))
    result = plan_of(record(root, status=preempting), gone)
    assert result.plan.status == {
        "phase": "Preempted",
        "ttl": "1h0m0s",
        "preemptedAt": "2026-03-01T11:59:00Z",
        "preemptionReason": "idle",
        "verdict": "Preempted at 2026-03-01T11:59:00Z: idle",
        "finishedAt": "2026-03-01T12:00:00Z",
    }
    assert [(e.reason, e.message) for e in result.plan.events] == [
        ("WorkloadPreempted", "Job/train was preempted to free GPUs; reason: idle")
    ]
    assert result.replan_at == NOW + timedelta(hours=1)
    finished = result.plan.status
    expired = plan_of(record(root, status=finished), gone, now=NOW + timedelta(hours=1))
    assert expired.plan.delete_owner is True
    assert expired.plan.status is None


def test_a_workload_that_opted_out_is_no_longer_tracked() -> None:
    root = job()
    plan = plan_of(record(root, status={"phase": "Idle"}), cluster(root, record(root))).plan
    assert plan.delete_owner is True


def test_the_shown_utilization_moves_in_steps_of_five_points() -> None:
    root = job(annotations=ALWAYS)
    uid = root["metadata"]["uid"]
    shown = {"phase": "Active", "utilization": 40}

    def utilization(percent: float) -> int:
        state = cluster(root, record(root, status=shown), findings=(finding(uid, percent=percent),))
        return plan_of(record(root, status=shown), state).plan.status["utilization"]

    assert utilization(43.4) == 40
    assert utilization(36.0) == 40
    assert utilization(45.2) == 45
    assert utilization(34.5) == 35  # a half rounds up, not to the even 34


def test_whole_percentages_round_halves_up() -> None:
    assert [whole_percent(p) for p in (92.5, 92.49, 0.5, 0.0, 99.5)] == [93, 92, 1, 0, 100]


# ------------------------------------------------------------------ waiting for GPUs (0056)

ON_PRESSURE = {f"{OPT_IN}policy": "OnPressure", f"{OPT_IN}grace-period": "1m"}


def kueue_workload(
    owner: dict[str, Any], *, reserved: str, message: str, created: str = "2026-03-01T11:00:00Z"
) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": f"job-{meta['name']}-abcde",
            "namespace": meta["namespace"],
            "uid": f"wl-{meta['name']}",
            "creationTimestamp": created,
            "ownerReferences": [
                {
                    "apiVersion": owner["apiVersion"],
                    "kind": owner["kind"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": reserved,
                    "reason": "Pending",
                    "message": message,
                }
            ]
        },
    }


QUOTA_FOR_GPUS = (
    "couldn't assign flavors to pod set main: insufficient unused quota for amd.com/gpu in "
    "flavor mi300x, 2 more needed"
)


def test_a_plain_job_kueue_does_not_admit_for_gpus_is_pressure_for_an_idle_one() -> None:
    idle = job("idle", annotations=ON_PRESSURE)
    read = finding(idle["metadata"]["uid"], percent=0.0, idle_since=NOW - timedelta(minutes=5))
    waits = job("waits", annotations=ON_PRESSURE, creationTimestamp="2026-03-01T11:00:00Z")
    refused = kueue_workload(waits, reserved="False", message=QUOTA_FOR_GPUS)
    state = cluster(
        idle,
        record(idle),
        waits,
        record(waits, name="job-waits-waits-01"),
        refused,
        findings=(read,),
    )

    pressed = plan_of(record(idle), state).plan
    assert pressed.preempt is not None and pressed.preempt.action == "delete"
    assert pressed.status["preemptedFor"] == {
        "kind": "Job",
        "name": "waits",
        "namespace": "team-a",
        "uid": "waits-0123456789",
    }

    waiting = plan_of(record(waits, name="job-waits-waits-01"), state).plan
    assert waiting.status["phase"] == "PendingGpu"
    assert waiting.status["verdict"] == (
        "Waiting for 2 amd GPUs since 2026-03-01T11:00:00Z: idle workloads under the "
        "OnPressure policy may be preempted for it"
    )
    assert [(e.type, e.reason) for e in waiting.events] == [("Warning", "WorkloadPendingGpu")]


def test_waiting_for_cpu_or_being_admitted_or_not_opted_in_is_no_pressure() -> None:
    idle = job("idle", annotations=ON_PRESSURE)
    read = finding(idle["metadata"]["uid"], percent=0.0, idle_since=NOW - timedelta(minutes=5))
    waits = job("waits", annotations=ON_PRESSURE)
    cpu = "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor x"
    nobodys = job("nobodys")
    for others in (
        (waits, record(waits), kueue_workload(waits, reserved="False", message=cpu)),
        (waits, record(waits), kueue_workload(waits, reserved="True", message=QUOTA_FOR_GPUS)),
        # Waiting, but nobody opted it in: it is not tracked, so it presses nobody.
        (nobodys, kueue_workload(nobodys, reserved="False", message=QUOTA_FOR_GPUS)),
    ):
        state = cluster(idle, record(idle), *others, findings=(read,))
        assert plan_of(record(idle), state).plan.preempt is None


def test_a_recent_wait_is_no_pressure_until_the_pending_threshold() -> None:
    idle = job("idle", annotations=ON_PRESSURE)
    read = finding(idle["metadata"]["uid"], percent=0.0, idle_since=NOW - timedelta(minutes=5))
    waits = job("waits", annotations=ON_PRESSURE)
    just_now = kueue_workload(
        waits, reserved="False", message=QUOTA_FOR_GPUS, created="2026-03-01T11:59:50Z"
    )
    state = cluster(idle, record(idle), waits, record(waits), just_now, findings=(read,))
    assert plan_of(record(idle), state).plan.preempt is None  # the default threshold: 5m


def test_a_bare_pod_the_scheduler_cannot_place_for_gpus_is_pressure() -> None:
    idle = job("idle", annotations=ON_PRESSURE)
    read = finding(idle["metadata"]["uid"], percent=0.0, idle_since=NOW - timedelta(minutes=5))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "notebook",
            "namespace": "team-a",
            "uid": "pod-0123456789",
            "creationTimestamp": "2026-03-01T11:00:00Z",
            "annotations": ON_PRESSURE,
        },
        "spec": {"containers": [{"name": "main", "resources": GPU}]},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available: 3 Insufficient amd.com/gpu.",
                }
            ],
        },
    }
    state = cluster(idle, record(idle), pod, record(pod), findings=(read,))
    pressed = plan_of(record(idle), state).plan
    assert pressed.preempt is not None
    assert pressed.status["preemptedFor"]["name"] == "notebook"

    memory = {
        **pod,
        "status": {
            **pod["status"],
            "conditions": [
                {
                    **pod["status"]["conditions"][0],
                    "message": "0/3 nodes are available: 3 Insufficient memory.",
                }
            ],
        },
    }
    state = cluster(idle, record(idle), memory, record(memory), findings=(read,))
    assert plan_of(record(idle), state).plan.preempt is None


# ------------------------------------------------------------------ pods of roots waiting (0066)

UNPLACED = {
    "phase": "Pending",
    "conditions": [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 Insufficient amd.com/gpu.",
        }
    ],
}


def pod_of(
    owner: dict[str, Any],
    name: str,
    *,
    status: dict[str, Any] | None = None,
    replica_set: str | None = None,
    template_hash: str = "5d8f9c7b6",
) -> dict[str, Any]:
    """A pod the owner's controller made: a Job's or StatefulSet's directly, a Deployment's
    through the ReplicaSet ``replica_set`` (default ``<deployment>-<hash>``)."""
    meta = owner["metadata"]
    labels: dict[str, str] = {}
    if owner["kind"] == "Deployment":
        labels["pod-template-hash"] = template_hash
        controller = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": replica_set or f"{meta['name']}-{template_hash}",
            "uid": "rs-0123456789",
            "controller": True,
        }
    else:
        controller = {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"pod-{name}",
            "creationTimestamp": "2026-03-01T11:00:00Z",
            "labels": labels,
            "ownerReferences": [controller],
        },
        "spec": {"containers": [{"name": "main", "resources": GPU}]},
        "status": status if status is not None else UNPLACED,
    }


def idle_job_state(*others: dict[str, Any]) -> ClusterState:
    idle = job("idle", annotations=ON_PRESSURE)
    read = finding(idle["metadata"]["uid"], percent=0.0, idle_since=NOW - timedelta(minutes=5))
    return cluster(idle, record(idle), *others, findings=(read,))


def test_a_plain_jobs_pod_the_scheduler_cannot_place_for_gpus_is_pressure() -> None:
    waits = job("waits", annotations=ON_PRESSURE)
    state = idle_job_state(waits, record(waits), pod_of(waits, "waits-x7k2p"))

    pressed = plan_of(record(job("idle", annotations=ON_PRESSURE)), state).plan
    assert pressed.preempt is not None and pressed.preempt.action == "delete"
    assert pressed.status["preemptedFor"]["name"] == "waits"
    waiting = plan_of(record(waits), state).plan
    assert waiting.status["phase"] == "PendingGpu"
    assert waiting.status["verdict"] == (
        "Waiting for 2 amd GPUs since 2026-03-01T11:00:00Z: idle workloads under the "
        "OnPressure policy may be preempted for it"
    )


def test_a_deployment_waits_for_the_gpus_of_its_unplaced_pods_only() -> None:
    """Three replicas of 2 GPUs, two placed, one not: it waits for 2 GPUs, which the idle
    2-GPU job frees (waiting for all 6, it would preempt nobody: all or nothing)."""
    serve = deployment(3, annotations=ON_PRESSURE)
    state = idle_job_state(serve, record(serve), pod_of(serve, "serve-5d8f9c7b6-abcde"))

    pressed = plan_of(record(job("idle", annotations=ON_PRESSURE)), state).plan
    assert pressed.preempt is not None
    assert pressed.status["preemptedFor"] == {
        "kind": "Deployment",
        "name": "serve",
        "namespace": "team-a",
        "uid": "serve-0123456789",
    }
    assert (
        plan_of(record(serve), state)
        .plan.status["verdict"]
        .startswith("Waiting for 2 amd GPUs since 2026-03-01T11:00:00Z")
    )


def test_a_statefulsets_pod_the_scheduler_cannot_place_for_gpus_is_pressure() -> None:
    ranks = deployment(1, annotations=ON_PRESSURE)
    ranks["kind"] = "StatefulSet"
    state = idle_job_state(ranks, record(ranks), pod_of(ranks, "serve-0"))
    pressed = plan_of(record(job("idle", annotations=ON_PRESSURE)), state).plan
    assert pressed.preempt is not None
    assert pressed.status["preemptedFor"]["kind"] == "StatefulSet"


def test_pods_waiting_for_other_things_or_of_others_are_no_pressure() -> None:
    waits = job("waits", annotations=ON_PRESSURE)
    serve = deployment(1, annotations=ON_PRESSURE)
    memory = {
        **UNPLACED,
        "conditions": [
            {
                **UNPLACED["conditions"][0],
                "message": "0/3 nodes are available: 3 Insufficient memory.",
            }
        ],
    }
    placed = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    nobodys = job("nobodys")
    for others in (
        (waits, record(waits), pod_of(waits, "waits-a", status=memory)),
        (waits, record(waits), pod_of(waits, "waits-b", status=placed)),
        # Not opted in: not tracked, so its waiting pod presses nobody.
        (nobodys, pod_of(nobodys, "nobodys-a")),
        # A ReplicaSet not named after the pods' hash is no Deployment's.
        (serve, record(serve), pod_of(serve, "serve-c", replica_set="made-by-hand")),
    ):
        state = idle_job_state(*others)
        assert plan_of(record(job("idle", annotations=ON_PRESSURE)), state).plan.preempt is None


def test_a_workload_a_preemption_served_is_no_pressure_while_the_freed_gpus_come() -> None:
    """The first victim preempted for ``waits`` is gone, but the scheduler has not placed the
    waiting pod yet: no second victim for the same demand, for two minutes; still waiting
    after that, it presses again (seen on the real stack: both holders went)."""
    waits = job("waits", annotations=ON_PRESSURE)
    served = record(
        job("first", annotations=ON_PRESSURE),
        name="job-first-first-01",
        status={
            "phase": "Preempted",
            "preemptedAt": "2026-03-01T11:59:30Z",
            "preemptedFor": {
                "kind": "Job",
                "namespace": "team-a",
                "name": "waits",
                "uid": "waits-0123456789",
            },
        },
    )
    state = idle_job_state(waits, record(waits), pod_of(waits, "waits-x7k2p"), served)
    idle = record(job("idle", annotations=ON_PRESSURE))
    assert plan_of(idle, state).plan.preempt is None
    later = plan_of(idle, state, now=NOW + timedelta(minutes=2)).plan
    assert later.preempt is not None
    assert later.status["preemptedFor"]["name"] == "waits"


def test_the_gpus_of_a_workload_gone_before_its_record_says_so_are_on_their_way() -> None:
    """The first victim's deletion reached the planner before the ``Preempting`` its record
    was given first (the watcher observes them on separate watches): its record still says
    Idle. Its 2 GPUs are being freed, so no second victim goes for the same demand (seen on
    the real stack). Once the record says Deleted, nothing of it is in flight any more."""
    waits = job("waits", annotations=ON_PRESSURE)
    first = job("first", annotations=ON_PRESSURE)
    told = {"phase": "Idle", "gpus": 2, "vendor": "amd"}
    waiting = (waits, record(waits), pod_of(waits, "waits-x7k2p"))
    idle = record(job("idle", annotations=ON_PRESSURE))

    gone = record(first, name="job-first-first-01", status=told)
    assert plan_of(idle, idle_job_state(*waiting, gone)).plan.preempt is None

    deleted = record(first, name="job-first-first-01", status={**told, "phase": "Deleted"})
    pressed = plan_of(idle, idle_job_state(*waiting, deleted)).plan
    assert pressed.preempt is not None
    assert pressed.status["preemptedFor"]["name"] == "waits"


def test_a_preemption_published_and_not_observed_yet_frees_gpus_for_its_demand() -> None:
    """Two idle holders, one confirmed idle a moment after the other: the decision made then
    chose ``first``, whose preemption is published but not observed yet (its record still
    says Idle). The next decision, made from ``second``'s newer reading, must count
    ``first``'s GPUs as being freed rather than choose ``second`` too (seen on the real
    stack: both holders went for one 2-GPU demand)."""
    waits = job("waits", annotations=ON_PRESSURE)
    first, second = (job(name, annotations=ON_PRESSURE) for name in ("first", "second"))
    first_record = record(first, status={"phase": "Idle", "gpus": 2, "vendor": "amd"})
    first_record["metadata"]["uid"] = "first-record"
    second_record = record(second)
    second_record["metadata"]["uid"] = "second-record"
    idle_since = NOW - timedelta(minutes=5)
    state = cluster(
        waits,
        record(waits),
        pod_of(waits, "waits-x7k2p"),
        first,
        first_record,
        second,
        second_record,
        findings=(finding(second["metadata"]["uid"], percent=0.0, idle_since=idle_since),),
    )
    unaware = plan_object(owner=second_record, context=PlanningContext.of(state), now=NOW)
    assert unaware.plan.preempt is not None

    aware = PlanningContext.of(state).with_preempting(frozenset({"first-record"}))
    assert plan_object(owner=second_record, context=aware, now=NOW).plan.preempt is None
