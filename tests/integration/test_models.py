"""KubeAI Models end to end: the operator's processes against the session's real API server,
the test playing the kubelet (there is none) by writing the status of the Model's Pods and
Jobs.

One operator serves the module. In order: every example Model and one Model per engine get
their Pods, which the status counts; a changed spec rolls the Pods with at most the surge
extra; a deleted Pod is replaced; adapters change without restarting a Pod; a Model with a
cache loads it before its Pods run and, deleted, evicts its files before it goes, with
everything it owned; and ``kaiwo events replay`` reproduces every Model plan recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import pytest
import pytest_asyncio
import yaml
from click.testing import CliRunner
from kaiwo_cli.main import app
from kaiwo_kube import Invalid, KubernetesPort, NotFound, Retryable, resources

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pending, Pipeline, eventually
from tests.integration.pipeline.model_actors import (
    a_model,
    apply_models_config,
    bound_cache_volume,
    condition,
    is_ready,
    model,
    model_pods,
    remove_models_config,
    run_pods,
    serving,
)

pytestmark = [
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.k8s,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.parametrize("shared_pipeline", ["real"], indirect=True),
]

EXAMPLES: Final = Path(__file__).resolve().parents[2] / "examples"
ADAPTER_PREFIX: Final = "adapter.kubeai.org/"
KEPT_ALIVE: Final = "kept-alive"
SPACED_PATH: Final = "/app/chat template.jinja"
TEMPLATE: Final = "{% for m in messages %}{{ m.content }}{% endfor %}"
# The path's "/" and " " turned into "_", then "-" and the first 8 hex digits of its SHA-256.
SPACED_KEY: Final = "_app_chat_template.jinja-e4956777"


# ---------------------------------------------------------------------- the platform team


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def models_config(shared_pipeline: Pipeline) -> AsyncIterator[None]:
    """The system configuration of Models, in the operator's namespace, for the module."""
    await apply_models_config(shared_pipeline.kube)
    try:
        yield
    finally:
        await remove_models_config(shared_pipeline.kube)


def example(name: str, namespace: str) -> dict[str, Any]:
    found: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    found["metadata"]["namespace"] = namespace
    return found


async def kaiwo(*arguments: str) -> Any:
    env = {**os.environ, "COLUMNS": "250"}
    return await asyncio.to_thread(CliRunner().invoke, app, list(arguments), env=env)


# ---------------------------------------------------------------------- the tests


async def test_every_example_and_every_engine_runs_its_pods_and_counts_them(
    shared_pipeline: Pipeline, models_config: None
) -> None:
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    ollama = example("model-ollama.yaml", namespace)
    vllm = example("model-vllm.yaml", namespace)
    whisper = a_model(
        "whisper",
        namespace,
        url="hf://Systran/faster-whisper-medium.en",
        engine="FasterWhisper",
        features=["SpeechToText"],
        resourceProfile="cpu:1",
        minReplicas=1,
    )
    infinity = a_model(
        "embeddings",
        namespace,
        url="hf://BAAI/bge-small-en-v1.5",
        engine="Infinity",
        features=["TextEmbedding"],
        resourceProfile="mi300x:2",
        replicas=2,
        autoscalingDisabled=True,
    )
    for manifest in (ollama, vllm, whisper, infinity):
        await kube.create(manifest)

    # The vLLM example scales between 0 and 4: no Pods until something scales it up, as
    # the autoscaler would, through the scale subresource.
    idle = await eventually(
        lambda: _ready_reason(pipeline, vllm["metadata"]["name"]),
        what="the vLLM example scaled to zero",
    )
    assert idle == "ScaledToZero"
    assert await model_pods(kube, namespace, vllm["metadata"]["name"]) == []
    await kube.merge_patch(
        resources.KUBEAI_MODEL,
        vllm["metadata"]["name"],
        {"spec": {"replicas": 1}},
        namespace=namespace,
        field_manager="autoscaler",
    )

    await serving(pipeline, "nomic-embed-text-cpu", 1)
    await serving(pipeline, "llama-3.1-8b-instruct-mi300x", 1)
    await serving(pipeline, "whisper", 1)
    found = await serving(pipeline, "embeddings", 2)
    assert found["status"]["observedGeneration"] == found["metadata"]["generation"]

    [server] = (await model_pods(kube, namespace, "llama-3.1-8b-instruct-mi300x"))[0]["spec"][
        "containers"
    ]
    assert server["image"] == "rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909"
    assert server["args"][:2] == [
        "--model=meta-llama/Llama-3.1-8B-Instruct",
        "--served-model-name=llama-3.1-8b-instruct-mi300x",
    ]
    assert server["resources"]["limits"] == {"amd.com/gpu": "1"}
    assert server["envFrom"] == [{"secretRef": {"name": "hf-token"}}]
    for pod in await model_pods(kube, namespace, "embeddings"):
        [server] = pod["spec"]["containers"]
        assert server["image"] == "michaelf34/infinity:0.0.77-rocm"
        # The API server defaults an extended resource's request to its limit.
        assert server["resources"] == {
            "requests": {"cpu": "8", "memory": "32Gi", "amd.com/gpu": "2"},
            "limits": {"amd.com/gpu": "2"},
        }
        labels = pod["metadata"]["labels"]
        assert (labels["model"], labels["app.kubernetes.io/name"]) == ("embeddings", "infinity")
        assert labels["app.kubernetes.io/managed-by"] == "kaiwo"
        [owner] = pod["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("Model", "embeddings", True)
    # Each Model carries upstream's feature labels, and keeps the user's own.
    embeddings = await model(pipeline, "embeddings")
    assert embeddings["metadata"]["labels"] == {"features.kubeai.org/TextEmbedding": "true"}
    await kube.merge_patch(
        resources.KUBEAI_MODEL,
        "whisper",
        {"metadata": {"labels": {"team": "speech", "features.kubeai.org/Stale": "true"}}},
        namespace=namespace,
        field_manager="user",
    )
    labels = await eventually(
        lambda: _labels_without(pipeline, "whisper", "features.kubeai.org/Stale"),
        what="the stale feature label removed",
    )
    assert labels == {"team": "speech", "features.kubeai.org/SpeechToText": "true"}
    [ollama_pod] = await model_pods(kube, namespace, "nomic-embed-text-cpu")
    probe = ollama_pod["spec"]["containers"][0]["startupProbe"]["exec"]["command"]
    pull = "/bin/ollama pull nomic-embed-text"
    assert probe[-1] == f"{pull} && /bin/ollama cp nomic-embed-text nomic-embed-text-cpu"


async def _labels_without(pipeline: Pipeline, name: str, key: str) -> dict[str, str] | Pending:
    labels = (await model(pipeline, name))["metadata"].get("labels") or {}
    return Pending(f"{key} still there") if key in labels else labels


async def _ready_reason(pipeline: Pipeline, name: str) -> str | Pending:
    found = condition(await model(pipeline, name), "Ready")
    return found["reason"] if found else Pending("no Ready condition yet")


async def test_a_changed_spec_rolls_the_pods_with_at_most_the_surge_extra(
    shared_pipeline: Pipeline, models_config: None
) -> None:
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    await kube.create(
        a_model(
            "rolling",
            namespace,
            url="hf://org/model",
            engine="VLLM",
            resourceProfile="cpu:1",
            replicas=3,
            autoscalingDisabled=True,
        )
    )
    await serving(pipeline, "rolling", 3)
    before = {
        p["metadata"]["labels"]["pod-hash"] for p in await model_pods(kube, namespace, "rolling")
    }
    assert len(before) == 1

    await kube.merge_patch(
        resources.KUBEAI_MODEL,
        "rolling",
        {"spec": {"args": ["--max-model-len=4096"]}},
        namespace=namespace,
        field_manager="user",
    )
    most = 0

    async def rolled() -> set[str] | Pending:
        nonlocal most
        pods = [
            p
            for p in await model_pods(kube, namespace, "rolling")
            if not p["metadata"].get("deletionTimestamp")
        ]
        most = max(most, len(pods))
        hashes = {p["metadata"]["labels"]["pod-hash"] for p in pods}
        await run_pods(kube, namespace, "rolling")
        if len(pods) == 3 and hashes.isdisjoint(before) and all(is_ready(p) for p in pods):
            return hashes
        return Pending(f"{len(pods)} Pods, hashes {sorted(hashes)}")

    after = await eventually(rolled, what="every Pod replaced", within=90, interval=0.3)
    assert len(after) == 1
    assert most <= 3 + 1
    for pod in await model_pods(kube, namespace, "rolling"):
        assert "--max-model-len=4096" in pod["spec"]["containers"][0]["args"]
    await serving(pipeline, "rolling", 3)


async def test_a_deleted_pod_is_replaced(shared_pipeline: Pipeline, models_config: None) -> None:
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    pods = await model_pods(kube, namespace, "rolling")
    gone = pods[0]
    await kube.delete(resources.POD, gone["metadata"]["name"], namespace=namespace)

    async def replaced() -> list[str] | Pending:
        names = [p["metadata"]["uid"] for p in await model_pods(kube, namespace, "rolling")]
        if len(names) == 3 and gone["metadata"]["uid"] not in names:
            return names
        return Pending(f"{len(names)} Pods")

    await eventually(replaced, what="the deleted Pod replaced")
    await serving(pipeline, "rolling", 3)


async def test_replicas_beyond_the_bounds_are_written_back_unless_autoscaling_is_off(
    shared_pipeline: Pipeline, models_config: None
) -> None:
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    bounded = a_model(
        "bounded",
        namespace,
        url="hf://org/bounded",
        engine="VLLM",
        resourceProfile="cpu:1",
        replicas=5,
        minReplicas=1,
        maxReplicas=2,
    )
    fixed = {**bounded, "metadata": {"name": "fixed", "namespace": namespace}}
    fixed["spec"] = {**bounded["spec"], "autoscalingDisabled": True}
    await kube.create(bounded)
    await kube.create(fixed)

    async def clamped() -> dict[str, Any] | Pending:
        found = await model(pipeline, "bounded")
        return found if found["spec"]["replicas"] == 2 else Pending(found["spec"]["replicas"])

    await eventually(clamped, what="spec.replicas written back as maxReplicas")
    assert len(await model_pods(kube, namespace, "bounded")) == 2
    # The user's own number stands where autoscaling is disabled: five Pods, as asked.
    assert (await model(pipeline, "fixed"))["spec"]["replicas"] == 5
    for name in ("bounded", "fixed"):
        await kube.delete(resources.KUBEAI_MODEL, name, namespace=namespace)


async def test_a_model_without_replicas_answers_on_its_scale_and_a_users_number_stands(
    shared_pipeline: Pipeline, models_config: None
) -> None:
    """Decision 0223: an autoscaled Model created without ``spec.replicas`` gets its
    ``minReplicas`` (0) written down, so its scale subresource answers (it was a 500); a
    number the user sets, at creation or later by server-side apply, is never written over."""
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    spec = {"url": "hf://org/unscaled", "engine": "VLLM", "resourceProfile": "cpu:1"}
    unscaled = a_model("unscaled", namespace, **spec, minReplicas=0, maxReplicas=3)
    await kube.create(unscaled)
    await kube.create(a_model("hand-scaled", namespace, **spec, replicas=1, maxReplicas=3))
    await kube.create(a_model("manual", namespace, **spec, autoscalingDisabled=True))

    async def scale_of(name: str) -> dict[str, Any] | Pending:
        try:
            return await kube.get_scale(resources.KUBEAI_MODEL, name, namespace=namespace)
        except Retryable as error:
            return Pending(f"the scale subresource answers {error.code}: {error}")

    scale = await eventually(lambda: scale_of("unscaled"), what="the scale of unscaled read")
    # autoscaling/v1 omits a zero: {} is "0 replicas".
    assert (scale["spec"], scale["status"]) == ({}, {"replicas": 0})
    assert (await model(pipeline, "unscaled"))["spec"]["replicas"] == 0

    # The user's own number, applied server-side without force: no conflict, and it stands.
    applied = await kube.apply(
        {**unscaled, "spec": {**unscaled["spec"], "replicas": 2}},
        field_manager="kubectl",
        force=False,
    )
    assert applied["spec"]["replicas"] == 2
    await serving(pipeline, "unscaled", 2)
    await serving(pipeline, "hand-scaled", 1)
    await pipeline.settled(within=60)
    assert (await model(pipeline, "unscaled"))["spec"]["replicas"] == 2
    assert (await model(pipeline, "hand-scaled"))["spec"]["replicas"] == 1
    scale = await kube.get_scale(resources.KUBEAI_MODEL, "unscaled", namespace=namespace)
    assert (scale["spec"], scale["status"]) == ({"replicas": 2}, {"replicas": 2})
    # With autoscaling disabled the user owns the field, unset included (as upstream): the
    # operator writes nothing into it.
    manual = await model(pipeline, "manual")
    assert condition(manual, "Ready") is not None
    assert "replicas" not in manual["spec"]
    for name in ("unscaled", "hand-scaled", "manual"):
        await kube.delete(resources.KUBEAI_MODEL, name, namespace=namespace)


async def test_a_max_replicas_above_the_clusters_ceiling_is_told_once(
    shared_pipeline: Pipeline, models_config: None
) -> None:
    """The module's configuration leaves modelAutoscaling out: the default ceiling, 8."""
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    await kube.create(
        a_model(
            "roomy",
            namespace,
            url="hf://org/roomy",
            engine="VLLM",
            resourceProfile="cpu:1",
            replicas=1,
            maxReplicas=20,
        )
    )
    told = (
        "spec.maxReplicas is 20, but the autoscaler sets at most 8 replicas on any Model, the "
        "cluster's ceiling: the default of modelAutoscaling.maxReplicas, which ConfigMap "
        "kaiwo-system/kaiwo-models does not set"
    )

    async def ceiling_events() -> list[tuple[str, str, str]]:
        listed = await kube.list(resources.EVENT, namespace=namespace)
        return [
            (str(e.get("type")), str(e.get("reason")), str(e.get("message")))
            for e in listed.items
            if (e.get("involvedObject") or {}).get("name") == "roomy"
            and e.get("reason") == "MaxReplicasAboveClusterCeiling"
        ]

    async def warned() -> list[tuple[str, str, str]] | Pending:
        return await ceiling_events() or Pending("no MaxReplicasAboveClusterCeiling Event yet")

    assert await eventually(warned, what="the ceiling told on the Model") == [
        ("Warning", "MaxReplicasAboveClusterCeiling", told)
    ]
    # More rounds of planning (its Pod runs, the Model turns Ready): the Event is not told
    # again, and the condition stays as it was.
    served = await serving(pipeline, "roomy", 1)
    limited = condition(served, "LimitedByClusterCeiling")
    assert limited is not None
    assert (limited["status"], limited["reason"], limited["message"]) == (
        "True",
        "MaxReplicasAboveClusterCeiling",
        told,
    )
    assert len(await ceiling_events()) == 1
    await kube.delete(resources.KUBEAI_MODEL, "roomy", namespace=namespace)


async def test_adapters_are_loaded_and_changed_without_restarting_a_pod(
    shared_pipeline: Pipeline, models_config: None
) -> None:
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    adapters = [
        {"name": "sql", "url": "hf://org/sql-lora"},
        {"name": "chat", "url": "hf://org/chat-lora"},
    ]
    await kube.create(
        a_model(
            "lora",
            namespace,
            url="hf://meta-llama/Llama-3.1-8B",
            engine="VLLM",
            adapters=adapters,
            files=[{"path": "/config/chat.jinja", "content": "{{ messages }}"}],
            replicas=1,
            autoscalingDisabled=True,
        )
    )
    await serving(pipeline, "lora", 1)
    [pod] = await model_pods(kube, namespace, "lora")
    assert [c["name"] for c in pod["spec"]["containers"]] == ["server", "loader"]
    role = await pipeline.appears(resources.ROLE, "model-lora-adapter-loader")
    assert role["rules"][0]["resourceNames"] == [pod["metadata"]["name"]]
    await pipeline.appears(resources.ROLE_BINDING, "model-lora-adapter-loader")
    files = await pipeline.appears(resources.CONFIG_MAP, "model-lora-files")
    assert files["data"] == {"_config_chat.jinja": "{{ messages }}"}
    wanted = await pipeline.appears(resources.CONFIG_MAP, "model-lora-adapters")

    # The sidecar (no kubelet runs it here) reports what it loaded on its Pod.
    for adapter in json.loads(wanted["data"]["adapters.json"]):
        await kube.merge_patch(
            resources.POD,
            pod["metadata"]["name"],
            {"metadata": {"labels": {ADAPTER_PREFIX + adapter["name"]: adapter["hash"]}}},
            namespace=namespace,
            field_manager="kaiwo-adapter-loader",
        )

    async def loaded() -> dict[str, Any] | Pending:
        found = condition(await model(pipeline, "lora"), "AdaptersLoaded")
        return found if found and found["status"] == "True" else Pending(f"{found}")

    await eventually(loaded, what="adapters loaded")

    # One adapter less: the list changes, no Pod does.
    await kube.merge_patch(
        resources.KUBEAI_MODEL,
        "lora",
        {"spec": {"adapters": adapters[:1]}},
        namespace=namespace,
        field_manager="user",
    )

    async def listed_once() -> list[Any] | Pending:
        found = await pipeline.child(resources.CONFIG_MAP, "model-lora-adapters")
        names = [a["name"] for a in json.loads((found or {})["data"]["adapters.json"])]
        return names if names == ["sql"] else Pending(f"{names}")

    await eventually(listed_once, what="the adapters ConfigMap updated")
    await asyncio.sleep(1.0)
    assert [p["metadata"]["uid"] for p in await model_pods(kube, namespace, "lora")] == [
        pod["metadata"]["uid"]
    ]
    # Until the sidecar unloads it, the Pod still reports "chat": not loaded as wanted.
    reported = condition(await model(pipeline, "lora"), "AdaptersLoaded")
    assert reported is not None and reported["status"] == "False"


async def _rolled_once(pipeline: Pipeline, name: str, before: set[str]) -> list[Any] | Pending:
    """Play the kubelet until the Model's live Pods are all of a spec other than ``before``'s
    and Ready, and its status says so."""
    kube, namespace = pipeline.kube, pipeline.namespace
    await run_pods(kube, namespace, name)
    pods = [
        p
        for p in await model_pods(kube, namespace, name)
        if not p["metadata"].get("deletionTimestamp")
    ]
    hashes = {p["metadata"]["labels"]["pod-hash"] for p in pods}
    ready = condition(await model(pipeline, name), "Ready")
    if (
        pods
        and hashes.isdisjoint(before)
        and all(is_ready(p) for p in pods)
        and ready is not None
        and ready["reason"] == "ReplicasReady"
    ):
        return pods
    return Pending(f"{len(pods)} Pods, hashes {sorted(hashes)}, Ready {ready}")


async def test_removed_adapters_take_their_condition_with_them(
    shared_pipeline: Pipeline, models_config: None
) -> None:
    """Without adapters the Pods roll without the loader sidecar, and ``AdaptersLoaded`` goes:
    before, it stayed for good, False, counting adapters no Pod was asked to load."""
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    await kube.create(
        a_model(
            "unadapted",
            namespace,
            url="hf://meta-llama/Llama-3.1-8B",
            engine="VLLM",
            adapters=[{"name": "sql", "url": "hf://org/sql-lora"}],
            replicas=1,
            autoscalingDisabled=True,
        )
    )
    found = await serving(pipeline, "unadapted", 1)
    told = condition(found, "AdaptersLoaded")
    assert told is not None and told["message"] == "0 of 1 Ready Pods have loaded all 1 adapters"
    before = {
        p["metadata"]["labels"]["pod-hash"] for p in await model_pods(kube, namespace, "unadapted")
    }

    await kube.merge_patch(
        resources.KUBEAI_MODEL,
        "unadapted",
        {"spec": {"adapters": None}},
        namespace=namespace,
        field_manager="kubectl-edit",
    )

    [pod] = await eventually(
        lambda: _rolled_once(pipeline, "unadapted", before), what="the Pod rolled without adapters"
    )
    assert [c["name"] for c in pod["spec"]["containers"]] == ["server"]
    found = await model(pipeline, "unadapted")
    assert [c["type"] for c in found["status"]["conditions"]] == ["Configured", "Ready"]
    await kube.delete(resources.KUBEAI_MODEL, "unadapted", namespace=namespace)


async def test_a_files_new_content_reaches_the_servers_through_new_pods(
    shared_pipeline: Pipeline, models_config: None
) -> None:
    """A file is a ``subPath`` mount, which a running Pod never sees change: new content rolls
    the Pods. Before, the ConfigMap changed and the Model stayed Ready on the current spec
    while its servers kept the old content."""
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    await kube.create(
        a_model(
            "templated",
            namespace,
            url="hf://meta-llama/Llama-3.1-8B",
            engine="VLLM",
            files=[{"path": "/config/chat.jinja", "content": "{{ messages }}"}],
            replicas=2,
            autoscalingDisabled=True,
        )
    )
    await serving(pipeline, "templated", 2)
    old = await model_pods(kube, namespace, "templated")
    before = {p["metadata"]["labels"]["pod-hash"] for p in old}

    await kube.merge_patch(
        resources.KUBEAI_MODEL,
        "templated",
        {"spec": {"files": [{"path": "/config/chat.jinja", "content": "{{ messages | tojson }}"}]}},
        namespace=namespace,
        field_manager="kubectl-edit",
    )

    pods = await eventually(
        lambda: _rolled_once(pipeline, "templated", before),
        what="every Pod replaced by one that reads the new content",
        within=90,
        interval=0.3,
    )
    assert len(pods) == 2
    assert {p["metadata"]["uid"] for p in pods}.isdisjoint(p["metadata"]["uid"] for p in old)
    # The same mount (the content is not in the spec): only the Pods are new.
    for pod in pods:
        [mount] = [
            m for m in pod["spec"]["containers"][0]["volumeMounts"] if m["name"] == "model-files"
        ]
        assert mount == {
            "name": "model-files",
            "mountPath": "/config/chat.jinja",
            "subPath": "_config_chat.jinja",
            "readOnly": True,
        }
    files = await pipeline.child(resources.CONFIG_MAP, "model-templated-files")
    assert files is not None and files["data"] == {"_config_chat.jinja": "{{ messages | tojson }}"}
    await kube.delete(resources.KUBEAI_MODEL, "templated", namespace=namespace)


async def deleted(pipeline: Pipeline, name: str, *, what: str) -> None:
    """Wait until the Model ``name`` is gone (its finalizer dropped)."""

    async def gone() -> bool | Pending:
        try:
            await model(pipeline, name)
        except NotFound:
            return True
        return Pending(f"the Model {name} still exists")

    await eventually(gone, what=what, within=60)


async def test_a_cached_model_loads_before_it_serves_and_deleted_evicts_and_leaves_nothing(
    shared_pipeline: Pipeline, models_config: None, finalizers_released: None
) -> None:
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    await kube.create(
        a_model(
            "cached",
            namespace,
            url="s3://models/qwen",
            engine="VLLM",
            resourceProfile="cpu:1",
            cacheProfile="shared",
            env={"AWS_ENDPOINT_URL": "http://minio:9000"},
            minReplicas=1,
        )
    )
    volume = await pipeline.appears(resources.PERSISTENT_VOLUME_CLAIM, "shared-model-cache-shared")
    assert "ownerReferences" not in volume["metadata"]
    load = await pipeline.appears(resources.JOB, "load-cache-cached")
    assert load["spec"]["template"]["spec"]["containers"][0]["args"][0] == "s3://models/qwen"
    found = await eventually(
        lambda: _with_finalizer(pipeline, "cached"), what="the cache-eviction finalizer"
    )
    assert found["metadata"]["finalizers"] == ["kubeai.org/cache-eviction"]
    assert await model_pods(kube, namespace, "cached") == []

    await bound_cache_volume(pipeline)
    await pipeline.jobs.pod_succeeded("load-cache-cached", namespace=namespace)
    found = await serving(pipeline, "cached", 1)
    assert found["status"]["cache"] == {"loaded": True, "volumeUID": volume["metadata"]["uid"]}

    async def load_job_gone() -> bool | Pending:
        job = await pipeline.child(resources.JOB, "load-cache-cached")
        return True if job is None or job["metadata"].get("deletionTimestamp") else Pending("there")

    await eventually(load_job_gone, what="the finished load Job pruned")

    await kube.delete(resources.KUBEAI_MODEL, "cached", namespace=namespace)
    await pipeline.appears(resources.JOB, "evict-cache-cached")
    # Its Pods go first; the Model waits for the eviction.
    await eventually(
        lambda: _no_pods(kube, namespace, "cached"), what="the cached Model's Pods deleted"
    )
    assert (await model(pipeline, "cached"))["metadata"]["deletionTimestamp"]
    await pipeline.jobs.pod_succeeded("evict-cache-cached", namespace=namespace)

    await deleted(pipeline, "cached", what="the Model deleted once evicted")

    async def owned_gone() -> bool | Pending:
        left = []
        for resource in (resources.JOB, resources.CONFIG_MAP, resources.POD):
            listed = await kube.list(
                resource,
                namespace=namespace,
                label_selector=f"{actors.OWNER_UID_LABEL}={found['metadata']['uid']}",
            )
            left += [f"{resource.kind} {i['metadata']['name']}" for i in listed.items]
        return True if not left else Pending(f"left: {left}")

    await eventually(owned_gone, what="everything the Model owned collected", within=60)
    # The cache volume is shared: it stays for the other Models of the profile.
    assert await pipeline.child(resources.PERSISTENT_VOLUME_CLAIM, "shared-model-cache-shared")


async def test_a_model_whose_cache_volume_never_binds_says_so_and_goes_when_deleted(
    shared_pipeline: Pipeline, models_config: None, finalizers_released: None
) -> None:
    """Upstream's issue 286 (decision 0202): a storage class that does not exist leaves the
    cache volume Pending; the Model said it was loading for good and, deleted, waited for an
    eviction whose pod could never run. Nothing was ever written to a volume never bound."""
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    await kube.create(
        a_model(
            "unbound",
            namespace,
            url="s3://models/qwen",
            engine="VLLM",
            resourceProfile="cpu:1",
            cacheProfile="unbound",
            minReplicas=1,
        )
    )
    await pipeline.appears(resources.JOB, "load-cache-unbound")

    async def told() -> dict[str, Any] | Pending:
        found = await model(pipeline, "unbound")
        loaded = condition(found, "CacheLoaded") or {}
        return found if loaded.get("reason") == "VolumeNotBound" else Pending(f"{loaded}")

    waiting = await eventually(told, what="CacheLoaded saying the volume is not bound")
    assert "shared-model-cache-unbound" in (condition(waiting, "CacheLoaded") or {})["message"]
    assert waiting["metadata"]["finalizers"] == ["kubeai.org/cache-eviction"]

    await kube.delete(resources.KUBEAI_MODEL, "unbound", namespace=namespace)

    await deleted(pipeline, "unbound", what="the Model deleted with nothing to evict")
    assert await pipeline.child(resources.JOB, "evict-cache-unbound") is None


async def test_a_model_too_large_for_the_bus_is_told_so_and_gets_no_pods(
    shared_pipeline: Pipeline, models_config: None
) -> None:
    """The API server stores a Model of up to 1.5 MiB; the watcher publishes one larger than
    a bus message (1 MiB) as its metadata only. The Model is told that, not that its spec
    lacks the fields it was observed without, and nothing is made from it."""
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    await kube.create(
        a_model(
            "huge",
            namespace,
            url="hf://org/huge",
            engine="VLLM",
            resourceProfile="cpu:1",
            minReplicas=1,
            env={"PADDING": "x" * 1_200_000},
        )
    )

    async def told() -> dict[str, Any] | Pending:
        found = await model(pipeline, "huge")
        valid = condition(found, "Valid") or {}
        return valid if valid.get("status") == "False" else Pending(f"Valid: {valid}")

    valid = await eventually(told, what="the Model told it is too large")
    assert valid["reason"] == "ObjectTooLarge"
    assert valid["message"].startswith(
        "The object is larger as JSON than the 1,048,576 bytes a message on the operator's "
        "event bus may carry"
    )

    async def about_it() -> list[tuple[Any, Any]] | Pending:
        events = await kube.list(resources.EVENT, namespace=namespace)
        found = [
            (e.get("type"), e.get("reason"))
            for e in events.items
            if (e.get("involvedObject") or {}).get("name") == "huge"
        ]
        return found or Pending("no Event about the Model yet")

    # The executor writes the status, then the Event: the status alone says nothing of it.
    await eventually(about_it, what="the Event on the Model")
    await pipeline.settled()
    assert await about_it() == [("Warning", "ObjectTooLarge")]
    assert await model_pods(kube, namespace, "huge") == []
    await kube.delete(resources.KUBEAI_MODEL, "huge", namespace=namespace)


async def test_a_cache_volume_someone_else_made_is_not_used_until_labelled_kaiwos(
    shared_pipeline: Pipeline, models_config: None, finalizers_released: None
) -> None:
    """A claim of the cache's name made before (by a KubeAI install, a platform team) lacks
    the label the watcher observes by: the operator never sees it, so nothing is loaded into
    it and the Model says how to hand it over; labelled, it is the Model's cache."""
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    name = "shared-model-cache-premade"
    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace, "labels": {"team": "ml"}},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "resources": {"requests": {"storage": "10Gi"}},
                "storageClassName": "nfs-rwx",
            },
        }
    )
    await kube.create(
        a_model(
            "premade",
            namespace,
            url="s3://models/qwen",
            engine="VLLM",
            resourceProfile="cpu:1",
            cacheProfile="premade",
            minReplicas=1,
        )
    )
    told = (
        f"PersistentVolumeClaim/{namespace}/{name} exists without the label "
        "app.kubernetes.io/managed-by=kaiwo, so Kaiwo does not see it: left as it is and not "
        "used; label it so to share it with Kaiwo's Models, or remove it"
    )

    async def conflict() -> dict[str, Any] | Pending:
        found = condition(await model(pipeline, "premade"), "NameConflict")
        return found if found is not None else Pending("no NameConflict yet")

    assert (await eventually(conflict, what="the Model told of the volume"))["message"] == told
    assert await pipeline.child(resources.JOB, "load-cache-premade") is None
    volume = await kube.get(resources.PERSISTENT_VOLUME_CLAIM, name, namespace=namespace)
    assert volume["metadata"]["labels"] == {"team": "ml"}

    await kube.merge_patch(
        resources.PERSISTENT_VOLUME_CLAIM,
        name,
        {"metadata": {"labels": {"app.kubernetes.io/managed-by": "kaiwo"}}},
        namespace=namespace,
    )
    await pipeline.appears(resources.JOB, "load-cache-premade")

    async def cleared() -> bool | Pending:
        found = condition(await model(pipeline, "premade"), "NameConflict")
        return True if found is None else Pending(f"still {found}")

    await eventually(cleared, what="the NameConflict condition gone")
    await bound_cache_volume(pipeline, "premade")
    await pipeline.jobs.pod_succeeded("load-cache-premade", namespace=namespace)
    loaded = await serving(pipeline, "premade", 1)
    assert loaded["status"]["cache"] == {"loaded": True, "volumeUID": volume["metadata"]["uid"]}

    await kube.delete(resources.KUBEAI_MODEL, "premade", namespace=namespace)
    await pipeline.appears(resources.JOB, "evict-cache-premade")
    await pipeline.jobs.pod_succeeded("evict-cache-premade", namespace=namespace)
    await deleted(pipeline, "premade", what="the Model deleted once evicted")


async def test_an_edit_the_load_job_cannot_take_is_told_and_the_cache_profile_stays(
    shared_pipeline: Pipeline, models_config: None, finalizers_released: None
) -> None:
    """A Job's pod template cannot change: an edit of ``env`` while the files load leaves the
    load Job as it was made and says so (applied, it was refused on every plan:
    ``ApplyRefused``). Removing the cacheProfile is refused by the API server, since the
    Model's files would stay on the shared volume for good."""
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    await kube.create(
        a_model(
            "recached",
            namespace,
            url="s3://models/qwen",
            engine="VLLM",
            resourceProfile="mi300x:1",
            cacheProfile="shared",
            env={"AWS_ENDPOINT_URL": "http://minio:9000"},
            minReplicas=1,
        )
    )
    await pipeline.appears(resources.JOB, "load-cache-recached")
    await kube.merge_patch(
        resources.KUBEAI_MODEL,
        "recached",
        {"spec": {"env": {"AWS_ENDPOINT_URL": "http://minio:9001"}}},
        namespace=namespace,
        field_manager="kubectl-edit",
    )

    async def told() -> dict[str, Any] | Pending:
        found = await model(pipeline, "recached")
        cache = condition(found, "CacheLoaded")
        if cache is None or cache["reason"] != "LoadingAsCreated":
            return Pending(f"CacheLoaded {cache}, ApplyRefused {condition(found, 'ApplyRefused')}")
        return found

    found = await eventually(told, what="the load Job kept as made, and told")
    cache = condition(found, "CacheLoaded")
    assert cache is not None and cache["message"] == (
        "Job load-cache-recached loads the files with the settings it was created with: a "
        "Job's pod template cannot change (spec.template.spec.containers[0].env[0].value); "
        "delete the Job to load with the edited spec"
    )
    assert found["status"]["observedGeneration"] == found["metadata"]["generation"]
    assert condition(found, "ApplyRefused") is None
    job = await pipeline.child(resources.JOB, "load-cache-recached")
    assert job is not None
    [loader] = job["spec"]["template"]["spec"]["containers"]
    assert {"name": "AWS_ENDPOINT_URL", "value": "http://minio:9000"} in loader["env"]

    with pytest.raises(Invalid, match="cacheProfile cannot be removed: delete the Model"):
        await kube.merge_patch(
            resources.KUBEAI_MODEL,
            "recached",
            {"spec": {"cacheProfile": None}},
            namespace=namespace,
            field_manager="kubectl-edit",
        )

    await bound_cache_volume(pipeline)
    await pipeline.jobs.pod_succeeded("load-cache-recached", namespace=namespace)
    found = await serving(pipeline, "recached", 1)
    assert found["metadata"]["finalizers"] == ["kubeai.org/cache-eviction"]
    assert condition(found, "ApplyRefused") is None
    await kube.delete(resources.KUBEAI_MODEL, "recached", namespace=namespace)
    await pipeline.appears(resources.JOB, "evict-cache-recached")
    await pipeline.jobs.pod_succeeded("evict-cache-recached", namespace=namespace)

    await deleted(pipeline, "recached", what="the Model deleted once evicted")


async def test_a_cache_added_to_a_serving_model_keeps_its_pods_serving_until_loaded(
    shared_pipeline: Pipeline, models_config: None, finalizers_released: None
) -> None:
    """Adding a cacheProfile (allowed, as upstream) loads the files before any new Pod; the
    Pods of the earlier spec serve meanwhile, and ``Ready`` says so (it said "No Pods")."""
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    await kube.create(
        a_model(
            "latecached",
            namespace,
            url="hf://org/latecached",
            engine="VLLM",
            replicas=2,
            autoscalingDisabled=True,
        )
    )
    await serving(pipeline, "latecached", 2)
    old = await model_pods(kube, namespace, "latecached")

    await kube.merge_patch(
        resources.KUBEAI_MODEL,
        "latecached",
        {"spec": {"cacheProfile": "shared"}},
        namespace=namespace,
        field_manager="kubectl-edit",
    )
    await pipeline.appears(resources.JOB, "load-cache-latecached")

    async def waiting() -> dict[str, Any] | Pending:
        ready = condition(await model(pipeline, "latecached"), "Ready")
        return ready if ready and ready["reason"] == "WaitingForCache" else Pending(f"{ready}")

    ready = await eventually(waiting, what="Ready waiting for the cache")
    assert ready["message"] == (
        "2 Ready Pods of an earlier spec serve until the cache is loaded; then they are "
        "replaced by Pods that read it"
    )
    assert [p["metadata"]["uid"] for p in await model_pods(kube, namespace, "latecached")] == [
        p["metadata"]["uid"] for p in old
    ]

    await bound_cache_volume(pipeline)
    await pipeline.jobs.pod_succeeded("load-cache-latecached", namespace=namespace)
    before = {p["metadata"]["labels"]["pod-hash"] for p in old}
    pods = await eventually(
        lambda: _rolled_once(pipeline, "latecached", before),
        what="the Pods replaced by ones that read the cache",
        within=90,
        interval=0.3,
    )
    assert len(pods) == 2
    await kube.delete(resources.KUBEAI_MODEL, "latecached", namespace=namespace)
    await pipeline.appears(resources.JOB, "evict-cache-latecached")
    await pipeline.jobs.pod_succeeded("evict-cache-latecached", namespace=namespace)


async def _with_finalizer(pipeline: Pipeline, name: str) -> dict[str, Any] | Pending:
    found = await model(pipeline, name)
    return found if found["metadata"].get("finalizers") else Pending("no finalizer yet")


@pytest_asyncio.fixture(loop_scope="module")
async def finalizers_released(shared_pipeline: Pipeline) -> AsyncIterator[None]:
    """Should a test stop half way, the Models it leaves must not hold their namespace
    (deleted after the operator stopped, so no plan would drop their finalizers)."""
    try:
        yield
    finally:
        listed = await shared_pipeline.kube.list(
            resources.KUBEAI_MODEL, namespace=shared_pipeline.namespace
        )
        for item in listed.items:
            if item["metadata"].get("finalizers"):
                with contextlib.suppress(NotFound):
                    await shared_pipeline.kube.merge_patch(
                        resources.KUBEAI_MODEL,
                        item["metadata"]["name"],
                        {"metadata": {"finalizers": None}},
                        namespace=shared_pipeline.namespace,
                    )


async def _no_pods(kube: KubernetesPort, namespace: str, name: str) -> bool | Pending:
    left = await model_pods(kube, namespace, name)
    return True if not left else Pending(f"{len(left)} Pods")


async def test_replay_reproduces_every_model_plan_and_explain_tells_the_story(
    shared_pipeline: Pipeline, models_config: None
) -> None:
    pipeline = shared_pipeline
    await pipeline.settled(within=60)
    assert await pipeline.dead_letters() == 0
    if pipeline.audit_log is not None:
        # Settled means settled: no status, Pod or finalizer written back and forth.
        assert await pipeline.operator_writes_while_idle() == Counter()
    for name in (
        "nomic-embed-text-cpu",
        "llama-3.1-8b-instruct-mi300x",
        "rolling",
        "lora",
        "cached",
    ):
        replayed = await kaiwo(
            "events",
            "replay",
            "--workload",
            f"{pipeline.namespace}/{name}",
            "--store",
            pipeline.store_url,
        )
        assert replayed.exit_code == 0, replayed.output
        summary = replayed.stdout.strip().splitlines()[-1]
        plans = int(summary.split()[0])
        assert plans > 0, summary
        assert summary.startswith(f"{plans} plans, {plans} reproduced, 0 differ, 0 skipped"), (
            replayed.output
        )
    explained = await kaiwo(
        "events", "explain", f"{pipeline.namespace}/rolling", "--store", pipeline.store_url
    )
    assert explained.exit_code == 0, explained.output
    # Standard output only: the cluster line goes to stderr, which ``output`` interleaves.
    assert explained.stdout.startswith(f"Model {pipeline.namespace}/rolling")
    # Long lines are wrapped under their branch: read them joined again.
    assert "delete Pod" in " ".join(line.lstrip("│├└─ ") for line in explained.stdout.splitlines())


async def test_an_engines_variable_the_user_sets_and_a_path_with_a_space_give_a_serving_model(
    shared_pipeline: Pipeline, models_config: None
) -> None:
    """A Model whose ``spec.env`` names a variable its engine sets, and whose file path holds a
    space, gets its server Pod, with the user's value, and its files ConfigMap (decision 0212).
    Upstream's Pod (the variable twice) and upstream's key (the space kept) are refused by the
    API server, which the test shows too."""
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    await kube.create(
        a_model(
            KEPT_ALIVE,
            namespace,
            url="ollama://qwen2:0.5b",
            engine="OLlama",
            features=["TextGeneration"],
            resourceProfile="cpu:1",
            env={"OLLAMA_KEEP_ALIVE": "-1"},
            files=[{"path": SPACED_PATH, "content": TEMPLATE}],
            replicas=1,
            autoscalingDisabled=True,
        )
    )

    found = await serving(pipeline, KEPT_ALIVE, 1)

    configured = condition(found, "Configured")
    assert configured is not None and configured["status"] == "True"
    [pod] = await model_pods(kube, namespace, KEPT_ALIVE)
    [server] = pod["spec"]["containers"]
    assert server["env"] == [
        {"name": "OLLAMA_HOST", "value": "0.0.0.0:8000"},
        {"name": "OLLAMA_KEEP_ALIVE", "value": "-1"},
    ]
    [mount] = [m for m in server["volumeMounts"] if m["name"] == "model-files"]
    assert mount == {
        "name": "model-files",
        "mountPath": SPACED_PATH,
        "subPath": SPACED_KEY,
        "readOnly": True,
    }
    files = await pipeline.appears(resources.CONFIG_MAP, f"model-{KEPT_ALIVE}-files")
    assert files["data"] == {SPACED_KEY: TEMPLATE}

    # What upstream would apply instead: both refused.
    doubled: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{KEPT_ALIVE}-upstreams", "namespace": namespace},
        "spec": {
            "containers": [
                {
                    "name": "server",
                    "image": server["image"],
                    "env": [
                        {"name": "OLLAMA_KEEP_ALIVE", "value": "999999h"},
                        {"name": "OLLAMA_KEEP_ALIVE", "value": "-1"},
                    ],
                }
            ]
        },
    }
    with pytest.raises(Invalid) as refused_pod:
        await kube.apply(doubled, field_manager="upstream")
    assert "OLLAMA_KEEP_ALIVE" in refused_pod.value.message
    spaced = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"model-{KEPT_ALIVE}-upstreams", "namespace": namespace},
        "data": {SPACED_PATH.replace("/", "_"): TEMPLATE},
    }
    with pytest.raises(Invalid) as refused_key:
        await kube.apply(spaced, field_manager="upstream")
    assert "a valid config key" in refused_key.value.message

    await kube.delete(resources.KUBEAI_MODEL, KEPT_ALIVE, namespace=namespace)
