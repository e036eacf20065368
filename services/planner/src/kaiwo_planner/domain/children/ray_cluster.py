"""The Ray cluster inside a RayJob (``rayClusterSpec``) or a RayService (``rayClusterConfig``).

Every worker group runs ``replicas`` pods with ``gpusPerReplica`` GPUs each, autoscaling off
(Kueue admits a fixed size): a cluster of several groups holds the split in each (decision
0146). A given cluster with no worker group gets Kaiwo's default one when the workload asks
for GPUs (upstream ran the head alone, and the GPUs asked for nowhere). The head gets no
GPUs, KaiwoConfig's ``headPodMemory`` as memory request and limit, and the same ``NUM_*``
variables as the (first group's) workers.

A multi-host group (``numOfHosts``, kept as the user gives it) runs each replica on that many
pods of ``gpusPerReplica`` GPUs: its pods' ``NUM_REPLICAS`` counts them all (replicas x
numOfHosts) and ``NUM_GPUS`` their GPUs, the Ray worker nodes a script can use, so that
``NUM_GPUS = NUM_REPLICAS x NUM_GPUS_PER_REPLICA`` holds as for every other workload (decision
0151; upstream never read ``numOfHosts`` and counted the replicas only).

A workload asking for no GPUs whose groups' templates ask for their own (rule ``template``,
decision 0167) keeps every container's GPUs as written; each group's ``NUM_*`` env counts its
own pods and its own GPUs per pod (the groups may differ), and no default group is added.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kaiwo_planner.domain.children.batch_job import complete_workload_template
from kaiwo_planner.domain.children.pod_template import (
    PodAdditions,
    default_pod_template,
    given_or_default_template,
)
from kaiwo_planner.domain.scheduling.gpu_allocation import (
    GpuAllocation,
    pod_template_gpus,
    worker_group_hosts,
)
from kaiwo_planner.domain.settings.workload_inputs import ChildDefaults, WorkloadInputs

HEAD_CONTAINER = "ray-head"
WORKER_CONTAINER = "ray-worker"
HEAD_DSHM_SIZE = "1Gi"
WORKER_DSHM_SIZE = "200Gi"
DEFAULT_WORKER_GROUP = "default-worker-group"
KAIWO_CLUSTER_WORDS = (
    "Kaiwo's default cluster: one head and the worker group "
    f"{DEFAULT_WORKER_GROUP}, sized by spec.replicas and the GPU fields"
)
"""How the Schedulable condition names the cluster Kaiwo gives a Ray workload whose given
RayJob or RayService names none (decisions 0151, 0154)."""


def default_ray_cluster_spec(*, defaults: ChildDefaults, dangerous: bool) -> dict[str, Any]:
    """One head and one worker group, on Kaiwo's default pod templates."""
    return {
        "enableInTreeAutoscaling": False,
        "headGroupSpec": {
            "rayStartParams": {"dashboard-host": "0.0.0.0"},  # noqa: S104 - in the pod
            "template": _ray_pod_template(defaults, dangerous=dangerous, head=True),
        },
        "workerGroupSpecs": [
            {
                **_default_worker_group(),
                "template": _ray_pod_template(defaults, dangerous=dangerous, head=False),
            }
        ],
    }


def _default_worker_group() -> dict[str, Any]:
    """Kaiwo's worker group, its template left to the caller."""
    return {
        "groupName": DEFAULT_WORKER_GROUP,
        "replicas": 1,
        "minReplicas": 1,
        "maxReplicas": 1,
        "rayStartParams": {},
    }


def _ray_pod_template(defaults: ChildDefaults, *, dangerous: bool, head: bool) -> dict[str, Any]:
    return default_pod_template(
        scheduler_name=defaults.scheduler_name,
        container_name=HEAD_CONTAINER if head else WORKER_CONTAINER,
        dshm_size=HEAD_DSHM_SIZE if head else WORKER_DSHM_SIZE,
        dangerous=dangerous,
    )


def complete_ray_cluster_spec(
    cluster: Mapping[str, Any],
    inputs: WorkloadInputs,
    *,
    allocation: GpuAllocation,
    defaults: ChildDefaults,
    additions: PodAdditions,
    generated: bool,
) -> dict[str, Any]:
    """``cluster`` with every head and worker template completed and worker groups sized."""
    # Copied along the paths that change; templates are copied by complete_pod_template.
    result = dict(cluster)
    workers = []
    groups = result.get("workerGroupSpecs") or []
    # Rule template: the user's templates hold their own GPUs, kept as written (decision 0167).
    own_gpus = allocation.rule == "template"
    if not groups and allocation.gpus_per_replica > 0 and not own_gpus:
        # The user gave the head (and Ray settings) but no worker: the GPUs asked for run
        # in Kaiwo's group, on its default template.
        groups = [_default_worker_group()]
    head_additions = additions
    for index, given in enumerate(groups):
        group = dict(given)
        group_additions = (
            _own_gpus(additions, allocation, group)
            if own_gpus
            else _on_hosts(additions, allocation, worker_group_hosts(group))
        )
        if index == 0:
            head_additions = group_additions
        template, defaulted = given_or_default_template(
            group.get("template"),
            _ray_pod_template(defaults, dangerous=inputs.dangerous, head=False),
        )
        group["template"] = complete_workload_template(
            template,
            inputs,
            additions=group_additions,
            generated=generated or defaulted,
            pod_gpus=0 if own_gpus else allocation.gpus_per_replica,
        )
        group["replicas"] = group["minReplicas"] = group["maxReplicas"] = allocation.replicas
        workers.append(group)
    if workers:
        result["workerGroupSpecs"] = workers
    head = result.get("headGroupSpec")
    if head is not None:
        head = result["headGroupSpec"] = dict(head)
        template, defaulted = given_or_default_template(
            head.get("template"), _ray_pod_template(defaults, dangerous=inputs.dangerous, head=True)
        )
        head["template"] = complete_workload_template(
            template,
            inputs,
            additions=head_additions,
            generated=generated or defaulted,
            pod_gpus=0,
            memory_override=defaults.head_pod_memory or None,
        )
    return result


def _on_hosts(additions: PodAdditions, allocation: GpuAllocation, hosts: int) -> PodAdditions:
    """``additions`` for the pods of a worker group of ``hosts`` hosts per replica: the
    ``NUM_*`` env counts every pod of the group (decision 0151)."""
    if hosts <= 1:
        return additions
    per_group = allocation.on_hosts(hosts)
    return replace(additions, replicas=per_group.replicas, gpus_total=per_group.gpus)


def _own_gpus(
    additions: PodAdditions, allocation: GpuAllocation, group: Mapping[str, Any]
) -> PodAdditions:
    """``additions`` for the pods of a worker group whose own template gives its GPUs (rule
    ``template``, decision 0167): the ``NUM_*`` env counts the group's own pods (Kaiwo's
    replicas on every host) and its own GPUs per pod, as every group's env counts its own."""
    per_pod = pod_template_gpus(group.get("template"), allocation.vendor)
    pods = allocation.replicas * worker_group_hosts(group)
    return replace(additions, replicas=pods, gpus_per_replica=per_pod, gpus_total=pods * per_pod)
