"""The API server refuses an AIMNamespaceConfig whose Secret reference or gateway is given by
halves, naming the field (decision 0121). The object has no status, so before these rules the
operator ignored such a reference without a word: no HF_TOKEN, no download credential, no
HTTPRoute."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kaiwo_kube import Invalid, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter

from tests.real_cluster import RealCluster

pytestmark = pytest.mark.k8s

NAMESPACE = "aimns-rules"
TOGETHER = "secretName and secretKey must be given together (the Secret and its key)"
GATEWAY_NAME = "name is required when namespace is given (the Gateway the routes attach to)"


def config(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "AIMNamespaceConfig",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


@pytest.fixture
async def kube(real_cluster: RealCluster) -> AsyncIterator[KubernetesAsyncioAdapter]:
    async with await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig) as kube:
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        await kube.apply(namespace, field_manager="test")
        yield kube
        for item in (await kube.list(resources.AIM_NAMESPACE_CONFIG, namespace=NAMESPACE)).items:
            await kube.delete(
                resources.AIM_NAMESPACE_CONFIG, item["metadata"]["name"], namespace=NAMESPACE
            )


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        (
            {"credentials": {"huggingFaceToken": {"secretName": "hf-creds"}}},
            "spec.credentials.huggingFaceToken",
            TOGETHER,
        ),
        (
            {"credentials": {"huggingFaceToken": {"secretName": "", "secretKey": "token"}}},
            "spec.credentials.huggingFaceToken",
            TOGETHER,
        ),
        (
            {
                "credentials": {
                    "s3": [
                        {
                            "endpointUrl": "https://s3.example.com",
                            "accessKeyId": {"secretName": "s3", "secretKey": "id"},
                            "secretAccessKey": {"secretName": "s3"},
                        }
                    ]
                }
            },
            "spec.credentials.s3[0].secretAccessKey",
            TOGETHER,
        ),
        (
            {"credentials": {"gcs": [{"applicationCredentials": {"secretKey": "key.json"}}]}},
            "spec.credentials.gcs[0].applicationCredentials",
            TOGETHER,
        ),
        (
            {"credentials": {"azureBlob": [{"connectionString": {"secretName": "az"}}]}},
            "spec.credentials.azureBlob[0].connectionString",
            TOGETHER,
        ),
        ({"gateway": {"namespace": "gateway-system"}}, "spec.gateway.name", GATEWAY_NAME),
    ],
)
async def test_a_reference_given_by_halves_is_refused_naming_the_field(
    kube: KubernetesAsyncioAdapter, spec: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(Invalid) as raised:
        await kube.create(config("halves", spec))

    assert [(cause["field"], message in cause["message"]) for cause in raised.value.causes] == [
        (field, True)
    ]


async def test_whole_references_and_empty_ones_are_accepted(
    kube: KubernetesAsyncioAdapter,
) -> None:
    whole = {
        "gateway": {"name": "kgw", "namespace": "gateway-system"},
        "credentials": {
            "huggingFaceToken": {"secretName": "hf-creds", "secretKey": "token"},
            "s3": [{"endpointUrl": "https://s3.example.com"}],
            "gcs": [{"applicationCredentials": {}}],
        },
    }
    await kube.create(config("whole", whole))
    await kube.create(config("gateway-here", {"gateway": {"name": "kgw"}}))
    await kube.create(config("empty", {"gateway": {}, "credentials": {"huggingFaceToken": {}}}))

    listed = await kube.list(resources.AIM_NAMESPACE_CONFIG, namespace=NAMESPACE)
    assert sorted(item["metadata"]["name"] for item in listed.items) == [
        "empty",
        "gateway-here",
        "whole",
    ]
