"""The real API server refuses hostile quantities and durations with the CRDs' own rules, and
agrees with `kaiwo validate` on a KubeAI Model's replica bounds.

Each hostile value is created on the session's real kube-apiserver (``real_cluster``, the
generated CRDs installed) and must come back as 422 Invalid naming the field; the valid value
next to it must be accepted. Expected fields are written out by hand.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kaiwo_contracts.validation import validate_manifest
from kaiwo_kube import Invalid, KubeError, NotFound
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kube.resources import NAMESPACE

from tests.real_cluster import RealCluster

pytestmark = [pytest.mark.k8s]

KAIWO_API = "kaiwo.silogen.ai/v1alpha1"


@pytest.fixture
async def kube(real_cluster: RealCluster) -> AsyncIterator[tuple[KubernetesAsyncioAdapter, str]]:
    adapter = await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig)
    namespace = f"hostile-grammar-{uuid.uuid4().hex[:6]}"
    await adapter.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    try:
        yield adapter, namespace
    finally:
        with contextlib.suppress(NotFound):
            await adapter.delete(NAMESPACE, namespace)
        await adapter.close()


def job(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": KAIWO_API,
        "kind": "KaiwoJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"image": "busybox", **spec},
    }


def storage(size: str) -> dict[str, Any]:
    return {"storageEnabled": True, "data": {"storageSize": size}}


def resources(memory: Any) -> dict[str, Any]:
    return {"requests": {"memory": memory}}


# (case, spec fields, the field the 422 names)
REFUSED_ON_A_JOB = [
    ("exponent-and-suffix", {"storage": storage("1e100Gi")}, "spec.storage.data.storageSize"),
    ("not-a-number", {"storage": storage("NaN")}, "spec.storage.data.storageSize"),
    ("negative-size", {"storage": storage("-10Gi")}, "spec.storage.data.storageSize"),
    ("two-decimal-points", {"storage": storage("1.5.5Gi")}, "spec.storage.data.storageSize"),
    ("negative-request", {"resources": resources("-1Gi")}, "spec.resources.requests.memory"),
    ("negative-integer", {"resources": resources(-5)}, "spec.resources.requests.memory"),
    ("lower-case-binary", {"resources": resources("1gi")}, "spec.resources.requests.memory"),
    ("duration-overflow", {"duration": "99999999999999h"}, "spec.duration"),
    ("duration-with-days", {"duration": "1d"}, "spec.duration"),
    ("replicas-beyond-int32", {"replicas": 2**31}, "spec.replicas"),
    ("gpus-beyond-int32", {"gpus": 2**40}, "spec.gpus"),
    ("gpus-per-replica-zero", {"gpusPerReplica": 0, "replicas": 1}, "spec.gpusPerReplica"),
    ("gpu-vendor-newline", {"gpuVendor": "amd\nnvidia"}, "spec.gpuVendor"),
    ("gpu-vendor-final-newline", {"gpuVendor": "amd\n"}, "spec.gpuVendor"),
    ("queue-final-newline", {"clusterQueue": "kaiwo\n"}, "spec.clusterQueue"),
]

# Names `kaiwo validate` refuses; the API server must refuse each too (a custom resource's
# name is a DNS-1123 subdomain, a namespace's a DNS-1123 label).
REFUSED_NAMES = [
    ("10,000 characters", "a" * 10_000),
    ("zero-width space", "ab\u200bc"),
    ("right-to-left override", "ab\u202ec"),
    ("path", "../../etc/passwd"),
    ("capitals and underscore", "ML_Team"),
]


@pytest.mark.parametrize(
    ("case", "spec", "field"), REFUSED_ON_A_JOB, ids=[case for case, _, _ in REFUSED_ON_A_JOB]
)
async def test_the_api_server_refuses_a_hostile_value_naming_the_field(
    kube: tuple[KubernetesAsyncioAdapter, str], case: str, spec: dict[str, Any], field: str
) -> None:
    adapter, namespace = kube

    with pytest.raises(Invalid) as refused:
        await adapter.create(job(case, namespace, **spec))

    assert refused.value.code == 422
    assert field in [cause.get("field") for cause in refused.value.causes], refused.value.causes


async def test_the_api_server_accepts_the_valid_values_next_to_them(
    kube: tuple[KubernetesAsyncioAdapter, str],
) -> None:
    adapter, namespace = kube
    valid = job(
        "valid-grammar",
        namespace,
        storage=storage("1.5Gi"),
        resources={"requests": {"memory": "512Mi", "cpu": "500m"}, "limits": {"cpu": 2}},
        duration="2562047h",
        replicas=2**31 - 1,
        gpus=0,
    )

    created = await adapter.create(valid)

    assert created["spec"]["storage"]["data"]["storageSize"] == "1.5Gi"
    assert created["spec"]["duration"] == "2562047h"


async def test_a_queue_quota_and_the_config_durations_follow_the_same_grammar(
    kube: tuple[KubernetesAsyncioAdapter, str],
) -> None:
    adapter, _ = kube
    flavors = [{"name": "gpu", "resources": [{"name": "amd.com/gpu", "nominalQuota": "-8"}]}]
    queue_config = {
        "apiVersion": KAIWO_API,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": f"hostile-{uuid.uuid4().hex[:6]}"},
        "spec": {
            "clusterQueues": [
                {
                    "name": "q",
                    "spec": {
                        "resourceGroups": [
                            {"coveredResources": ["amd.com/gpu"], "flavors": flavors}
                        ]
                    },
                }
            ]
        },
    }
    with pytest.raises(Invalid) as refused:
        await adapter.create(queue_config)
    fields = [cause.get("field") for cause in refused.value.causes]
    assert (
        "spec.clusterQueues[0].spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
        in fields
    ), fields

    config = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {
            "scheduling": {"pendingThresholdForPreemption": "99999999999999h"},
            "ray": {"headPodMemory": "NaN"},
        },
    }
    with pytest.raises(Invalid) as refused:
        await adapter.create(config)
    fields = [cause.get("field") for cause in refused.value.causes]
    assert "spec.scheduling.pendingThresholdForPreemption" in fields, fields
    assert "spec.ray.headPodMemory" in fields, fields


@pytest.mark.parametrize(("case", "name"), REFUSED_NAMES, ids=[c for c, _ in REFUSED_NAMES])
async def test_the_api_server_refuses_the_names_kaiwo_validate_refuses(
    kube: tuple[KubernetesAsyncioAdapter, str], case: str, name: str
) -> None:
    adapter, namespace = kube
    manifest = job(name, namespace)
    as_namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}

    assert [p.path for p in validate_manifest(manifest)] == ["metadata.name"], case
    assert [
        p.path
        for p in validate_manifest({**manifest, "metadata": {"name": "ok", "namespace": name}})
    ] == ["metadata.namespace"], case
    with pytest.raises(KubeError) as refused:
        await adapter.create(manifest)
    # A name with "/" cannot even be a path segment: refused before validation names a field.
    assert refused.value.code in (400, 422), refused.value
    if refused.value.code == 422:
        assert isinstance(refused.value, Invalid)
        assert "metadata.name" in [c.get("field") for c in refused.value.causes]
    with pytest.raises(Invalid) as refused_namespace:
        await adapter.create(as_namespace)
    assert "metadata.name" in [c.get("field") for c in refused_namespace.value.causes]


# ------------------------------------------------------------------ a Model's replica bounds


def model(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"url": "hf://org/m", "engine": "VLLM", **spec},
    }


REPLICA_BOUNDS_MESSAGE = "minReplicas should be less than or equal to maxReplicas."
# Bounds `kaiwo validate` accepts; the API server must store each as written. `minReplicas` is
# optional with no CRD default (0 when unset), so the rule must not read it when it is absent.
ACCEPTED_REPLICA_BOUNDS = [
    ("max-without-min", {"maxReplicas": 3}),
    ("min-without-max", {"minReplicas": 2}),
    ("min-equal-to-max", {"minReplicas": 2, "maxReplicas": 2}),
    ("zero-min-below-max", {"minReplicas": 0, "maxReplicas": 1}),
]


@pytest.mark.parametrize(
    ("case", "spec"), ACCEPTED_REPLICA_BOUNDS, ids=[case for case, _ in ACCEPTED_REPLICA_BOUNDS]
)
async def test_the_api_server_accepts_the_replica_bounds_kaiwo_validate_accepts(
    kube: tuple[KubernetesAsyncioAdapter, str], case: str, spec: dict[str, Any]
) -> None:
    adapter, namespace = kube
    manifest = model(case, namespace, **spec)
    assert validate_manifest(manifest) == []

    created = await adapter.create(manifest)

    assert created["spec"].get("minReplicas") == spec.get("minReplicas")
    assert created["spec"].get("maxReplicas") == spec.get("maxReplicas")


async def test_a_min_above_the_max_is_refused_by_both_with_the_rules_message(
    kube: tuple[KubernetesAsyncioAdapter, str],
) -> None:
    adapter, namespace = kube
    manifest = model("min-above-max", namespace, minReplicas=4, maxReplicas=3)
    assert [(p.path, p.message) for p in validate_manifest(manifest)] == [
        ("spec.minReplicas", REPLICA_BOUNDS_MESSAGE)
    ]

    with pytest.raises(Invalid) as refused:
        await adapter.create(manifest)

    assert [(c.get("field"), c.get("message")) for c in refused.value.causes] == [
        ("spec", f"Invalid value: {REPLICA_BOUNDS_MESSAGE}")
    ], refused.value.causes
