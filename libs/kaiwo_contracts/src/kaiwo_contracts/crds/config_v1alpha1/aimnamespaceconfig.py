"""AIMNamespaceConfig (config.kaiwo.silogen.ai/v1alpha1): gateway and credentials of a namespace.

Namespaced, typically written by a tenant administrator: which KGateway serves the namespace's
AIM models, which Secrets hold the credentials for model sources and caches (Hugging Face, S3,
GCS, Azure Blob), and which image pull secrets reach private AIM images.

Upstream shipped this CRD (short name ``aimns``, a Gateway printer column, no status
subresource, every field optional) without a controller. Here the planner acts on it: the
config in a workload's namespace adds its image pull secrets to the generated pods, fills in
credentials a download item or the Hugging Face token leaves out, and exposes KaiwoServices
through an HTTPRoute on the named gateway (docs/aimnamespaceconfig.md says exactly how).

The CRD is in the ``kaiwo`` category but not in ``all``: ``kubectl get all`` lists workloads,
not configuration objects.

A Secret reference needs both its ``secretName`` and its ``secretKey``, and a gateway that
names a namespace needs its ``name``: the API server refuses either given by halves
(:data:`SECRET_REFERENCE_RULE`, :data:`GATEWAY_RULE`; decision 0121), since the object has
no status on which the operator could say it ignores them. These rules live in the CRD only:
an object stored before them still parses, and the planner ignores such a half as before,
rather than dropping the namespace's whole configuration.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import ConfigDict, Field
from pydantic.config import JsonDict

from kaiwo_contracts.crds.base import CrdInfo, KubeModel, PrinterColumn
from kaiwo_contracts.crds.cel_rules import CEL_VALIDATIONS
from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import API_VERSION, GROUP, VERSION
from kaiwo_contracts.crds.config_v1alpha1.type_meta import TypedObject
from kaiwo_contracts.crds.meta import ListMeta, ObjectMeta


def _given(field: str) -> str:
    return f"(has(self.{field}) && self.{field} != '')"


SECRET_REFERENCE_RULE: JsonDict = {
    "rule": f"{_given('secretName')} == {_given('secretKey')}",
    "message": "secretName and secretKey must be given together (the Secret and its key)",
}
"""Upstream takes either alone, and nothing uses such a reference: no HF_TOKEN, no download
credential, and no word of it anywhere (the workloads' own references are refused alike)."""
GATEWAY_RULE: JsonDict = {
    # ``namespace`` is a CEL keyword: the API server names the field ``__namespace__``.
    "rule": f"!{_given('__namespace__')} || {_given('name')}",
    "message": "name is required when namespace is given (the Gateway the routes attach to)",
    "fieldPath": ".name",
}


class SecretValueReference(KubeModel):
    """One key of a Secret in the same namespace (for example ``hf-creds`` / ``token``)."""

    model_config = ConfigDict(json_schema_extra={CEL_VALIDATIONS: [SECRET_REFERENCE_RULE]})

    secret_name: str | None = Field(default=None, description="Name of the Secret.")
    secret_key: str | None = Field(default=None, description="Key within the Secret.")


class AIMS3Credential(KubeModel):
    """Credentials for one S3 endpoint."""

    endpoint_url: str | None = Field(default=None, description="The S3 endpoint.")
    access_key_id: SecretValueReference | None = None
    secret_access_key: SecretValueReference | None = None


class AIMGCSCredential(KubeModel):
    """A GCS service account; the Secret key holds the account's JSON key file."""

    application_credentials: SecretValueReference | None = None


class AIMAzureBlobCredential(KubeModel):
    """An Azure Blob Storage connection string."""

    connection_string: SecretValueReference | None = None


class AIMNamespaceCredentials(KubeModel):
    """Credentials for model discovery and caching; any number of providers."""

    hugging_face_token: SecretValueReference | None = Field(
        default=None, description="Token to access Hugging Face repositories."
    )
    s3: list[AIMS3Credential] | None = Field(default=None, description="S3 credentials.")
    gcs: list[AIMGCSCredential] | None = Field(default=None, description="GCS credentials.")
    azure_blob: list[AIMAzureBlobCredential] | None = Field(
        default=None, description="Azure Blob credentials."
    )


class AIMNamespaceImageConfig(KubeModel):
    """Image pull configuration for AIM images in the namespace."""

    image_pull_secrets: list[str] | None = Field(
        default=None, description="Names of Secrets used to pull AIM images."
    )


class GatewayRef(KubeModel):
    """The KGateway instance the namespace uses for exposure and routing."""

    model_config = ConfigDict(json_schema_extra={CEL_VALIDATIONS: [GATEWAY_RULE]})

    name: str | None = Field(default=None, description="Name of the gateway object.")
    namespace: str | None = Field(default=None, description="Namespace of the gateway object.")


class AIMNamespaceConfigSpec(KubeModel):
    """Desired configuration of an AIM-enabled namespace."""

    gateway: GatewayRef | None = Field(
        default=None, description="KGateway instance for exposure and routing."
    )
    credentials: AIMNamespaceCredentials | None = Field(
        default=None, description="Secret references for model access and caching."
    )
    images: AIMNamespaceImageConfig | None = Field(
        default=None, description="Image pull behaviour for AIM images."
    )


class AIMNamespaceConfig(TypedObject):
    """Credentials and routing for one namespace."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="AIMNamespaceConfig",
        plural="aimnamespaceconfigs",
        scope="Namespaced",
        short_names=("aimns",),
        categories=("kaiwo",),
        printer_columns=(
            PrinterColumn(name="Gateway", type="string", json_path=".spec.gateway.name"),
            PrinterColumn(name="Age", type="date", json_path=".metadata.creationTimestamp"),
        ),
        status_subresource=False,
        description=(
            "AIMNamespaceConfig configures credentials and routing for a namespace. "
            "It is namespaced and typically created by a tenant administrator."
        ),
    )

    api_version: Literal["config.kaiwo.silogen.ai/v1alpha1"] = API_VERSION
    kind: Literal["AIMNamespaceConfig"] = "AIMNamespaceConfig"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: AIMNamespaceConfigSpec = Field(default_factory=AIMNamespaceConfigSpec)


class AIMNamespaceConfigList(TypedObject):
    """A list of AIMNamespaceConfig objects, as the API server returns it."""

    api_version: Literal["config.kaiwo.silogen.ai/v1alpha1"] = API_VERSION
    kind: Literal["AIMNamespaceConfigList"] = "AIMNamespaceConfigList"
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[AIMNamespaceConfig]
