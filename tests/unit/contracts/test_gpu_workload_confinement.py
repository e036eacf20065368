"""The confinement of GPU idle preemption of workloads no Kaiwo kind owns (decision 0047): a
GpuWorkload's plan preempts the one workload it names, the way that kind is preempted, and
only when the workload or its namespace opted in as the API server holds them now. Cases
written out by hand."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_contracts.confinement import PreemptionTarget, preemption_target_ref, refusals
from kaiwo_contracts.plans import ObjectRef, Plan, PreemptIntent, PruneRule

KAIWO = "kaiwo.silogen.ai/v1alpha1"
OPTED_IN = {"kaiwo.silogen.ai/gpu-preemption.policy": "Always"}
RECORD = ObjectRef(
    api_version=KAIWO, kind="GpuWorkload", name="job-train-j-1", namespace="ml", uid="r-1"
)
TRAIN = ObjectRef(api_version="batch/v1", kind="Job", name="train", namespace="ml", uid="j-1")


def live_record(**reference: str) -> dict[str, Any]:
    named = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "j-1", **reference}
    return {
        "apiVersion": KAIWO,
        "kind": "GpuWorkload",
        "metadata": {"name": "job-train-j-1", "namespace": "ml", "uid": "r-1"},
        "spec": {"workloadRef": named},
    }


def workload(annotations: dict[str, str] | None = None, uid: str = "j-1") -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml", "uid": uid, "annotations": annotations},
    }


def namespace(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ml", **({"annotations": annotations} if annotations else {})},
    }


def preempting(target: ObjectRef = TRAIN, action: str = "delete", **plan: Any) -> Plan:
    intent = PreemptIntent(target=target, action=action)  # type: ignore[arg-type]
    return Plan(owner=RECORD, status={"phase": "Preempting"}, preempt=intent, **plan)


def judged(
    plan: Plan, *, target: PreemptionTarget | None, record: dict[str, Any] | None = None
) -> tuple[str, ...]:
    return refusals(plan, owner=record or live_record(), target=target)


def test_an_opted_in_job_is_deleted_by_its_records_plan() -> None:
    plan = preempting()
    assert preemption_target_ref(plan) == TRAIN
    assert judged(plan, target=PreemptionTarget(workload(OPTED_IN), namespace())) == ()


def test_a_job_whose_namespace_opted_in_is_deleted_too() -> None:
    target = PreemptionTarget(workload(), namespace(OPTED_IN))
    assert judged(preempting(), target=target) == ()


def test_nothing_that_did_not_opt_in_is_preempted_whatever_the_plan_says() -> None:
    reason = (
        "preemption of Job/ml/train: neither the workload nor its namespace opted in to GPU "
        "idle preemption"
    )
    assert judged(preempting(), target=PreemptionTarget(workload(), namespace())) == (reason,)
    opted_out = workload({**OPTED_IN, "kaiwo.silogen.ai/gpu-preemption.enabled": "false"})
    assert judged(preempting(), target=PreemptionTarget(opted_out, namespace(OPTED_IN))) == (
        reason,
    )


def test_a_workload_gone_or_replaced_is_not_preempted() -> None:
    gone = "preemption of Job/ml/train: the workload does not exist with uid j-1"
    assert judged(preempting(), target=PreemptionTarget(None, namespace())) == (gone,)
    replaced = PreemptionTarget(workload(OPTED_IN, uid="j-2"), namespace())
    assert judged(preempting(), target=replaced) == (gone,)


def test_a_record_preempts_only_the_workload_its_spec_names() -> None:
    other = TRAIN.model_copy(update={"name": "eval", "uid": "j-9"})
    assert judged(preempting(other), target=PreemptionTarget(workload(OPTED_IN), namespace())) == (
        "preemption of Job/ml/eval: not the workload GpuWorkload/ml/job-train-j-1 names",
    )
    elsewhere = TRAIN.model_copy(update={"namespace": "kube-system"})
    assert judged(preempting(elsewhere), target=None) == (
        "preemption of Job/kube-system/train: not the workload GpuWorkload/ml/job-train-j-1 names",
    )


@pytest.mark.parametrize(
    ("kind", "api_version", "action", "allowed"),
    [
        ("Job", "batch/v1", "scale-to-zero", False),
        ("Deployment", "apps/v1", "delete", False),
        ("Deployment", "apps/v1", "scale-to-zero", True),
        ("StatefulSet", "apps/v1", "scale-to-zero", True),
        ("Pod", "v1", "delete", True),
        ("RayCluster", "ray.io/v1", "delete", True),
        ("CronJob", "batch/v1", "delete", False),
    ],
)
def test_each_kind_is_preempted_its_own_way(
    kind: str, api_version: str, action: str, allowed: bool
) -> None:
    target = TRAIN.model_copy(update={"kind": kind, "api_version": api_version})
    live = {**workload(OPTED_IN), "apiVersion": api_version, "kind": kind}
    found = judged(
        preempting(target, action),
        target=PreemptionTarget(live, namespace()),
        record=live_record(apiVersion=api_version, kind=kind),
    )
    assert (found == ()) is allowed, found


def test_only_a_gpu_workload_preempts_and_it_writes_nothing_else() -> None:
    job_owner = ObjectRef(api_version=KAIWO, kind="KaiwoJob", name="x", namespace="ml", uid="k")
    live_job = {"apiVersion": KAIWO, "kind": "KaiwoJob", "metadata": {"name": "x", "uid": "k"}}
    plan = Plan(owner=job_owner, preempt=PreemptIntent(target=TRAIN, action="delete"))
    target = PreemptionTarget(workload(OPTED_IN), namespace())
    assert refusals(plan, owner=live_job, target=target) == ("a KaiwoJob may not preempt anything",)
    desired = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "ml"},
    }
    smuggled = preempting(
        desired=(desired,),
        prune=(PruneRule(api_version="batch/v1", kind="Job"),),
        prune_selector={"kaiwo.silogen.ai/owner-uid": "r-1"},
    )
    reasons = judged(smuggled, target=target)
    assert "ConfigMap ml/x: a GpuWorkload may not write a ConfigMap of v1" in reasons
    assert "prune of Job of batch/v1: not a kind the owner writes" in reasons


def test_a_record_deletes_itself_once_its_ttl_passed() -> None:
    assert refusals(Plan(owner=RECORD, delete_owner=True), owner=live_record()) == ()


def creation(name: str = "job-train-j-1", **reference: str) -> Plan:
    named = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "j-1", **reference}
    manifest = {
        "apiVersion": KAIWO,
        "kind": "GpuWorkload",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"workloadRef": named},
    }
    owner = ObjectRef(api_version=KAIWO, kind="GpuWorkload", name=name, namespace="ml")
    return Plan(owner=owner, desired=(manifest,), create_only=True)


def test_a_record_is_created_for_an_opted_in_root_under_its_own_name() -> None:
    plan = creation()
    assert preemption_target_ref(plan) == TRAIN
    target = PreemptionTarget(workload(OPTED_IN), namespace())
    assert refusals(plan, owner=None, target=target) == ()
    assert refusals(creation("job-other-j-1"), owner=None, target=target) == (
        "GpuWorkload/ml/job-other-j-1 must be named job-train-j-1 in its workload's namespace",
    )
    assert refusals(plan, owner=None, target=PreemptionTarget(workload(), namespace())) == (
        "tracking of Job/ml/train: neither the workload nor its namespace opted in to GPU idle "
        "preemption",
    )
    cron = creation("cronjob-train-j-1", kind="CronJob")
    assert refusals(cron, owner=None, target=target) == (
        "GpuWorkload/ml/cronjob-train-j-1 names no workload of a kind GPU idle preemption tracks",
    )
