"""A running workload keeps the split by node size its main child was made with (decision
0137): read back from the child (the ``spec.gpus`` it was split from, its replicas and GPU
limits) while the workload runs and its spec asks for the same GPUs; otherwise the nodes of
now split it. Expected values by hand."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_planner.domain.scheduling.gpu_allocation import (
    SPLIT_MADE_FROM_ANNOTATION,
    GpuAllocation,
    GpuStats,
    allocated_gpus,
    child_runs,
    child_split,
    keep_running_split,
    running_child_among,
    split_made_from,
)

# A 4-GPU node joined two 8-GPU nodes: the nodes of now split 16 into 4 x 4.
SPLIT_BY_SMALL_NODE = GpuAllocation(gpus=16, gpus_per_replica=4, replicas=4, vendor="amd")
MIXED_NODES = GpuStats(
    vendor="amd",
    total_gpus=20,
    min_gpus_per_node=4,
    total_allocatable_gpus=20,
    min_allocatable_gpus_per_node=4,
    max_gpus_per_node=8,
)


def pod_template(gpus: int | str, key: str = "amd.com/gpu") -> dict[str, Any]:
    return {
        "spec": {
            "containers": [
                {"name": "sidecar", "resources": {"limits": {"cpu": "1"}}},
                {"name": "main", "resources": {"limits": {key: gpus, "memory": "8Gi"}}},
            ]
        }
    }


def deployment(
    replicas: int = 2, gpus: int | str = "8", *, made_from: str | None = "16", ready: int = 2
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "chat",
        "namespace": "team-a",
        "ownerReferences": [{"uid": "svc-uid", "controller": True}],
    }
    if made_from is not None:
        meta["annotations"] = {SPLIT_MADE_FROM_ANNOTATION: made_from}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {"replicas": replicas, "template": pod_template(gpus)},
        "status": {"readyReplicas": ready},
    }


def ray_cluster(replicas: int, gpus: int) -> dict[str, Any]:
    return {
        "headGroupSpec": {"template": pod_template(0)},
        "workerGroupSpecs": [{"replicas": replicas, "template": pod_template(gpus)}],
    }


def ray_job(*, suspend: bool) -> dict[str, Any]:
    return {
        "kind": "RayJob",
        "metadata": {"annotations": {SPLIT_MADE_FROM_ANNOTATION: "16"}},
        "spec": {"suspend": suspend, "rayClusterSpec": ray_cluster(2, 8)},
    }


def app_wrapper() -> dict[str, Any]:
    ray_service = {"kind": "RayService", "spec": {"rayClusterConfig": ray_cluster(2, 8)}}
    return {
        "kind": "AppWrapper",
        "metadata": {"annotations": {SPLIT_MADE_FROM_ANNOTATION: "16"}},
        "spec": {"suspend": False, "components": [{"template": ray_service}]},
    }


# ------------------------------------------------------------------ the split kept


def test_a_running_deployment_keeps_the_split_it_was_made_with() -> None:
    kept = keep_running_split(SPLIT_BY_SMALL_NODE, asked=16, child=deployment(), runs=True)
    assert kept == GpuAllocation(gpus=16, gpus_per_replica=8, replicas=2, vendor="amd", rule="kept")


def test_a_kept_split_that_rounded_down_still_says_what_was_asked() -> None:
    # 30 on 8-GPU nodes was 4 x 7; a 4-GPU node joined, and the nodes would make 8 x 3 = 24.
    by_nodes = GpuAllocation(
        gpus=24, gpus_per_replica=3, replicas=8, vendor="amd", adjusted_from=30
    )
    kept = keep_running_split(by_nodes, asked=30, child=deployment(4, 7, made_from="30"), runs=True)
    assert kept == GpuAllocation(
        gpus=28, gpus_per_replica=7, replicas=4, vendor="amd", rule="kept", adjusted_from=30
    )


@pytest.mark.parametrize(
    "child",
    [ray_job(suspend=False), app_wrapper()],
    ids=["RayJob", "AppWrapper"],
)
def test_the_worker_groups_of_a_ray_child_are_its_split(child: dict[str, Any]) -> None:
    assert child_split(child, "amd.com/gpu") == (2, 8)
    kept = keep_running_split(SPLIT_BY_SMALL_NODE, asked=16, child=child, runs=True)
    assert (kept.replicas, kept.gpus_per_replica, kept.rule) == (2, 8, "kept")


def test_the_same_split_as_the_nodes_make_stays_automatic() -> None:
    by_nodes = GpuAllocation(gpus=16, gpus_per_replica=8, replicas=2, vendor="amd")
    assert keep_running_split(by_nodes, asked=16, child=deployment(), runs=True) is by_nodes


# ------------------------------------------------------------------ the nodes split it


@pytest.mark.parametrize(
    ("child", "asked", "runs"),
    [
        # Not running yet (waiting for admission): nothing is lost placing it as nodes are.
        (deployment(), 16, False),
        # spec.gpus edited since the child was made (16 -> 12): split anew.
        (deployment(), 12, True),
        # Made before this decision (no mark): as before, the nodes split it.
        (deployment(made_from=None), 16, True),
        # Scaled by hand to 3 x 8: no split of 16, so the plan puts it back.
        (deployment(3, 8), 16, True),
        # Another vendor's GPUs (spec.gpuVendor edited): no limit of amd.com/gpu.
        (
            {
                **deployment(),
                "spec": {"replicas": 2, "template": pod_template(8, "nvidia.com/gpu")},
            },
            16,
            True,
        ),
        # No child yet.
        (None, 16, True),
    ],
    ids=["not-running", "gpus-edited", "unmarked", "scaled-by-hand", "other-vendor", "no-child"],
)
def test_otherwise_the_nodes_of_now_split_it(
    child: dict[str, Any] | None, asked: int, runs: bool
) -> None:
    assert keep_running_split(SPLIT_BY_SMALL_NODE, asked=asked, child=child, runs=runs) is (
        SPLIT_BY_SMALL_NODE
    )


def test_a_paused_workload_is_not_given_back_the_pods_of_its_child() -> None:
    # replicas: 0 on a running service: the Deployment goes to 0, not back to 2 x 8.
    paused = GpuAllocation(gpus=0, gpus_per_replica=0, replicas=0, vendor="amd")
    assert keep_running_split(paused, asked=16, child=deployment(), runs=True) is paused


def test_a_split_the_spec_fixes_is_never_read_from_the_child() -> None:
    given = GpuAllocation(gpus=16, gpus_per_replica=4, replicas=4, vendor="amd", rule="per-replica")
    assert keep_running_split(given, asked=16, child=deployment(), runs=True) is given


# ------------------------------------------------------------------ the mark and running


def test_the_mark_is_put_on_a_split_by_node_size_only() -> None:
    assert split_made_from(SPLIT_BY_SMALL_NODE, 16) == {SPLIT_MADE_FROM_ANNOTATION: "16"}
    kept = GpuAllocation(gpus=16, gpus_per_replica=8, replicas=2, vendor="amd", rule="kept")
    assert split_made_from(kept, 16) == {SPLIT_MADE_FROM_ANNOTATION: "16"}
    over = GpuAllocation(gpus=8, gpus_per_replica=2, replicas=4, vendor="amd", rule="over-replicas")
    assert split_made_from(over, 8) == {}
    paused = GpuAllocation(gpus=0, gpus_per_replica=8, replicas=0, vendor="amd")
    assert split_made_from(paused, 16) == {}


def test_what_counts_as_running() -> None:
    assert child_runs(deployment(ready=1))
    assert not child_runs(deployment(ready=0))
    assert not child_runs({"kind": "Deployment", "spec": {}})
    assert child_runs(ray_job(suspend=False))
    assert not child_runs(ray_job(suspend=True))
    assert not child_runs(None)


def test_the_limit_is_read_as_a_whole_number_or_not_at_all() -> None:
    assert child_split(deployment(2, 8), "amd.com/gpu") == (2, 8)
    assert child_split(deployment(2, "8"), "amd.com/gpu") == (2, 8)
    assert child_split(deployment(2, "8Ki"), "amd.com/gpu") is None
    assert child_split({"kind": "Job", "spec": {}}, "amd.com/gpu") is None


# ------------------------------------------------------------------ counted as it runs


def service(gpus: int = 16) -> dict[str, Any]:
    return {
        "kind": "KaiwoService",
        "metadata": {"name": "chat", "namespace": "team-a", "uid": "svc-uid"},
        "spec": {"gpus": gpus, "gpuVendor": "amd"},
    }


def test_a_running_workload_is_counted_by_its_childs_split() -> None:
    # 30 on the mixed nodes is 8 x 3 = 24; the running child holds 4 x 7 = 28.
    running = deployment(4, 7, made_from="30")
    assert allocated_gpus(service(30), lambda _: MIXED_NODES) == 24
    assert allocated_gpus(service(30), lambda _: MIXED_NODES, running_child=running) == 28


def test_the_running_child_is_found_among_listed_children_by_owner_kind_and_name() -> None:
    mine = deployment()
    others = [
        {**deployment(), "metadata": {**mine["metadata"], "ownerReferences": [{"uid": "x"}]}},
        {**deployment(), "kind": "StatefulSet"},
    ]
    assert running_child_among([*others, mine], service()) is mine
    assert running_child_among(others, service()) is None
    assert running_child_among([deployment(ready=0)], service()) is None
