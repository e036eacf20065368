"""The GPUs a workload holds, as preemption and the CLI count them: the total its allocation
gives its pods, worked out by the planner's own rule on the nodes' size (decisions 0111, 0113
and 0118). Expected values by hand, for four 8-GPU AMD nodes unless said otherwise."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwojob import KaiwoJobSpec
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoservice import KaiwoServiceSpec
from kaiwo_planner.domain.scheduling.gpu_allocation import (
    GpuStats,
    allocated_gpus,
    gpu_stats,
    no_nodes,
    released_pods,
    released_pods_among,
    running_child_among,
    wire_workload_shape,
)
from kaiwo_planner.domain.state.nodes import NodeInfo

EIGHT_GPU_NODES = GpuStats(
    vendor="amd",
    total_gpus=32,
    min_gpus_per_node=8,
    total_allocatable_gpus=32,
    min_allocatable_gpus_per_node=8,
    max_gpus_per_node=8,
)


def eight_gpu_nodes(vendor: str) -> GpuStats:
    return EIGHT_GPU_NODES if vendor == "amd" else no_nodes(vendor)


def workload(kind: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": kind, "spec": spec}


def deployment(**resources: dict[str, Any]) -> dict[str, Any]:
    """A given Deployment whose main container has ``resources``, and a sidecar with none."""
    containers = [{"name": "vllm", "resources": resources}, {"name": "proxy"}]
    return {"spec": {"template": {"spec": {"containers": containers}}}}


def job(parallelism: int, *, completions: int | None = None, **resources: Any) -> dict[str, Any]:
    """A given batch Job running ``parallelism`` pods whose main container has ``resources``,
    and a sidecar with none."""
    spec: dict[str, Any] = {"parallelism": parallelism, **deployment(**resources)["spec"]}
    if completions is not None:
        spec["completions"] = completions
    return {"spec": spec}


@pytest.mark.parametrize(
    ("obj", "held"),
    [
        # A batch Job runs one pod: all of gpus, or gpusPerReplica; replicas does not count.
        (workload("KaiwoJob", gpus=16), 16),
        (workload("KaiwoJob", gpus=16, replicas=2), 16),
        (workload("KaiwoJob", replicas=2, gpusPerReplica=4), 4),
        (workload("KaiwoJob", replicas=0, gpusPerReplica=4), 4),
        (workload("KaiwoJob", gpus=16, replicas=1, gpusPerReplica=4), 4),
        # ...but every pod its spec.job runs at once holds them (decision 0147): 4 x 8.
        (workload("KaiwoJob", gpus=8, job={"spec": {"parallelism": 4}}), 32),
        (workload("KaiwoJob", gpusPerReplica=8, job={"spec": {"parallelism": 2}}), 16),
        (workload("KaiwoJob", gpus=8, job={"spec": {"parallelism": 4, "completions": 3}}), 24),
        (workload("KaiwoJob", gpus=8, job={"spec": {"parallelism": 0}}), 0),
        # A Ray job runs no batch Job: its spec.job does not count.
        (workload("KaiwoJob", ray=True, gpus=8, job={"spec": {"parallelism": 4}}), 8),
        # A Ray job: its worker groups.
        (workload("KaiwoJob", ray=True, replicas=2, gpusPerReplica=4), 8),
        (workload("KaiwoJob", rayJob={}, replicas=3, gpusPerReplica=2), 6),
        (workload("KaiwoJob", ray=True, gpus=16), 16),
        # The split by node size rounds down: 30 on 8-GPU nodes is 4 x 7 = 28 (upstream's
        # preemption test asks for 30; counting 30 claimed GPUs no pod holds).
        (workload("KaiwoJob", ray=True, gpus=30), 28),
        (workload("KaiwoJob", ray=True, gpus=30, replicas=1), 28),
        (workload("KaiwoService", gpus=30, replicas=1), 28),
        (workload("KaiwoService", rayService={}, gpus=18), 18),
        # gpusPerReplica recalculates gpus: the CRD's replicas 1 with 8 each is 8, not 16.
        (workload("KaiwoJob", ray=True, gpus=16, replicas=1, gpusPerReplica=8), 8),
        # A service: its replicas; paused (replicas 0), none.
        (workload("KaiwoService", replicas=4, gpus=8), 8),
        (workload("KaiwoService", replicas=3, gpusPerReplica=2), 6),
        (workload("KaiwoService", replicas=0, gpus=8), 0),
        (workload("KaiwoService", replicas=0, gpusPerReplica=2), 0),
        (workload("KaiwoService", ray=True, gpus=4), 4),
        (workload("KaiwoService"), 0),
        # A given Deployment that asks for its GPUs itself, the spec asking for none: each of
        # its replicas holds them, as Kueue reserves them (decision 0163).
        (workload("KaiwoService", replicas=2, deployment=deployment(limits={"amd.com/gpu": 2})), 4),
        (workload("KaiwoService", deployment=deployment(requests={"amd.com/gpu": "4"})), 4),
        (workload("KaiwoService", replicas=0, deployment=deployment(limits={"amd.com/gpu": 2})), 0),
        # ...but what the spec asks for decides when it asks for any.
        (workload("KaiwoService", gpus=1, deployment=deployment(limits={"amd.com/gpu": 2})), 1),
        # Another vendor's key, or a sidecar's, is not the main container's GPUs of the vendor.
        (workload("KaiwoService", deployment=deployment(limits={"nvidia.com/gpu": 2})), 0),
        # A given batch Job that asks for its GPUs itself, the spec asking for none: each pod
        # it runs at once holds them, as Kueue reserves them (decision 0166).
        (workload("KaiwoJob", job=job(2, limits={"amd.com/gpu": 4})), 8),
        (workload("KaiwoJob", job=job(1, requests={"amd.com/gpu": "8"})), 8),
        (workload("KaiwoJob", job=job(0, limits={"amd.com/gpu": 4})), 0),
        (workload("KaiwoJob", job=job(4, completions=3, limits={"amd.com/gpu": 2})), 6),
        # ...but what the spec asks for decides when it asks for any.
        (workload("KaiwoJob", gpus=1, job=job(2, limits={"amd.com/gpu": 4})), 2),
        (workload("KaiwoJob", job=job(2, limits={"nvidia.com/gpu": 4})), 0),
        # A Ray job runs no batch Job: its spec.job's container holds nothing.
        (workload("KaiwoJob", ray=True, job=job(2, limits={"amd.com/gpu": 4})), 0),
        # Another vendor's nodes do not count: no NVIDIA node, one replica with all 30.
        (workload("KaiwoJob", ray=True, gpus=30, gpuVendor="nvidia"), 30),
        # What the wire does not say as a whole number counts as absent.
        (workload("KaiwoService", gpus="8"), 0),
        (workload("KaiwoService", gpus=True), 0),
        ({"kind": "KaiwoService"}, 0),
    ],
)
def test_a_workload_holds_what_its_allocation_gives_its_pods(
    obj: dict[str, Any], held: int
) -> None:
    assert allocated_gpus(obj, eight_gpu_nodes) == held


def test_the_nodes_decide_the_rounding(make_node: Any) -> None:
    # 30 GPUs on 4-GPU nodes: 8 replicas of 3 (24 held); on 6-GPU nodes 5 of 6 (30 held).
    small = [NodeInfo.from_wire(make_node(f"n{i}", gpu="mi300x", gpus=4)) for i in range(8)]
    larger = [NodeInfo.from_wire(make_node(f"n{i}", gpu="mi300x", gpus=6)) for i in range(5)]
    obj = workload("KaiwoJob", ray=True, gpus=30)
    assert allocated_gpus(obj, lambda vendor: gpu_stats(small, vendor)) == 24
    assert allocated_gpus(obj, lambda vendor: gpu_stats(larger, vendor)) == 30


def test_without_nodes_a_workload_holds_what_it_asks_for() -> None:
    # kaiwo plan's assumed nodes are sized from this, before any node exists.
    assert allocated_gpus(workload("KaiwoJob", ray=True, gpus=30), no_nodes) == 30
    assert allocated_gpus(workload("KaiwoJob", replicas=3, gpusPerReplica=2), no_nodes) == 2


@pytest.mark.parametrize(
    ("kind", "spec", "shape"),
    [
        ("KaiwoJob", {}, "batch-job"),
        ("KaiwoJob", {"ray": True}, "ray"),
        ("KaiwoJob", {"rayJob": {}}, "ray"),
        ("KaiwoJob", {"ray": False, "job": {}}, "batch-job"),
        ("KaiwoService", {}, "deployment"),
        ("KaiwoService", {"ray": True}, "ray"),
        ("KaiwoService", {"rayService": {}}, "ray"),
        ("KaiwoService", {"deployment": {}}, "deployment"),
    ],
)
def test_the_wire_shape_is_the_models(kind: str, spec: dict[str, Any], shape: str) -> None:
    # The planner reads the parsed models (is_ray_job / is_ray_service), preemption the wire.
    assert wire_workload_shape(kind, spec) == shape
    if kind == "KaiwoJob":
        is_ray = KaiwoJobSpec.model_validate(spec).is_ray_job
    else:
        is_ray = KaiwoServiceSpec.model_validate(spec).is_ray_service
    assert is_ray == (shape == "ray")


def kueue_workload(*, admitted: bool, reclaimable: list[dict[str, Any]] | None) -> dict[str, Any]:
    """A Kueue Workload of a Job, as Kueue 0.17 writes its status (decision 0152)."""
    status: dict[str, Any] = {}
    if admitted:
        status["admission"] = {"podSetAssignments": [{"name": "main", "count": 2}]}
    if reclaimable is not None:
        status["reclaimablePods"] = reclaimable
    return {"metadata": {"ownerReferences": [{"uid": "sweep-job-uid"}]}, "status": status}


def test_the_pods_whose_quota_kueue_released_are_its_reclaimable_pods() -> None:
    """Decision 0152: what Kueue subtracts from the ClusterQueue's usage, on a Workload
    that holds quota; nothing before it writes them, or once it holds no quota."""
    one = [{"name": "main", "count": 1}]
    assert released_pods([kueue_workload(admitted=True, reclaimable=one)]) == 1
    assert released_pods([kueue_workload(admitted=True, reclaimable=None)]) == 0
    assert released_pods([kueue_workload(admitted=False, reclaimable=one)]) == 0
    assert released_pods([kueue_workload(admitted=True, reclaimable=[{"name": "main"}])]) == 0
    assert released_pods([]) == 0


@pytest.mark.parametrize(
    ("obj", "released", "held"),
    [
        # 2 pods x 8 at once, 3 completions: after the first 2, one pod is left (1 released).
        (workload("KaiwoJob", gpus=8, job={"spec": {"parallelism": 2, "completions": 3}}), 1, 8),
        (workload("KaiwoJob", gpus=8, job={"spec": {"parallelism": 4}}), 3, 8),
        (workload("KaiwoJob", gpus=8, job={"spec": {"parallelism": 2}}), 0, 16),
        # Never below none.
        (workload("KaiwoJob", gpus=8, job={"spec": {"parallelism": 2}}), 5, 0),
        # The template's own GPUs per pod (decision 0166): 1 of 2 pods of 4 released.
        (workload("KaiwoJob", job=job(2, completions=3, limits={"amd.com/gpu": 4})), 1, 4),
        # A Ray job or a service runs no batch Job: nothing of it is released so.
        (workload("KaiwoJob", ray=True, gpus=8, job={"spec": {"parallelism": 4}}), 1, 8),
        (workload("KaiwoService", replicas=2, gpusPerReplica=4), 1, 8),
    ],
)
def test_a_running_job_holds_none_of_the_pods_kueue_released(
    obj: dict[str, Any], released: int, held: int
) -> None:
    assert allocated_gpus(obj, eight_gpu_nodes, released=released) == held


def test_a_listed_jobs_kueue_workload_tells_its_released_pods() -> None:
    """``kaiwo gpus`` lists the Jobs and the Kueue Workloads: the KaiwoJob's own Job (its
    name, owned by it) finds its Workload; another's Workload, or none listed, releases
    nothing; a Job of one pod at once is not looked at."""
    sweep = workload("KaiwoJob", gpus=8, job={"spec": {"parallelism": 2, "completions": 3}})
    sweep["metadata"] = {"name": "sweep", "uid": "sweep-uid"}
    job = {
        "kind": "Job",
        "metadata": {
            "name": "sweep",
            "uid": "sweep-job-uid",
            "ownerReferences": [{"uid": "sweep-uid"}],
        },
    }
    released = kueue_workload(admitted=True, reclaimable=[{"name": "main", "count": 1}])
    assert released_pods_among([job], [released], sweep) == 1
    assert released_pods_among([], [released], sweep) == 0
    others = {**job, "metadata": {**job["metadata"], "ownerReferences": [{"uid": "other"}]}}
    assert released_pods_among([others], [released], sweep) == 0
    single = {**sweep, "spec": {"gpus": 8}}
    assert released_pods_among([job], [released], single) == 0


SWEEP = {
    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoJob",
    "metadata": {"name": "sweep", "namespace": "ml", "uid": "uid-sweep"},
    "spec": {
        "gpus": 4,
        "job": {
            "metadata": {"annotations": {"kueue.x-k8s.io/job-min-parallelism": "2"}},
            "spec": {"parallelism": 4, "completions": 4},
        },
    },
}


def sweep_job(*, parallelism: int, suspend: bool, annotated: bool = True) -> dict[str, Any]:
    """The batch Job of :data:`SWEEP` as observed."""
    metadata: dict[str, Any] = {
        "name": "sweep",
        "namespace": "ml",
        "ownerReferences": [{"kind": "KaiwoJob", "name": "sweep", "uid": "uid-sweep"}],
    }
    if annotated:
        metadata["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": "2"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {"parallelism": parallelism, "completions": 4, "suspend": suspend},
    }


@pytest.mark.parametrize(
    ("child", "held"),
    [
        # Kueue admitted 2 of the 4 pods: the running Job holds 2 x 4 (decision 0153).
        (sweep_job(parallelism=2, suspend=False), 8),
        # Admitted whole, or waiting (its own count back): what spec.job runs, 4 x 4.
        (sweep_job(parallelism=4, suspend=False), 16),
        (sweep_job(parallelism=4, suspend=True), 16),
        # Not annotated (a hand edit Kueue did not make): the spec's count (decision 0147).
        (sweep_job(parallelism=2, suspend=False, annotated=False), 16),
    ],
    ids=["partial", "whole", "waiting", "unannotated"],
)
def test_a_partially_admitted_job_holds_the_pods_kueue_admitted(
    child: dict[str, Any], held: int
) -> None:
    """Preemption (of both kinds) reads a running workload's main child: a sweep Kueue
    admitted with 2 of its 4 pods frees 8 GPUs, not 16. Before, the Job was never read, and
    the victim counted as 16 left a waiter of 16 with one victim where it needed two."""
    running = running_child_among([child], SWEEP)
    assert allocated_gpus(SWEEP, eight_gpu_nodes, running_child=running) == held
