"""KaiwoJob: a batch workload run as a Kubernetes Job or a RayJob."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from kaiwo_contracts.crds.base import CrdInfo, EmbeddedObject, PrinterColumn
from kaiwo_contracts.crds.kaiwo_v1alpha1.common import (
    API_VERSION,
    CATEGORIES,
    GROUP,
    VERSION,
    CommonMetaSpec,
    CommonStatus,
    KaiwoObject,
    KaiwoObjectList,
    embedded_kind,
)
from kaiwo_contracts.crds.kaiwo_v1alpha1.gpu_vendor_keys import other_vendor_gpu_key_refusal
from kaiwo_contracts.crds.kaiwo_v1alpha1.kueue_job_annotations import (
    kueue_job_annotation_refusal,
)
from kaiwo_contracts.crds.meta import ListMeta, ObjectMeta

EmbeddedJob = Annotated[EmbeddedObject, embedded_kind("Job")]
EmbeddedRayJob = Annotated[EmbeddedObject, embedded_kind("RayJob")]


RAY_CLUSTER_SELECTOR_KEY = "ray.io/cluster"
"""The key of a RayJob's ``clusterSelector`` that names the RayCluster it runs on (KubeRay's
``RayJobClusterSelectorKey``, the only one it reads)."""


def on_existing_ray_cluster(ray_job: object) -> bool:
    """Whether a RayJob (a given ``rayJob``, or the child made from it; wire form, read
    defensively) runs on a Ray cluster that exists (``clusterSelector``, decision 0156)."""
    spec = ray_job.get("spec") if isinstance(ray_job, Mapping) else None
    return isinstance(spec, Mapping) and bool(spec.get("clusterSelector"))


class KaiwoJobSpec(CommonMetaSpec):
    """The desired state of a KaiwoJob.

    ``rayJob`` or ``ray: true`` makes it a RayJob, otherwise a batch/v1 Job; ``job`` and
    ``rayJob`` are whole objects used as the base of the child, with unknown fields kept.
    """

    entrypoint: str | None = Field(
        default=None,
        description=(
            "Command or script the main container runs (a Job's command, a RayJob's "
            "entrypoint); may be multi-line."
        ),
    )
    ray_job: EmbeddedRayJob | None = Field(default=None, description="A full ray.io/v1 RayJob.")
    job: EmbeddedJob | None = Field(default=None, description="A full batch/v1 Job.")

    @property
    def is_ray_job(self) -> bool:
        """The child is a RayJob (``rayJob`` given or ``ray: true``)."""
        return self.ray or self.ray_job is not None

    @field_validator("ray_job")
    @classmethod
    def _ray_job_deletes_its_cluster(cls, ray_job: EmbeddedRayJob | None) -> EmbeddedRayJob | None:
        # Kaiwo queues every RayJob in Kueue, whose RayJob webhook refuses one that makes its
        # own cluster and keeps it after the job (decision 0151): the RayJob would never be
        # made. Left out, Kaiwo sets it true; an explicit false is the user's, so refused here
        # with the user's field named rather than fought or quoted from Kueue.
        spec = (ray_job or {}).get("spec")
        if (
            isinstance(spec, dict)
            and spec.get("shutdownAfterJobFinishes") is False
            and not spec.get("clusterSelector")
        ):
            raise PydanticCustomError(
                "ray_job_keeps_its_cluster",
                "spec.shutdownAfterJobFinishes must not be false: Kaiwo queues the RayJob in "
                "Kueue, which admits a RayJob only when its Ray cluster is deleted after the "
                "job finishes; leave the field out (Kaiwo sets true) or set true",
            )
        return ray_job

    @field_validator("ray_job")
    @classmethod
    def _ray_job_names_its_existing_cluster(
        cls, ray_job: EmbeddedRayJob | None
    ) -> EmbeddedRayJob | None:
        # A RayJob with a clusterSelector runs on a RayCluster that exists (decision 0156).
        # KubeRay finds that cluster by the name under ray.io/cluster alone and refuses the
        # RayJob (ValidationFailed, for good) without it, with a backoffLimit above 0, in
        # SidecarMode, or with a deletion policy that deletes the cluster or its workers
        # (decision 0159); with a rayClusterSpec as well, it ignores the spec (and Kueue's
        # webhook refuses both). Refused here, naming the user's field, before anything is
        # made.
        if ray_job is None or not on_existing_ray_cluster(ray_job):
            return ray_job
        spec = ray_job["spec"]
        selector = spec["clusterSelector"]
        named = selector.get(RAY_CLUSTER_SELECTOR_KEY) if isinstance(selector, dict) else None
        if not isinstance(named, str) or not named:
            raise PydanticCustomError(
                "ray_job_names_no_cluster",
                "spec.clusterSelector must name the Ray cluster under the key ray.io/cluster "
                "(ray.io/cluster: <name of a RayCluster in the KaiwoJob's namespace>): "
                "KubeRay runs the RayJob on the RayCluster of that name and reads no other key",
            )
        if spec.get("rayClusterSpec") is not None:
            raise PydanticCustomError(
                "ray_job_two_clusters",
                "spec.clusterSelector and spec.rayClusterSpec must not both be given: with "
                "clusterSelector the RayJob runs on the existing cluster and rayClusterSpec "
                "is ignored; leave out one of them",
            )
        backoff = spec.get("backoffLimit")
        if isinstance(backoff, int) and not isinstance(backoff, bool) and backoff > 0:
            raise PydanticCustomError(
                "ray_job_retries_on_existing_cluster",
                "spec.backoffLimit must not be above 0 with spec.clusterSelector: KubeRay "
                "retries a RayJob on a cluster of its own, and refuses to retry one on an "
                "existing cluster; leave spec.backoffLimit out",
            )
        if spec.get("submissionMode") == "SidecarMode":
            raise PydanticCustomError(
                "ray_job_sidecar_on_existing_cluster",
                "spec.submissionMode must not be SidecarMode with spec.clusterSelector: in "
                "SidecarMode KubeRay submits the job from a container it adds to the head pod "
                "of the RayJob's own cluster, and refuses it on an existing cluster; leave "
                "spec.submissionMode out (K8sJobMode) or set K8sJobMode, HTTPMode or "
                "InteractiveMode",
            )
        deleting = _cluster_deleting_policy(spec.get("deletionStrategy"))
        if deleting is not None:
            path, policy = deleting
            raise PydanticCustomError(
                "ray_job_deletes_existing_cluster",
                "spec.deletionStrategy.{path} must not be {policy} with spec.clusterSelector: "
                "the existing Ray cluster is not the RayJob's to delete, and KubeRay refuses a "
                "RayJob on an existing cluster whose deletion policy deletes the cluster or "
                "its workers (DeleteCluster, DeleteWorkers); use DeleteSelf or DeleteNone",
                {"path": path, "policy": policy},
            )
        return ray_job

    @field_validator("job")
    @classmethod
    def _job_runs_as_given(
        cls, job: EmbeddedJob | None, info: ValidationInfo
    ) -> EmbeddedJob | None:
        # A given Job that Kueue or the nodes can never run is refused here, naming the
        # user's fields, before anything is made; the Job would otherwise wait PENDING for
        # good, told in Kueue's words or not at all:
        # - Kueue's partial-admission annotations, carried onto the Job (decisions 0153,
        #   0157), in combinations its Job webhook refuses (decision 0160);
        # - another vendor's GPU key in the template, kept beside the key Kaiwo gives the
        #   pods their GPUs under (decision 0161).
        # A RayJob's KaiwoJob makes no Job.
        if info.data.get("ray") or info.data.get("ray_job") is not None:
            return job
        refused = kueue_job_annotation_refusal(job) or other_vendor_gpu_key_refusal(
            job, info.data, owner_kind="KaiwoJob"
        )
        if refused is not None:
            raise PydanticCustomError(*refused)
        return job

    @field_validator("ray_job")
    @classmethod
    def _ray_job_asks_for_one_vendors_gpus(
        cls, ray_job: EmbeddedRayJob | None, info: ValidationInfo
    ) -> EmbeddedRayJob | None:
        # The same for the head and every worker group of the RayJob's cluster (decision 0161).
        refused = other_vendor_gpu_key_refusal(
            ray_job, info.data, owner_kind="KaiwoJob", cluster_key="rayClusterSpec"
        )
        if refused is not None:
            raise PydanticCustomError(*refused)
        return ray_job


CLUSTER_DELETING_POLICIES = ("DeleteCluster", "DeleteWorkers")
"""KubeRay's deletion policies that delete the RayJob's cluster or its workers: refused for a
RayJob on an existing cluster (``clusterSelector``), in the legacy ``onSuccess``/``onFailure``
form and in ``deletionRules`` alike (decision 0159)."""


def _cluster_deleting_policy(strategy: object) -> tuple[str, str] | None:
    """The first policy of a RayJob's ``deletionStrategy`` that deletes its cluster or its
    workers, as (its path under ``deletionStrategy``, the policy); None: none does."""
    if not isinstance(strategy, dict):
        return None
    given: list[tuple[str, object]] = []
    for when in ("onSuccess", "onFailure"):
        legacy = strategy.get(when)
        if isinstance(legacy, dict):
            given.append((f"{when}.policy", legacy.get("policy")))
    rules = strategy.get("deletionRules")
    if isinstance(rules, list):
        for index, rule in enumerate(rules):
            if isinstance(rule, dict):
                given.append((f"deletionRules[{index}].policy", rule.get("policy")))
    for path, policy in given:
        if isinstance(policy, str) and policy in CLUSTER_DELETING_POLICIES:
            return path, policy
    return None


class KaiwoJobStatus(CommonStatus):
    """The observed state of a KaiwoJob."""

    completion_time: datetime | None = Field(
        default=None, description="When the job finished, successfully or not."
    )


class KaiwoJob(KaiwoObject):
    """A batch workload managed by Kaiwo (a Job or a RayJob plus storage and scheduling)."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="KaiwoJob",
        plural="kaiwojobs",
        scope="Namespaced",
        short_names=("kj", "kjob"),
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("Status", "string", ".status.status"),
            PrinterColumn("StartTime", "string", ".status.startTime"),
            PrinterColumn("CompletionTime", "string", ".status.completionTime"),
            PrinterColumn("Duration(s)", "integer", ".status.duration"),
        ),
        status_subresource=True,
        description=(
            "KaiwoJob represents a batch workload managed by Kaiwo: a Kubernetes Job or a "
            "RayJob, with common metadata, storage and scheduling preferences."
        ),
    )

    api_version: Literal["kaiwo.silogen.ai/v1alpha1"] = API_VERSION
    kind: Literal["KaiwoJob"] = "KaiwoJob"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: KaiwoJobSpec = Field(default_factory=KaiwoJobSpec)
    status: KaiwoJobStatus = Field(default_factory=KaiwoJobStatus)


class KaiwoJobList(KaiwoObjectList):
    """A list of KaiwoJobs."""

    item_kind: ClassVar[str] = "KaiwoJob"

    api_version: Literal["kaiwo.silogen.ai/v1alpha1"] = API_VERSION
    kind: Literal["KaiwoJobList"] = "KaiwoJobList"
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[KaiwoJob] = Field(default_factory=list)
