"""Node-pool discovery leaves out a node whose ``kaiwo/nodepool`` someone else set (decision
0229); expected quotas, flavors and node labels by hand.

A discovered flavor selects ``kaiwo/nodepool=<pool>`` and the executor never replaces an
admin's value of that label (decision 0110), so such a node never carries its pool's label:
counted in the pool, its quota admitted pods that stayed Pending for ever.

MI300X nodes of 64 cores and 512 GiB are pool ``amd-mi300x-8gpu-57core-460gi`` (90 %: 57
cores, 460 GiB); of 64 cores and 1 TiB, ``amd-mi300x-8gpu-57core-921gi``.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoConfig
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import KaiwoQueueConfig
from kaiwo_contracts.plans import Plan
from kaiwo_planner.domain.queues.node_pools import is_generated_pool_name
from kaiwo_planner.domain.queues.queue_config import plan_queue_config
from kaiwo_planner.domain.state.cluster import ClusterState

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
POOL = "amd-mi300x-8gpu-57core-460gi"
BIGGER_POOL = "amd-mi300x-8gpu-57core-921gi"
ADMINS = {"kaiwo/nodepool": "amd-gpu-nodes"}
"""The API reference's own example of a flavor's nodeLabels."""
OPERATORS_OTHER_LABELS = {
    "kaiwo/gpu-model": "mi300x",
    "kaiwo/topology-block": "block-a",
    "kaiwo/topology-rack": "rack-a",
    "kaiwo/worker": "true",
}


def kqc(spec: dict[str, Any]) -> KaiwoQueueConfig:
    return KaiwoQueueConfig.from_wire(
        {
            "apiVersion": "kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoQueueConfig",
            "metadata": {"name": "kaiwo", "uid": "kqc-uid", "generation": 1},
            "spec": spec,
        }
    )


def plan(
    nodes: list[dict[str, Any]],
    spec: dict[str, Any] | None = None,
    *,
    objects: list[dict[str, Any]] | None = None,
    **settings: Any,
) -> Plan:
    return plan_queue_config(
        queue_config=kqc(spec or {}),
        kaiwo_config=KaiwoConfig.from_wire({"metadata": {"name": "kaiwo"}, "spec": settings}),
        cluster=ClusterState.from_wire(nodes=nodes, objects=objects or [], namespaces=("ml",)),
        now=NOW,
    )


def kueue_objects(planned: Plan) -> list[dict[str, Any]]:
    """The plan's Kueue objects as the API server holds them once applied."""
    found = []
    for number, manifest in enumerate(planned.desired, start=1):
        if manifest["apiVersion"].startswith("kueue.x-k8s.io/"):
            applied = copy.deepcopy(manifest)
            applied["metadata"] |= {"uid": f"kueue-{number}", "resourceVersion": str(number)}
            found.append(applied)
    return found


def of_kind(planned: Plan, kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in planned.desired if o["kind"] == kind}


def node_labels(planned: Plan) -> dict[str, dict[str, str]]:
    return {name: node["metadata"]["labels"] for name, node in of_kind(planned, "Node").items()}


def one_node_of(pool: str, memory: str) -> dict[str, Any]:
    return {
        "namespaceSelector": {},
        "cohort": "kaiwo",
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", "amd.com/gpu"],
                "flavors": [
                    {
                        "name": pool,
                        "resources": [
                            {"name": "cpu", "nominalQuota": "57"},
                            {"name": "memory", "nominalQuota": memory},
                            {"name": "amd.com/gpu", "nominalQuota": "8"},
                        ],
                    }
                ],
            }
        ],
    }


def test_nodes_labelled_by_an_admin_add_no_quota_to_the_discovered_pool(make_node: Any) -> None:
    nodes = [
        make_node("admin-0", gpu="mi300x", labels=ADMINS),
        make_node("admin-1", gpu="mi300x", labels=ADMINS),
        make_node("free-0", gpu="mi300x"),
    ]
    planned = plan(nodes)
    # One node's quota, not three: 24 GPUs of which 16 could never be scheduled on.
    assert of_kind(planned, "ClusterQueue")["kaiwo"]["spec"] == one_node_of(POOL, "460Gi")
    assert of_kind(planned, "ResourceFlavor")[POOL]["spec"]["nodeLabels"] == {
        "kaiwo/nodepool": POOL
    }
    # The pool label only where it will be carried; the operator's other labels everywhere.
    assert node_labels(planned) == {
        "admin-0": OPERATORS_OTHER_LABELS,
        "admin-1": OPERATORS_OTHER_LABELS,
        "free-0": {**OPERATORS_OTHER_LABELS, "kaiwo/nodepool": POOL},
    }


def test_only_admin_labelled_nodes_make_no_flavor_and_the_status_names_them(
    make_node: Any,
) -> None:
    # The audit's reproduction: two MI300X nodes, kaiwo/nodepool=amd-gpu-nodes, an empty spec.
    nodes = [make_node(f"mi300x-{n}", gpu="mi300x", labels=ADMINS) for n in range(2)]
    first = plan(nodes)
    assert of_kind(first, "ResourceFlavor") == {}
    assert of_kind(first, "ClusterQueue")["kaiwo"]["spec"] == {
        "namespaceSelector": {},
        "cohort": "kaiwo",
    }
    settled = plan(nodes, objects=kueue_objects(first))
    assert settled.status["status"] == "READY"
    [ready] = settled.status["conditions"]
    assert ready["message"] == (
        "Kueue objects match the KaiwoQueueConfig (generated from the nodes: ClusterQueues "
        "kaiwo); left out of the node pools, their kaiwo/nodepool set elsewhere: "
        "mi300x-0, mi300x-1"
    )
    # Settled: the same plan again, nothing for the executor to write.
    assert plan(nodes, objects=kueue_objects(first)).desired == settled.desired


def test_a_node_whose_shape_changed_moves_from_the_operators_old_pool_to_its_new_one(
    make_node: Any,
) -> None:
    # The operator labelled it when it reported 512 GiB; it now reports 1 TiB. Its old value is
    # the operator's (the executor moves it), so the node is not left out of every pool.
    nodes = [make_node("grown", gpu="mi300x", memory="1Ti", labels={"kaiwo/nodepool": POOL})]
    planned = plan(nodes)
    assert of_kind(planned, "ClusterQueue")["kaiwo"]["spec"] == one_node_of(BIGGER_POOL, "921Gi")
    assert node_labels(planned)["grown"]["kaiwo/nodepool"] == BIGGER_POOL
    settled = plan(nodes, objects=kueue_objects(planned))
    assert "left out" not in settled.status["conditions"][0]["message"]


def test_a_node_already_carrying_its_pool_is_counted(make_node: Any) -> None:
    nodes = [make_node("labelled", gpu="mi300x", labels={"kaiwo/nodepool": POOL})]
    planned = plan(nodes)
    assert of_kind(planned, "ClusterQueue")["kaiwo"]["spec"] == one_node_of(POOL, "460Gi")


def test_with_the_dynamic_setting_the_default_queue_counts_only_the_pools_own_nodes(
    make_node: Any,
) -> None:
    # tests/integration/test_node_labels_real_stack.py's setup: the user's flavor selects the
    # admin's value; the discovered flavor is merged in beside it.
    nodes = [
        make_node("admin-0", gpu="mi300x", labels={"kaiwo/nodepool": "admin-gpus"}),
        make_node("free-0", gpu="mi300x"),
    ]
    spec = {
        "resourceFlavors": [{"name": "admin-gpus", "nodeLabels": {"kaiwo/nodepool": "admin-gpus"}}]
    }
    planned = plan(nodes, spec, dynamicallyUpdateDefaultClusterQueue=True)
    assert of_kind(planned, "ClusterQueue")["kaiwo"]["spec"] == one_node_of(POOL, "460Gi")
    assert "kaiwo/nodepool" not in node_labels(planned)["admin-0"]
    settled = plan(
        nodes, spec, objects=kueue_objects(planned), dynamicallyUpdateDefaultClusterQueue=True
    )
    assert settled.status["conditions"][0]["message"] == (
        "Kueue objects match the KaiwoQueueConfig (generated from the nodes: ClusterQueues "
        f"kaiwo; ResourceFlavors {POOL}); left out of the node pools, their kaiwo/nodepool set "
        "elsewhere: admin-0"
    )


def test_the_status_names_no_node_when_nothing_is_generated_from_the_nodes(
    make_node: Any,
) -> None:
    # examples/kaiwoqueueconfig.yaml: the user's flavors and queue, every node the admin's.
    nodes = [make_node("mi300x-0", gpu="mi300x", labels={"kaiwo/nodepool": "amd-mi300x-8gpu"})]
    spec = {
        "resourceFlavors": [
            {"name": "amd-mi300x-8gpu", "nodeLabels": {"kaiwo/nodepool": "amd-mi300x-8gpu"}}
        ],
        "clusterQueues": [{"name": "team", "spec": {}}],
    }
    first = plan(nodes, spec)
    settled = plan(nodes, spec, objects=kueue_objects(first))
    assert settled.status["conditions"][0]["message"] == "Kueue objects match the KaiwoQueueConfig"


def test_pool_names_the_operator_generates_are_told_from_an_admins_values() -> None:
    for generated in (
        "amd-mi300x-8gpu-57core-460gi",
        "cpu-only-0gpu-14core-57gi",
        "nvidia-nvidia-h100-80gb-hbm3-8gpu-201core-1843gi",
        # NVIDIA_A100-SXM4-80GB-with-a-very-long-product-name-indeed: cut, with a hash.
        "nvidia-nvidia-a100-sxm4-80gb-with-c9c35931-8gpu-201core-1843gi",
    ):
        assert is_generated_pool_name(generated), generated
    for admins in (
        "amd-gpu-nodes",
        "amd-mi300x-8gpu",
        "admin-gpus",
        "AMD-MI300X-8gpu-57core-460gi",
    ):
        assert not is_generated_pool_name(admins), admins
