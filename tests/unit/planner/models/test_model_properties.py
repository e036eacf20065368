"""Properties of planning Models over random, schema-valid Models and clusters: every engine
and URL scheme, profiles that exist or not, caches loading, loaded or failing, adapters,
files, replica bounds, deletion, valid, invalid and missing system configurations, and Pods
of the current or earlier specs in every state. For each:

* planning never raises;
* the plan is byte-identical when planned again from fresh copies of the inputs handed over
  in another order;
* every desired object is controlled by the Model, every deletion names an observed Pod of
  it, and the plan passes the executor's admission;
* no more Pods are wanted than the replicas plus the surge.

Derandomized, no example database: CI sees the same examples.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kaiwo_contracts.confinement import refusals
from kaiwo_contracts.plans import Plan, canonical_json
from kaiwo_planner.domain.state.cluster import ClusterState

from tests.planning_calls import planned as plan_in_fresh_context
from tests.unit.planner.models.building import NOW, model, models_config, observed_pod

SETTINGS = settings(
    max_examples=600,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
URLS = {
    "VLLM": ["hf://org/m", "pvc://weights/m", "s3://b/m", "gs://b/m", "oss://b/m"],
    "OLlama": ["ollama://qwen2:0.5b", "ollama://x?pull=false", "pvc://store?model=q", "hf://o/m"],
    "FasterWhisper": ["hf://Systran/w", "pvc://w", "s3://b/w", "gs://b/w"],
    "Infinity": ["hf://BAAI/bge", "s3://b/e", "ollama://x"],
}
CACHEABLE = ("hf://", "s3://", "gs://", "oss://")
CONFIGS = [
    None,
    "cacheProfiles:\n  fast:\n    sharedFilesystem: {storageClassName: nfs}\n",
    "modelRollouts: {surge: 0}\n"
    "cacheProfiles:\n  fast:\n    sharedFilesystem: {persistentVolumeName: pv}\n",
    "modelRollouts: {surge: 2}\nmodelServerPods: {serviceAccountName: models}\n",
    "resourceProfiles: [broken\n",
    "modelRollouts: {surge: -3}\n",
    "modelServerPods:\n  jsonPatches:\n    - {op: add, path: /spec/priorityClassName, value: p}\n",
    "modelServerPods:\n  jsonPatches:\n    - {op: remove, path: /spec/nothing}\n",
]


@st.composite
def model_specs(draw: st.DrawFn) -> dict[str, Any]:
    engine = draw(st.sampled_from(sorted(URLS)))
    url = draw(st.sampled_from(URLS[engine]))
    spec: dict[str, Any] = {"engine": engine, "url": url}
    if url.startswith(("gs://", "oss://")) or (url.startswith(CACHEABLE) and draw(st.booleans())):
        spec["cacheProfile"] = draw(st.sampled_from(["fast", "fast", "absent"]))
    if engine == "VLLM" and draw(st.booleans()):
        spec["adapters"] = draw(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "name": st.sampled_from(["sql", "chat", "x"]),
                        "url": st.sampled_from(["hf://o/a", "s3://b/a"]),
                    }
                ),
                max_size=2,
                unique_by=lambda a: a["name"],
            )
        )
    spec |= draw(
        st.fixed_dictionaries(
            {},
            optional={
                "resourceProfile": st.sampled_from(
                    ["cpu:1", "amd-gpu-mi300x:2", "nvidia-gpu-l4:3", "missing:1"]
                ),
                "replicas": st.integers(0, 4),
                "minReplicas": st.integers(0, 2),
                "autoscalingDisabled": st.booleans(),
                "args": st.lists(st.sampled_from(["--a", "--b=1"]), max_size=2),
                "env": st.dictionaries(
                    st.sampled_from(["A", "HF_TOKEN", "AWS_ENDPOINT_URL"]),
                    st.sampled_from(["1", "http://m"]),
                    max_size=2,
                ),
                "envFrom": st.just([{"secretRef": {"name": "s"}}]),
                "files": st.lists(
                    st.fixed_dictionaries(
                        {"path": st.sampled_from(["/a", "/b/c"]), "content": st.just("x")}
                    ),
                    max_size=2,
                    unique_by=lambda f: f["path"],
                ),
                "image": st.just("registry.local/server:1"),
                "priorityClassName": st.just("high"),
                "features": st.just(["TextGeneration"]),
            },
        )
    )
    if draw(st.booleans()):
        spec["maxReplicas"] = spec.get("minReplicas", 0) + draw(st.integers(1, 3))
    return spec


def pods_from(plan: Plan | None, draw: st.DrawFn, prefix: str) -> list[dict[str, Any]]:
    if plan is None:
        return []
    pods = [d for d in plan.desired if d["kind"] == "Pod"]
    return [
        observed_pod(
            pod,
            uid=f"{prefix}-{index}",
            ready=draw(st.booleans()),
            scheduled=draw(st.booleans()),
            deleting=draw(st.integers(0, 5)) == 0,
            created=draw(st.sampled_from(["2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z"])),
        )
        for index, pod in enumerate(pods)
    ]


@st.composite
def worlds(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    text = draw(st.sampled_from(CONFIGS))
    objects: list[dict[str, Any]] = [] if text is None else [models_config(text)]
    if draw(st.booleans()):
        objects.append(
            {
                "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
                "kind": "AIMNamespaceConfig",
                "metadata": {"name": "aim", "namespace": "ai", "uid": "aim"},
                "spec": {
                    "images": {"imagePullSecrets": ["reg"]},
                    "credentials": {
                        "huggingFaceToken": {"secretName": "hf", "secretKey": "t"},
                        "gcs": [{"applicationCredentials": {"secretName": "g", "secretKey": "k"}}],
                    },
                },
            }
        )
    # Pods of an earlier spec, then of this one: plan, observe, plan again.
    earlier = model(draw(model_specs()))
    cluster = ClusterState.from_wire(objects=[earlier, *objects], namespaces=["ai"])
    objects += pods_from(
        plan_in_fresh_context(owner=earlier, cluster=cluster, now=NOW), draw, "old"
    )
    metadata: dict[str, Any] = {"generation": 2}
    if draw(st.integers(0, 4)) == 0:
        metadata["deletionTimestamp"] = "2026-01-01T11:59:00Z"
    if draw(st.booleans()):
        metadata["finalizers"] = ["kubeai.org/cache-eviction"]
    owner = model(draw(model_specs()), **metadata)
    cluster = ClusterState.from_wire(objects=[owner, *objects], namespaces=["ai"])
    first = plan_in_fresh_context(owner=owner, cluster=cluster, now=NOW)
    objects += pods_from(first, draw, "new")
    for job in (d for d in (first.desired if first else ()) if d["kind"] == "Job"):
        state = draw(st.sampled_from([None, "Complete", "Failed"]))
        found = copy.deepcopy(job) | {"status": {}}
        found["metadata"]["uid"] = f"uid-{job['metadata']['name']}"
        if state:
            found["status"] = {"conditions": [{"type": state, "status": "True"}]}
        objects.append(found)
    if first is not None and first.shared and draw(st.booleans()):
        volume = copy.deepcopy(first.shared[0])
        volume["metadata"]["uid"] = "pvc"
        objects.append(volume)
    if draw(st.booleans()) and first is not None:
        owner["status"] = copy.deepcopy(first.status)
    return owner, objects


def planned(owner: dict[str, Any], objects: list[dict[str, Any]], *, reverse: bool) -> Plan:
    fresh = copy.deepcopy(objects)
    if reverse:
        fresh.reverse()
    cluster = ClusterState.from_wire(objects=[*fresh, copy.deepcopy(owner)], namespaces=["ai"])
    plan = plan_in_fresh_context(owner=copy.deepcopy(owner), cluster=cluster, now=NOW)
    assert plan is not None
    return plan


@pytest.mark.slow
@SETTINGS
@given(worlds())
def test_model_planning_never_raises_is_repeatable_and_stays_confined(world: Any) -> None:
    owner, objects = world

    first = planned(owner, objects, reverse=False)
    second = planned(owner, objects, reverse=True)

    assert canonical_json(first.model_dump(mode="json")) == canonical_json(
        second.model_dump(mode="json")
    )
    assert refusals(first, owner=owner) == ()
    for desired in first.desired:
        assert [r["uid"] for r in desired["metadata"]["ownerReferences"]] == ["u-1"]
    observed = {o["metadata"]["uid"] for o in objects if o["kind"] == "Pod"}
    assert {ref.uid for ref in first.delete} <= observed
    spec = owner["spec"]
    most = max(spec.get("replicas") or 0, spec.get("minReplicas") or 0) + 2
    assert len([d for d in first.desired if d["kind"] == "Pod"]) <= most
    valid = [c for c in (first.status or {}).get("conditions") or () if c["type"] == "Valid"]
    assert all(c["status"] == "True" for c in valid), valid
