"""KaiwoJob with ``ray: false`` -> a batch/v1 Job.

Differences from upstream, on purpose: a ``backoffLimit`` given in ``spec.job`` is kept (the
API reference offers it as a Job parameter to control; upstream forced it to 0), and it only
defaults to 0. A pod template in ``spec.job`` without ``restartPolicy`` gets ``Never``, as
Kaiwo's own template has: left out it means ``Always``, which the API server refuses for a
Job (upstream sent it so, and the Job was never created; decision 0119). A ``spec.job`` that
names no container (a Job parameter only) runs Kaiwo's own template (decision 0136). The Job
is created suspended; Kueue unsuspends it on admission.
``parallelism`` is set (1, Kubernetes' own default, unless ``spec.job`` says otherwise) so the
operator owns it: a hand-edited value counts as drift and is put back, except where Kueue's
partial admission lowered it (decision 0153): Kueue's ``kueue.x-k8s.io/job-min-parallelism``,
given in ``spec.job.metadata.annotations``, is carried onto the Job (the only key of the
embedded Job's metadata that is: upstream ignores it), and the running Job's parallelism is
then Kueue's (:func:`~kaiwo_planner.domain.children.job_changes.job_update`).
"""

from __future__ import annotations

from typing import Any

from kaiwo_planner.domain.children.entrypoint import shell_command
from kaiwo_planner.domain.children.labels import inherited_labels, queue_labels
from kaiwo_planner.domain.children.naming import main_child_name
from kaiwo_planner.domain.children.ownership import child_metadata
from kaiwo_planner.domain.children.partial_admission import kueue_job_annotations
from kaiwo_planner.domain.children.pod_template import (
    PodAdditions,
    complete_pod_template,
    default_pod_template,
    given_or_default_template,
)
from kaiwo_planner.domain.children.resources import (
    GPU_KEY_AMD,
    GPU_KEY_NVIDIA,
    main_container_defaults,
    user_resource_defaults,
)
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation
from kaiwo_planner.domain.settings.workload_inputs import ChildDefaults, WorkloadInputs
from kaiwo_planner.domain.state.json_trees import copy_tree

JOB_CONTAINER = "workload"
JOB_DSHM_SIZE = "1Gi"
DEFAULT_TTL_SECONDS_AFTER_FINISHED = 3600
JOB_RESTART_POLICY = "Never"


def with_entrypoint(template: dict[str, Any], entrypoint: str) -> dict[str, Any]:
    """``template`` whose first container runs ``entrypoint``: the reference's entrypoint
    "populates the command and args fields" and "overrides any default command specified in
    ... the underlying job" spec. So the container's own ``args`` go (decision 0193): left,
    ``/bin/sh -c`` took them as ``$0`` and on, and the script never saw them. A spec that
    gives both is told (``ignored_settings``)."""
    if not entrypoint or not template.get("spec", {}).get("containers"):
        return template
    # Copy only the path to the first container; the rest is shared with ``template``.
    containers = list(template["spec"]["containers"])
    first = {key: value for key, value in containers[0].items() if key != "args"}
    containers[0] = {**first, "command": shell_command(entrypoint)}
    return {**template, "spec": {**template["spec"], "containers": containers}}


def complete_workload_template(
    template: dict[str, Any],
    inputs: WorkloadInputs,
    *,
    additions: PodAdditions,
    generated: bool,
    pod_gpus: int,
    memory_override: str | None = None,
) -> dict[str, Any]:
    """A pod template with the resource defaults of a workload pod getting ``pod_gpus`` GPUs."""
    main_defaults = main_container_defaults(
        user_resources=inputs.resources,
        gpus_per_replica=pod_gpus,
        gpu_key=additions.gpu_key,
        generated_template=generated,
        memory_override=memory_override,
    )
    init_defaults = user_resource_defaults(
        inputs.resources, gpu_keys=frozenset({GPU_KEY_AMD, GPU_KEY_NVIDIA, additions.gpu_key})
    )
    return complete_pod_template(
        template,
        additions,
        pod_gpus=pod_gpus,
        main_defaults=main_defaults,
        init_defaults=init_defaults,
    )


def build_batch_job(
    inputs: WorkloadInputs,
    *,
    allocation: GpuAllocation,
    defaults: ChildDefaults,
    additions: PodAdditions,
) -> dict[str, Any]:
    """The Job: ``spec.job`` (or the default) completed with the workload's settings.

    Each pod gets the allocation's ``gpus_per_replica``: every GPU of ``gpus``, or
    ``gpusPerReplica`` when given (decision 0113); ``replicas`` does not change parallelism (the
    API reference: replicas are ignored for Jobs). The allocation's replicas are the pods
    ``spec.job``'s parallelism runs at once, so the env describes them all (decision 0147).
    """
    spec: dict[str, Any] = copy_tree(dict((inputs.job or {}).get("spec") or {}))
    spec.setdefault("ttlSecondsAfterFinished", DEFAULT_TTL_SECONDS_AFTER_FINISHED)
    spec.setdefault("backoffLimit", 0)
    spec.setdefault("parallelism", 1)
    template, generated = given_or_default_template(
        spec.get("template"),
        default_pod_template(
            scheduler_name=defaults.scheduler_name,
            container_name=JOB_CONTAINER,
            dshm_size=JOB_DSHM_SIZE,
            dangerous=inputs.dangerous,
        ),
    )
    template = with_entrypoint(template, inputs.entrypoint)
    # A copy of the user's template or a fresh one: safe to fill in.
    template.setdefault("spec", {}).setdefault("restartPolicy", JOB_RESTART_POLICY)
    spec["template"] = complete_workload_template(
        template,
        inputs,
        additions=additions,
        generated=generated,
        # GPUs the given container asks for itself are its own, kept as written (decision
        # 0161); the allocation counts them, and the env says so (decisions 0163, 0166).
        pod_gpus=0 if allocation.rule == "template" else allocation.gpus_per_replica,
    )
    spec["suspend"] = True
    labels = {
        **inherited_labels({}, inputs.identity),
        **queue_labels(inputs.queue_name, inputs.kueue_priority_class),
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": child_metadata(
            inputs.identity,
            name=main_child_name(inputs.identity.name),
            labels=labels,
            annotations=kueue_job_annotations(inputs.job),
        ),
        "spec": spec,
    }
