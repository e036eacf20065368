"""KaiwoJob with ``ray: true`` (or ``rayJob`` given) -> a ray.io/v1 RayJob.

Kueue's queue labels go on the RayJob only, not on the head pod template (upstream shared one
label map between both, so head pods also carried the queue label by accident). A
``backoffLimit`` the user gives is kept.

A given ``rayJob.spec`` is completed where Kueue or KubeRay could not run it as given
(decision 0151): without ``shutdownAfterJobFinishes`` it gets ``true``, as upstream's default
spec has (Kueue's RayJob webhook refuses a queued RayJob that keeps its cluster; one the user
sets ``false`` is refused by the KaiwoJob's own validation, naming the field); with neither
``rayClusterSpec`` nor ``clusterSelector`` (``rayJob: {}``) it gets Kaiwo's default cluster, as
``ray: true`` does (KubeRay cannot run a RayJob with no cluster).

A RayJob sent to an existing cluster (``clusterSelector``, decision 0156) gets no cluster and no
``shutdownAfterJobFinishes``, and is neither queued nor suspended: Kueue does not manage a RayJob
on an existing cluster (the cluster's pods are queued with the cluster; Kueue's controller skips
such a RayJob), but its webhook still suspends one that carries a queue label, and KubeRay
refuses a suspended RayJob in that mode. So it carries no Kueue label and ``suspend: false``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwojob import (
    RAY_CLUSTER_SELECTOR_KEY,
    on_existing_ray_cluster,
)

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
    and runs Kaiwo's (decision 0151), or runs on an existing one (decision 0156); empty
    otherwise."""
    if ray_job is None:
        return ""
    spec = ray_job.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    if on_existing_ray_cluster(ray_job):
        selector = spec.get("clusterSelector")
        named = selector.get(RAY_CLUSTER_SELECTOR_KEY) if isinstance(selector, Mapping) else None
        return (
            "spec.rayJob.spec.clusterSelector sends the RayJob to the existing Ray cluster "
            f"{named}, whose pods run it: the workload holds no GPUs of its own (spec.gpus, "
            "spec.gpusPerReplica and spec.replicas size nothing) and is not queued in Kueue, "
            "which queues the cluster's pods with the cluster"
        )
    if spec.get("rayClusterSpec") is not None:
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
    existing = on_existing_ray_cluster(inputs.ray_job)
    if not existing:
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
    # Kueue unsuspends what it admits; a RayJob on an existing cluster is not Kueue's, and
    # KubeRay refuses to run one suspended (decision 0156).
    spec["suspend"] = not existing
    labels = inherited_labels({}, inputs.identity)
    if not existing:
        labels |= queue_labels(inputs.queue_name, inputs.kueue_priority_class)
    return {
        "apiVersion": RAY_API_VERSION,
        "kind": "RayJob",
        "metadata": child_metadata(
            inputs.identity, name=main_child_name(inputs.identity.name), labels=labels
        ),
        "spec": spec,
    }
