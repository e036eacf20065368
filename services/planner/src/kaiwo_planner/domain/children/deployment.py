"""KaiwoService with ``ray: false`` -> an apps/v1 Deployment (and, for routing, a Service).

Kueue admits Deployments pod by pod: the queue labels go on the pod template (and on the
Deployment). Pods are selected by ``app: <name>``.
"""

from __future__ import annotations

from typing import Any

from kaiwo_planner.domain.children.batch_job import complete_workload_template, with_entrypoint
from kaiwo_planner.domain.children.labels import (
    LABEL_APP,
    LABEL_RUN_ID,
    inherited_labels,
    queue_labels,
)
from kaiwo_planner.domain.children.naming import bounded_label, main_child_name
from kaiwo_planner.domain.children.ownership import child_metadata
from kaiwo_planner.domain.children.pod_template import (
    PodAdditions,
    default_pod_template,
    given_or_default_template,
)
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation
from kaiwo_planner.domain.settings.workload_inputs import ChildDefaults, WorkloadInputs
from kaiwo_planner.domain.state.json_trees import copy_tree
from kaiwo_planner.domain.state.workload_identity import WorkloadIdentity

DEPLOYMENT_CONTAINER = "workload"
DEPLOYMENT_DSHM_SIZE = "1Gi"
DEFAULT_SERVICE_PORT = 8000


def deployment_pod_labels(inputs: WorkloadInputs) -> dict[str, str]:
    """Labels a Deployment's pods carry besides the inherited ones: app and Kueue queue."""
    return {
        LABEL_APP: bounded_label(inputs.identity.name),
        **queue_labels(inputs.queue_name, inputs.kueue_priority_class),
    }


def build_deployment(
    inputs: WorkloadInputs,
    *,
    allocation: GpuAllocation,
    defaults: ChildDefaults,
    additions: PodAdditions,
) -> dict[str, Any]:
    """The Deployment: ``spec.deployment`` (or the default) with ``replicas`` from the allocation.

    ``additions.extra_labels`` must hold :func:`deployment_pod_labels`. The selector is the
    given one's with ``app``; apps/v1 refuses any change of it, so once the Deployment exists
    its observed selector is applied instead
    (:func:`~kaiwo_planner.domain.children.main_child_changes.deployment_update`, decision 0216).
    """
    spec: dict[str, Any] = copy_tree(dict((inputs.deployment or {}).get("spec") or {}))
    template, generated = given_or_default_template(
        spec.get("template"),
        default_pod_template(
            scheduler_name=defaults.scheduler_name,
            container_name=DEPLOYMENT_CONTAINER,
            dshm_size=DEPLOYMENT_DSHM_SIZE,
            dangerous=inputs.dangerous,
        ),
    )
    selector = spec.setdefault("selector", {})
    selector["matchLabels"] = {
        **(selector.get("matchLabels") or {}),
        LABEL_APP: bounded_label(inputs.identity.name),
    }
    spec["replicas"] = allocation.replicas
    template = with_entrypoint(template, inputs.entrypoint)
    template.setdefault("spec", {})["restartPolicy"] = "Always"
    spec["template"] = complete_workload_template(
        template,
        inputs,
        additions=additions,
        generated=generated,
        # GPUs the given container asks for itself are its own, kept as written (decision
        # 0161); the allocation counts them, and the env says so (decision 0163).
        pod_gpus=0 if allocation.rule == "template" else allocation.gpus_per_replica,
    )
    labels = inherited_labels(spec["template"]["metadata"]["labels"], inputs.identity)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": child_metadata(
            inputs.identity, name=main_child_name(inputs.identity.name), labels=labels
        ),
        "spec": spec,
    }


def serving_port(deployment: dict[str, Any]) -> int:
    """The first declared port of the primary container, else 8000 (vLLM's and Ray Serve's)."""
    containers = deployment["spec"]["template"]["spec"].get("containers") or [{}]
    for port in containers[0].get("ports") or []:
        if isinstance(port.get("containerPort"), int):
            return int(port["containerPort"])
    return DEFAULT_SERVICE_PORT


def build_service(identity: WorkloadIdentity, *, port: int) -> dict[str, Any]:
    """A ClusterIP Service for the Deployment's pods (the HTTPRoute's backend).

    The selector includes the run id so that pods of another object named alike never match.
    """
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": child_metadata(
            identity, name=main_child_name(identity.name), labels=inherited_labels({}, identity)
        ),
        "spec": {
            "type": "ClusterIP",
            "selector": {LABEL_APP: bounded_label(identity.name), LABEL_RUN_ID: identity.uid},
            "ports": [{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }
