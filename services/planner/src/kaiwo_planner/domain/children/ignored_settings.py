"""Settings a KaiwoJob or KaiwoService spec gives that have no effect, in words for people.

The API reference says where a field is ignored or replaced; the workload then runs without
it and, before, nothing said so. Each remark names the field, what happens instead and what to
change; the workload plan emits them as ``SettingsIgnored`` Warning Events, once per
generation (decision 0119). Pure: the workload, its inputs and its allocation are given.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import StorageSpec

from kaiwo_planner.domain.children.resources import GPU_KEY_AMD, GPU_KEY_NVIDIA
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation
from kaiwo_planner.domain.settings.workload_inputs import WorkloadInputs
from kaiwo_planner.domain.state.nodes import parse_quantity

_WORKER_GROUP_SIZES = ("replicas", "minReplicas", "maxReplicas")


def ignored_settings(
    inputs: WorkloadInputs,
    storage: StorageSpec | None,
    *,
    allocation: GpuAllocation,
    gpu_key: str,
) -> tuple[str, ...]:
    """Every remark for ``inputs`` (``storage``: the spec's, enabled or not; ``gpu_key``: the
    resource name the pods get their GPUs under)."""
    return tuple(
        note
        for note in (
            _gpu_resources(inputs),
            _disabled_storage(storage),
            *_kind_settings(inputs),
            _entrypoint_args(inputs),
            _deployment_replicas(inputs, allocation),
            _worker_group_sizes(inputs, allocation),
            _worker_group_gpus(inputs, allocation, gpu_key=gpu_key),
        )
        if note
    )


def _gpu_resources(inputs: WorkloadInputs) -> str:
    given = inputs.resources or {}
    keys = {key for section in ("requests", "limits") for key in (given.get(section) or {})}
    ignored = sorted(keys & {GPU_KEY_AMD, GPU_KEY_NVIDIA})
    if not ignored:
        return ""
    return (
        f"GPU quantities in spec.resources ({', '.join(ignored)}) are ignored; "
        "GPUs are set with spec.gpus, spec.gpusPerReplica and spec.gpuVendor"
    )


def _disabled_storage(storage: StorageSpec | None) -> str:
    """The reference: "If false, data and huggingFace sections are ignored"; a user who sized
    a volume or listed downloads most likely forgot ``storageEnabled``."""
    if storage is None or storage.storage_enabled:
        return ""
    data, hf = storage.data, storage.hugging_face
    sections = []
    if data is not None and (
        data.storage_size or (data.download is not None and not data.download.is_empty)
    ):
        sections.append("spec.storage.data")
    if hf is not None and (hf.storage_size or hf.pre_cache_repos):
        sections.append("spec.storage.huggingFace")
    if not sections:
        return ""
    return (
        f"{' and '.join(sections)} {'are' if len(sections) > 1 else 'is'} ignored because "
        "spec.storage.storageEnabled is not true: no PersistentVolumeClaim is created, nothing "
        "is downloaded and nothing is mounted; set spec.storage.storageEnabled: true to use it"
    )


def _kind_settings(inputs: WorkloadInputs) -> Iterator[str]:
    """Fields of the other child kind: the reference uses ``job``/``deployment`` only with
    ``ray: false``, ``serveConfigV2`` only with ``ray: true``, a KaiwoService's
    ``entrypoint`` only for its Deployment."""
    if inputs.identity.workload_type == "job":
        if inputs.ray and inputs.job is not None:
            yield (
                "spec.job is ignored: the KaiwoJob runs as a RayJob (ray: true or spec.rayJob "
                "given); put Ray settings in spec.rayJob, or set ray: false and leave out "
                "spec.rayJob to run spec.job"
            )
        return
    if inputs.ray:
        if inputs.deployment is not None:
            yield (
                "spec.deployment is ignored: the KaiwoService runs as a RayService (ray: true "
                "or spec.rayService given); set ray: false and leave out spec.rayService to "
                "run spec.deployment"
            )
        if inputs.entrypoint:
            yield (
                "spec.entrypoint is ignored for a Ray KaiwoService: define the Ray Serve "
                "applications in spec.serveConfigV2 (or spec.rayService)"
            )
    elif inputs.serve_config_v2:
        yield (
            "spec.serveConfigV2 is ignored: it is only used with ray: true (a RayService); "
            "the KaiwoService runs as a Deployment"
        )


def _entrypoint_args(inputs: WorkloadInputs) -> str:
    """The reference: ``entrypoint`` "populates the command and args fields of the container
    spec", overriding the ``job`` (or ``deployment``) spec's: the first container's ``args``
    are dropped (decision 0193)."""
    if inputs.ray or not inputs.entrypoint:
        return ""
    field = "spec.job" if inputs.identity.workload_type == "job" else "spec.deployment"
    given = inputs.job if inputs.identity.workload_type == "job" else inputs.deployment
    containers = _nested(given, "spec", "template", "spec", "containers")
    first = containers[0] if isinstance(containers, list) and containers else None
    args = first.get("args") if isinstance(first, Mapping) else None
    if not isinstance(args, list) or not args:
        return ""
    return (
        f"{field}.spec.template.spec.containers[0].args ({' '.join(map(str, args))}) are "
        "dropped: spec.entrypoint sets the container's command and args (/bin/sh -c with the "
        "entrypoint); put the arguments in spec.entrypoint"
    )


def _deployment_replicas(inputs: WorkloadInputs, allocation: GpuAllocation) -> str:
    """The reference: ``replicas`` "sets deployment.spec.replicas"."""
    if inputs.ray or inputs.deployment is None:
        return ""
    given = (inputs.deployment.get("spec") or {}).get("replicas")
    if not isinstance(given, int) or given == allocation.replicas:
        return ""
    return (
        f"spec.deployment.spec.replicas ({given}) is replaced by {allocation.replicas}, from "
        "spec.replicas (default 1), which sets the Deployment's replicas; set spec.replicas "
        "instead"
    )


def _worker_group_sizes(inputs: WorkloadInputs, allocation: GpuAllocation) -> str:
    """The reference: ``replicas`` sets every Ray worker group's replicas and "locks
    minReplicas and maxReplicas to this value"."""
    if not inputs.ray:
        return ""
    field, cluster = _ray_cluster(inputs)
    replaced = [
        f"workerGroupSpecs[{index}].{size} ({group[size]})"
        for index, group in enumerate(cluster.get("workerGroupSpecs") or [])
        if isinstance(group, Mapping)
        for size in _WORKER_GROUP_SIZES
        if isinstance(group.get(size), int) and group[size] != allocation.replicas
    ]
    if not replaced:
        return ""
    return (
        f"{field}: {', '.join(replaced)} {'is' if len(replaced) == 1 else 'are'} replaced by "
        f"{allocation.replicas}, from spec.replicas "
        "(default 1) and spec.gpus, which set every worker group's replicas, minReplicas and "
        "maxReplicas; set spec.replicas instead"
    )


def _worker_group_gpus(inputs: WorkloadInputs, allocation: GpuAllocation, *, gpu_key: str) -> str:
    """The reference: GPU limits "are controlled exclusively by the gpus, gpusPerReplica, and
    gpuVendor fields", and every worker group runs the split (decision 0146), so each group's
    main container gets the split's GPUs as limit and request. Told (decision 0154): a GPU
    quantity the user wrote there that differs, and a group that leaves it out while another
    group of the cluster sets one (a group meant to run without GPUs). Nothing is replaced
    when the workload asks for no GPUs, nor in a cluster where no group names its GPUs (they
    are left to Kaiwo)."""
    written = allocation.gpus_per_replica
    # Rule template: the groups' own GPUs are kept as written (decision 0167).
    if not inputs.ray or written <= 0 or allocation.rule == "template":
        return ""
    field, cluster = _ray_cluster(inputs)
    groups = cluster.get("workerGroupSpecs")
    mains = [_main_resources(group) for group in (groups if isinstance(groups, list) else ())]
    any_set = any(gpu_key in section for main in mains if main for section in main.values())
    replaced: list[str] = []
    for index, main in enumerate(mains):
        if main is None:
            continue  # no container of the user's: Kaiwo's template runs the group
        path = f"{field}.workerGroupSpecs[{index}].template.spec.containers[0].resources"
        if any_set and not any(gpu_key in section for section in main.values()):
            replaced.append(f'{path}.limits["{gpu_key}"] (not set)')
            continue
        replaced += [
            f'{path}.{name}["{gpu_key}"] ({section[gpu_key]})'
            for name, section in main.items()
            if gpu_key in section and not _same_quantity(section[gpu_key], written)
        ]
    if not replaced:
        return ""
    return (
        f"{', '.join(replaced)} {'is' if len(replaced) == 1 else 'are'} replaced by {written}, "
        "from spec.gpus, spec.gpusPerReplica and spec.gpuVendor, which give every worker "
        "group's pods the same GPUs (no group runs without them); set those fields instead"
    )


def _main_resources(group: Any) -> dict[str, Mapping[str, Any]] | None:
    """The ``limits`` and ``requests`` the user wrote in the main (first) container of a
    worker group, the one that gets the GPUs; None when the group names no container."""
    containers = _nested(group, "template", "spec", "containers")
    if not isinstance(containers, list) or not containers:
        return None
    main = containers[0]
    resources = main.get("resources") if isinstance(main, Mapping) else None
    resources = resources if isinstance(resources, Mapping) else {}
    return {
        name: section
        for name in ("limits", "requests")
        if isinstance(section := resources.get(name), Mapping)
    }


def _nested(found: Any, *keys: str) -> Any:
    """The value at ``keys`` down nested mappings of a user's spec, or None where one is
    missing or not a mapping."""
    for key in keys:
        found = found.get(key) if isinstance(found, Mapping) else None
    return found


def _same_quantity(given: Any, written: int) -> bool:
    try:
        return parse_quantity(given) == written
    except (TypeError, ValueError):
        return False  # not a quantity: replaced all the same


def _ray_cluster(inputs: WorkloadInputs) -> tuple[str, Mapping[str, Any]]:
    """The path of the user's Ray cluster and the cluster (empty when none is given)."""
    if inputs.identity.workload_type == "job":
        return "spec.rayJob.spec.rayClusterSpec", _cluster(inputs.ray_job, "rayClusterSpec")
    return (
        "spec.rayService.spec.rayClusterConfig",
        _cluster(inputs.ray_service, "rayClusterConfig"),
    )


def _cluster(ray_object: Mapping[str, Any] | None, key: str) -> Mapping[str, Any]:
    spec = (ray_object or {}).get("spec") or {}
    cluster = spec.get(key) if isinstance(spec, Mapping) else None
    return cluster if isinstance(cluster, Mapping) else {}
