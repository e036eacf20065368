"""KubeAI's Model (kubeai.org/v1): an ML model served behind an OpenAI-compatible API.

Field for field the KubeAI API, with its CEL rules twice: as ``x-kubernetes-validations`` in the
schema (what the API server enforces) and as pydantic checks (so ``kaiwo validate`` catches the
same mistakes offline, each error located at the field it is about). Rules comparing an update
with the previous object (``oldSelf``) cannot be checked on one object; call
:meth:`Model.update_violations`.

Where the API reference (the seed) and upstream's Go code differ, the reference wins:

* ``features`` accepts ``TextGeneration``, ``TextEmbedding`` and ``SpeechToText`` (upstream
  later added ``Reranking``);
* ``loadBalancing.prefixHash.replication`` defaults to 20 (upstream now 256);
* ``features`` is optional (upstream's CRD requires the key, the reference does not).

Beyond the reference, ``replication`` lies in [1, :data:`MAX_RING_REPLICATION`]: the gateway
builds a ring of replication x endpoints points, and one Model with a huge value would take the
memory of the gateway every Model shares (decision 0032).

Upstream fields the reference predates are modelled too: ``envFrom``, ``files`` and
``priorityClassName``. Beyond upstream, ``resourceProfile`` is checked to have the
``<profile>:<count>`` form the controller otherwise rejects at reconcile time, and the CRD gets
printer columns and a short name. The scale subresource has no label selector path, as upstream.
"""

from __future__ import annotations

from typing import ClassVar, Final, Literal, Self

from pydantic import ConfigDict, Field, model_validator

from kaiwo_contracts.crds.base import CrdInfo, KubeModel, PrinterColumn, ScaleSubresource
from kaiwo_contracts.crds.cel_rules import (
    CEL_VALIDATIONS,
    CelRule,
    RuleViolation,
    raise_violations,
)
from kaiwo_contracts.crds.kubeai_v1.model_spec import (
    RESOURCE_PROFILE_PATTERN,
    Engine,
    ModelFeature,
    ModelSpec,
)
from kaiwo_contracts.crds.kubeai_v1.model_status import (
    ModelStatus,
    ModelStatusCache,
    ModelStatusReplicas,
)
from kaiwo_contracts.crds.kubeai_v1.spec_parts import (
    ADAPTER_URL_SCHEMES,
    CACHEABLE_URL_SCHEMES,
    MAX_RING_REPLICATION,
    MODEL_URL_SCHEMES,
    Adapter,
    File,
    LoadBalancing,
    LoadBalancingStrategy,
    PrefixHash,
)
from kaiwo_contracts.crds.meta import ListMeta, ObjectMeta

__all__ = [
    "ADAPTER_URL_SCHEMES",
    "API_VERSION",
    "CACHEABLE_URL_SCHEMES",
    "CEL_VALIDATIONS",
    "GROUP",
    "MAX_MODEL_NAME_LENGTH",
    "MAX_RING_REPLICATION",
    "MODEL_URL_SCHEMES",
    "RESOURCE_PROFILE_PATTERN",
    "VERSION",
    "Adapter",
    "Engine",
    "File",
    "LoadBalancing",
    "LoadBalancingStrategy",
    "Model",
    "ModelFeature",
    "ModelList",
    "ModelSpec",
    "ModelStatus",
    "ModelStatusCache",
    "ModelStatusReplicas",
    "PrefixHash",
    "RuleViolation",
]


GROUP: Final = "kubeai.org"
VERSION: Final = "v1"
API_VERSION: Final = "kubeai.org/v1"
MAX_MODEL_NAME_LENGTH: Final = 40

_NAME_RULE = CelRule[ObjectMeta](
    rule=f"size(self.metadata.name) <= {MAX_MODEL_NAME_LENGTH}",
    message=f"name must not exceed {MAX_MODEL_NAME_LENGTH} characters.",
    field="metadata.name",
    holds=lambda meta: meta.name is None or len(meta.name) <= MAX_MODEL_NAME_LENGTH,
)


class Model(KubeModel):
    """A model KubeAI serves (kubeai.org/v1 Model)."""

    model_config = ConfigDict(json_schema_extra={CEL_VALIDATIONS: [_NAME_RULE.schema_entry()]})

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="Model",
        plural="models",
        scope="Namespaced",
        short_names=("mdl",),
        categories=("kubeai",),
        printer_columns=(
            PrinterColumn(name="Engine", type="string", json_path=".spec.engine"),
            PrinterColumn(name="Features", type="string", json_path=".spec.features"),
            PrinterColumn(
                name="Replicas",
                type="integer",
                json_path=".status.replicas.all",
                description="Pods of the model, terminating ones included.",
            ),
            PrinterColumn(name="Ready", type="integer", json_path=".status.replicas.ready"),
            PrinterColumn(name="URL", type="string", json_path=".spec.url", priority=1),
            PrinterColumn(
                name="Profile", type="string", json_path=".spec.resourceProfile", priority=1
            ),
            PrinterColumn(name="Age", type="date", json_path=".metadata.creationTimestamp"),
        ),
        status_subresource=True,
        scale=ScaleSubresource(
            spec_replicas_path=".spec.replicas",
            status_replicas_path=".status.replicas.all",
        ),
        description="Model resources define the ML models that will be served by KubeAI.",
    )

    api_version: Literal["kubeai.org/v1"] = API_VERSION
    kind: Literal["Model"] = "Model"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ModelSpec
    status: ModelStatus | None = None

    @model_validator(mode="after")
    def _name_fits(self) -> Self:
        self.__pydantic_fields_set__.update({"api_version", "kind"})
        if not _NAME_RULE.holds(self.metadata):
            raise_violations("Model", [(_NAME_RULE.field, _NAME_RULE.message, self.metadata.name)])
        return self

    def update_violations(self, *, previous: Model) -> list[RuleViolation]:
        """The ``oldSelf`` rules an update from ``previous`` to this object breaks."""
        return [
            RuleViolation(field=f"spec.{violation.field}", message=violation.message)
            for violation in self.spec.update_violations(previous=previous.spec)
        ]


class ModelList(KubeModel):
    """A list of Models, as the API server returns it."""

    api_version: Literal["kubeai.org/v1"] = API_VERSION
    kind: Literal["ModelList"] = "ModelList"
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[Model]

    @model_validator(mode="after")
    def _always_send_type_meta(self) -> Self:
        self.__pydantic_fields_set__.update({"api_version", "kind"})
        return self
