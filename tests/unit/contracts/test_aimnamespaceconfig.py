"""AIMNamespaceConfig: shape, validation messages, lossless round trips, the example."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from kaiwo_contracts.crds.base import PrinterColumn
from kaiwo_contracts.crds.config_v1alpha1 import (
    AIMNamespaceConfig,
    AIMNamespaceConfigList,
    AIMNamespaceConfigSpec,
    GatewayRef,
    SecretValueReference,
)
from kaiwo_contracts.crds.meta import ObjectMeta
from pydantic import ValidationError

AIMNAMESPACECONFIG_FROM_API: dict[str, Any] = {
    "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
    "kind": "AIMNamespaceConfig",
    "metadata": {
        "name": "aim",
        "namespace": "ml-prod",
        "uid": "b2b7f0a4-61a4-4a55-9a7e-0f3f2b1c9d10",
        "resourceVersion": "77120",
        "generation": 1,
        "creationTimestamp": "2025-11-03T14:20:00Z",
    },
    "spec": {
        "gateway": {"name": "kgw-default", "namespace": "gateway-system"},
        "credentials": {
            "huggingFaceToken": {"secretName": "hf-creds", "secretKey": "token"},
            "s3": [
                {
                    "endpointUrl": "https://s3.us-east-1.amazonaws.com",
                    "accessKeyId": {"secretName": "s3-creds", "secretKey": "accessKeyId"},
                    "secretAccessKey": {"secretName": "s3-creds", "secretKey": "secretAccessKey"},
                }
            ],
            "gcs": [{"applicationCredentials": {"secretName": "gcs-sa", "secretKey": "key.json"}}],
            "azureBlob": [{"connectionString": {"secretName": "azure", "secretKey": "conn"}}],
        },
        "images": {"imagePullSecrets": ["my-regcred", "another-secret"]},
    },
}


def _single_error(error: ValidationError) -> tuple[tuple[str | int, ...], str]:
    errors = error.errors()
    assert len(errors) == 1, errors
    return errors[0]["loc"], errors[0]["msg"]


def test_an_object_from_the_api_server_round_trips_unchanged() -> None:
    parsed = AIMNamespaceConfig.from_wire(copy.deepcopy(AIMNAMESPACECONFIG_FROM_API))

    assert parsed.to_wire() == AIMNAMESPACECONFIG_FROM_API


def test_fields_read_in_python_names() -> None:
    spec = AIMNamespaceConfig.from_wire(copy.deepcopy(AIMNAMESPACECONFIG_FROM_API)).spec

    assert spec.gateway == GatewayRef(name="kgw-default", namespace="gateway-system")
    assert spec.credentials is not None
    assert spec.credentials.hugging_face_token == SecretValueReference(
        secret_name="hf-creds", secret_key="token"
    )
    assert spec.credentials.s3 is not None
    assert spec.credentials.s3[0].endpoint_url == "https://s3.us-east-1.amazonaws.com"
    assert spec.credentials.s3[0].secret_access_key == SecretValueReference(
        secret_name="s3-creds", secret_key="secretAccessKey"
    )
    assert spec.credentials.gcs is not None
    assert spec.credentials.gcs[0].application_credentials == SecretValueReference(
        secret_name="gcs-sa", secret_key="key.json"
    )
    assert spec.credentials.azure_blob is not None
    assert spec.credentials.azure_blob[0].connection_string == SecretValueReference(
        secret_name="azure", secret_key="conn"
    )
    assert spec.images is not None
    assert spec.images.image_pull_secrets == ["my-regcred", "another-secret"]


def test_every_field_is_optional() -> None:
    config = AIMNamespaceConfig.from_wire(
        {
            "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
            "kind": "AIMNamespaceConfig",
            "metadata": {"name": "empty", "namespace": "team-a"},
            "spec": {"credentials": {"s3": [{}]}, "gateway": {}},
        }
    )

    assert config.spec.images is None
    assert config.spec.gateway == GatewayRef(name=None, namespace=None)
    assert config.spec.credentials is not None
    assert config.spec.credentials.hugging_face_token is None
    assert config.spec.credentials.s3 is not None
    assert config.spec.credentials.s3[0].endpoint_url is None


def test_an_object_built_in_python_is_sent_with_its_type() -> None:
    config = AIMNamespaceConfig(
        metadata=ObjectMeta(name="aim", namespace="team-a"),
        spec=AIMNamespaceConfigSpec(gateway=GatewayRef(name="kgw")),
    )

    assert config.to_wire() == {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "AIMNamespaceConfig",
        "metadata": {"name": "aim", "namespace": "team-a"},
        "spec": {"gateway": {"name": "kgw"}},
    }


def test_a_list_round_trips() -> None:
    wire = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "AIMNamespaceConfigList",
        "metadata": {"resourceVersion": "77121"},
        "items": [copy.deepcopy(AIMNAMESPACECONFIG_FROM_API)],
    }

    parsed = AIMNamespaceConfigList.from_wire(copy.deepcopy(wire))

    assert parsed.items[0].metadata.namespace == "ml-prod"
    assert parsed.to_wire() == wire


@pytest.mark.parametrize(
    ("spec", "loc", "message"),
    [
        (
            {"credentials": {"huggingFaceToken": {"secretName": "hf", "key": "token"}}},
            ("spec", "credentials", "huggingFaceToken", "key"),
            "Extra inputs are not permitted",
        ),
        (
            {"credentials": {"s3": {"endpointUrl": "https://s3"}}},
            ("spec", "credentials", "s3"),
            "Input should be a valid list",
        ),
        (
            {"images": {"imagePullSecrets": [{"name": "regcred"}]}},
            ("spec", "images", "imagePullSecrets", 0),
            "Input should be a valid string",
        ),
        (
            {"gateway": "kgw-default"},
            ("spec", "gateway"),
            "Input should be a valid dictionary or instance of GatewayRef",
        ),
    ],
)
def test_malformed_specs_are_rejected_at_the_field(
    spec: dict[str, Any], loc: tuple[str | int, ...], message: str
) -> None:
    wire = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "AIMNamespaceConfig",
        "metadata": {"name": "aim", "namespace": "team-a"},
        "spec": spec,
    }

    with pytest.raises(ValidationError) as caught:
        AIMNamespaceConfig.from_wire(wire)

    assert _single_error(caught.value) == (loc, message)


def test_the_kind_must_match() -> None:
    wire = copy.deepcopy(AIMNAMESPACECONFIG_FROM_API)
    wire["kind"] = "KaiwoConfig"

    with pytest.raises(ValidationError) as caught:
        AIMNamespaceConfig.from_wire(wire)

    assert _single_error(caught.value) == (("kind",), "Input should be 'AIMNamespaceConfig'")


def test_crd_is_namespaced_with_short_name_and_gateway_column() -> None:
    info = AIMNamespaceConfig.crd

    assert info.api_version == "config.kaiwo.silogen.ai/v1alpha1"
    assert info.crd_name == "aimnamespaceconfigs.config.kaiwo.silogen.ai"
    assert info.scope == "Namespaced"
    assert info.short_names == ("aimns",)
    assert info.categories == ("kaiwo",)
    assert info.status_subresource is False
    assert info.printer_columns == (
        PrinterColumn(name="Gateway", type="string", json_path=".spec.gateway.name"),
        PrinterColumn(name="Age", type="date", json_path=".metadata.creationTimestamp"),
    )


def test_the_example_configures_gateway_and_every_provider(repo_root: Path) -> None:
    wire = yaml.safe_load((repo_root / "examples" / "aimnamespaceconfig.yaml").read_text())

    config = AIMNamespaceConfig.from_wire(wire)

    credentials = config.spec.credentials
    assert credentials is not None
    assert config.spec.gateway == GatewayRef(name="kgw-default", namespace="gateway-system")
    assert credentials.hugging_face_token == SecretValueReference(
        secret_name="hf-creds", secret_key="token"
    )
    assert credentials.s3 is not None
    assert len(credentials.s3) == 2
    assert credentials.gcs is not None
    assert len(credentials.gcs) == 1
    assert credentials.azure_blob is not None
    assert len(credentials.azure_blob) == 1
    assert config.to_wire() == wire


TOGETHER_RULE = {
    "rule": "(has(self.secretName) && self.secretName != '') == "
    "(has(self.secretKey) && self.secretKey != '')",
    "message": "secretName and secretKey must be given together (the Secret and its key)",
}


def test_the_crd_refuses_references_given_by_halves(repo_root: Path) -> None:
    crd = yaml.safe_load(
        (repo_root / "deploy/k8s/crds/config.kaiwo.silogen.ai_aimnamespaceconfigs.yaml").read_text()
    )
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    credentials = spec["properties"]["credentials"]["properties"]

    def rules(schema: dict[str, Any]) -> list[dict[str, Any]]:
        return list(schema.get("x-kubernetes-validations", []))

    s3 = credentials["s3"]["items"]["properties"]
    assert rules(credentials["huggingFaceToken"]) == [TOGETHER_RULE]
    assert rules(s3["accessKeyId"]) == [TOGETHER_RULE]
    assert rules(s3["secretAccessKey"]) == [TOGETHER_RULE]
    gcs = credentials["gcs"]["items"]["properties"]["applicationCredentials"]
    assert rules(gcs) == [TOGETHER_RULE]
    azure = credentials["azureBlob"]["items"]["properties"]["connectionString"]
    assert rules(azure) == [TOGETHER_RULE]
    assert rules(spec["properties"]["gateway"]) == [
        {
            "rule": "!(has(self.__namespace__) && self.__namespace__ != '') || "
            "(has(self.name) && self.name != '')",
            "message": (
                "name is required when namespace is given (the Gateway the routes attach to)"
            ),
            "fieldPath": ".name",
        }
    ]


def test_an_object_stored_before_the_rules_still_parses() -> None:
    # The rules are the API server's only: such an object keeps its other settings (the
    # planner ignores the half reference, as before) instead of being dropped as invalid.
    wire = copy.deepcopy(AIMNAMESPACECONFIG_FROM_API)
    wire["spec"] = {
        "gateway": {"namespace": "gateway-system"},
        "credentials": {"huggingFaceToken": {"secretName": "hf-creds"}},
        "images": {"imagePullSecrets": ["regcred"]},
    }

    config = AIMNamespaceConfig.from_wire(wire)

    assert config.spec.images is not None
    assert config.spec.images.image_pull_secrets == ["regcred"]
