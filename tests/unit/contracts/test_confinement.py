"""Plan confinement: forged and careless plans are refused with the reason; the planner's own
plans pass (its property test checks every generated plan). Cases written out by hand."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_contracts.confinement import refusals
from kaiwo_contracts.plans import EventIntent, ObjectRef, Plan, PruneRule, ScaleIntent

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


def recorded(manifest: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    manifest["metadata"]["annotations"] = annotations
    return manifest


def test_a_node_intent_may_record_the_gpu_taint_key_in_force_with_the_taint() -> None:
    custom = node(taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}])
    intent = recorded(custom, {"kaiwo/gpu-taint": "gpu"})

    assert refusals(Plan(owner=KQC, desired=(intent,)), owner=LIVE_KQC, gpu_taint_key="gpu") == ()


def test_a_node_intent_records_no_other_key_no_taint_it_lacks_and_no_other_annotation() -> None:
    # The record tells the executor which taint to move the operator's to: a record of a key
    # not in force, or a record without the taint (which would only remove it), is refused.
    stale = recorded(node(), {"kaiwo/gpu-taint": "example.com/old"})
    untainted = recorded(node(), {"kaiwo/gpu-taint": "kaiwo.silogen.ai/gpu"})
    del untainted["spec"]["taints"]
    foreign = recorded(node(), {"kaiwo/gpu-taint": "kaiwo.silogen.ai/gpu", "team": "ml"})

    assert refusals(Plan(owner=KQC, desired=(stale, untainted, foreign)), owner=LIVE_KQC) == (
        "Node gpu-1: records the GPU taint key 'example.com/old', not the one in force "
        "'kaiwo.silogen.ai/gpu'",
        "Node gpu-1: records Kaiwo's GPU taint without carrying it",
        "Node gpu-1: annotations that are not Kaiwo's: team",
    )


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


def test_kinds_that_are_no_owners_are_refused() -> None:
    config_map = ObjectRef(api_version="v1", kind="ConfigMap", name="c", namespace="x", uid="c")
    assert refusals(Plan(owner=config_map), owner={"metadata": {"uid": "c"}}) == (
        "a ConfigMap owns no children",
    )


def test_a_configuration_objects_plan_carries_only_events() -> None:
    # Decision 0206: a KaiwoConfig or an AIMNamespaceConfig the operator cannot use gets a
    # Warning Event; it owns nothing and has no status.
    config = ObjectRef(
        api_version="config.kaiwo.silogen.ai/v1alpha1",
        kind="AIMNamespaceConfig",
        name="c",
        namespace="x",
        uid="c",
    )
    live = {"metadata": {"uid": "c"}}
    warning = EventIntent(type="Warning", reason="InvalidConfig", message="bad")
    assert refusals(Plan(owner=config, events=(warning,)), owner=live) == ()
    # Any reason: one not in force is told so too (decision 0209).
    not_in_force = EventIntent(type="Warning", reason="NotInForce", message="another is")
    assert refusals(Plan(owner=config, events=(not_in_force,)), owner=live) == ()
    with_status = Plan(owner=config, events=(warning,), status={"status": "READY"})
    assert refusals(with_status, owner=live) == (
        "a AIMNamespaceConfig has no status a plan may write",
    )
    child = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "x"},
    }
    assert refusals(Plan(owner=config, desired=(child,)), owner=live) == (
        "ConfigMap x/x: a AIMNamespaceConfig may not write a ConfigMap of v1",
    )
    kaiwo_config = ObjectRef(
        api_version="config.kaiwo.silogen.ai/v1alpha1", kind="KaiwoConfig", name="kaiwo", uid="k"
    )
    assert (
        refusals(Plan(owner=kaiwo_config, events=(warning,)), owner={"metadata": {"uid": "k"}})
        == ()
    )
    assert refusals(Plan(owner=kaiwo_config, status={}), owner={"metadata": {"uid": "k"}}) == (
        "a KaiwoConfig has no status a plan may write",
    )


# ------------------------------------------------------------------ Models

MODEL = ObjectRef(api_version="kubeai.org/v1", kind="Model", name="llm", namespace="ai", uid="m-1")
LIVE_MODEL = {
    "apiVersion": "kubeai.org/v1",
    "kind": "Model",
    "metadata": {"name": "llm", "namespace": "ai", "uid": "m-1"},
}
MODEL_CONTROLLER = {
    "apiVersion": "kubeai.org/v1",
    "kind": "Model",
    "name": "llm",
    "uid": "m-1",
    "controller": True,
}
MODEL_SELECTOR = {"app.kubernetes.io/managed-by": "kaiwo", "kaiwo.silogen.ai/owner-uid": "m-1"}


def model_child(api_version: str, kind: str, name: str, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": "ai", "ownerReferences": [MODEL_CONTROLLER]},
        **fields,
    }


def cache_volume(**metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "shared-model-cache-fast",
            "namespace": "ai",
            "labels": {"app.kubernetes.io/managed-by": "kaiwo"},
            **metadata,
        },
    }


LOADER_ROLE = model_child(
    "rbac.authorization.k8s.io/v1",
    "Role",
    "model-llm-adapter-loader",
    rules=[
        {
            "apiGroups": [""],
            "resources": ["pods"],
            "verbs": ["get", "patch"],
            "resourceNames": ["model-llm-abc-0"],
        }
    ],
)
LOADER_BINDING = model_child(
    "rbac.authorization.k8s.io/v1",
    "RoleBinding",
    "model-llm-adapter-loader",
    roleRef={
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "model-llm-adapter-loader",
    },
    subjects=[{"kind": "ServiceAccount", "name": "default", "namespace": "ai"}],
)


def test_a_model_plan_with_pods_jobs_a_shared_cache_and_its_finalizer_passes() -> None:
    plan = Plan(
        owner=MODEL,
        desired=(
            model_child("v1", "Pod", "model-llm-abc-0", spec={}),
            model_child("v1", "ConfigMap", "model-llm-files", data={}),
            model_child("batch/v1", "Job", "load-cache-llm", spec={}),
            LOADER_ROLE,
            LOADER_BINDING,
        ),
        delete=(
            ObjectRef(
                api_version="v1", kind="Pod", name="model-llm-old-0", namespace="ai", uid="p-1"
            ),
        ),
        shared=(cache_volume(),),
        finalizers=("kubeai.org/cache-eviction",),
        prune=(PruneRule(api_version="batch/v1", kind="Job"),),
        prune_selector=MODEL_SELECTOR,
    )
    assert refusals(plan, owner=LIVE_MODEL) == ()


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        (
            ObjectRef(api_version="v1", kind="Pod", name="db-0", namespace="prod", uid="p"),
            "deletion of Pod/prod/db-0: outside the owner's namespace ai",
        ),
        (
            ObjectRef(api_version="v1", kind="Pod", name="model-llm-x", namespace="ai"),
            "deletion of Pod/ai/model-llm-x: names no uid",
        ),
        (
            ObjectRef(api_version="v1", kind="Secret", name="token", namespace="ai", uid="s"),
            "deletion of Secret/ai/token: not a kind the owner writes",
        ),
    ],
)
def test_a_model_deletes_only_its_own_kinds_in_its_namespace_by_uid(
    target: ObjectRef, reason: str
) -> None:
    assert refusals(Plan(owner=MODEL, delete=(target,)), owner=LIVE_MODEL) == (reason,)


@pytest.mark.parametrize(
    ("shared", "reason"),
    [
        (
            cache_volume(namespace="prod"),
            "shared PersistentVolumeClaim prod/shared-model-cache-fast: outside the owner's "
            "namespace ai",
        ),
        (
            cache_volume(ownerReferences=[MODEL_CONTROLLER]),
            "shared PersistentVolumeClaim ai/shared-model-cache-fast: a shared object has no owner",
        ),
        (
            cache_volume(labels={}),
            "shared PersistentVolumeClaim ai/shared-model-cache-fast: not labelled "
            "app.kubernetes.io/managed-by=kaiwo",
        ),
        (
            model_child("v1", "Pod", "model-llm-abc-0"),
            "shared Pod ai/model-llm-abc-0: a Model may not share a Pod",
        ),
    ],
)
def test_only_a_kaiwo_labelled_cache_volume_without_owner_is_shared(
    shared: dict[str, Any], reason: str
) -> None:
    assert refusals(Plan(owner=MODEL, shared=(shared,)), owner=LIVE_MODEL) == (reason,)


def test_a_model_sets_only_its_own_finalizer_and_no_workload_sets_any() -> None:
    foreign = ("kubeai.org/cache-eviction", "example.com/keep-forever")
    assert refusals(Plan(owner=MODEL, finalizers=foreign), owner=LIVE_MODEL) == (
        "finalizers a Model may not set: example.com/keep-forever",
    )
    assert refusals(
        Plan(owner=OWNER, finalizers=("kubeai.org/cache-eviction",)), owner=LIVE_OWNER
    ) == ("finalizers a KaiwoJob may not set: kubeai.org/cache-eviction",)
    assert refusals(Plan(owner=MODEL, finalizers=()), owner=LIVE_MODEL) == ()


def test_a_model_may_not_write_deployments_pvcs_of_its_own_or_delete_itself() -> None:
    plan = Plan(
        owner=MODEL,
        desired=(
            model_child("apps/v1", "Deployment", "llm"),
            cache_volume(ownerReferences=[MODEL_CONTROLLER]),
        ),
        delete_owner=True,
    )
    assert refusals(plan, owner=LIVE_MODEL) == (
        "Deployment ai/llm: a Model may not write a Deployment of apps/v1",
        "PersistentVolumeClaim ai/shared-model-cache-fast: a Model may not write a "
        "PersistentVolumeClaim of v1",
        "a Model may not be deleted by a plan",
    )


@pytest.mark.parametrize(
    "rules",
    [
        [],
        [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"]}],
        [{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"], "resourceNames": ["a"]}],
        [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["a"]}],
        [{"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a"]}],
        [
            {
                "apiGroups": [""],
                "resources": ["pods"],
                "verbs": ["get"],
                "resourceNames": ["a"],
                "nonResourceURLs": ["/"],
            }
        ],
    ],
    ids=["none", "every-pod", "delete", "secrets", "any-group", "extra-field"],
)
def test_a_model_role_grants_nothing_but_get_and_patch_of_named_pods(
    rules: list[dict[str, Any]],
) -> None:
    role = {**LOADER_ROLE, "rules": rules}
    assert refusals(Plan(owner=MODEL, desired=(role, LOADER_BINDING)), owner=LIVE_MODEL) == (
        "Role ai/model-llm-adapter-loader: may only grant get and patch of named Pods",
    )


@pytest.mark.parametrize(
    "binding",
    [
        {**LOADER_BINDING, "roleRef": {**LOADER_BINDING["roleRef"], "name": "admin"}},
        {**LOADER_BINDING, "roleRef": {**LOADER_BINDING["roleRef"], "kind": "ClusterRole"}},
        {**LOADER_BINDING, "subjects": [{"kind": "User", "name": "mallory"}]},
        {
            **LOADER_BINDING,
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "prod"}],
        },
        {**LOADER_BINDING, "subjects": []},
    ],
    ids=["other-role", "cluster-role", "user", "other-namespace", "nobody"],
)
def test_a_model_role_binding_binds_its_own_role_to_local_service_accounts(
    binding: dict[str, Any],
) -> None:
    assert refusals(Plan(owner=MODEL, desired=(LOADER_ROLE, binding)), owner=LIVE_MODEL) == (
        "RoleBinding ai/model-llm-adapter-loader: may only bind a Role of the same plan to "
        "service accounts of ai",
    )


def test_a_singleton_plan_may_not_smuggle_deletions_shares_or_finalizers() -> None:
    empty = {"apiVersion": KAIWO, "kind": "KaiwoQueueConfig", "metadata": {"name": "kaiwo"}}
    creating = Plan(owner=KQC.model_copy(update={"uid": None}), desired=(empty,), create_only=True)
    for extra in (
        {"delete": (ObjectRef(api_version="v1", kind="Pod", name="p", uid="u"),)},
        {"shared": (cache_volume(),)},
        {"finalizers": ()},
        {"scale": ScaleIntent(target=KQC, replicas=1, from_replicas=0)},
    ):
        assert refusals(creating.model_copy(update=extra), owner=None) == (
            "a plan creating KaiwoQueueConfig/kaiwo may create that object and nothing else",
        )


def test_a_model_plan_scales_its_own_model_and_nothing_else() -> None:
    own = Plan(owner=MODEL, scale=ScaleIntent(target=MODEL, replicas=3, from_replicas=1))
    assert refusals(own, owner=LIVE_MODEL) == ()

    other = MODEL.model_copy(update={"name": "other", "uid": "m-2"})
    forged = Plan(owner=MODEL, scale=ScaleIntent(target=other, replicas=3, from_replicas=1))
    assert refusals(forged, owner=LIVE_MODEL) == (
        "scale of Model/ai/other: a plan scales only its owner Model/ai/llm",
    )
    same_name_other_uid = MODEL.model_copy(update={"uid": "m-2"})
    replaced = Plan(
        owner=MODEL, scale=ScaleIntent(target=same_name_other_uid, replicas=3, from_replicas=1)
    )
    assert refusals(replaced, owner=LIVE_MODEL) == (
        "scale of Model/ai/llm: a plan scales only its owner Model/ai/llm",
    )


def test_a_scale_stays_within_the_live_models_max_replicas_and_autoscaling() -> None:
    plan = Plan(owner=MODEL, scale=ScaleIntent(target=MODEL, replicas=4, from_replicas=0))
    bounded = {**LIVE_MODEL, "spec": {"maxReplicas": 3}}
    assert refusals(plan, owner=bounded) == (
        "scale to 4 replicas: above the owner's maxReplicas 3",
    )
    assert refusals(plan, owner={**LIVE_MODEL, "spec": {"maxReplicas": 4}}) == ()
    switched_off = {**LIVE_MODEL, "spec": {"autoscalingDisabled": True}}
    assert refusals(plan, owner=switched_off) == (
        "a Model with autoscalingDisabled is scaled by its users only",
    )


def test_a_workload_plan_may_not_scale_anything() -> None:
    plan = Plan(owner=OWNER, scale=ScaleIntent(target=OWNER, replicas=2, from_replicas=1))
    assert refusals(plan, owner=LIVE_OWNER) == ("a KaiwoJob may not be scaled by a plan",)


def test_a_model_sets_only_its_feature_labels_and_no_workload_sets_any() -> None:
    own = {"features.kubeai.org/TextGeneration": "true"}
    assert refusals(Plan(owner=MODEL, owner_labels=own), owner=LIVE_MODEL) == ()
    assert refusals(
        Plan(owner=MODEL, owner_labels={**own, "team": "b", "kubeai.org/x": "1"}),
        owner=LIVE_MODEL,
    ) == ("labels a Model may not set: kubeai.org/x, team",)
    assert refusals(Plan(owner=OWNER, owner_labels=own), owner=LIVE_OWNER) == (
        "labels a KaiwoJob may not set: features.kubeai.org/TextGeneration",
    )
