"""The worked examples of upstream Kaiwo §6, for both vendors (expected values from the table;
the total is what the pods hold, which upstream's ``TotalGpus`` is not when the split rounds
down: decision 0118)."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_planner.domain.scheduling.gpu_allocation import (
    GpuAllocation,
    GpuStats,
    WorkloadShape,
    allocate_workload_gpus,
    calculate_gpu_allocation,
    gpu_stats,
    job_pods,
    template_gpus,
)
from kaiwo_planner.domain.state.nodes import NodeInfo


def _nodes(make_node: Any, gpu: str, per_node: int, count: int) -> list[NodeInfo]:
    return [
        NodeInfo.from_wire(make_node(f"{gpu}-{i}", gpu=gpu, gpus=per_node)) for i in range(count)
    ]


@pytest.fixture(params=[("amd", "mi300x"), ("nvidia", "h100")], ids=["amd", "nvidia"])
def vendor_nodes(request: Any, make_node: Any) -> tuple[str, list[NodeInfo]]:
    vendor, gpu = request.param
    # Four 8-GPU nodes of the vendor plus two 4-GPU nodes of the other one, which must not count.
    other = "h100" if gpu == "mi300x" else "mi300x"
    return vendor, _nodes(make_node, gpu, 8, 4) + _nodes(make_node, other, 4, 2)


@pytest.mark.parametrize(
    ("spec", "replicas", "gpus_per_replica", "total", "adjusted_from"),
    [
        ({"gpus": 14}, 2, 7, 14, None),
        ({"gpus": 8}, 1, 8, 8, None),
        ({"gpus": 16}, 2, 8, 16, None),
        ({"gpus": 18}, 3, 6, 18, None),
        # Upstream's TotalGpus (and NUM_GPUS) is 30; the 4 pods hold 28.
        ({"gpus": 30}, 4, 7, 28, 30),
        ({"gpus": 4}, 1, 4, 4, None),
        ({"replicas": 3, "gpus_per_replica": 2}, 3, 2, 6, None),
        ({"gpus": 0, "replicas": 1}, 1, 0, 0, None),
        ({"gpus": 0, "replicas": 3}, 3, 0, 0, None),
    ],
)
def test_worked_examples(
    vendor_nodes: tuple[str, list[NodeInfo]],
    spec: dict[str, int],
    replicas: int,
    gpus_per_replica: int,
    total: int,
    adjusted_from: int | None,
) -> None:
    vendor, nodes = vendor_nodes
    allocation = calculate_gpu_allocation(
        gpus=spec.get("gpus", 0),
        replicas=spec.get("replicas", 1),
        gpus_per_replica=spec.get("gpus_per_replica"),
        vendor=vendor,
        stats=gpu_stats(nodes, vendor),
    )
    assert (
        allocation.replicas,
        allocation.gpus_per_replica,
        allocation.gpus,
        allocation.adjusted_from,
    ) == (replicas, gpus_per_replica, total, adjusted_from)


def test_stats_count_only_the_vendor(vendor_nodes: tuple[str, list[NodeInfo]]) -> None:
    vendor, nodes = vendor_nodes
    assert gpu_stats(nodes, vendor) == GpuStats(
        vendor=vendor,
        total_gpus=32,
        min_gpus_per_node=8,
        total_allocatable_gpus=32,
        min_allocatable_gpus_per_node=8,
        max_gpus_per_node=8,
    )


def test_stats_vendor_is_case_insensitive(make_node: Any) -> None:
    nodes = _nodes(make_node, "mi300x", 8, 1)
    assert gpu_stats(nodes, "AMD").total_gpus == 8


def test_uneven_total_leaves_gpus_unallocated(make_node: Any) -> None:
    stats = gpu_stats(_nodes(make_node, "mi300x", 4, 8), "amd")
    allocation = calculate_gpu_allocation(
        gpus=25, replicas=1, gpus_per_replica=None, vendor="amd", stats=stats
    )
    # The pods hold 7 x 3 = 21 (NUM_GPUS says 21); the 25 asked for is kept for the note.
    assert allocation == GpuAllocation(
        gpus=21, gpus_per_replica=3, replicas=7, vendor="amd", adjusted_from=25
    )
    assert allocation.resource_key == "amd.com/gpu"


def test_allocatable_node_size_is_used_when_it_covers_the_request(make_node: Any) -> None:
    full = make_node("a", gpu="h100", gpus=8)
    partly_used = make_node("b", gpu="h100", gpus=8)
    partly_used["status"]["allocatable"]["nvidia.com/gpu"] = "4"
    stats = gpu_stats([NodeInfo.from_wire(full), NodeInfo.from_wire(partly_used)], "nvidia")
    assert stats == GpuStats(
        vendor="nvidia",
        total_gpus=16,
        min_gpus_per_node=8,
        total_allocatable_gpus=12,
        min_allocatable_gpus_per_node=4,
        max_gpus_per_node=8,
    )
    # 12 allocatable >= 8 requested: split by the smallest allocatable node (4).
    assert calculate_gpu_allocation(
        gpus=8, replicas=1, gpus_per_replica=None, vendor="nvidia", stats=stats
    ) == GpuAllocation(gpus=8, gpus_per_replica=4, replicas=2, vendor="nvidia")
    # 14 > 12 allocatable: split by the smallest node (8).
    assert calculate_gpu_allocation(
        gpus=14, replicas=1, gpus_per_replica=None, vendor="nvidia", stats=stats
    ) == GpuAllocation(gpus=14, gpus_per_replica=7, replicas=2, vendor="nvidia")


def test_no_matching_nodes_gives_one_replica_with_everything() -> None:
    allocation = calculate_gpu_allocation(
        gpus=12, replicas=1, gpus_per_replica=None, vendor="nvidia", stats=GpuStats("nvidia")
    )
    assert allocation == GpuAllocation(gpus=12, gpus_per_replica=12, replicas=1, vendor="nvidia")
    assert allocation.resource_key == "nvidia.com/gpu"


@pytest.mark.parametrize(
    ("gpus", "gpus_per_replica", "expected_per_replica"),
    [(0, 2, 2), (0, None, 0), (8, None, 0), (8, 4, 4)],
)
def test_zero_replicas_hold_no_gpus(
    make_node: Any, gpus: int, gpus_per_replica: int | None, expected_per_replica: int
) -> None:
    # replicas: 0 pauses a Deployment or a Ray worker group: no pods, so nothing is held, and
    # a replica keeps the GPUs it would get when scaled up again (decision 0111).
    stats = gpu_stats(_nodes(make_node, "mi300x", 8, 2), "amd")
    allocation = calculate_gpu_allocation(
        gpus=gpus, replicas=0, gpus_per_replica=gpus_per_replica, vendor="amd", stats=stats
    )
    assert allocation == GpuAllocation(
        gpus=0, gpus_per_replica=expected_per_replica, replicas=0, vendor="amd"
    )


def test_explicit_split_wins_over_gpus(make_node: Any) -> None:
    # The API reference: with replicas and gpusPerReplica set, gpus is recalculated from them.
    stats = gpu_stats(_nodes(make_node, "mi300x", 8, 2), "amd")
    allocation = calculate_gpu_allocation(
        gpus=8, replicas=2, gpus_per_replica=2, vendor="amd", stats=stats
    )
    assert allocation == GpuAllocation(
        gpus=4,
        gpus_per_replica=2,
        replicas=2,
        vendor="amd",
        rule="per-replica",
        adjusted_from=8,
    )


# ------------------------------------------------------------------ by workload shape (0113)


@pytest.mark.parametrize(
    ("shape", "spec", "expected"),
    [
        # A batch Job runs one pod: it gets every GPU, more than a node has included
        # (Schedulable then refuses it); upstream gave the pod 8 of the 16.
        ("batch-job", {"gpus": 16}, (16, 1, 16, "one-pod", None)),
        ("batch-job", {"gpus": 4, "replicas": 3}, (4, 1, 4, "one-pod", None)),
        # gpusPerReplica is what the one pod gets; the allocation is that one pod whatever
        # replicas says, so NUM_REPLICAS and NUM_GPUS describe it (decision 0118).
        (
            "batch-job",
            {"gpus": 16, "replicas": 1, "gpus_per_replica": 4},
            (4, 1, 4, "one-pod-per-replica", 16),
        ),
        (
            "batch-job",
            {"replicas": 3, "gpus_per_replica": 2},
            (2, 1, 2, "one-pod-per-replica", None),
        ),
        (
            "batch-job",
            {"replicas": 0, "gpus_per_replica": 2},
            (2, 1, 2, "one-pod-per-replica", None),
        ),
        ("batch-job", {"gpus": 0, "replicas": 3}, (0, 1, 0, "one-pod", None)),
        # Ray keeps the split by node size.
        ("ray", {"gpus": 16}, (16, 2, 8, "automatic", None)),
        ("ray", {"gpus": 8, "replicas": 4}, (8, 1, 8, "automatic", None)),
        ("ray", {"gpus": 30}, (28, 4, 7, "automatic", 30)),
        # gpusPerReplica with the CRD's replicas 1: gpus is recalculated as 1 x 8.
        ("ray", {"gpus": 16, "replicas": 1, "gpus_per_replica": 8}, (8, 1, 8, "per-replica", 16)),
        (
            "ray",
            {"gpus": 16, "replicas": 2, "gpus_per_replica": 8},
            (16, 2, 8, "per-replica", None),
        ),
        # A Deployment's replicas above 1 are kept and share gpus; upstream made 1 x 8.
        ("deployment", {"gpus": 8, "replicas": 4}, (8, 4, 2, "over-replicas", None)),
        ("deployment", {"gpus": 32, "replicas": 2}, (32, 2, 16, "over-replicas", None)),
        # Not divisible: rounded down here, refused by Schedulable.
        ("deployment", {"gpus": 10, "replicas": 4}, (8, 4, 2, "over-replicas", 10)),
        # replicas 1 (the default, not told apart from a given 1) keeps the split by node size.
        ("deployment", {"gpus": 16, "replicas": 1}, (16, 2, 8, "automatic", None)),
        ("deployment", {"gpus": 0, "replicas": 3}, (0, 3, 0, "automatic", None)),
        (
            "deployment",
            {"gpus": 8, "replicas": 4, "gpus_per_replica": 1},
            (4, 4, 1, "per-replica", 8),
        ),
    ],
)
def test_the_split_follows_the_workload_shape(
    make_node: Any, shape: WorkloadShape, spec: dict[str, int], expected: tuple[Any, ...]
) -> None:
    stats = gpu_stats(_nodes(make_node, "mi300x", 8, 4), "amd")
    allocation = allocate_workload_gpus(
        shape=shape,
        gpus=spec.get("gpus", 0),
        replicas=spec.get("replicas", 1),
        gpus_per_replica=spec.get("gpus_per_replica"),
        vendor="AMD",
        stats=stats,
    )
    gpus, replicas, per_replica, rule, adjusted_from = expected
    assert allocation == GpuAllocation(
        gpus=gpus,
        gpus_per_replica=per_replica,
        replicas=replicas,
        vendor="amd",
        rule=rule,
        adjusted_from=adjusted_from,
    )


def test_the_largest_node_is_in_the_stats(make_node: Any) -> None:
    nodes = _nodes(make_node, "mi300x", 4, 2) + _nodes(make_node, "mi300x", 8, 1)
    stats = gpu_stats(nodes, "amd")
    assert (stats.min_gpus_per_node, stats.max_gpus_per_node) == (4, 8)
    assert gpu_stats(nodes, "nvidia").max_gpus_per_node is None


# ------------------------------------------------------ a batch Job's parallel pods (0147)


@pytest.mark.parametrize(
    ("spec", "pods", "expected"),
    [
        # Each pod of the Job gets the pod's GPUs; the allocation counts every pod it runs
        # at once: 4 pods x 8 = 32, what Kueue reserves, and NUM_REPLICAS=4.
        ({"gpus": 8}, 4, (32, 4, 8, "one-pod", 8)),
        ({"gpus": 8, "replicas": 3}, 4, (32, 4, 8, "one-pod", 8)),
        ({"gpus": 32, "gpus_per_replica": 8}, 4, (32, 4, 8, "one-pod-per-replica", None)),
        ({"gpus": 8, "gpus_per_replica": 8}, 2, (16, 2, 8, "one-pod-per-replica", 8)),
        ({"gpus_per_replica": 2}, 3, (6, 3, 2, "one-pod-per-replica", None)),
        # No pod runs (parallelism 0): nothing is held, by request, and nothing to tell.
        ({"gpus": 8}, 0, (0, 0, 8, "one-pod", None)),
        ({"gpus": 0}, 4, (0, 4, 0, "one-pod", None)),
    ],
)
def test_a_batch_jobs_pods_at_once_are_its_replicas(
    make_node: Any, spec: dict[str, int], pods: int, expected: tuple[Any, ...]
) -> None:
    allocation = allocate_workload_gpus(
        shape="batch-job",
        gpus=spec.get("gpus", 0),
        replicas=spec.get("replicas", 1),
        gpus_per_replica=spec.get("gpus_per_replica"),
        vendor="amd",
        stats=gpu_stats(_nodes(make_node, "mi300x", 8, 4), "amd"),
        batch_job_pods=pods,
    )
    gpus, replicas, per_replica, rule, adjusted_from = expected
    assert allocation == GpuAllocation(
        gpus=gpus,
        gpus_per_replica=per_replica,
        replicas=replicas,
        vendor="amd",
        rule=rule,
        adjusted_from=adjusted_from,
    )


@pytest.mark.parametrize(
    ("job", "pods"),
    [
        (None, 1),
        ({}, 1),
        ({"spec": {"backoffLimit": 2}}, 1),
        ({"spec": {"parallelism": 4}}, 4),
        # Never more pods than completions: Kubernetes runs no more, Kueue counts no more.
        ({"spec": {"parallelism": 4, "completions": 2}}, 2),
        ({"spec": {"parallelism": 4, "completions": 100}}, 4),
        ({"spec": {"parallelism": 4, "completions": 4, "completionMode": "Indexed"}}, 4),
        ({"spec": {"completions": 5}}, 1),
        ({"spec": {"parallelism": 0}}, 0),
        # What the wire does not say as a whole number counts as absent.
        ({"spec": {"parallelism": "4"}}, 1),
        ({"spec": {"parallelism": True}}, 1),
        ({"spec": "x"}, 1),
    ],
)
def test_a_jobs_pods_at_once_are_its_parallelism_bounded_by_completions(
    job: dict[str, Any] | None, pods: int
) -> None:
    assert job_pods(job) == pods


def _given(resources: dict[str, Any], *, gpu_sidecar: bool = False) -> dict[str, Any]:
    """A given Deployment whose main (first) container has ``resources``; a second container
    asking for a GPU after it with ``gpu_sidecar``."""
    containers = [{"name": "vllm", "resources": resources}]
    if gpu_sidecar:
        containers.append({"name": "proxy", "resources": {"limits": {"amd.com/gpu": 1}}})
    return {"spec": {"template": {"spec": {"containers": containers}}}}


@pytest.mark.parametrize(
    ("deployment", "vendor", "per_pod"),
    [
        (_given({"limits": {"amd.com/gpu": 2}}), "amd", 2),
        (_given({"limits": {"amd.com/gpu": "2"}, "requests": {"amd.com/gpu": "2"}}), "amd", 2),
        (_given({"requests": {"nvidia.com/gpu": 4}}), "NVIDIA", 4),
        # The limit is what the pod gets when both are written (they must be equal anyway).
        (_given({"limits": {"amd.com/gpu": 2}, "requests": {"amd.com/gpu": 1}}), "amd", 2),
        # Not the vendor's key, not the main container's, nothing, zero, not whole: none.
        (_given({"limits": {"nvidia.com/gpu": 2}}), "amd", None),
        (_given({}, gpu_sidecar=True), "amd", None),
        (_given({"limits": {"cpu": "4"}}), "amd", None),
        (_given({"limits": {"amd.com/gpu": 0}}), "amd", None),
        (_given({"limits": {"amd.com/gpu": "500m"}}), "amd", None),
        (_given({"limits": {"amd.com/gpu": "two"}}), "amd", None),
        (_given({"limits": {"amd.com/gpu": 2}}), "intel", None),
        ({"spec": {"strategy": {"type": "Recreate"}}}, "amd", None),
        (None, "amd", None),
    ],
)
def test_a_given_deployments_own_gpus_are_its_main_containers(
    deployment: dict[str, Any] | None, vendor: str, per_pod: int | None
) -> None:
    assert template_gpus(deployment, vendor) == per_pod


@pytest.mark.parametrize(
    ("replicas", "gpus", "gpus_per_replica", "expected"),
    [
        # The spec asks for no GPUs: each replica holds the container's own 2 (decision 0163).
        (
            3,
            0,
            None,
            GpuAllocation(
                gpus=6,
                gpus_per_replica=2,
                replicas=3,
                vendor="amd",
                rule="template",
                given_template="deployment",
            ),
        ),
        (
            None,
            0,
            None,
            GpuAllocation(
                gpus=2,
                gpus_per_replica=2,
                replicas=1,
                vendor="amd",
                rule="template",
                given_template="deployment",
            ),
        ),
        (
            0,
            0,
            None,
            GpuAllocation(
                gpus=0,
                gpus_per_replica=2,
                replicas=0,
                vendor="amd",
                rule="template",
                given_template="deployment",
            ),
        ),
        # The spec asks for GPUs: its fields decide, as before.
        (
            3,
            0,
            1,
            GpuAllocation(gpus=3, gpus_per_replica=1, replicas=3, vendor="amd", rule="per-replica"),
        ),
        (
            2,
            8,
            None,
            GpuAllocation(
                gpus=8, gpus_per_replica=4, replicas=2, vendor="amd", rule="over-replicas"
            ),
        ),
    ],
)
def test_a_deployment_asking_no_gpus_of_the_spec_holds_its_templates(
    make_node: Any,
    replicas: int | None,
    gpus: int,
    gpus_per_replica: int | None,
    expected: GpuAllocation,
) -> None:
    stats = gpu_stats(_nodes(make_node, "mi300x", 8, 2), "amd")
    allocation = allocate_workload_gpus(
        shape="deployment",
        gpus=gpus,
        replicas=replicas,
        gpus_per_replica=gpus_per_replica,
        vendor="amd",
        stats=stats,
        given=_given({"limits": {"amd.com/gpu": 2}}),
    )
    assert allocation == expected


def test_a_ray_workload_does_not_read_a_templates_gpus(make_node: Any) -> None:
    # Its worker groups are sized by the spec (decisions 0146, 0154), not by rule template.
    stats = gpu_stats(_nodes(make_node, "mi300x", 8, 2), "amd")
    allocation = allocate_workload_gpus(
        shape="ray",
        gpus=0,
        replicas=1,
        gpus_per_replica=None,
        vendor="amd",
        stats=stats,
        given=_given({"limits": {"amd.com/gpu": 2}}),
    )
    assert allocation.gpus == 0


def test_a_given_jobs_own_gpus_are_its_main_containers() -> None:
    # spec.job keeps its pod template where a Deployment does (decision 0166).
    job = {"spec": {"parallelism": 2, **_given({"limits": {"amd.com/gpu": 4}})["spec"]}}
    assert template_gpus(job, "amd") == 4
    assert template_gpus({"spec": {"parallelism": 2}}, "amd") is None


@pytest.mark.parametrize(
    ("pods", "min_pods", "gpus", "gpus_per_replica", "expected"),
    [
        # The spec asks for no GPUs: each pod the Job runs at once holds the container's own
        # 2 (decision 0166), as Kueue reserves them.
        (
            3,
            None,
            0,
            None,
            GpuAllocation(
                gpus=6,
                gpus_per_replica=2,
                replicas=3,
                vendor="amd",
                rule="template",
                given_template="job",
            ),
        ),
        (
            1,
            None,
            0,
            None,
            GpuAllocation(
                gpus=2,
                gpus_per_replica=2,
                replicas=1,
                vendor="amd",
                rule="template",
                given_template="job",
            ),
        ),
        # parallelism 0 runs no pod; partial admission keeps its minimum (decision 0155).
        (
            0,
            None,
            0,
            None,
            GpuAllocation(
                gpus=0,
                gpus_per_replica=2,
                replicas=0,
                vendor="amd",
                rule="template",
                given_template="job",
            ),
        ),
        (
            4,
            2,
            0,
            None,
            GpuAllocation(
                gpus=8,
                gpus_per_replica=2,
                replicas=4,
                vendor="amd",
                rule="template",
                min_replicas=2,
                given_template="job",
            ),
        ),
        # The spec asks for GPUs: its fields decide, as before.
        (
            2,
            None,
            4,
            None,
            GpuAllocation(
                gpus=8,
                gpus_per_replica=4,
                replicas=2,
                vendor="amd",
                rule="one-pod",
                adjusted_from=4,
            ),
        ),
        (
            2,
            None,
            0,
            1,
            GpuAllocation(
                gpus=2, gpus_per_replica=1, replicas=2, vendor="amd", rule="one-pod-per-replica"
            ),
        ),
    ],
)
def test_a_batch_job_asking_no_gpus_of_the_spec_holds_its_templates_in_each_pod(
    make_node: Any,
    pods: int,
    min_pods: int | None,
    gpus: int,
    gpus_per_replica: int | None,
    expected: GpuAllocation,
) -> None:
    stats = gpu_stats(_nodes(make_node, "mi300x", 8, 2), "amd")
    allocation = allocate_workload_gpus(
        shape="batch-job",
        gpus=gpus,
        replicas=1,
        gpus_per_replica=gpus_per_replica,
        vendor="amd",
        stats=stats,
        batch_job_pods=pods,
        batch_job_min_pods=min_pods,
        given=_given({"limits": {"amd.com/gpu": 2}}),
    )
    assert allocation == expected
