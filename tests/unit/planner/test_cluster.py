from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.nodes import (
    NodeInfo,
    Taint,
    clean_amd_gpu_name,
    clean_nvidia_gpu_name,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("16Gi", Decimal(17179869184)),
        ("500m", Decimal("0.5")),
        ("2", Decimal(2)),
        (4, Decimal(4)),
        ("1k", Decimal(1000)),
        ("1.5G", Decimal(1500000000)),
        ("1e3", Decimal(1000)),
        ("128974848", Decimal(128974848)),
    ],
)
def test_parse_quantity(text: Any, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


def test_parse_quantity_rejects_text() -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity("lots")


@pytest.mark.parametrize("value", [True, False, float("nan"), float("inf"), "NaN", "-infGi"])
def test_parse_quantity_rejects_what_is_no_number_to_kubernetes(value: Any) -> None:
    # Found by fuzzing planning: a Node whose capacity held true raised decimal's
    # InvalidOperation (no ValueError), and planning with it.
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity(value)


def test_a_node_with_a_boolean_capacity_reports_none() -> None:
    node = {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": True, "memory": "1Gi"}}}
    assert NodeInfo.from_wire(node).capacity_reported is False


def test_gpu_name_cleaning() -> None:
    assert clean_amd_gpu_name("AMD_Instinct_MI300X_OAM") == "mi300x"
    assert clean_amd_gpu_name("AMD Instinct MI250X") == "mi250x"
    assert clean_nvidia_gpu_name("Tesla-K80") == "teslak80"
    assert clean_nvidia_gpu_name("NVIDIA-H100-80GB-HBM3") == "nvidiah10080gbhbm3"


def test_node_info_from_amd_node(make_node: Any) -> None:
    node = NodeInfo.from_wire(
        make_node(
            "mi300x-0",
            gpu="mi300x",
            cpu="127500m",
            memory="2Ti",
            taints=[{"key": "kaiwo.silogen.ai/gpu", "value": "true", "effect": "NoSchedule"}],
        )
    )
    assert node.name == "mi300x-0"
    assert node.uid == "uid-mi300x-0"
    assert node.cpu_capacity_millis == 127500
    assert node.cpu_cores == 128
    assert node.memory_capacity_bytes == 2 * 1024**4
    assert node.memory_gib == 2048
    assert node.gpu_capacity == {"amd.com/gpu": 8}
    assert node.gpu_vendor == "amd"
    assert node.gpu_model == "mi300x"
    assert node.gpu_count == 8
    assert node.allocatable_gpus("amd") == 8
    assert node.allocatable_gpus("nvidia") == 0
    assert node.ready
    assert not node.is_control_plane
    assert node.taints == (Taint(key="kaiwo.silogen.ai/gpu", value="true", effect="NoSchedule"),)
    assert node.has_taint("kaiwo.silogen.ai/gpu", value="true", effect="NoSchedule")


def test_label_values_that_are_not_strings_are_left_out(make_node: Any) -> None:
    # Found by fuzzing: a count label holding a list made every plan that reads GPUs raise.
    wire = make_node("mi300x-0", gpu="mi300x")
    wire["metadata"]["labels"]["beta.amd.com/gpu.family.AI"] = ["8"]
    wire["metadata"]["labels"]["kaiwo/nodepool"] = None
    node = NodeInfo.from_wire(wire)
    assert "beta.amd.com/gpu.family.AI" not in node.labels
    assert "kaiwo/nodepool" not in node.labels
    assert node.gpu_vendor == "amd"  # the product label and the capacity still say so
    assert node.gpu_count == 8  # from the capacity


def test_node_info_from_nvidia_and_cpu_nodes(make_node: Any) -> None:
    nvidia = NodeInfo.from_wire(make_node("h100-0", gpu="h100", gpus=4))
    cpu = NodeInfo.from_wire(make_node("cp-0", control_plane=True, unschedulable=True, ready=False))
    assert (nvidia.gpu_vendor, nvidia.gpu_model, nvidia.gpu_count) == (
        "nvidia",
        "nvidiah10080gbhbm3",
        4,
    )
    assert (cpu.gpu_vendor, cpu.gpu_model, cpu.gpu_count) == (None, None, 0)
    assert cpu.is_control_plane
    assert cpu.unschedulable
    assert not cpu.ready


def test_master_label_counts_as_control_plane() -> None:
    node = NodeInfo.from_wire(
        {"metadata": {"name": "m", "labels": {"node-role.kubernetes.io/master": ""}}}
    )
    assert node.is_control_plane
    assert node.cpu_capacity_millis == 0


def _child(kind: str, name: str, owner: str, *, ns: str = "team") -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1" if kind == "Job" else "v1",
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{name}",
            "ownerReferences": [{"uid": owner, "kind": "KaiwoJob", "name": "x"}],
        },
    }


def test_cluster_state_indexes_children_and_workloads(make_node: Any) -> None:
    job = _child("Job", "train", "kj-1")
    pvc = _child("PersistentVolumeClaim", "train-data", "kj-1")
    other = _child("Job", "other", "kj-2")
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": "job-train-abc",
            "namespace": "team",
            "ownerReferences": [{"uid": "uid-train", "kind": "Job", "name": "train"}],
        },
    }
    pod_workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": "pod-web-1",
            "namespace": "team",
            "labels": {"kueue.x-k8s.io/job-uid": "uid-pod-1"},
        },
    }
    state = ClusterState.from_wire(
        nodes=[make_node("b"), make_node("a")],
        objects=[pvc, other, job],
        kueue_workloads=[workload, pod_workload],
        namespaces=["team"],
    )
    assert [n.name for n in state.nodes] == ["a", "b"]
    assert state.children_of("kj-1") == (job, pvc)  # batch/v1 sorts before v1
    assert state.children_of("missing") == ()
    assert state.child_of("kj-1", kind="Job") == job
    assert state.child_of("kj-1", kind="Job", name="nope") is None
    assert state.kueue_workload_for("uid-train") == workload
    assert state.kueue_workload_for("uid-pod-1") == pod_workload
    assert state.kueue_workload_for("uid-other") is None
    assert state.has_namespace("team")
    assert not state.has_namespace("kube-system")
    assert state.node("a") is not None
    assert state.objects_labelled("kaiwo.silogen.ai/run-id", "nobody") == ()
