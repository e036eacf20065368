"""What a workload adds to each of its pod templates, gathered once per plan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kaiwo_planner.domain.children.labels import topology_annotations
from kaiwo_planner.domain.children.pod_template import PodAdditions
from kaiwo_planner.domain.children.resources import gpu_resource_key
from kaiwo_planner.domain.children.storage import storage_env, storage_mounts, storage_volumes
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation
from kaiwo_planner.domain.settings.namespace_config import (
    HF_TOKEN_ENV,
    NamespaceSettings,
    hf_token_env,
)
from kaiwo_planner.domain.settings.workload_inputs import (
    ChildDefaults,
    SecretVolumeInput,
    WorkloadInputs,
)


def secret_volume(volume: SecretVolumeInput) -> dict[str, Any]:
    """The pod volume of a ``secretVolumes`` entry.

    With ``key`` only that key is projected, as the file ``subPath`` (or the key's name) in
    the mount directory, which is what the API reference describes; upstream ignored ``key``.
    """
    return {"name": volume.name, "secret": {"secretName": volume.secret_name, **_items(volume)}}


def _items(volume: SecretVolumeInput) -> dict[str, Any]:
    """With ``key``, only that key, as the file ``subPath`` (or the key's name)."""
    if not volume.key:
        return {}
    return {"items": [{"key": volume.key, "path": volume.sub_path or volume.key}]}


def secret_volume_mount(volume: SecretVolumeInput) -> dict[str, Any]:
    """The mount of a ``secretVolumes`` entry; ``subPath`` selects a file only without ``key``."""
    mount = {"name": volume.name, "mountPath": volume.mount_path}
    if volume.sub_path and not volume.key:
        mount["subPath"] = volume.sub_path
    return mount


def secret_volumes_and_mounts(
    entries: Sequence[SecretVolumeInput],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pod volumes and container mounts of ``secretVolumes``, in their order.

    A container takes one mount per path, so entries that share a ``mountPath`` would leave
    all but the last one out. Those that each place files in that directory (with ``key``,
    or a whole Secret) become one projected volume there, named after the first of them:
    two keys of two Secrets in one directory, as the reference's ``subPath`` ("the filename
    within the ``MountPath`` directory") describes. An entry that mounts a single file at
    ``mountPath`` (``subPath`` without ``key``) keeps its own volume.
    """
    sharing: dict[str, list[SecretVolumeInput]] = {}
    for entry in entries:
        sharing.setdefault(entry.mount_path, []).append(entry)
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    for entry in entries:
        group = sharing[entry.mount_path]
        directory = len(group) > 1 and all(e.key or not e.sub_path for e in group)
        if not directory:
            volumes.append(secret_volume(entry))
            mounts.append(secret_volume_mount(entry))
        elif entry is group[0]:
            sources = [{"secret": {"name": e.secret_name, **_items(e)}} for e in group]
            volumes.append({"name": entry.name, "projected": {"sources": sources}})
            mounts.append({"name": entry.name, "mountPath": entry.mount_path})
    return volumes, mounts


def workload_env(
    inputs: WorkloadInputs, namespace: NamespaceSettings
) -> tuple[Mapping[str, Any], ...]:
    """``spec.env``, then ``HF_HOME`` for the HF cache, then the namespace's ``HF_TOKEN``:
    the download job's variables."""
    return (*_own_env(inputs), *namespace_env(inputs, namespace))


def _own_env(inputs: WorkloadInputs) -> tuple[Mapping[str, Any], ...]:
    return (*inputs.env, *storage_env(inputs.storage))


def namespace_env(
    inputs: WorkloadInputs, namespace: NamespaceSettings
) -> tuple[Mapping[str, Any], ...]:
    """The namespace's ``HF_TOKEN`` (AIMNamespaceConfig), unless ``spec.env`` sets one: a
    credential the workload names itself wins (a container's own too, see
    :attr:`~kaiwo_planner.domain.children.pod_template.PodAdditions.fallback_env`)."""
    token = hf_token_env(namespace)
    if token is None or any(v.get("name") == HF_TOKEN_ENV for v in inputs.env):
        return ()
    return (token,)


def image_pull_secrets(inputs: WorkloadInputs, namespace: NamespaceSettings) -> tuple[str, ...]:
    """The workload's ``imagePullSecrets``, then its namespace's (AIMNamespaceConfig) not
    named already: "added to the PodSpec for all generated pods"."""
    pull_secrets = list(inputs.image_pull_secrets)
    pull_secrets += [name for name in namespace.image_pull_secrets if name not in pull_secrets]
    return tuple(pull_secrets)


def pod_additions(
    inputs: WorkloadInputs,
    *,
    allocation: GpuAllocation,
    defaults: ChildDefaults,
    namespace: NamespaceSettings,
    extra_labels: Mapping[str, str] | None = None,
    gpu_model_flavors: Sequence[Sequence[tuple[str, str]]] = (),
) -> PodAdditions:
    secret_volumes, secret_mounts = secret_volumes_and_mounts(inputs.secret_volumes)
    return PodAdditions(
        identity=inputs.identity,
        default_image=inputs.image or defaults.default_ray_image,
        gpu_key=gpu_resource_key(inputs.gpu_vendor, default_key=defaults.default_gpu_resource_key),
        gpus_total=allocation.gpus,
        replicas=allocation.replicas,
        gpus_per_replica=allocation.gpus_per_replica,
        pod_template_spec_labels=inputs.pod_template_spec_labels,
        priority_class_name=inputs.pod_priority_class,
        extra_labels=dict(extra_labels or {}),
        topology_annotations=topology_annotations(
            required_topology=inputs.required_topology,
            preferred_topology=inputs.preferred_topology,
        ),
        image_pull_secrets=image_pull_secrets(inputs, namespace),
        env=_own_env(inputs),
        fallback_env=namespace_env(inputs, namespace),
        volumes=(*storage_volumes(inputs.identity.name, inputs.storage), *secret_volumes),
        volume_mounts=(*storage_mounts(inputs.storage), *secret_mounts),
        gpu_models=inputs.gpu_models,
        gpu_model_flavors=gpu_model_flavors,
        gpu_toleration_keys=defaults.gpu_toleration_keys,
    )
