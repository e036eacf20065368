"""KaiwoJob with ``ray: true`` (or ``rayJob`` given) -> a ray.io/v1 RayJob.

Kueue's queue labels go on the RayJob only, not on the head pod template (upstream shared one
label map between both, so head pods also carried the queue label by accident). A
``backoffLimit`` the user gives is kept.

A given ``rayJob.spec`` is completed where Kueue or KubeRay could not run it as given
(decision 0151): without ``shutdownAfterJobFinishes`` it gets ``true``, as upstream's default
spec has (Kueue's RayJob webhook refuses a queued RayJob that keeps its cluster; one the user
sets ``false`` is refused by the KaiwoJob's own validation, naming the field); with neither
``rayClusterSpec`` nor ``clusterSelector`` (``rayJob: {}``) it gets Kaiwo's default cluster, as
``ray: true`` does (KubeRay cannot run a RayJob with no cluster). A RayJob sent to an existing
cluster (``clusterSelector``) is left as given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kaiwo_planner.domain.children.entrypoint import ray_entrypoint
from kaiwo_planner.domain.children.labels import inherited_labels, queue_labels
from kaiwo_planner.domain.children.naming import main_child_name
from kaiwo_planner.domain.children.ownership import child_metadata
from kaiwo_planner.domain.children.pod_template import PodAdditions
from kaiwo_planner.domain.children.ray_cluster import (
    KAIWO_CLUSTER_WORDS,
    complete_ray_cluster_spec,
    default_ray_cluster_spec,
)
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation
from kaiwo_planner.domain.settings.workload_inputs import ChildDefaults, WorkloadInputs
from kaiwo_planner.domain.state.json_trees import copy_tree

RAY_API_VERSION = "ray.io/v1"


def kaiwo_cluster_note(ray_job: Mapping[str, Any] | None) -> str:
    """The words the Schedulable condition adds when a given ``rayJob`` names no Ray cluster
    and runs Kaiwo's (decision 0151); empty otherwise."""
    if ray_job is None:
        return ""
    spec = ray_job.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    if spec.get("clusterSelector") or spec.get("rayClusterSpec") is not None:
        return ""
    return (
        "spec.rayJob.spec gives no Ray cluster (neither rayClusterSpec nor clusterSelector), "
        f"so the RayJob runs {KAIWO_CLUSTER_WORDS}"
    )


def build_ray_job(
    inputs: WorkloadInputs,
    *,
    allocation: GpuAllocation,
    defaults: ChildDefaults,
    additions: PodAdditions,
) -> dict[str, Any]:
    """The RayJob: ``spec.rayJob`` (or a default cluster) completed with the workload's settings."""
    spec: dict[str, Any] = (
        {} if inputs.ray_job is None else copy_tree(dict(inputs.ray_job.get("spec") or {}))
    )
    generated = False
    if not spec.get("clusterSelector"):
        if spec.get("shutdownAfterJobFinishes") is None:
            spec["shutdownAfterJobFinishes"] = True
        if spec.get("rayClusterSpec") is None:
            generated = True
            spec["rayClusterSpec"] = default_ray_cluster_spec(
                defaults=defaults, dangerous=inputs.dangerous
            )
    if inputs.entrypoint:
        spec["entrypoint"] = ray_entrypoint(inputs.entrypoint)
    if isinstance(spec.get("rayClusterSpec"), Mapping):
        spec["rayClusterSpec"] = complete_ray_cluster_spec(
            spec["rayClusterSpec"],
            inputs,
            allocation=allocation,
            defaults=defaults,
            additions=additions,
            generated=generated,
        )
    spec["suspend"] = True
    labels = {
        **inherited_labels({}, inputs.identity),
        **queue_labels(inputs.queue_name, inputs.kueue_priority_class),
    }
    return {
        "apiVersion": RAY_API_VERSION,
        "kind": "RayJob",
        "metadata": child_metadata(
            inputs.identity, name=main_child_name(inputs.identity.name), labels=labels
        ),
        "spec": spec,
    }
