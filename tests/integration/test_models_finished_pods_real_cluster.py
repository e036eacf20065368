"""A Model's server Pod that finished (evicted by its kubelet) on the real API server: the
operator deletes it and runs another in its place (decision 0253). The test plays the
kubelet (there is none), writing the Pods' status as a kubelet does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kaiwo_kube import resources

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pending, Pipeline, eventually
from tests.integration.pipeline.model_actors import (
    a_model,
    apply_models_config,
    model_pods,
    remove_models_config,
    serving,
)

pytestmark = [
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.k8s,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.parametrize("shared_pipeline", ["real"], indirect=True),
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def models_config(shared_pipeline: Pipeline) -> AsyncIterator[None]:
    await apply_models_config(shared_pipeline.kube)
    try:
        yield
    finally:
        await remove_models_config(shared_pipeline.kube)


async def test_an_evicted_server_pod_is_deleted_and_replaced(
    shared_pipeline: Pipeline, models_config: None
) -> None:
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    await kube.create(
        a_model(
            "evicted",
            namespace,
            url="hf://org/evicted",
            engine="VLLM",
            resourceProfile="cpu:1",
            replicas=2,
            autoscalingDisabled=True,
        )
    )
    await serving(pipeline, "evicted", 2)
    [evicted, kept] = await model_pods(kube, namespace, "evicted")

    # What a kubelet writes when it evicts a Pod under node pressure: the Pod stays, Failed.
    await kube.patch_status(
        resources.POD,
        evicted["metadata"]["name"],
        {
            "phase": "Failed",
            "reason": "Evicted",
            "message": "The node was low on resource: memory.",
            "conditions": [
                {"type": "Ready", "status": "False", "lastTransitionTime": actors.now()},
                {"type": "ContainersReady", "status": "False", "lastTransitionTime": actors.now()},
            ],
        },
        namespace=namespace,
        field_manager="kubelet",
        method="merge",
    )

    async def replaced() -> list[dict[str, Any]] | Pending:
        pods = await model_pods(kube, namespace, "evicted")
        uids = [p["metadata"]["uid"] for p in pods]
        if evicted["metadata"]["uid"] in uids or len(pods) != 2:
            return Pending(f"Pods {[p['metadata']['name'] for p in pods]}")
        return pods

    pods = await eventually(replaced, what="the evicted Pod deleted and replaced")
    assert kept["metadata"]["uid"] in [p["metadata"]["uid"] for p in pods]
    found = await serving(pipeline, "evicted", 2)
    assert found["status"]["replicas"] == {"all": 2, "ready": 2}
    await kube.delete(resources.KUBEAI_MODEL, "evicted", namespace=namespace)
