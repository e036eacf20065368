"""Types shared by KaiwoJob and KaiwoService: the common spec fields, storage, status.

The field set follows the Kaiwo API reference. A few fields exist only in the upstream operator
(``gpuModels``, ``duration``, ``preferredTopologyLabel``, ``requiredTopologyLabel``) and are
kept because behaviour the reference describes depends on them (duration-based preemption,
GPU-model and topology placement) and because manifests written for upstream use them; each is
marked "upstream" in its description.

Choices where the reference is silent and upstream accepts anything (what a user expects wins):

* ``duration`` must match ``^([0-9]+(s|m|h))+$`` (the pattern the config API uses for durations);
  Go's ``metav1.Duration`` would also take ``1.5h`` or ``300ms``, which nobody needs here.
* ``gpus`` and ``replicas`` cannot be negative; ``gpusPerReplica``, when given, is at least 1
  (upstream treats 0 as "not given": leave it out); ``gpuVendor`` is a label value (upstream
  takes any string, then matches it against node pool labels and prints it in conditions).
* ``storage.accessMode`` is one of the four Kubernetes access modes.
* A ``ValueReference`` names both ``secretName`` and ``secretKey`` or neither.
* ``SecretVolume`` needs ``name``, ``secretName`` and ``mountPath``; download items need the
  fields without which they mean nothing (endpoint, bucket name, repository, target path).
* Embedded ``job``/``rayJob``/``deployment``/``rayService`` may leave out ``apiVersion`` and
  ``kind`` (upstream manifests give just ``{spec: ...}``, and the CRD accepts that, see
  docs/decisions/0002); a ``kind`` that is given must be the field's kind.
* The top-level kinds fill in ``apiVersion`` and ``kind`` when missing, so objects built in
  Python serialise as complete manifests.
* Short names (upstream has none): ``kj``/``kjob``, ``ks``/``kaiwosvc`` (``ksvc`` belongs to
  Knative), ``kqc``; category ``kaiwo`` (``kubectl get kaiwo`` lists all three kinds).
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Final, Self

from pydantic import AfterValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from kaiwo_contracts.crds.base import LIST_MAP_KEYS, LIST_TYPE, CrdInfo, KubeModel
from kaiwo_contracts.crds.core_v1 import (
    EnvVar,
    LocalObjectReference,
    PersistentVolumeAccessMode,
    ResourceRequirements,
)
from kaiwo_contracts.crds.go_duration import duration_nanoseconds, duration_schema
from kaiwo_contracts.crds.label_syntax import checked_labels
from kaiwo_contracts.crds.meta import Condition
from kaiwo_contracts.crds.quantity import QuantityString
from kaiwo_contracts.crds.schema import NoCrdDefault

GROUP: Final = "kaiwo.silogen.ai"
VERSION: Final = "v1alpha1"
API_VERSION: Final = "kaiwo.silogen.ai/v1alpha1"
CATEGORIES = ("kaiwo",)

# ------------------------------------------------------------------ constrained strings


def must_match(pattern: str, *, meaning: str) -> AfterValidator:
    """A validator failing with ``meaning`` in plain words when a string does not match.

    Pair it with ``Field(json_schema_extra={"pattern": pattern})`` so the pattern still goes
    into the JSON schema (and so into the CRD); only the error message differs from pydantic's
    "String should match pattern '...'".
    """
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        # fullmatch: Python's "$" also matches before a final newline ("q\n"), the API
        # server's (Go RE2) does not.
        if compiled.fullmatch(value) is None:
            raise PydanticCustomError(
                "string_format",
                "{meaning}, got {value}",
                {"meaning": meaning, "value": repr(value)},
            )
        return value

    return AfterValidator(check)


MAX_COUNT: Final = 2**31 - 1
"""The largest count (GPUs, replicas): Kubernetes counts replicas and parallelism in int32."""

DURATION_PATTERN = r"^([0-9]+(s|m|h))+$"


def _within_go_range(value: str) -> str:
    if duration_nanoseconds(value) is None:
        raise PydanticCustomError(
            "duration_range",
            "must be at most 2562047h (the longest duration Go holds), got {value}",
            {"value": repr(value)},
        )
    return value


Duration = Annotated[
    str,
    Field(json_schema_extra=duration_schema(DURATION_PATTERN)),
    must_match(DURATION_PATTERN, meaning="must be a duration such as 30m, 1h or 1h30m"),
    AfterValidator(_within_go_range),
]
"""A duration in whole hours, minutes and seconds (``90s``, ``30m``, ``1h30m``, ``1h0m0s``)."""


LABEL_VALUE_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"

LabelValue = Annotated[
    str,
    Field(max_length=63, json_schema_extra={"pattern": LABEL_VALUE_PATTERN}),
    must_match(
        LABEL_VALUE_PATTERN,
        meaning="must be a name of lower-case letters, digits, '-' and '.' (it becomes a label)",
    ),
]
"""A name that becomes a Kueue label value as it is (the queue, the priority class): Kueue
matches it exactly, so it cannot be shortened and must fit a label (63 characters)."""

GPU_VENDOR_PATTERN = r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"

GpuVendor = Annotated[
    str,
    Field(max_length=63, json_schema_extra={"pattern": GPU_VENDOR_PATTERN}),
    must_match(
        GPU_VENDOR_PATTERN,
        meaning="must be a vendor name such as amd or nvidia (letters, digits, '-', '_', '.')",
    ),
]
"""A GPU vendor: the reference says "e.g. amd, nvidia" and upstream maps any other to the
default GPU resource key, so the set stays open; but the value is matched against node pool
labels and printed in conditions and Events, so it has a label value's grammar (no newline,
no space, at most 63 characters)."""


def embedded_kind(kind: str) -> AfterValidator:
    """A validator for an embedded object: a ``kind``, when given, is the field's ``kind``.

    ``apiVersion`` and ``kind`` may be left out, as the CRD allows (only ``spec`` is used);
    a Deployment given where a Job belongs is a mistake worth naming.
    """

    def check(value: dict[str, Any]) -> dict[str, Any]:
        given = value.get("kind")
        if given is not None and given != kind:
            raise PydanticCustomError(
                "embedded_object",
                "must be a {kind} object, got kind {given}",
                {"kind": kind, "given": repr(given)},
            )
        return value

    return AfterValidator(check)


# ------------------------------------------------------------------ status


def _distinct_condition_types(conditions: list[Condition]) -> list[Condition]:
    types = [condition.type for condition in conditions]
    repeated = sorted({t for t in types if types.count(t) > 1})
    if repeated:
        raise PydanticCustomError(
            "duplicate_condition",
            "conditions must have distinct types; repeated: {repeated}",
            {"repeated": ", ".join(repeated)},
        )
    return conditions


Conditions = Annotated[
    list[Condition],
    Field(json_schema_extra={LIST_TYPE: "map", LIST_MAP_KEYS: ["type"]}),
    AfterValidator(_distinct_condition_types),
]
"""Status conditions: one per type, merged by type under server-side apply."""


class WorkloadStatus(StrEnum):
    """The high-level phase in ``status.status`` of every Kaiwo kind.

    The API reference lists NEW (""), PENDING, STARTING, READY, RUNNING, COMPLETE and FAILED;
    the upstream operator also writes DOWNLOADING, ERROR, TERMINATING and TERMINATED, so they
    are valid here too. READY is what a ready KaiwoService reports (its Deployment or
    RayService serves; the API reference defines it so, although later upstream versions write
    RUNNING) and what a KaiwoQueueConfig reports once its Kueue objects are in sync. RUNNING
    means the workload's pods run (for a KaiwoService: some, but not yet all, replicas).
    """

    NEW = ""
    """Created, not yet processed by the controller."""
    DOWNLOADING = "DOWNLOADING"
    """The download job is filling the storage volumes (upstream)."""
    PENDING = "PENDING"
    """Waiting for prerequisites such as Kueue admission."""
    STARTING = "STARTING"
    """The underlying Job, Deployment, RayJob or RayService is being created or started."""
    READY = "READY"
    """A KaiwoService is ready to serve, or a KaiwoQueueConfig is in sync."""
    RUNNING = "RUNNING"
    """The workload's pods are running (a KaiwoService: not yet every replica is ready)."""
    COMPLETE = "COMPLETE"
    """A KaiwoJob finished successfully."""
    ERROR = "ERROR"
    """A recoverable problem, e.g. not schedulable or a Deployment past its deadline (upstream)."""
    FAILED = "FAILED"
    """The workload or its prerequisites failed and will not recover."""
    TERMINATING = "TERMINATING"
    """Being stopped early, e.g. its duration expired while GPUs are in demand (upstream)."""
    TERMINATED = "TERMINATED"
    """Stopped early; its children are deleted, the object is kept for inspection (upstream)."""

    @property
    def is_terminal(self) -> bool:
        """Nothing changes any more once a workload reaches this phase."""
        return self in _TERMINAL


_TERMINAL = frozenset({WorkloadStatus.COMPLETE, WorkloadStatus.FAILED, WorkloadStatus.TERMINATED})


class PreemptedFor(KubeModel):
    """The pending workload a preemption stopped this one for (a KaiwoJob or KaiwoService)."""

    kind: str = Field(description="KaiwoJob or KaiwoService.")
    namespace: str = Field(description="Its namespace.")
    name: str = Field(description="Its name.")
    uid: str | None = Field(default=None, description="Its metadata.uid.")


class CommonStatus(KubeModel):
    """The observed state fields KaiwoJob and KaiwoService share."""

    start_time: datetime | None = Field(
        default=None, description="When the first pod of the workload started running."
    )
    conditions: Conditions | None = Field(
        default=None, description="Standard Kubernetes conditions of the workload."
    )
    status: Annotated[WorkloadStatus, NoCrdDefault] = Field(
        default=WorkloadStatus.NEW, description="The high-level phase of the workload."
    )
    duration: int | None = Field(
        default=None, ge=0, description="Seconds the workload has been running (or ran)."
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="The metadata.generation last processed."
    )
    preempted_for: PreemptedFor | None = Field(
        default=None,
        description=(
            "Not in upstream Kaiwo. The pending workload this one was preempted for (duration "
            "preemption, or GPU idle preemption under OnPressure); unset when it was stopped "
            "for nobody in particular."
        ),
    )

    def condition(self, condition_type: str) -> Condition | None:
        """The condition of that type, if present."""
        return next((c for c in self.conditions or () if c.type == condition_type), None)


# ------------------------------------------------------------------ storage and downloads


class ValueReference(KubeModel):
    """A value kept in a Secret (credentials for download tasks)."""

    file: str | None = Field(
        default=None,
        description="Path where the value is mounted in the download job; set by the controller.",
    )
    secret_name: str | None = Field(default=None, description="Name of the Secret.")
    secret_key: str | None = Field(default=None, description="Key within the Secret.")

    @model_validator(mode="after")
    def _secret_name_and_key_together(self) -> Self:
        if bool(self.secret_name) != bool(self.secret_key):
            raise PydanticCustomError(
                "secret_reference",
                "secretName and secretKey must be given together (the Secret and its key)",
            )
        return self


class CloudDownloadFile(KubeModel):
    """One object to download from a bucket."""

    path: str = Field(min_length=1, description="Object key within the bucket.")
    target_path: str = Field(description="Destination, relative to the data mount path.")


class CloudDownloadFolder(KubeModel):
    """A prefix (folder) to download from a bucket."""

    path: str = Field(min_length=1, description="Prefix within the bucket.")
    target_path: str = Field(description="Destination, relative to the data mount path.")
    glob: str | None = Field(default=None, description="Only objects matching this glob.")


class CloudDownloadBucket(KubeModel):
    """A bucket (S3, GCS) or container (Azure) and what to download from it."""

    name: str = Field(min_length=1, description="Name of the bucket or container.")
    files: list[CloudDownloadFile] | None = None
    folders: list[CloudDownloadFolder] | None = None


class S3DownloadItem(KubeModel):
    """Downloads from an S3-compatible object store."""

    endpoint_url: str = Field(min_length=1, description="S3 API endpoint URL.")
    access_key_id: ValueReference | None = Field(
        default=None, description="Secret holding the access key id."
    )
    secret_key: ValueReference | None = Field(
        default=None, description="Secret holding the secret access key."
    )
    buckets: list[CloudDownloadBucket]


class GCSDownloadItem(KubeModel):
    """Downloads from Google Cloud Storage."""

    application_credentials: ValueReference = Field(
        description="Secret holding the service account key JSON."
    )
    buckets: list[CloudDownloadBucket]


class AzureBlobStorageDownloadItem(KubeModel):
    """Downloads from Azure Blob Storage."""

    connection_string: ValueReference = Field(
        description="Secret holding the storage connection string."
    )
    containers: list[CloudDownloadBucket]


class GitDownloadItem(KubeModel):
    """Clones a Git repository (or part of it) into the data volume.

    ``branch`` takes precedence over ``commit`` when both are given.
    """

    repository: str = Field(min_length=1, description="Repository URL.")
    branch: str | None = None
    commit: str | None = None
    username: ValueReference | None = None
    token: ValueReference | None = None
    path: str | None = Field(default=None, description="Sub-path to copy; whole repo if unset.")
    target_path: str = Field(description="Destination, relative to the data mount path.")


class HuggingFaceDownloadItem(KubeModel):
    """A Hugging Face repository (or some of its files) to pre-cache."""

    repo_id: str = Field(min_length=1, description='Hub repository id, e.g. "org/model".')
    files: list[str] | None = Field(default=None, description="Only these files; all if unset.")


class ObjectStorageDownloadSpec(KubeModel):
    """Download tasks that fill the data volume before the workload starts."""

    s3: list[S3DownloadItem] | None = None
    gcs: list[GCSDownloadItem] | None = None
    azure_blob: list[AzureBlobStorageDownloadItem] | None = None
    git: list[GitDownloadItem] | None = None

    @property
    def is_empty(self) -> bool:
        return not (self.s3 or self.gcs or self.azure_blob or self.git)


class DataStorageSpec(KubeModel):
    """The data volume: a PVC (created when ``storageSize`` is set) and optional downloads."""

    # No CRD default: the API server would fill it in before the planner saw the object, and
    # KaiwoConfig.spec.storage.defaultDataMountPath could never apply (decision 0044).
    mount_path: Annotated[str, NoCrdDefault] = Field(
        default="/workload",
        description="Mount path in the containers; KaiwoConfig's defaultDataMountPath if unset.",
    )
    storage_size: QuantityString | None = Field(default=None, description='PVC size, e.g. "100Gi".')
    download: ObjectStorageDownloadSpec | None = None


class HfStorageSpec(KubeModel):
    """The Hugging Face cache volume; its mount path is also exported as ``HF_HOME``."""

    # No CRD default, as for the data volume: KaiwoConfig's defaultHfMountPath applies.
    mount_path: Annotated[str, NoCrdDefault] = Field(
        default="/hf_cache",
        description="Mount path, also HF_HOME; KaiwoConfig's defaultHfMountPath if unset.",
    )
    storage_size: QuantityString | None = Field(default=None, description='PVC size, e.g. "50Gi".')
    pre_cache_repos: list[HuggingFaceDownloadItem] | None = None


class StorageSpec(KubeModel):
    """Persistent storage for the workload; ignored unless ``storageEnabled`` is true."""

    storage_enabled: Annotated[bool, NoCrdDefault] = False
    storage_class_name: str | None = None
    access_mode: PersistentVolumeAccessMode = "ReadWriteMany"
    data: DataStorageSpec | None = None
    hugging_face: HfStorageSpec | None = None

    @property
    def has_data(self) -> bool:
        """A data PVC is requested."""
        return bool(self.data is not None and self.data.storage_size)

    @property
    def has_object_storage_downloads(self) -> bool:
        return bool(
            self.has_data
            and self.data is not None
            and self.data.download is not None
            and not self.data.download.is_empty
        )

    @property
    def has_hf_downloads(self) -> bool:
        return bool(self.hugging_face is not None and self.hugging_face.pre_cache_repos)

    @property
    def has_downloads(self) -> bool:
        """A download job must run (and succeed) before the workload starts."""
        return self.has_object_storage_downloads or self.has_hf_downloads


class DownloadTaskConfig(KubeModel):
    """What the download job is told to fetch (its configuration file, not part of a CRD)."""

    download_root: str
    hf_home: str
    s3: list[S3DownloadItem] | None = None
    gcs: list[GCSDownloadItem] | None = None
    hf: list[HuggingFaceDownloadItem] | None = None
    azure_blob: list[AzureBlobStorageDownloadItem] | None = None
    git: list[GitDownloadItem] | None = None


class SecretVolume(KubeModel):
    """Mounts a Secret (or one of its keys) as files into the workload's containers."""

    name: str = Field(min_length=1, description="Volume name, unique within the pod.")
    secret_name: str = Field(min_length=1, description="The Secret to mount.")
    key: str | None = Field(default=None, description="Only this key; whole Secret if unset.")
    sub_path: str | None = Field(default=None, description="File name of the key's content.")
    mount_path: str = Field(min_length=1, description="Directory in the container.")


# ------------------------------------------------------------------ common spec


class CommonMetaSpec(KubeModel):
    """Fields KaiwoJobSpec and KaiwoServiceSpec share (inlined into both)."""

    user: str | None = Field(default=None, description="Owner's e-mail; labels the children.")
    pod_template_spec_labels: Annotated[dict[str, str] | None, AfterValidator(checked_labels)] = (
        None
    )
    gpus: int = Field(
        default=0, ge=0, le=MAX_COUNT, description="Total GPUs for the whole workload."
    )
    gpu_vendor: GpuVendor = Field(default="amd", description="GPU vendor, e.g. amd or nvidia.")
    gpu_models: list[str] | None = Field(
        default=None, description="Upstream: only nodes labelled with one of these GPU models."
    )
    version: str | None = Field(default=None, description="Free-form version, metadata only.")
    replicas: int = Field(default=1, ge=0, le=MAX_COUNT, description="Number of replicas.")
    gpus_per_replica: int | None = Field(
        default=None, ge=1, le=MAX_COUNT, description="GPUs per replica (leave out for none)."
    )
    duration: Duration | None = Field(
        default=None,
        description=(
            "Upstream: how long the workload may run before it may be preempted when other "
            "workloads wait for GPUs, e.g. 8h."
        ),
    )
    preferred_topology_label: str | None = Field(
        default=None, description="Upstream: Kueue topology level the pods should share."
    )
    required_topology_label: str | None = Field(
        default=None, description="Upstream: Kueue topology level the pods must share."
    )
    resources: ResourceRequirements | None = Field(
        default=None, description="Default requests/limits for every container (not GPUs)."
    )
    image: str | None = Field(default=None, description="Default container image.")
    image_pull_secrets: list[LocalObjectReference] | None = None
    env: list[EnvVar] | None = Field(default=None, description="Added to every main container.")
    secret_volumes: list[SecretVolume] | None = None
    ray: bool = Field(default=False, description="Run on Ray (RayJob/RayService).")
    storage: StorageSpec | None = None
    dangerous: bool = Field(default=False, description="Do not add the default security context.")
    cluster_queue: LabelValue | None = Field(default=None, description="Kueue ClusterQueue name.")
    priority_class: LabelValue | None = Field(
        default=None, description="Kueue WorkloadPriorityClass name (upstream wire name)."
    )

    @model_validator(mode="after")
    def _gpus_per_replica_needs_replicas(self) -> Self:
        # The API reference: "If you specify gpusPerReplica, you must also specify replicas."
        # Only an offline check: the API server defaults replicas to 1 before anything reads it.
        if self.gpus_per_replica is not None and "replicas" not in self.model_fields_set:
            raise PydanticCustomError(
                "gpus_per_replica_without_replicas",
                "replicas must be specified when gpusPerReplica is (the API reference requires "
                "both); add replicas, e.g. replicas: 1",
            )
        return self


class KaiwoObject(KubeModel):
    """Base of the top-level Kaiwo kinds: ``apiVersion`` and ``kind`` are always on the wire.

    They default to the kind's own values, and count as set, so an object built in Python
    serialises as a complete manifest while JSON that carries both round-trips unchanged.
    (An *after* validator: a *before* one would make pydantic re-validate JSON input as Python
    objects, which strict manifest validation then rejects for every timestamp string.)
    """

    crd: ClassVar[CrdInfo]

    @model_validator(mode="after")
    def _always_send_type_meta(self) -> Self:
        self.__pydantic_fields_set__.update({"api_version", "kind"})
        return self


class KaiwoObjectList(KubeModel):
    """Base of the ``...List`` kinds."""

    item_kind: ClassVar[str]

    @model_validator(mode="after")
    def _always_send_type_meta(self) -> Self:
        self.__pydantic_fields_set__.update({"api_version", "kind"})
        return self
