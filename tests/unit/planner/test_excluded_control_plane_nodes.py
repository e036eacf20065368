"""``excludeMasterNodesFromNodePools`` turned on at runtime (decision 0224): a control-plane node
labelled while it was off loses Kaiwo's pool labels, and its GPUs leave the cluster's count.
Expected values worked out by hand: an 8-GPU MI300X worker and an 8-GPU MI300X control-plane
node, 16 GPUs with the control plane, 8 without."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kaiwo_planner.domain.queues.node_pools import node_changes, pool_label_removals
from kaiwo_planner.domain.scheduling.gpu_allocation import (
    GpuStats,
    gpu_stats,
    vendor_gpu_stats,
)
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.nodes import NodeInfo
from kaiwo_planner.domain.state.planning_context import PlanningContext

from tests.planning_calls import planned
from tests.unit.planner.conftest import build_node
from tests.unit.planner.test_planning import kaiwo_job, queue_config

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
AMD_POOL = "amd-mi300x-8gpu-115core-1843gi"
LABELLED_WHILE_OFF = {
    "kaiwo/nodepool": AMD_POOL,
    "kaiwo/worker": "true",
    "kaiwo/gpu-model": "mi300x",
    "kaiwo/topology-block": "block-a",
    "kaiwo/topology-rack": "rack-a",
    "team": "infra",
}
"""What the operator wrote on the control-plane node while the setting was off, and a label
of the admin's."""


def control_plane(labels: dict[str, str] | None = None) -> dict[str, Any]:
    return build_node(
        "cp-0", gpu="mi300x", cpu="128", memory="2Ti", control_plane=True, labels=labels
    )


def worker() -> dict[str, Any]:
    return build_node("mi300x-0", gpu="mi300x", cpu="128", memory="2Ti")


def infos(*nodes: dict[str, Any]) -> list[NodeInfo]:
    return [NodeInfo.from_wire(node) for node in nodes]


def changes(*nodes: dict[str, Any], exclude: bool) -> list[dict[str, Any]]:
    return node_changes(
        infos(*nodes),
        exclude_control_plane=exclude,
        add_gpu_taint=False,
        gpu_taint_key="kaiwo.silogen.ai/gpu",
    )


def kaiwo_config(*, exclude: bool) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {"nodes": {"excludeMasterNodesFromNodePools": exclude}},
    }


# ------------------------------------------------------------------ the pool labels removed


def test_an_excluded_control_plane_node_loses_only_kaiwos_pool_labels() -> None:
    found = changes(control_plane(LABELLED_WHILE_OFF), worker(), exclude=True)

    assert found[-1] == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "cp-0",
            # None: removed by the merge patch. Not the topology labels, nor the admin's.
            "labels": {"kaiwo/nodepool": None, "kaiwo/worker": None, "kaiwo/gpu-model": None},
        },
    }
    assert [c["metadata"]["name"] for c in found] == ["mi300x-0", "cp-0"]
    assert found[0]["metadata"]["labels"]["kaiwo/nodepool"] == AMD_POOL


def test_only_the_pool_labels_the_node_carries_are_named() -> None:
    (removal,) = pool_label_removals(infos(control_plane({"kaiwo/worker": "true"})))

    assert removal["metadata"]["labels"] == {"kaiwo/worker": None}


def test_a_settled_control_plane_node_gets_no_intent() -> None:
    # Its pool labels are gone: nothing is asked of it, so nothing is written.
    settled = {"kaiwo/topology-block": "block-a", "kaiwo/topology-rack": "rack-a"}

    assert changes(control_plane(settled), exclude=True) == []


def test_with_the_setting_off_the_control_plane_node_is_labelled_as_a_pool_member() -> None:
    (change,) = changes(control_plane(LABELLED_WHILE_OFF), exclude=False)

    assert change["metadata"]["labels"] == {
        "kaiwo/gpu-model": "mi300x",
        "kaiwo/nodepool": AMD_POOL,
        "kaiwo/topology-block": "block-a",
        "kaiwo/topology-rack": "rack-a",
        "kaiwo/worker": "true",
    }


def test_a_cordoned_worker_keeps_its_pool_labels() -> None:
    # Out of the pools while cordoned, as upstream; only the control plane is excluded for good.
    cordoned = build_node("mi300x-1", gpu="mi300x", labels=LABELLED_WHILE_OFF, unschedulable=True)

    assert changes(cordoned, exclude=True) == []


def test_the_queue_config_plan_asks_for_the_removal() -> None:
    from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoConfig
    from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import KaiwoQueueConfig
    from kaiwo_planner.domain.queues.queue_config import plan_queue_config

    cluster = ClusterState.from_wire(nodes=[control_plane(LABELLED_WHILE_OFF), worker()])
    empty = {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoQueueConfig"}
    plan = plan_queue_config(
        queue_config=KaiwoQueueConfig.model_validate(
            {**empty, "metadata": {"name": "kaiwo", "uid": "kqc-uid"}, "spec": {}}
        ),
        kaiwo_config=KaiwoConfig.model_validate(kaiwo_config(exclude=True)),
        cluster=cluster,
        now=NOW,
    )

    nodes = {m["metadata"]["name"]: m for m in plan.desired if m["kind"] == "Node"}
    assert nodes["cp-0"]["metadata"]["labels"] == {
        "kaiwo/nodepool": None,
        "kaiwo/worker": None,
        "kaiwo/gpu-model": None,
    }


# ------------------------------------------------------------------ the GPUs counted


def test_gpu_stats_leave_out_excluded_control_plane_nodes() -> None:
    nodes = infos(control_plane(), worker())

    assert gpu_stats(nodes, "amd", exclude_control_plane=True) == GpuStats(
        vendor="amd",
        total_gpus=8,
        min_gpus_per_node=8,
        total_allocatable_gpus=8,
        min_allocatable_gpus_per_node=8,
        max_gpus_per_node=8,
    )
    assert gpu_stats(nodes, "amd", exclude_control_plane=False).total_gpus == 16


def test_the_planners_gpu_count_follows_the_kaiwo_config() -> None:
    nodes = [control_plane(), worker()]
    for exclude, total in ((False, 16), (True, 8)):
        cluster = ClusterState.from_wire(nodes=nodes, objects=[kaiwo_config(exclude=exclude)])

        assert vendor_gpu_stats(PlanningContext.of(cluster), "AMD").total_gpus == total


def test_schedulable_does_not_count_the_excluded_control_planes_gpus() -> None:
    owner = kaiwo_job({"user": "ann@example.com", "gpus": 16, "image": "rocm/pytorch:latest"})
    cluster = ClusterState.from_wire(
        nodes=[control_plane(), worker()],
        objects=[queue_config({"name": "kaiwo"}), kaiwo_config(exclude=True), owner],
        namespaces=["team-a"],
    )

    plan = planned(owner=owner, cluster=cluster, now=NOW)

    assert plan is not None and plan.status is not None
    [schedulable] = [c for c in plan.status["conditions"] if c["type"] == "Schedulable"]
    assert (schedulable["status"], schedulable["reason"], schedulable["message"]) == (
        "False",
        "InsufficientGPUs",
        "Cluster has 8 GPUs, but requested for 16 GPUs (vendor: amd)",
    )
