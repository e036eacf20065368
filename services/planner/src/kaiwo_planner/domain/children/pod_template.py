"""The pod template Kaiwo generates, and how it completes any pod template (generated or given).

Applied to the batch Job template, the Deployment template and every Ray head and worker
template. The input template is never modified: every function returns a new dict.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kaiwo_planner.domain.children.labels import inherited_labels
from kaiwo_planner.domain.children.resources import Resources, fill_resources
from kaiwo_planner.domain.state.json_trees import copy_tree
from kaiwo_planner.domain.state.workload_identity import WorkloadIdentity

DSHM_VOLUME = "dshm"
DSHM_PATH = "/dev/shm"  # noqa: S108 - the pod's shared-memory mount, not a temp file
DEFAULT_USER_ID = 1000
GPU_MODEL_LABEL = "kaiwo/gpu-model"
# The whole manifest kubectl apply writes on the workload stays off its pods (upstream copies
# every annotation). kubectl's other annotations are for pods too (default-container picks the
# container `kubectl logs` and `exec` use): copied (decision 0195).
_ANNOTATIONS_NOT_COPIED = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})


def default_security_context() -> dict[str, Any]:
    return {"runAsUser": DEFAULT_USER_ID, "runAsGroup": DEFAULT_USER_ID, "fsGroup": DEFAULT_USER_ID}


def default_pod_template(
    *,
    scheduler_name: str,
    container_name: str,
    dshm_size: str,
    dangerous: bool,
) -> dict[str, Any]:
    """The template used when the workload gives no Job/Deployment/Ray spec of its own."""
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "restartPolicy": "Never",
        "containers": [
            {
                "name": container_name,
                "imagePullPolicy": "Always",
                "volumeMounts": [{"name": DSHM_VOLUME, "mountPath": DSHM_PATH}],
            }
        ],
        "volumes": [
            {"name": DSHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": dshm_size}}
        ],
    }
    if not dangerous:
        spec["securityContext"] = default_security_context()
    return {"spec": spec}


def given_or_default_template(
    given: Mapping[str, Any] | None, default: dict[str, Any]
) -> tuple[dict[str, Any], bool]:
    """The pod template of a ``spec.job`` / ``spec.deployment`` / Ray group (a copy the caller
    may fill in), and whether Kaiwo's ``default`` made its container.

    The API reference merges the workload's image, entrypoint and resources into the given
    spec; one that names no container (``job: {spec: {backoffLimit: 2}}``, to set a Job
    parameter only) has nothing to merge them into, and the child was refused by the API
    server on every plan ("containers: Required value"). So such a template is ``default``
    with what ``given`` sets laid over it (its labels, node selector, tolerations...), as if
    no template had been given but for those (decision 0136).
    """
    given_spec = (given or {}).get("spec") or {}
    if isinstance(given_spec, Mapping) and given_spec.get("containers"):
        return copy_tree(dict(given or {})), False
    template = copy_tree(dict(given or {}))
    laid = {k: v for k, v in (template.get("spec") or {}).items() if k != "containers"}
    template["spec"] = {**default["spec"], **laid}
    return template, True


@dataclass(frozen=True, slots=True)
class PodAdditions:
    """Everything the workload adds to each of its pod templates."""

    identity: WorkloadIdentity
    default_image: str
    gpu_key: str
    gpus_total: int
    replicas: int
    gpus_per_replica: int
    pod_template_spec_labels: Mapping[str, str] = field(default_factory=dict)
    extra_labels: Mapping[str, str] = field(default_factory=dict)
    topology_annotations: Mapping[str, str] = field(default_factory=dict)
    image_pull_secrets: Sequence[str] = ()
    env: Sequence[Mapping[str, Any]] = ()
    fallback_env: Sequence[Mapping[str, Any]] = ()
    """Variables a container gets only when it sets none of that name itself: the
    namespace's ``HF_TOKEN``, which must not replace a token a container names (decision
    0201). ``env`` replaces a container's variable of the same name (``spec.env`` wins)."""
    volumes: Sequence[Mapping[str, Any]] = ()
    volume_mounts: Sequence[Mapping[str, Any]] = ()
    gpu_models: Sequence[str] = ()
    gpu_model_flavors: Sequence[Sequence[tuple[str, str]]] = ()
    """The node labels of the flavors of the workload's queue that hold one of
    ``gpu_models``, when its queue has others too (decision 0237); () otherwise."""
    gpu_toleration_keys: Sequence[str] = ()
    """The taint keys a pod that requests GPUs tolerates (``NoSchedule``, any value)."""
    priority_class_name: str = ""
    """The workload's ``priorityClass`` when a Kubernetes PriorityClass of that name exists;
    a pod template's own ``priorityClassName`` wins."""


def merge_by_key(
    existing: Iterable[Mapping[str, Any]], additions: Iterable[Mapping[str, Any]], *, key: str
) -> list[dict[str, Any]]:
    """``existing`` then ``additions``; an addition replaces an entry with the same ``key``.

    Kubernetes treats env, volumes and mounts as maps keyed by name (or path): duplicates are
    rejected by server-side apply, so a later value replaces the earlier one in place.
    """
    merged = [dict(item) for item in existing]
    for addition in additions:
        for index, item in enumerate(merged):
            if item.get(key) == addition.get(key):
                merged[index] = dict(addition)
                break
        else:
            merged.append(dict(addition))
    return merged


def _labels(template: Mapping[str, Any], additions: PodAdditions) -> dict[str, str]:
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    labels.update(additions.pod_template_spec_labels)
    labels = inherited_labels(labels, additions.identity)
    labels.update(additions.extra_labels)
    return labels


def _annotations(template: Mapping[str, Any], additions: PodAdditions) -> dict[str, str]:
    annotations = dict((template.get("metadata") or {}).get("annotations") or {})
    annotations.update(
        {
            key: value
            for key, value in additions.identity.annotations.items()
            if key not in _ANNOTATIONS_NOT_COPIED
        }
    )
    annotations.update(additions.topology_annotations)
    return annotations


def _allocation_env(additions: PodAdditions) -> list[dict[str, Any]]:
    return [
        {"name": "NUM_GPUS", "value": str(additions.gpus_total)},
        {"name": "NUM_REPLICAS", "value": str(additions.replicas)},
        {"name": "NUM_GPUS_PER_REPLICA", "value": str(additions.gpus_per_replica)},
    ]


def _complete_container(
    container: Mapping[str, Any],
    additions: PodAdditions,
    *,
    defaults: Resources,
    allocation_env: Sequence[Mapping[str, Any]],
    enforced: frozenset[str],
    main: bool,
) -> dict[str, Any]:
    result = dict(container)
    mounts = merge_by_key(
        result.get("volumeMounts") or [], additions.volume_mounts, key="mountPath"
    )
    if mounts:
        result["volumeMounts"] = mounts
    own = {variable.get("name") for variable in result.get("env") or ()}
    fallback = [variable for variable in additions.fallback_env if variable.get("name") not in own]
    env = merge_by_key(
        result.get("env") or [], [*additions.env, *fallback, *allocation_env], key="name"
    )
    if env:
        result["env"] = env
    if main and not result.get("image"):
        result["image"] = additions.default_image
    resources = fill_resources(result.get("resources"), defaults, enforced=enforced)
    if resources:
        result["resources"] = resources
    return result


def _requests_gpu(containers: Iterable[Mapping[str, Any]], gpu_key: str) -> bool:
    gpu_keys = {"amd.com/gpu", "nvidia.com/gpu", gpu_key}
    for container in containers:
        resources = container.get("resources") or {}
        for section in ("requests", "limits"):
            if gpu_keys & set(resources.get(section) or {}):
                return True
    return False


def _gpu_model_affinity(
    models: Sequence[str], flavors: Sequence[Sequence[tuple[str, str]]] = ()
) -> dict[str, Any]:
    """The node affinity of ``gpuModels``; with ``flavors`` one term per flavor, its node
    labels beside the models: Kueue ignores a key no flavor of the queue declares, so only
    the flavor labels make it choose a flavor whose nodes hold the models (decision 0237)."""
    model = {"key": GPU_MODEL_LABEL, "operator": "In", "values": list(models)}
    terms = [
        {
            "matchExpressions": [
                model,
                *({"key": key, "operator": "In", "values": [value]} for key, value in labels),
            ]
        }
        for labels in flavors
    ] or [{"matchExpressions": [model]}]
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}


NODE_AFFINITY = "affinity.nodeAffinity"
"""Where a pod template carries the ``gpuModels`` affinity (all of its node affinity)."""

_PATH_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def without_flavor_terms(
    paths: Sequence[str], desired: Mapping[str, Any], observed: Mapping[str, Any]
) -> tuple[str, ...]:
    """``paths`` (where the ``desired`` and ``observed`` children differ) but those in a pod's
    node affinity every term of which asks the same ``kaiwo/gpu-model`` values in both: those
    differ in the flavor terms alone, which follow the nodes and the queue (decision 0237), not
    the workload's spec (decisions 0261, 0267). A Job's, a RayJob's cluster's or an
    AppWrapper's component's templates alike."""
    return tuple(path for path in paths if not _in_flavor_terms(path, desired, observed))


def _in_flavor_terms(path: str, desired: Mapping[str, Any], observed: Mapping[str, Any]) -> bool:
    at = path.find(NODE_AFFINITY)
    end = at + len(NODE_AFFINITY)
    if at < 0 or path[end : end + 1] not in ("", "."):
        return False
    wanted = _models_asked(_value_at(desired, path[:end]))
    return wanted is not None and wanted == _models_asked(_value_at(observed, path[:end]))


def _value_at(tree: Any, path: str) -> Any:
    for key, index in _PATH_STEP.findall(path):
        if key:
            tree = tree.get(key) if isinstance(tree, Mapping) else None
        else:
            tree = tree[int(index)] if isinstance(tree, list) and int(index) < len(tree) else None
    return tree


def _models_asked(tree: Any) -> frozenset[str] | None:
    """The ``kaiwo/gpu-model`` values of a node affinity, the same in every term; None when a
    term names none or names others."""
    required = (
        tree.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(tree, Mapping)
        else None
    )
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    if not isinstance(terms, list) or not terms:
        return None
    found: set[frozenset[str]] = set()
    for term in terms:
        expressions = term.get("matchExpressions") if isinstance(term, Mapping) else None
        models = [
            frozenset(str(v) for v in e.get("values") or ())
            for e in expressions or ()
            if isinstance(e, Mapping) and e.get("key") == GPU_MODEL_LABEL
        ]
        if len(models) != 1:
            return None
        found.add(models[0])
    return next(iter(found)) if len(found) == 1 else None


def complete_pod_template(
    template: Mapping[str, Any],
    additions: PodAdditions,
    *,
    pod_gpus: int,
    main_defaults: Resources,
    init_defaults: Resources,
) -> dict[str, Any]:
    """``template`` with the workload's labels, env, volumes, image and resources added.

    ``pod_gpus`` is what this pod gets (0 for a Ray head); ``main_defaults`` already holds it
    under the GPU key. The GPUs go to the primary (first) container only: a sidecar must not
    multiply the pod's GPU request. Every main container gets the CPU/memory defaults and the
    ``NUM_*`` variables; init containers get ``spec.resources``, env and mounts.
    """
    result = copy_tree(dict(template))
    result["metadata"] = {
        **(result.get("metadata") or {}),
        "labels": _labels(template, additions),
    }
    annotations = _annotations(template, additions)
    if annotations:
        result["metadata"]["annotations"] = annotations
    spec: dict[str, Any] = result.setdefault("spec", {})
    if additions.priority_class_name:
        spec.setdefault("priorityClassName", additions.priority_class_name)

    allocation_env = _allocation_env(additions)
    enforced = frozenset({additions.gpu_key}) if pod_gpus > 0 else frozenset()
    sidecar_defaults = {
        s: {k: v for k, v in d.items() if k != additions.gpu_key} for s, d in main_defaults.items()
    }
    spec["containers"] = [
        _complete_container(
            container,
            additions,
            defaults=main_defaults if index == 0 else sidecar_defaults,
            allocation_env=allocation_env,
            enforced=enforced if index == 0 else frozenset(),
            main=True,
        )
        for index, container in enumerate(spec.get("containers") or [])
    ]
    if spec.get("initContainers"):
        spec["initContainers"] = [
            _complete_container(
                container,
                additions,
                defaults=init_defaults,
                allocation_env=(),
                enforced=frozenset(),
                main=False,
            )
            for container in spec["initContainers"]
        ]
    volumes = merge_by_key(spec.get("volumes") or [], additions.volumes, key="name")
    if volumes:
        spec["volumes"] = volumes
    pull_secrets = merge_by_key(
        spec.get("imagePullSecrets") or [],
        [{"name": name} for name in additions.image_pull_secrets],
        key="name",
    )
    if pull_secrets:
        spec["imagePullSecrets"] = pull_secrets
    if additions.gpu_models and pod_gpus > 0:
        spec["affinity"] = {
            **(spec.get("affinity") or {}),
            "nodeAffinity": _gpu_model_affinity(additions.gpu_models, additions.gpu_model_flavors),
        }
    if additions.gpu_toleration_keys and _requests_gpu(spec["containers"], additions.gpu_key):
        tolerations = list(spec.get("tolerations") or [])
        for key in additions.gpu_toleration_keys:
            # The form 0132's toleration has always had: a child made while a recorded key
            # was the key in force carries this very toleration, so it stays as it is.
            toleration = {"key": key, "operator": "Exists", "effect": "NoSchedule"}
            if toleration not in tolerations:
                tolerations.append(toleration)
        spec["tolerations"] = tolerations
    return result
