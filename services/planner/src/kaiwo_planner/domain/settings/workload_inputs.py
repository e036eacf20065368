"""What the child planners read from a workload and from KaiwoConfig, in one plain shape.

KaiwoJob and KaiwoService share most of their spec; the builders take these frozen values so
that the same code serves both kinds and tests can state inputs briefly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kaiwo_contracts.crds.config_v1alpha1 import KaiwoConfig
from kaiwo_contracts.crds.kaiwo_v1alpha1.common import StorageSpec
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwojob import KaiwoJob
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoservice import KaiwoService
from kaiwo_contracts.crds.kaiwo_v1alpha1.storage import DOWNLOAD_KINDS

from kaiwo_planner.domain.state.priority_classes import NO_PRIORITY, PriorityChoice
from kaiwo_planner.domain.state.workload_identity import WorkloadIdentity

DEFAULT_RAY_IMAGE = "ghcr.io/silogen/rocm-ray:6.4"
DEFAULT_SCHEDULER_NAME = "kaiwo-scheduler"
DEFAULT_HEAD_POD_MEMORY = "16Gi"
DEFAULT_GPU_RESOURCE_KEY = "amd.com/gpu"
DEFAULT_GPU_TAINT_KEY = "kaiwo.silogen.ai/gpu"
DEFAULT_CLUSTER_QUEUE = "kaiwo"
DEFAULT_DATA_MOUNT_PATH = "/workload"
DEFAULT_HF_MOUNT_PATH = "/hf_cache"


@dataclass(frozen=True, slots=True)
class ChildDefaults:
    """The KaiwoConfig settings that shape children (CRD defaults when the config is empty)."""

    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    default_ray_image: str = DEFAULT_RAY_IMAGE
    head_pod_memory: str = DEFAULT_HEAD_POD_MEMORY
    default_gpu_resource_key: str = DEFAULT_GPU_RESOURCE_KEY
    gpu_taint_key: str = DEFAULT_GPU_TAINT_KEY
    add_taints_to_gpu_nodes: bool = False
    gpu_taint_on_nodes: bool = False
    """Some Node carries the ``gpu_taint_key`` taint, whatever ``add_taints_to_gpu_nodes``
    says now (decision 0132)."""
    recorded_gpu_taint_keys: tuple[str, ...] = ()
    """The keys of the GPU taints the operator recorded on Nodes that still carry them,
    whatever the key in force (decision 0149)."""
    default_cluster_queue: str = DEFAULT_CLUSTER_QUEUE
    default_storage_class: str = ""
    default_data_mount_path: str = DEFAULT_DATA_MOUNT_PATH
    default_hf_mount_path: str = DEFAULT_HF_MOUNT_PATH

    @property
    def gpu_toleration_keys(self) -> tuple[str, ...]:
        """The taint keys a GPU pod tolerates.

        * The configured key while ``addTaintsToGpuNodes`` is on, and as long as a Node still
          carries its taint after it was turned off (the operator never removes its taint, as
          upstream; without the toleration every new GPU pod stayed Pending on the nodes it
          had tainted, decision 0132).
        * With the setting off, also the keys of the taints the operator recorded on Nodes
          (decision 0149): renamed while off, or in the same edit that turned it off, the old
          key's taint stays on the nodes and no node carries the new key. While the setting
          is on the executor moves such a taint to the key in force (decision 0145), so its
          key is not tolerated: for the moment the move takes, that would only change the
          pod template of a KaiwoService's Deployment twice (two rollouts) instead of once.
        """
        keys: list[str] = []
        if self.add_taints_to_gpu_nodes or self.gpu_taint_on_nodes:
            keys.append(self.gpu_taint_key)
        if not self.add_taints_to_gpu_nodes:
            keys += [key for key in self.recorded_gpu_taint_keys if key not in keys]
        return tuple(keys)


@dataclass(frozen=True, slots=True)
class SecretVolumeInput:
    name: str
    secret_name: str
    mount_path: str
    key: str = ""
    sub_path: str = ""


@dataclass(frozen=True, slots=True)
class HfRepoInput:
    repo_id: str
    files: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StorageInputs:
    """``spec.storage`` when ``storageEnabled`` is true (None otherwise).

    ``downloads`` is the wire form of ``storage.data.download`` (s3/gcs/azureBlob/git lists).
    The ``has_*`` predicates are the contract's (``StorageSpec``), over these plain values: a
    download needs its volume's size; a valid spec never asks for one without (decision 0111).
    """

    access_mode: str = "ReadWriteMany"
    storage_class: str = ""
    data_size: str = ""
    data_mount_path: str = DEFAULT_DATA_MOUNT_PATH
    downloads: Mapping[str, Any] = field(default_factory=dict)
    hf_size: str = ""
    hf_mount_path: str = DEFAULT_HF_MOUNT_PATH
    hf_repos: tuple[HfRepoInput, ...] = ()

    @property
    def has_data(self) -> bool:
        return bool(self.data_size)

    @property
    def has_hf(self) -> bool:
        return bool(self.hf_size)

    @property
    def has_object_downloads(self) -> bool:
        return self.has_data and any(self.downloads.get(kind) for kind in DOWNLOAD_KINDS)

    @property
    def has_hf_downloads(self) -> bool:
        return self.has_hf and bool(self.hf_repos)

    @property
    def has_downloads(self) -> bool:
        return self.has_object_downloads or self.has_hf_downloads


@dataclass(frozen=True, slots=True)
class WorkloadInputs:
    """The common spec of a KaiwoJob or KaiwoService, with its kind-specific parts.

    ``job``, ``ray_job``, ``deployment`` and ``ray_service`` are the user's embedded objects
    (wire form) or None; ``ray`` is already ``spec.ray or <ray object given>``.
    """

    identity: WorkloadIdentity
    ray: bool = False
    queue_name: str = ""
    pod_priority_class: str = ""
    """The pods' ``priorityClassName`` (:mod:`kaiwo_planner.domain.state.priority_classes`)."""
    kueue_priority_class: str = ""
    """Kueue's ``kueue.x-k8s.io/priority-class`` label."""
    entrypoint: str = ""
    image: str = ""
    image_pull_secrets: tuple[str, ...] = ()
    env: tuple[Mapping[str, Any], ...] = ()
    secret_volumes: tuple[SecretVolumeInput, ...] = ()
    pod_template_spec_labels: Mapping[str, str] = field(default_factory=dict)
    gpu_vendor: str = "amd"
    gpu_models: tuple[str, ...] = ()
    resources: Mapping[str, Any] | None = None
    dangerous: bool = False
    required_topology: str = ""
    preferred_topology: str = ""
    storage: StorageInputs | None = None
    job: Mapping[str, Any] | None = None
    ray_job: Mapping[str, Any] | None = None
    deployment: Mapping[str, Any] | None = None
    ray_service: Mapping[str, Any] | None = None
    serve_config_v2: str = ""


# ------------------------------------------------------------------ from the API models

Workload = KaiwoJob | KaiwoService


def child_defaults(
    config: KaiwoConfig | None,
    *,
    gpu_taint_on_nodes: bool = False,
    recorded_gpu_taint_keys: tuple[str, ...] = (),
) -> ChildDefaults:
    """The settings of ``config`` (the CRD defaults when there is none); ``gpu_taint_on_nodes``:
    some Node carries the GPU taint of ``config``'s key; ``recorded_gpu_taint_keys``: the keys
    of the GPU taints the operator recorded on Nodes that still carry them."""
    spec = (config or KaiwoConfig()).spec
    storage = spec.effective_storage
    return ChildDefaults(
        scheduler_name=spec.scheduling.kube_scheduler_name,
        default_ray_image=spec.ray.default_ray_image,
        head_pod_memory=spec.ray.head_pod_memory,
        default_gpu_resource_key=spec.nodes.default_gpu_resource_key,
        gpu_taint_key=spec.nodes.default_gpu_taint_key,
        add_taints_to_gpu_nodes=spec.nodes.add_taints_to_gpu_nodes,
        gpu_taint_on_nodes=gpu_taint_on_nodes,
        recorded_gpu_taint_keys=recorded_gpu_taint_keys,
        default_cluster_queue=spec.default_cluster_queue_name,
        default_storage_class=storage.default_storage_class or "",
        default_data_mount_path=storage.default_data_mount_path,
        default_hf_mount_path=storage.default_hf_mount_path,
    )


def _storage_inputs(spec: StorageSpec | None, defaults: ChildDefaults) -> StorageInputs | None:
    """``spec.storage`` when enabled. A mount path the user left unset takes KaiwoConfig's."""
    if spec is None or not spec.storage_enabled:
        return None
    data = spec.data
    hf = spec.hugging_face
    data_path = defaults.default_data_mount_path
    if data is not None and "mount_path" in data.model_fields_set:
        data_path = data.mount_path
    hf_path = defaults.default_hf_mount_path
    if hf is not None and "mount_path" in hf.model_fields_set:
        hf_path = hf.mount_path
    download = data.download if data is not None else None
    return StorageInputs(
        access_mode=spec.access_mode,
        storage_class=spec.storage_class_name or "",
        data_size=(data.storage_size or "") if data is not None else "",
        data_mount_path=data_path,
        downloads=download.to_wire() if download is not None else {},
        hf_size=(hf.storage_size or "") if hf is not None else "",
        hf_mount_path=hf_path,
        hf_repos=tuple(
            HfRepoInput(repo_id=repo.repo_id, files=tuple(repo.files or ()))
            for repo in (hf.pre_cache_repos or [] if hf is not None else [])
        ),
    )


def _identity(workload: Workload) -> WorkloadIdentity:
    meta = workload.metadata
    return WorkloadIdentity(
        api_version=workload.api_version,
        kind=workload.kind,
        name=meta.name or "",
        namespace=meta.namespace or "",
        uid=meta.uid or "",
        workload_type="job" if isinstance(workload, KaiwoJob) else "service",
        user=workload.spec.user or "",
        labels=dict(meta.labels or {}),
        annotations=dict(meta.annotations or {}),
    )


def workload_inputs(
    workload: Workload, defaults: ChildDefaults, priority: PriorityChoice = NO_PRIORITY
) -> WorkloadInputs:
    """The planner's view of a KaiwoJob or KaiwoService; ``priority`` is what its
    ``priorityClass`` resolved to in the cluster."""
    spec = workload.spec
    common: dict[str, Any] = {
        "identity": _identity(workload),
        "queue_name": spec.cluster_queue or defaults.default_cluster_queue,
        "pod_priority_class": priority.pod_priority_class,
        "kueue_priority_class": priority.kueue_priority_class,
        "entrypoint": spec.entrypoint or "",
        "image": spec.image or "",
        "image_pull_secrets": tuple(ref.name for ref in spec.image_pull_secrets or () if ref.name),
        "env": tuple(variable.to_wire() for variable in spec.env or ()),
        "secret_volumes": tuple(
            SecretVolumeInput(
                name=volume.name,
                secret_name=volume.secret_name,
                mount_path=volume.mount_path,
                key=volume.key or "",
                sub_path=volume.sub_path or "",
            )
            for volume in spec.secret_volumes or ()
        ),
        "pod_template_spec_labels": dict(spec.pod_template_spec_labels or {}),
        "gpu_vendor": spec.gpu_vendor,
        "gpu_models": tuple(spec.gpu_models or ()),
        "resources": spec.resources.to_wire() if spec.resources is not None else None,
        "dangerous": spec.dangerous,
        "required_topology": spec.required_topology_label or "",
        "preferred_topology": spec.preferred_topology_label or "",
        "storage": _storage_inputs(spec.storage, defaults),
    }
    if isinstance(workload, KaiwoJob):
        job_spec = workload.spec
        return WorkloadInputs(
            **common,
            ray=job_spec.is_ray_job,
            job=job_spec.job,
            ray_job=job_spec.ray_job,
        )
    service_spec = workload.spec
    return WorkloadInputs(
        **common,
        ray=service_spec.is_ray_service,
        deployment=service_spec.deployment,
        ray_service=service_spec.ray_service,
        serve_config_v2=service_spec.serve_config_v2 or "",
    )
