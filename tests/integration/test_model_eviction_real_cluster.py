"""A cached Model deleted while its files load, on the real API server: the load Job goes in
the foreground, and the eviction starts only once it and its Pod are gone (decision 0255).
The test plays a kubelet slow to stop the loader (there is none): a finalizer of its own
holds the load Job's Pod, as a container still running past its grace period would."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, Final

import pytest
import pytest_asyncio
from kaiwo_kube import NotFound, resources

from tests.integration.pipeline.harness import OPERATOR_USER, Pending, Pipeline, eventually
from tests.integration.pipeline.model_actors import (
    a_model,
    apply_models_config,
    bound_cache_volume,
    condition,
    model,
    remove_models_config,
)

pytestmark = [
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.k8s,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.parametrize("shared_pipeline", ["real"], indirect=True),
]

STILL_STOPPING: Final = "kaiwo.test/loader-still-stopping"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def models_config(shared_pipeline: Pipeline) -> AsyncIterator[None]:
    await apply_models_config(shared_pipeline.kube)
    try:
        yield
    finally:
        await remove_models_config(shared_pipeline.kube)


async def _finalizers(pipeline: Pipeline, resource: resources.ResourceType, name: str) -> None:
    with contextlib.suppress(NotFound):
        await pipeline.kube.merge_patch(
            resource, name, {"metadata": {"finalizers": None}}, namespace=pipeline.namespace
        )


async def test_an_eviction_waits_for_the_load_job_and_its_pod_to_be_gone(
    shared_pipeline: Pipeline, models_config: None
) -> None:
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    audit_log = pipeline.audit_log
    assert audit_log is not None
    created = audit_log.mark()
    await kube.create(
        a_model(
            "midload",
            namespace,
            url="s3://models/qwen",
            engine="VLLM",
            resourceProfile="cpu:1",
            cacheProfile="shared",
            minReplicas=1,
        )
    )
    await bound_cache_volume(pipeline)
    await pipeline.appears(resources.JOB, "load-cache-midload")

    async def loading_on_the_bound_volume() -> dict[str, Any] | Pending:
        # The planner's view of the volume lags the API server's: deleted while the planner
        # still saw it Pending, the Model would be judged to have written nothing (a volume
        # never bound, decision 0202), and go without waiting for its load (CI run 150).
        told = condition(await model(pipeline, "midload"), "CacheLoaded")
        reason = (told or {}).get("reason")
        return told if reason == "Loading" else Pending(f"CacheLoaded {reason}")

    await eventually(loading_on_the_bound_volume, what="the load seen on the bound volume")
    # The load Job was made only once the Model carried its finalizer: deleted before, the
    # Model would go at once and its load Job in the background (0278).
    operator_writes = [
        (e.resource, e.subresource)
        for e in audit_log.events(since=created)
        if e.user == OPERATOR_USER and e.name in ("midload", "load-cache-midload")
    ]
    assert operator_writes.index(("models", "")) < operator_writes.index(("jobs", ""))
    pod = await pipeline.jobs.job_pod("load-cache-midload", namespace=namespace)
    pod_name = pod["metadata"]["name"]
    held = [*(pod["metadata"].get("finalizers") or ()), STILL_STOPPING]
    await kube.merge_patch(
        resources.POD, pod_name, {"metadata": {"finalizers": held}}, namespace=namespace
    )
    mark = audit_log.mark()
    try:
        await kube.delete(resources.KUBEAI_MODEL, "midload", namespace=namespace)

        async def load_going_in_the_foreground() -> dict[str, Any] | Pending:
            job = await pipeline.child(resources.JOB, "load-cache-midload")
            if job is None:
                # Who deleted it, and whether the Model's finalizer went first (0278).
                writes = pipeline.writes_to(["midload", "load-cache-midload", pod_name], since=mark)
                return Pending(f"the load Job is gone while its Pod is held; writes: {writes}")
            finalizers = job["metadata"].get("finalizers") or []
            if "foregroundDeletion" not in finalizers:
                return Pending(f"the load Job's finalizers: {finalizers}")
            loader = await pipeline.child(resources.POD, pod_name)
            if loader is None or not loader["metadata"].get("deletionTimestamp"):
                return Pending("the load Pod is not being deleted yet")
            told = condition(await model(pipeline, "midload"), "CacheEvicted")
            return told if told else Pending("no CacheEvicted condition")

        told = await eventually(load_going_in_the_foreground, what="the load Job deleted first")
        assert (told["status"], told["reason"]) == ("False", "WaitingForLoad")
        await asyncio.sleep(2)  # plans made meanwhile (the Pod's deletion among their inputs)
        assert await pipeline.child(resources.JOB, "evict-cache-midload") is None

        # The loader stops at last (the Job controller has taken its own finalizer off).
        stopping = await kube.get(resources.POD, pod_name, namespace=namespace)
        left = [f for f in stopping["metadata"].get("finalizers") or () if f != STILL_STOPPING]
        await kube.merge_patch(
            resources.POD, pod_name, {"metadata": {"finalizers": left}}, namespace=namespace
        )
        await pipeline.appears(resources.JOB, "evict-cache-midload", within=30)
        assert await pipeline.child(resources.JOB, "load-cache-midload") is None
        assert await pipeline.child(resources.POD, pod_name) is None
    finally:
        await _finalizers(pipeline, resources.POD, pod_name)
        await _finalizers(pipeline, resources.KUBEAI_MODEL, "midload")
