"""KaiwoJob with ``ray: true`` (or ``rayJob`` given) -> a ray.io/v1 RayJob.

Kueue's queue labels go on the RayJob only, not on the head pod template (upstream shared one
label map between both, so head pods also carried the queue label by accident). A
``backoffLimit`` the user gives is kept.
"""

from __future__ import annotations

from typing import Any

from kaiwo_planner.domain.children.entrypoint import ray_entrypoint
from kaiwo_planner.domain.children.labels import inherited_labels, queue_labels
from kaiwo_planner.domain.children.naming import main_child_name
from kaiwo_planner.domain.children.ownership import child_metadata
from kaiwo_planner.domain.children.pod_template import PodAdditions
from kaiwo_planner.domain.children.ray_cluster import (
    complete_ray_cluster_spec,
    default_ray_cluster_spec,
)
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation
from kaiwo_planner.domain.settings.workload_inputs import ChildDefaults, WorkloadInputs
from kaiwo_planner.domain.state.json_trees import copy_tree

RAY_API_VERSION = "ray.io/v1"


def build_ray_job(
    inputs: WorkloadInputs,
    *,
    allocation: GpuAllocation,
    defaults: ChildDefaults,
    additions: PodAdditions,
) -> dict[str, Any]:
    """The RayJob: ``spec.rayJob`` (or a default cluster) completed with the workload's settings."""
    generated = inputs.ray_job is None
    if inputs.ray_job is None:
        spec: dict[str, Any] = {
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": default_ray_cluster_spec(
                defaults=defaults, dangerous=inputs.dangerous
            ),
        }
    else:
        spec = copy_tree(dict(inputs.ray_job.get("spec") or {}))
    if inputs.entrypoint:
        spec["entrypoint"] = ray_entrypoint(inputs.entrypoint)
    if "rayClusterSpec" in spec:
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
