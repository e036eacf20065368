"""Node-pool discovery on a mixed cluster: two MI300X nodes, an H100 node, a CPU worker and a
control-plane node (see ``mixed_cluster_nodes``). Expected names and quotas worked out by hand:
90 % of cores and GiB, rounded down."""

from __future__ import annotations

from typing import Any

from kaiwo_planner.domain.queues.node_pools import (
    default_cluster_queue,
    default_resource_flavors,
    default_topology,
    discover_node_pools,
    node_changes,
)
from kaiwo_planner.domain.state.nodes import NodeInfo

from tests.unit.planner.conftest import build_node

AMD_POOL = "amd-mi300x-8gpu-115core-1843gi"
NVIDIA_POOL = "nvidia-nvidiah10080gbhbm3-8gpu-86core-921gi"
CPU_POOL = "cpu-only-0gpu-14core-57gi"
CONTROL_PLANE_POOL = "cpu-only-0gpu-7core-28gi"


def _infos(nodes: list[dict[str, Any]]) -> list[NodeInfo]:
    return [NodeInfo.from_wire(n) for n in nodes]


def test_pools_of_a_mixed_cluster(mixed_cluster_nodes: list[dict[str, Any]]) -> None:
    pools = discover_node_pools(_infos(mixed_cluster_nodes), exclude_control_plane=False)
    assert [(p.name, p.nodes, p.quotas()) for p in pools] == [
        (
            AMD_POOL,
            ("mi300x-0", "mi300x-1"),
            {"cpu": "230", "memory": "3686Gi", "amd.com/gpu": "16"},
        ),
        (CPU_POOL, ("cpu-0",), {"cpu": "14", "memory": "57Gi"}),
        (CONTROL_PLANE_POOL, ("cp-0",), {"cpu": "7", "memory": "28Gi"}),
        (NVIDIA_POOL, ("h100-0",), {"cpu": "86", "memory": "921Gi", "nvidia.com/gpu": "8"}),
    ]


def test_control_plane_excluded_and_cordoned_nodes_left_out(
    mixed_cluster_nodes: list[dict[str, Any]], make_node: Any
) -> None:
    nodes = [n for n in mixed_cluster_nodes if n["metadata"]["name"] != "mi300x-1"]
    nodes.append(make_node("mi300x-1", gpu="mi300x", cpu="128", memory="2Ti", unschedulable=True))
    pools = discover_node_pools(_infos(nodes), exclude_control_plane=True)
    assert [(p.name, p.nodes, p.gpus) for p in pools] == [
        (AMD_POOL, ("mi300x-0",), 8),
        (CPU_POOL, ("cpu-0",), 0),
        (NVIDIA_POOL, ("h100-0",), 8),
    ]


def test_default_cluster_queue_covers_every_pool(
    mixed_cluster_nodes: list[dict[str, Any]],
) -> None:
    pools = discover_node_pools(_infos(mixed_cluster_nodes), exclude_control_plane=False)
    queue = default_cluster_queue(pools, name="kaiwo", cohort="kaiwo")
    covered = ["cpu", "memory", "amd.com/gpu", "nvidia.com/gpu"]
    assert queue == {
        "name": "kaiwo",
        "spec": {
            "namespaceSelector": {},
            "cohort": "kaiwo",
            "resourceGroups": [
                {
                    "coveredResources": covered,
                    "flavors": [
                        {
                            "name": CONTROL_PLANE_POOL,
                            "resources": [
                                {"name": "cpu", "nominalQuota": "7"},
                                {"name": "memory", "nominalQuota": "28Gi"},
                                {"name": "amd.com/gpu", "nominalQuota": "0"},
                                {"name": "nvidia.com/gpu", "nominalQuota": "0"},
                            ],
                        },
                        {
                            "name": CPU_POOL,
                            "resources": [
                                {"name": "cpu", "nominalQuota": "14"},
                                {"name": "memory", "nominalQuota": "57Gi"},
                                {"name": "amd.com/gpu", "nominalQuota": "0"},
                                {"name": "nvidia.com/gpu", "nominalQuota": "0"},
                            ],
                        },
                        {
                            "name": NVIDIA_POOL,
                            "resources": [
                                {"name": "cpu", "nominalQuota": "86"},
                                {"name": "memory", "nominalQuota": "921Gi"},
                                {"name": "amd.com/gpu", "nominalQuota": "0"},
                                {"name": "nvidia.com/gpu", "nominalQuota": "8"},
                            ],
                        },
                        {
                            "name": AMD_POOL,
                            "resources": [
                                {"name": "cpu", "nominalQuota": "230"},
                                {"name": "memory", "nominalQuota": "3686Gi"},
                                {"name": "amd.com/gpu", "nominalQuota": "16"},
                                {"name": "nvidia.com/gpu", "nominalQuota": "0"},
                            ],
                        },
                    ],
                }
            ],
        },
    }


def test_default_flavors_and_topology(mixed_cluster_nodes: list[dict[str, Any]]) -> None:
    pools = discover_node_pools(_infos(mixed_cluster_nodes), exclude_control_plane=True)
    assert default_resource_flavors(pools, topology_name="default-topology") == [
        {
            "name": AMD_POOL,
            "nodeLabels": {"kaiwo/nodepool": AMD_POOL},
            "topologyName": "default-topology",
        },
        {
            "name": CPU_POOL,
            "nodeLabels": {"kaiwo/nodepool": CPU_POOL},
            "topologyName": "default-topology",
        },
        {
            "name": NVIDIA_POOL,
            "nodeLabels": {"kaiwo/nodepool": NVIDIA_POOL},
            "topologyName": "default-topology",
        },
    ]
    assert default_topology("default-topology") == {
        "metadata": {"name": "default-topology"},
        "spec": {
            "levels": [
                {"nodeLabel": "kaiwo/topology-block"},
                {"nodeLabel": "kaiwo/topology-rack"},
                {"nodeLabel": "kubernetes.io/hostname"},
            ]
        },
    }


def test_node_labels_without_taints(mixed_cluster_nodes: list[dict[str, Any]]) -> None:
    changes = node_changes(
        _infos(mixed_cluster_nodes),
        exclude_control_plane=True,
        add_gpu_taint=False,
        gpu_taint_key="kaiwo.silogen.ai/gpu",
    )
    topology = {"kaiwo/topology-block": "block-a", "kaiwo/topology-rack": "rack-a"}
    amd_labels = {
        "kaiwo/gpu-model": "mi300x",
        "kaiwo/nodepool": AMD_POOL,
        **topology,
        "kaiwo/worker": "true",
    }
    assert changes == [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "cpu-0",
                "labels": {"kaiwo/nodepool": CPU_POOL, **topology, "kaiwo/worker": "true"},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "h100-0",
                "labels": {
                    "kaiwo/gpu-model": "nvidiah10080gbhbm3",
                    "kaiwo/nodepool": NVIDIA_POOL,
                    **topology,
                    "kaiwo/worker": "true",
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "mi300x-0", "labels": amd_labels},
        },
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "mi300x-1", "labels": amd_labels},
        },
    ]


def test_gpu_nodes_get_only_our_taint_the_executor_merges_it(make_node: Any) -> None:
    nodes = [
        make_node(
            "h100-0",
            gpu="h100",
            taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        ),
        make_node(
            "mi300x-0",
            gpu="mi300x",
            labels={"kaiwo/topology-rack": "rack-7"},
            taints=[{"key": "gpu", "value": "false", "effect": "NoSchedule"}],
        ),
        make_node("cpu-0"),
    ]
    changes = node_changes(
        _infos(nodes), exclude_control_plane=False, add_gpu_taint=True, gpu_taint_key="gpu"
    )
    assert "spec" not in changes[0]
    # Never the node's own taints: a stale copy of them would undo the node controller's.
    assert changes[1]["spec"] == {
        "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    }
    assert changes[2]["metadata"]["labels"]["kaiwo/topology-rack"] == "rack-7"
    assert changes[2]["spec"] == {
        "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    }
    # With the record of its key, which lets the executor move it when the key is renamed;
    # a CPU node gets neither.
    assert [c["metadata"].get("annotations") for c in changes] == [
        None,
        {"kaiwo/gpu-taint": "gpu"},
        {"kaiwo/gpu-taint": "gpu"},
    ]


def test_a_node_without_reported_capacity_forms_no_pool(make_node: Any) -> None:
    registered = make_node("mi300x-2", gpu="mi300x", cpu="128", memory="2Ti")
    del registered["status"]  # the kubelet created the Node; its status comes a moment later
    nodes = [make_node("mi300x-0", gpu="mi300x", cpu="128", memory="2Ti"), registered]
    pools = discover_node_pools(_infos(nodes), exclude_control_plane=False)
    assert [(p.name, p.nodes) for p in pools] == [("amd-mi300x-8gpu-115core-1843gi", ("mi300x-0",))]
    changes = node_changes(
        _infos(nodes), exclude_control_plane=False, add_gpu_taint=True, gpu_taint_key="gpu"
    )
    assert [c["metadata"]["name"] for c in changes] == ["mi300x-0"]


# ------------------------------------------------------------------ product labels (fuzzing)


def _pool_and_labels(product_labels: dict[str, str]) -> tuple[str, dict[str, str]]:
    node = build_node("gpu-0", cpu="128", memory="1Ti", labels=product_labels)
    node["status"]["capacity"]["nvidia.com/gpu"] = "8"
    (change,) = node_changes(
        [NodeInfo.from_wire(node)],
        exclude_control_plane=False,
        add_gpu_taint=False,
        gpu_taint_key="kaiwo.silogen.ai/gpu",
    )
    labels: dict[str, str] = change["metadata"]["labels"]
    return labels["kaiwo/nodepool"], labels


def test_a_product_label_with_underscores_gives_a_valid_flavor_name() -> None:
    # Found by fuzzing: "nvidia-nvidia_a100_sxm4-..." is no ResourceFlavor name (422).
    pool, labels = _pool_and_labels(
        {"nvidia.com/gpu.product": "NVIDIA_A100_SXM4", "nvidia.com/gpu.count": "8"}
    )
    assert pool == "nvidia-nvidia-a100-sxm4-8gpu-115core-921gi"
    assert labels["kaiwo/gpu-model"] == "nvidia_a100_sxm4"  # a valid label value: kept


def test_a_model_cleaned_to_a_leading_dash_gives_valid_labels() -> None:
    # "AMD-Instinct-MI300X" cleans to "--mi300x": no label value starts with "-".
    pool, labels = _pool_and_labels(
        {"amd.com/gpu.product-name": "AMD-Instinct-MI300X", "beta.amd.com/gpu.family.AI": "8"}
    )
    assert pool == "amd-mi300x-8gpu-115core-921gi"
    assert labels["kaiwo/gpu-model"] == "mi300x"


def test_a_63_character_product_gives_a_pool_name_of_at_most_63() -> None:
    first, _ = _pool_and_labels({"nvidia.com/gpu.product": "A" * 63, "nvidia.com/gpu.count": "8"})
    second, _ = _pool_and_labels(
        {"nvidia.com/gpu.product": "A" * 62 + "B", "nvidia.com/gpu.count": "8"}
    )
    for pool in (first, second):
        assert len(pool) <= 63
        assert pool.startswith("nvidia-aaaaaaaaaaaaaaaaaaaaaaaaaaaa-")
        assert pool.endswith("-8gpu-115core-921gi")
    assert first != second


def test_a_shape_longer_than_a_name_still_gives_a_pool_name_of_at_most_63() -> None:
    # Found by fuzzing planning: the suffix of child_name (the shape) can be longer than 63
    # characters on its own; the name began with "-" and ran past 63.
    pool, _ = _pool_and_labels({"nvidia.com/gpu.product": "H100", "nvidia.com/gpu.count": "9" * 60})
    assert len(pool) <= 63
    assert pool[0].isalnum() and pool[-1].isalnum()
