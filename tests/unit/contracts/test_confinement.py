"""Plan confinement: forged and careless plans are refused with the reason; the planner's own
plans pass (its property test checks every generated plan). Cases written out by hand."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_contracts.confinement import refusals
from kaiwo_contracts.plans import ObjectRef, Plan, PruneRule

KAIWO = "kaiwo.silogen.ai/v1alpha1"
OWNER = ObjectRef(api_version=KAIWO, kind="KaiwoJob", name="train", namespace="ml-team", uid="u-1")
LIVE_OWNER = {
    "apiVersion": KAIWO,
    "kind": "KaiwoJob",
    "metadata": {"name": "train", "namespace": "ml-team", "uid": "u-1"},
}
CONTROLLER = {
    "apiVersion": KAIWO,
    "kind": "KaiwoJob",
    "name": "train",
    "uid": "u-1",
    "controller": True,
}
WORKLOAD_SELECTOR = {"app.kubernetes.io/managed-by": "kaiwo", "kaiwo.silogen.ai/owner-uid": "u-1"}
KQC = ObjectRef(api_version=KAIWO, kind="KaiwoQueueConfig", name="kaiwo", uid="q-1")
LIVE_KQC = {
    "apiVersion": KAIWO,
    "kind": "KaiwoQueueConfig",
    "metadata": {"name": "kaiwo", "uid": "q-1"},
}


def job(namespace: str = "ml-team", **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": namespace,
            "ownerReferences": [CONTROLLER],
            **metadata,
        },
        "spec": {},
    }


def node(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gpu-1", "labels": {"kaiwo/nodepool": "amd", "kaiwo/worker": "true"}},
        "spec": {
            "taints": [{"key": "kaiwo.silogen.ai/gpu", "value": "true", "effect": "NoSchedule"}],
            **spec,
        },
    }


def test_a_workload_plan_within_its_namespace_passes() -> None:
    plan = Plan(
        owner=OWNER,
        desired=(job(),),
        prune=(PruneRule(api_version="batch/v1", kind="Job"),),
        prune_selector=WORKLOAD_SELECTOR,
    )
    assert refusals(plan, owner=LIVE_OWNER) == ()
    assert refusals(plan.model_copy(update={"delete_owner": True}), owner=LIVE_OWNER) == (
        "a KaiwoJob may not be deleted by a plan",
    )


def test_another_queue_config_gets_only_its_status() -> None:
    other = KQC.model_copy(update={"name": "team"})
    live = {**LIVE_KQC, "metadata": {"name": "team", "uid": "q-1"}}
    assert refusals(Plan(owner=other, status={"status": "FAILED"}), owner=live) == ()
    assert refusals(Plan(owner=other, desired=(node(),)), owner=live) == (
        "only the 'kaiwo' KaiwoQueueConfig owns children",
    )


def test_a_forged_plan_for_an_owner_that_does_not_exist_is_refused() -> None:
    assert refusals(Plan(owner=OWNER, desired=(job(),)), owner=None) == (
        "the owner KaiwoJob/ml-team/train does not exist",
    )


def test_a_plan_whose_owner_uid_differs_is_refused() -> None:
    forged = OWNER.model_copy(update={"uid": "someone-else"})
    assert refusals(Plan(owner=forged, desired=()), owner=LIVE_OWNER) == (
        "the owner KaiwoJob/ml-team/train has uid u-1, not the plan's someone-else",
    )


def test_a_privileged_deployment_in_kube_system_is_refused() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "miner", "namespace": "kube-system", "ownerReferences": [CONTROLLER]},
        "spec": {"template": {"spec": {"hostPID": True, "hostNetwork": True}}},
    }
    assert refusals(Plan(owner=OWNER, desired=(deployment,)), owner=LIVE_OWNER) == (
        "Deployment kube-system/miner: outside the owner's namespace ml-team",
    )


@pytest.mark.parametrize(
    ("manifest", "reason"),
    [
        (
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "x"},
            },
            "ClusterRoleBinding x: a KaiwoJob may not write a ClusterRoleBinding of "
            "rbac.authorization.k8s.io/v1",
        ),
        (
            job(ownerReferences=[]),
            "Job ml-team/train: does not name KaiwoJob/ml-team/train as its controller",
        ),
        (node(), "Node gpu-1: a KaiwoJob may not write a Node of v1"),
    ],
)
def test_a_workload_may_write_only_its_own_kinds(manifest: dict[str, Any], reason: str) -> None:
    assert refusals(Plan(owner=OWNER, desired=(manifest,)), owner=LIVE_OWNER) == (reason,)


def test_a_cluster_wide_prune_of_another_tenants_jobs_is_refused() -> None:
    plan = Plan(
        owner=OWNER,
        prune=(
            PruneRule(api_version="batch/v1", kind="Job"),
            PruneRule(api_version="v1", kind="Secret"),
        ),
        prune_selector={"app.kubernetes.io/managed-by": "kaiwo"},
    )
    assert refusals(plan, owner=LIVE_OWNER) == (
        "prune of Secret of v1: not a kind the owner writes",
        "prune selector {'app.kubernetes.io/managed-by': 'kaiwo'} does not ask for the owner's "
        "own {'kaiwo.silogen.ai/owner-uid': 'u-1'}",
    )


def test_the_queue_config_may_label_and_taint_nodes_only_with_kaiwos_keys() -> None:
    assert refusals(Plan(owner=KQC, desired=(node(),)), owner=LIVE_KQC) == ()
    evicting = node(
        taints=[{"key": "kaiwo.silogen.ai/gpu", "value": "true", "effect": "NoExecute"}]
    )
    cordoning = node(unschedulable=True)
    relabelling = node()
    relabelling["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] = ""
    assert refusals(
        Plan(owner=KQC, desired=(evicting, cordoning, relabelling)), owner=LIVE_KQC
    ) == (
        "Node gpu-1: a taint that is not Kaiwo's kaiwo.silogen.ai/gpu:NoSchedule",
        "Node gpu-1: may set only Kaiwo's labels and taint, not spec.unschedulable",
        "Node gpu-1: labels that are not Kaiwo's: node-role.kubernetes.io/control-plane",
    )


def test_a_configured_taint_key_is_kaiwos_own() -> None:
    custom = node(taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}])
    assert refusals(Plan(owner=KQC, desired=(custom,)), owner=LIVE_KQC, gpu_taint_key="gpu") == ()


def test_a_queue_config_plan_may_not_delete_its_owner_or_write_workloads() -> None:
    plan = Plan(owner=KQC, desired=(job(),), delete_owner=True)
    assert refusals(plan, owner=LIVE_KQC) == (
        "Job ml-team/train: a KaiwoQueueConfig may not write a Job of batch/v1",
        "a KaiwoQueueConfig may not be deleted by a plan",
    )


def test_only_the_default_singletons_are_created_by_a_plan() -> None:
    empty_kqc = {
        "apiVersion": KAIWO,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {},
    }
    creating = Plan(
        owner=KQC.model_copy(update={"uid": None}), desired=(empty_kqc,), create_only=True
    )
    assert refusals(creating, owner=None) == ()
    smuggling = creating.model_copy(update={"desired": (empty_kqc, job())})
    assert refusals(smuggling, owner=None) == (
        "a plan creating KaiwoQueueConfig/kaiwo may create that object and nothing else",
    )
    other = Plan(owner=OWNER, desired=(job(),), create_only=True)
    assert refusals(other, owner=None) == (
        "only the 'kaiwo' KaiwoConfig and KaiwoQueueConfig are created by a plan",
    )


def test_kinds_that_own_nothing_are_refused() -> None:
    model = ObjectRef(api_version="kubeai.org/v1", kind="Model", name="m", namespace="x", uid="m")
    assert refusals(Plan(owner=model), owner={"metadata": {"uid": "m"}}) == (
        "a Model owns no children",
    )
