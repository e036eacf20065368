"""KaiwoService with ``ray: true`` (or ``rayService`` given) -> a RayService inside an AppWrapper.

Kueue admits the AppWrapper (it has no RayService integration); the AppWrapper controller then
creates the RayService. Every worker group is declared as a pod set (upstream declared only the
first), so Kueue reserves quota for all of them, a multi-host group's as ``replicas x
numOfHosts`` pods (KubeRay's pods of the group; Kueue counts a RayJob's group so, decision
0151). The pod-set list is ``podSets`` on the wire.

A given ``rayService`` whose spec has no ``rayClusterConfig`` (``rayService: {}``, or a spec
with only ``serveConfigV2``) gets Kaiwo's default cluster, as ``ray: true`` does (decision
0154): KubeRay cannot run a RayService without a cluster, and a RayService has no
``clusterSelector`` to run on one that exists. Upstream kept the given spec as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kaiwo_planner.domain.children.labels import inherited_labels, queue_labels
from kaiwo_planner.domain.children.naming import main_child_name
from kaiwo_planner.domain.children.ownership import child_metadata
from kaiwo_planner.domain.children.pod_template import PodAdditions
from kaiwo_planner.domain.children.ray_cluster import (
    KAIWO_CLUSTER_WORDS,
    complete_ray_cluster_spec,
    default_ray_cluster_spec,
)
from kaiwo_planner.domain.children.ray_job import RAY_API_VERSION
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation, worker_group_hosts
from kaiwo_planner.domain.settings.workload_inputs import ChildDefaults, WorkloadInputs
from kaiwo_planner.domain.state.json_trees import copy_tree

APPWRAPPER_API_VERSION = "workload.codeflare.dev/v1beta2"
SERVE_PORT = 8000


def serve_service_name(workload_name: str) -> str:
    """The Service KubeRay creates for Ray Serve traffic of RayService ``workload_name``."""
    return f"{workload_name}-serve-svc"


def kaiwo_service_cluster_note(ray_service: Mapping[str, Any] | None) -> str:
    """The words the Schedulable condition adds when a given ``rayService`` names no Ray
    cluster and runs Kaiwo's (decision 0154); empty otherwise."""
    if ray_service is None:
        return ""
    spec = ray_service.get("spec")
    if isinstance(spec, Mapping) and spec.get("rayClusterConfig") is not None:
        return ""
    return (
        "spec.rayService.spec gives no Ray cluster (no rayClusterConfig), so the RayService "
        f"runs {KAIWO_CLUSTER_WORDS}"
    )


def build_ray_service(
    inputs: WorkloadInputs,
    *,
    allocation: GpuAllocation,
    defaults: ChildDefaults,
    additions: PodAdditions,
) -> dict[str, Any]:
    """The RayService (not applied directly: it goes into the AppWrapper): ``spec.rayService``
    (or a default cluster) completed with the workload's settings."""
    spec: dict[str, Any] = (
        {} if inputs.ray_service is None else copy_tree(dict(inputs.ray_service.get("spec") or {}))
    )
    generated = spec.get("rayClusterConfig") is None
    if generated:
        spec["rayClusterConfig"] = default_ray_cluster_spec(
            defaults=defaults, dangerous=inputs.dangerous
        )
    if inputs.serve_config_v2:
        spec["serveConfigV2"] = inputs.serve_config_v2
    if isinstance(spec.get("rayClusterConfig"), Mapping):
        spec["rayClusterConfig"] = complete_ray_cluster_spec(
            spec["rayClusterConfig"],
            inputs,
            allocation=allocation,
            defaults=defaults,
            additions=additions,
            generated=generated,
        )
    return {
        "apiVersion": RAY_API_VERSION,
        "kind": "RayService",
        "metadata": {
            "name": main_child_name(inputs.identity.name),
            "namespace": inputs.identity.namespace,
            "labels": inherited_labels({}, inputs.identity),
        },
        "spec": spec,
    }


def _pod_sets(ray_service: dict[str, Any]) -> list[dict[str, Any]]:
    cluster = ray_service["spec"].get("rayClusterConfig") or {}
    prefix = "template.spec.rayClusterConfig"
    pod_sets: list[dict[str, Any]] = []
    if "headGroupSpec" in cluster:
        pod_sets.append({"replicas": 1, "path": f"{prefix}.headGroupSpec.template"})
    for index, group in enumerate(cluster.get("workerGroupSpecs") or []):
        pod_sets.append(
            {
                "replicas": group.get("replicas", 1) * worker_group_hosts(group),
                "path": f"{prefix}.workerGroupSpecs[{index}].template",
            }
        )
    return pod_sets


def build_app_wrapper(inputs: WorkloadInputs, ray_service: dict[str, Any]) -> dict[str, Any]:
    """The AppWrapper Kueue admits, wrapping ``ray_service`` (taken over, not copied: the
    RayService exists only inside the AppWrapper)."""
    labels = {
        **inherited_labels({}, inputs.identity),
        **queue_labels(inputs.queue_name, inputs.kueue_priority_class),
    }
    component = {"podSets": _pod_sets(ray_service), "template": ray_service}
    return {
        "apiVersion": APPWRAPPER_API_VERSION,
        "kind": "AppWrapper",
        "metadata": child_metadata(
            inputs.identity, name=main_child_name(inputs.identity.name), labels=labels
        ),
        "spec": {"components": [component]},
    }
