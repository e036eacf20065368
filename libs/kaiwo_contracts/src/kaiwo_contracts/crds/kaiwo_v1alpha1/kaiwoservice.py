"""KaiwoService: a long-running service run as a Deployment or a RayService."""

from __future__ import annotations

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
from kaiwo_contracts.crds.meta import ListMeta, ObjectMeta

EmbeddedDeployment = Annotated[EmbeddedObject, embedded_kind("Deployment")]
EmbeddedRayService = Annotated[EmbeddedObject, embedded_kind("RayService")]


class KaiwoServiceSpec(CommonMetaSpec):
    """The desired state of a KaiwoService.

    ``rayService`` or ``ray: true`` makes it a RayService (admitted through an AppWrapper),
    otherwise an apps/v1 Deployment; ``deployment`` and ``rayService`` are whole objects used
    as the base of the child, with unknown fields kept.
    """

    entrypoint: str | None = Field(
        default=None,
        description="Command or script of the Deployment's main container (not used by Ray).",
    )
    serve_config_v2: str | None = Field(
        default=None, description="Ray Serve applications, as a multi-line YAML string."
    )
    ray_service: EmbeddedRayService | None = Field(
        default=None, description="A full ray.io/v1 RayService."
    )
    deployment: EmbeddedDeployment | None = Field(
        default=None, description="A full apps/v1 Deployment."
    )

    @property
    def is_ray_service(self) -> bool:
        """The child is a RayService (``rayService`` given or ``ray: true``)."""
        return self.ray or self.ray_service is not None

    @field_validator("ray_service")
    @classmethod
    def _ray_service_asks_for_one_vendors_gpus(
        cls, ray_service: EmbeddedRayService | None, info: ValidationInfo
    ) -> EmbeddedRayService | None:
        # Kaiwo gives the pods their GPUs under gpuVendor's key; another vendor's key in a
        # group's template was kept beside it and the pods waited for good (decision 0161).
        refused = other_vendor_gpu_key_refusal(
            ray_service, info.data, owner_kind="KaiwoService", cluster_key="rayClusterConfig"
        )
        if refused is not None:
            raise PydanticCustomError(*refused)
        return ray_service

    @field_validator("deployment")
    @classmethod
    def _deployment_asks_for_one_vendors_gpus(
        cls, deployment: EmbeddedDeployment | None, info: ValidationInfo
    ) -> EmbeddedDeployment | None:
        # The same for a given Deployment's template, when it is the child (decision 0161).
        if info.data.get("ray") or info.data.get("ray_service") is not None:
            return deployment
        refused = other_vendor_gpu_key_refusal(deployment, info.data, owner_kind="KaiwoService")
        if refused is not None:
            raise PydanticCustomError(*refused)
        return deployment


class KaiwoServiceStatus(CommonStatus):
    """The observed state of a KaiwoService."""


class KaiwoService(KaiwoObject):
    """A long-running service managed by Kaiwo (a Deployment or a RayService)."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="KaiwoService",
        plural="kaiwoservices",
        scope="Namespaced",
        short_names=("ks", "kaiwosvc"),
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("Status", "string", ".status.status"),
            PrinterColumn("StartTime", "string", ".status.startTime"),
            PrinterColumn("Duration(s)", "integer", ".status.duration"),
        ),
        status_subresource=True,
        description=(
            "KaiwoService represents a long-running service workload managed by Kaiwo: a "
            "Deployment or a RayService, with common metadata, storage and scheduling "
            "preferences."
        ),
    )

    api_version: Literal["kaiwo.silogen.ai/v1alpha1"] = API_VERSION
    kind: Literal["KaiwoService"] = "KaiwoService"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: KaiwoServiceSpec = Field(default_factory=KaiwoServiceSpec)
    status: KaiwoServiceStatus = Field(default_factory=KaiwoServiceStatus)


class KaiwoServiceList(KaiwoObjectList):
    """A list of KaiwoServices."""

    item_kind: ClassVar[str] = "KaiwoService"

    api_version: Literal["kaiwo.silogen.ai/v1alpha1"] = API_VERSION
    kind: Literal["KaiwoServiceList"] = "KaiwoServiceList"
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[KaiwoService] = Field(default_factory=list)
