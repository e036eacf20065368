"""Types shared by KaiwoJob and KaiwoService: the common spec fields here, their constrained
values (:mod:`.constrained`), storage (:mod:`.storage`) and status (:mod:`.workload_status`).

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

from typing import Annotated, ClassVar, Final, Self

from pydantic import AfterValidator, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from kaiwo_contracts.crds.base import CrdInfo, KubeModel
from kaiwo_contracts.crds.cel_rules import CEL_VALIDATIONS, raise_broken_rules
from kaiwo_contracts.crds.core_v1 import EnvVar, LocalObjectReference, ResourceRequirements
from kaiwo_contracts.crds.kaiwo_v1alpha1.constrained import (
    DURATION_PATTERN,
    GPU_VENDOR_PATTERN,
    LABEL_VALUE_PATTERN,
    MAX_COUNT,
    Duration,
    GpuVendor,
    LabelValue,
    embedded_kind,
    must_match,
)
from kaiwo_contracts.crds.kaiwo_v1alpha1.storage import (
    MAX_SECRET_VOLUMES,
    SECRET_VOLUMES_SPARE_STORAGE_RULE,
    AzureBlobStorageDownloadItem,
    CloudDownloadBucket,
    CloudDownloadFile,
    CloudDownloadFolder,
    DataStorageSpec,
    DownloadTaskConfig,
    GCSDownloadItem,
    GitDownloadItem,
    HfStorageSpec,
    HuggingFaceDownloadItem,
    ObjectStorageDownloadSpec,
    S3DownloadItem,
    SecretVolume,
    StorageSpec,
    ValueReference,
)
from kaiwo_contracts.crds.kaiwo_v1alpha1.workload_status import (
    CommonStatus,
    Conditions,
    PreemptedFor,
    WorkloadStatus,
)
from kaiwo_contracts.crds.label_syntax import checked_labels

__all__ = [
    "API_VERSION",
    "CATEGORIES",
    "DURATION_PATTERN",
    "GPU_VENDOR_PATTERN",
    "GROUP",
    "LABEL_VALUE_PATTERN",
    "MAX_COUNT",
    "VERSION",
    "AzureBlobStorageDownloadItem",
    "CloudDownloadBucket",
    "CloudDownloadFile",
    "CloudDownloadFolder",
    "CommonMetaSpec",
    "CommonStatus",
    "Conditions",
    "DataStorageSpec",
    "DownloadTaskConfig",
    "Duration",
    "GCSDownloadItem",
    "GitDownloadItem",
    "GpuVendor",
    "HfStorageSpec",
    "HuggingFaceDownloadItem",
    "KaiwoObject",
    "KaiwoObjectList",
    "LabelValue",
    "ObjectStorageDownloadSpec",
    "PreemptedFor",
    "S3DownloadItem",
    "SecretVolume",
    "StorageSpec",
    "ValueReference",
    "WorkloadStatus",
    "embedded_kind",
    "must_match",
]


GROUP: Final = "kaiwo.silogen.ai"
VERSION: Final = "v1alpha1"
API_VERSION: Final = "kaiwo.silogen.ai/v1alpha1"
CATEGORIES = ("kaiwo",)


class CommonMetaSpec(KubeModel):
    """Fields KaiwoJobSpec and KaiwoServiceSpec share (inlined into both)."""

    # Subclasses inherit the rule (pydantic merges model_config), so both CRDs carry it.
    model_config = ConfigDict(
        json_schema_extra={CEL_VALIDATIONS: [SECRET_VOLUMES_SPARE_STORAGE_RULE.schema_entry()]}
    )

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
    secret_volumes: list[SecretVolume] | None = Field(default=None, max_length=MAX_SECRET_VOLUMES)
    ray: bool = Field(default=False, description="Run on Ray (RayJob/RayService).")
    storage: StorageSpec | None = None
    dangerous: bool = Field(default=False, description="Do not add the default security context.")
    cluster_queue: LabelValue | None = Field(default=None, description="Kueue ClusterQueue name.")
    priority_class: LabelValue | None = Field(
        default=None,
        description=(
            "Name of a Kubernetes PriorityClass assigned to the workload's pods; a Kueue"
            " WorkloadPriorityClass of that name also orders the workload in its queue."
        ),
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

    @model_validator(mode="after")
    def _secret_volumes_spare_storage(self) -> Self:
        raise_broken_rules("Spec", (SECRET_VOLUMES_SPARE_STORAGE_RULE,), self)
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
