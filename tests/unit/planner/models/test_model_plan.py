"""A Model's whole plan: replicas, profiles, files, cache, adapters, status, Events, deletion
and what a configuration problem does. Expected values written out by hand."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kaiwo_contracts.confinement import refusals
from kaiwo_contracts.plans import EventIntent, ObjectRef, PruneRule, canonical_json_bytes
from kaiwo_planner.domain.models.adapters import string_hash
from kaiwo_planner.domain.planning import PlanningResult, plan_object
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.planning_context import PlanningContext

from tests.unit.planner.models.building import (
    NOW,
    condition,
    desired,
    expected,
    finished_job,
    model,
    models_config,
    observed_pod,
    only,
    plan_for,
)

BASE: dict[str, Any] = {"url": "hf://org/model", "engine": "VLLM"}
CACHE_CONFIG = models_config(
    "cacheProfiles:\n  fast:\n    sharedFilesystem: {storageClassName: nfs-rwx}\n"
)
CACHED: dict[str, Any] = {
    "url": "gs://bucket/llama",
    "engine": "VLLM",
    "resourceProfile": "cpu:1",
    "cacheProfile": "fast",
    "env": {"X": "1"},
    "envFrom": [{"secretRef": {"name": "bucket-creds"}}],
    "replicas": 1,
}
LIVE = {"metadata": {"uid": "u-1"}}
FINALIZED = ["kubeai.org/cache-eviction"]
"""The operator's finalizer on a cached Model: its load starts only once it is on (0278)."""


def pod_count(spec: dict[str, Any]) -> int:
    return len(desired(plan_for(model({**BASE, **spec})), "Pod"))


# ------------------------------------------------------------------ replicas


@pytest.mark.parametrize(
    ("spec", "pods"),
    [
        ({}, 0),
        ({"minReplicas": 2}, 2),
        ({"replicas": 1, "minReplicas": 2}, 2),
        ({"replicas": 5, "maxReplicas": 3}, 3),
        ({"replicas": 2, "minReplicas": 1, "maxReplicas": 3}, 2),
        ({"replicas": 5, "maxReplicas": 3, "autoscalingDisabled": True}, 5),
        ({"minReplicas": 2, "autoscalingDisabled": True}, 0),
    ],
    ids=[
        "nothing-set",
        "min-when-unset",
        "raised-to-min",
        "lowered-to-max",
        "within-bounds",
        "as-given-without-autoscaling",
        "none-without-autoscaling",
    ],
)
def test_replicas_are_clamped_into_their_bounds_unless_autoscaling_is_off(
    spec: dict[str, Any], pods: int
) -> None:
    assert pod_count(spec) == pods


@pytest.mark.parametrize(
    ("spec", "written"),
    [
        ({"replicas": 5, "maxReplicas": 3}, (5, 3)),
        ({"replicas": 0, "minReplicas": 2}, (0, 2)),
        ({"minReplicas": 2}, (0, 2)),
        ({"replicas": 2, "minReplicas": 1, "maxReplicas": 3}, None),
        # Unset and minReplicas 0: written down as 0, so the scale subresource answers.
        ({}, (0, 0)),
        ({"minReplicas": 0, "maxReplicas": 4}, (0, 0)),
        # Set, to anything within the bounds (0 included): never written again.
        ({"replicas": 0}, None),
        ({"replicas": 3, "maxReplicas": 4}, None),
        ({"replicas": 5, "maxReplicas": 3, "autoscalingDisabled": True}, None),
        # Autoscaling off: the user owns the field, unset included (upstream leaves it).
        ({"autoscalingDisabled": True}, None),
    ],
    ids=[
        "above-max",
        "below-min",
        "unset-below-min",
        "within",
        "unset",
        "unset-min-zero",
        "set-to-zero",
        "set-within",
        "autoscaling-off",
        "unset-autoscaling-off",
    ],
)
def test_replicas_outside_the_bounds_are_written_back_as_kubeai_does(
    spec: dict[str, Any], written: tuple[int, int] | None
) -> None:
    plan = plan_for(model({**BASE, **spec}))
    scale = plan.scale
    assert ((scale.from_replicas, scale.replicas) if scale else None) == written
    if scale is not None:
        assert scale.target == plan.owner


def test_an_unset_replicas_is_not_written_while_the_model_is_deleted() -> None:
    deleting = model(BASE, deletionTimestamp="2026-01-01T11:00:00Z", finalizers=["x"])
    assert plan_for(deleting).scale is None


@pytest.mark.parametrize("autoscaling_disabled", [False, True])
def test_a_model_asking_for_more_pods_than_a_plan_carries_runs_400_and_says_why(
    autoscaling_disabled: bool,
) -> None:
    # 2**31 - 1 replicas once made planning build two billion Pod names (found by fuzzing).
    spec = {**BASE, "replicas": 2_147_483_647, "autoscalingDisabled": autoscaling_disabled}
    plan = plan_for(model(spec))
    assert len(desired(plan, "Pod")) == 400
    assert len(plan.model_dump_json()) < 1024 * 1024
    ready = condition(plan, "Ready")
    assert ready is not None and (ready["status"], ready["reason"], ready["message"]) == (
        "False",
        "ReplicasCapped",
        "spec.replicas: 2147483647 asked, but a Model runs at most 400 server Pods (their"
        " manifests travel in one bus message); 0 of 400 replicas Ready",
    )
    assert [(e.type, e.reason) for e in plan.events] == [
        ("Normal", "Configured"),
        ("Warning", "ReplicasCapped"),
    ]


def test_the_models_feature_labels_follow_its_features_and_are_written_only_when_they_differ() -> (
    None
):
    features = {**BASE, "features": ["TextGeneration", "TextEmbedding"]}
    assert plan_for(model(features)).owner_labels == {
        "features.kubeai.org/TextGeneration": "true",
        "features.kubeai.org/TextEmbedding": "true",
    }
    labelled = model(
        features,
        labels={
            "team": "a",
            "features.kubeai.org/TextGeneration": "true",
            "features.kubeai.org/TextEmbedding": "true",
        },
    )
    assert plan_for(labelled).owner_labels is None
    stale = model(BASE, labels={"team": "a", "features.kubeai.org/SpeechToText": "true"})
    assert plan_for(stale).owner_labels == {}
    assert plan_for(model(BASE, labels={"team": "a"})).owner_labels is None


def test_the_spec_is_never_written_and_the_scale_status_counts_pods() -> None:
    plan = plan_for(model({**BASE, "minReplicas": 2}))
    assert all(d["kind"] != "Model" for d in plan.desired)
    assert plan.status is not None
    assert plan.status["replicas"] == {"all": 0, "ready": 0}


# ------------------------------------------------------------------ resource profiles


@pytest.mark.parametrize(
    ("quantity", "count", "result"),
    [("24Gi", 2, "48Gi"), ("6", 2, "12"), ("500m", 3, "1500m"), ("1.5", 2, "3"), (1, 4, 4)],
)
def test_a_profile_is_multiplied_by_its_count_in_its_own_units(
    quantity: Any, count: int, result: Any
) -> None:
    config = models_config(
        f"resourceProfiles:\n  p:\n    requests: {{x: {json.dumps(quantity)}}}\n"
        f"    limits: {{x: {json.dumps(quantity)}}}\n"
    )
    pod = only(
        plan_for(model({**BASE, "resourceProfile": f"p:{count}", "replicas": 1}), config), "Pod"
    )
    assert pod["spec"]["containers"][0]["resources"] == {
        "requests": {"x": result},
        "limits": {"x": result},
    }


def test_a_profiles_scheduling_is_copied_and_its_image_name_picks_the_image() -> None:
    config = models_config(
        """\
modelServers:
  VLLM:
    images: {mi355: registry.local/vllm:mi355}
resourceProfiles:
  mi355:
    imageName: mi355
    limits: {amd.com/gpu: 1}
    nodeSelector: {gpu: mi355}
    affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: []}}
    tolerations: [{key: gpu, operator: Exists}]
    schedulerName: gpu-scheduler
    runtimeClassName: rocm
"""
    )
    pod = only(
        plan_for(model({**BASE, "resourceProfile": "mi355:8", "replicas": 1}), config), "Pod"
    )
    spec = pod["spec"]
    assert spec["containers"][0]["image"] == "registry.local/vllm:mi355"
    assert spec["containers"][0]["resources"] == {"limits": {"amd.com/gpu": 8}}
    assert (spec["nodeSelector"], spec["tolerations"]) == (
        {"gpu": "mi355"},
        [{"key": "gpu", "operator": "Exists"}],
    )
    assert spec["affinity"] == {
        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}
    }
    assert (spec["schedulerName"], spec["runtimeClassName"]) == ("gpu-scheduler", "rocm")


# ------------------------------------------------------------------ configuration problems


@pytest.mark.parametrize(
    ("spec", "objects", "reason", "message"),
    [
        (
            {"resourceProfile": "tpu-v9:1"},
            (),
            "ResourceProfileNotFound",
            'resource profile not found: "tpu-v9"',
        ),
        (
            {"url": "gs://b/m", "cacheProfile": "nowhere"},
            (),
            "CacheProfileNotFound",
            'cache profile not found: "nowhere"',
        ),
        (
            {"url": "ollama://qwen2"},
            (),
            "UnsupportedURL",
            "ollama:// URLs are served by the OLlama engine only, not VLLM",
        ),
        (
            {"engine": "Infinity", "url": "s3://b/m"},
            (),
            "UnsupportedURL",
            "s3:// URLs without a cacheProfile are streamed by VLLM only; Infinity needs a "
            "cacheProfile to load them",
        ),
        (
            # Its startup probe ran "ollama cp  llm" (no tag to copy): never Ready.
            {"engine": "OLlama", "url": "pvc://weights/ollama", "features": ["TextGeneration"]},
            (),
            "UnsupportedURL",
            "a pvc:// URL for the OLlama engine names the model stored in the claim: "
            "pvc://<claim>[/<path>]?model=<tag>, not pvc://weights/ollama",
        ),
        (
            {"resourceProfile": "cpu:1"},
            (models_config("modelServers:\n  VLLM:\n    images: null\n"),),
            "MissingServerImage",
            'missing default server image: modelServers.VLLM.images has neither "cpu" nor '
            '"default"',
        ),
        (
            {},
            (models_config("modelRollouts: {surge: -1}\n"),),
            "InvalidSystemConfig",
            "the system configuration kaiwo-system/kaiwo-models is invalid: models.yaml: "
            "modelRollouts.surge: Input should be greater than or equal to 0",
        ),
        (
            {},
            (models_config("resourceProfiles: [\n"),),
            "InvalidSystemConfig",
            "the system configuration kaiwo-system/kaiwo-models is invalid: models.yaml is not "
            "YAML:",
        ),
    ],
    ids=[
        "profile",
        "cache-profile",
        "ollama-url",
        "s3-without-cache",
        "ollama-claim-without-tag",
        "image",
        "invalid",
        "yaml",
    ],
)
def test_a_model_the_configuration_cannot_serve_changes_nothing_but_its_status(
    spec: dict[str, Any], objects: tuple[dict[str, Any], ...], reason: str, message: str
) -> None:
    running = observed_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "model-llm-abc-0",
                "namespace": "ai",
                "labels": {"model": "llm", "pod-hash": "abc"},
                "ownerReferences": [{"uid": "u-1", "kind": "Model", "controller": True}],
            },
            "spec": {},
        },
        uid="p-1",
    )

    plan = plan_for(model({**BASE, "replicas": 1, **spec}), running, *objects)

    configured = condition(plan, "Configured")
    assert configured is not None
    assert (configured["status"], configured["reason"]) == ("False", reason)
    assert configured["message"].startswith(message)
    assert (plan.desired, plan.delete, plan.prune, plan.shared) == ((), (), (), ())
    assert plan.finalizers is None
    assert [e.reason for e in plan.events] == ["NotConfigured"]
    assert plan.status is not None and plan.status["replicas"] == {"all": 1, "ready": 1}


def test_a_configmap_of_another_namespace_labelled_as_ours_is_not_the_configuration() -> None:
    forged = models_config("modelServers:\n  VLLM:\n    images: {default: evil/vllm:1}\n")
    forged["metadata"]["namespace"] = "tenant"
    forged["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "kaiwo"

    pod = only(plan_for(model({**BASE, "replicas": 1}), forged), "Pod")

    assert pod["spec"]["containers"][0]["image"] == "vllm/vllm-openai:v0.10.2"


def test_an_invalid_spec_is_reported_and_nothing_else_is_planned() -> None:
    broken = model({**BASE, "resourceProfile": "no-count"})

    plan = plan_for(broken)

    valid = condition(plan, "Valid")
    assert valid is not None and (valid["status"], valid["reason"]) == ("False", "InvalidSpec")
    assert "spec.resourceProfile" in valid["message"]
    assert (plan.desired, plan.prune, plan.delete) == ((), (), ())
    assert "status" not in (plan.status or {})  # a Model has no phase


def test_a_count_of_more_digits_than_python_parses_is_an_invalid_spec() -> None:
    # The CRD takes any number of digits; planning raised on int() and told nothing.
    plan = plan_for(model({**BASE, "resourceProfile": "cpu:" + "1" * 5000, "replicas": 1}))

    valid = condition(plan, "Valid")
    assert valid is not None and (valid["status"], valid["reason"]) == ("False", "InvalidSpec")
    assert "spec.resourceProfile: the count must be at most 999999999" in valid["message"]


def test_a_fixed_spec_turns_valid_again() -> None:
    earlier = plan_for(model({**BASE, "resourceProfile": "no-count"}))
    fixed = plan_for(model({**BASE, "replicas": 1}, status=earlier.status))
    valid = condition(fixed, "Valid")
    assert valid is not None and (valid["status"], valid["reason"]) == ("True", "ValidSpec")


# ------------------------------------------------------------------ files


def test_files_are_a_configmap_mounted_at_their_paths() -> None:
    files = [
        {"path": "/config/prompt-template.txt", "content": "Q: {q}"},
        {"path": "/etc/extra.json", "content": "{}"},
    ]

    plan = plan_for(model({**BASE, "files": files, "replicas": 1}))

    config_map = only(plan, "ConfigMap")
    assert config_map["metadata"]["name"] == "model-llm-files"
    assert config_map["data"] == {"_config_prompt-template.txt": "Q: {q}", "_etc_extra.json": "{}"}
    mounts = only(plan, "Pod")["spec"]["containers"][0]["volumeMounts"]
    assert mounts[1:] == [
        {
            "name": "model-files",
            "mountPath": "/config/prompt-template.txt",
            "subPath": "_config_prompt-template.txt",
            "readOnly": True,
        },
        {
            "name": "model-files",
            "mountPath": "/etc/extra.json",
            "subPath": "_etc_extra.json",
            "readOnly": True,
        },
    ]


def test_two_paths_of_one_upstream_key_each_keep_their_own_content() -> None:
    # Decision 0203: /etc/a_b and /etc/a/b both became the key _etc_a_b (as upstream's), and
    # both mounts showed one of the two contents. Each now gets the key and its path's hash.
    files = [
        {"path": "/etc/a_b", "content": "first"},
        {"path": "/etc/a/b", "content": "second"},
        {"path": "/etc/c", "content": "alone"},
    ]

    plan = plan_for(model({**BASE, "files": files, "replicas": 1}))

    assert only(plan, "ConfigMap")["data"] == {
        "_etc_a_b-a0989f29": "first",
        "_etc_a_b-d79f19ac": "second",
        "_etc_c": "alone",
    }
    mounts = only(plan, "Pod")["spec"]["containers"][0]["volumeMounts"]
    assert [(m["mountPath"], m["subPath"]) for m in mounts[1:]] == [
        ("/etc/a/b", "_etc_a_b-d79f19ac"),
        ("/etc/a_b", "_etc_a_b-a0989f29"),
        ("/etc/c", "_etc_c"),
    ]


def test_new_file_content_rolls_the_pods_as_a_new_path_does() -> None:
    """A file is a ``subPath`` mount, never refreshed in a running Pod: new content reaches
    the server only in a new Pod."""
    files = [{"path": "/a.txt", "content": "one"}]
    first = plan_for(model({**BASE, "files": files, "replicas": 1}))
    running = observed_pod(only(first, "Pod"), uid="p-1")
    edited = [{"path": "/a.txt", "content": "two"}]

    rolling = plan_for(
        model({**BASE, "files": edited, "replicas": 1}, status=first.status, generation=2),
        running,
    )

    new_pod = only(rolling, "Pod")
    assert new_pod["metadata"]["name"] != only(first, "Pod")["metadata"]["name"]
    assert new_pod["spec"] == only(first, "Pod")["spec"]
    assert only(rolling, "ConfigMap")["data"] == {"_a.txt": "two"}
    ready = condition(rolling, "Ready")
    assert ready is not None and (ready["reason"], ready["message"]) == (
        "RollingOut",
        "Replacing 1 Pods of an earlier spec; 0 of 1 replicas Ready",
    )
    added = [*files, {"path": "/b.txt", "content": "x"}]
    rolled = only(plan_for(model({**BASE, "files": added, "replicas": 1})), "Pod")
    assert rolled["metadata"]["name"] != only(first, "Pod")["metadata"]["name"]


def test_a_model_without_files_keeps_the_hash_of_its_spec_alone() -> None:
    """Hashing the files' content rolls no Pod of a Model without files."""
    pod = only(plan_for(model({**BASE, "replicas": 1})), "Pod")
    spec_hash = hashlib.sha256(canonical_json_bytes(pod["spec"])).hexdigest()[:10]
    assert pod["metadata"]["labels"]["pod-hash"] == spec_hash


def test_without_files_there_is_no_configmap_and_it_is_pruned() -> None:
    plan = plan_for(model({**BASE, "replicas": 1}))
    assert desired(plan, "ConfigMap") == []
    assert PruneRule(api_version="v1", kind="ConfigMap") in plan.prune
    assert plan.prune_selector == {
        "app.kubernetes.io/managed-by": "kaiwo",
        "kaiwo.silogen.ai/owner-uid": "u-1",
    }


# ------------------------------------------------------------------ cache


def test_a_cached_model_first_takes_its_finalizer_then_loads_its_files_then_runs_its_pods() -> None:
    # Its load Job made before the finalizer was on, a Model deleted in between went at
    # once: the load Job went in the background, its loader still writing (a CI run, 0278).
    adding = plan_for(model(CACHED), CACHE_CONFIG)

    assert (adding.finalizers, desired(adding, "Job"), desired(adding, "Pod")) == (
        ("kubeai.org/cache-eviction",),
        [],
        [],
    )
    assert list(adding.shared) == [expected("cache_volume")]
    waiting = condition(adding, "CacheLoaded")
    assert waiting is not None
    assert (waiting["status"], waiting["reason"], waiting["message"]) == (
        "False",
        "AddingFinalizer",
        "Job load-cache-llm loads the files once the Model carries the finalizer "
        "kubeai.org/cache-eviction, which evicts them when the Model is deleted",
    )
    assert [e.reason for e in adding.events] == ["Configured"]

    loading = plan_for(model(CACHED, status=adding.status, finalizers=FINALIZED), CACHE_CONFIG)

    assert desired(loading, "Pod") == []
    assert only(loading, "Job") == expected("cached_gs_load_job")
    assert list(loading.shared) == [expected("cache_volume")]
    assert loading.finalizers is None  # already there
    assert loading.status is not None and loading.status["cache"] == {"loaded": False}
    assert [e.reason for e in loading.events] == ["CacheLoading"]
    ready = condition(loading, "Ready")
    assert ready is not None and ready["reason"] == "WaitingForCache"

    job = finished_job(only(loading, "Job"))
    loaded = plan_for(
        model(CACHED, status=loading.status, finalizers=["kubeai.org/cache-eviction"]),
        CACHE_CONFIG,
        job,
    )

    assert len(desired(loaded, "Pod")) == 1
    assert desired(loaded, "Job") == []  # done: pruned
    assert loaded.status is not None and loaded.status["cache"] == {"loaded": True}
    assert loaded.finalizers is None  # already there
    assert [e.reason for e in loaded.events] == ["CacheLoaded"]

    # The Job gone, the status remembers.
    later = plan_for(model(CACHED, status=loaded.status), CACHE_CONFIG)
    assert len(desired(later, "Pod")) == 1


def test_a_load_job_observed_without_the_finalizer_is_kept_and_the_finalizer_put_back() -> None:
    # Someone took the finalizer off while the files loaded: the load goes on, not made anew.
    load = running_job(only(plan_for(model(CACHED, finalizers=FINALIZED), CACHE_CONFIG), "Job"))

    plan = plan_for(model(CACHED), CACHE_CONFIG, load)

    assert (plan.finalizers, only(plan, "Job")) == (
        ("kubeai.org/cache-eviction",),
        expected("cached_gs_load_job"),
    )
    assert condition(plan, "CacheLoaded")["reason"] == "Loading"  # type: ignore[index]


def test_a_cache_added_to_a_serving_model_keeps_its_pods_until_loaded_and_says_so() -> None:
    cached = {**CACHED, "url": "hf://org/model"}
    served = {k: v for k, v in cached.items() if k != "cacheProfile"}
    first = plan_for(model(served), CACHE_CONFIG)
    running = observed_pod(only(first, "Pod"), uid="p-1")

    loading = plan_for(
        model(cached, status=first.status, generation=2, finalizers=FINALIZED),
        running,
        CACHE_CONFIG,
    )

    assert desired(loading, "Pod") == []
    assert loading.delete == ()
    ready = condition(loading, "Ready")
    assert ready is not None and (ready["status"], ready["reason"], ready["message"]) == (
        "False",
        "WaitingForCache",
        "1 Ready Pods of an earlier spec serve until the cache is loaded; then they are "
        "replaced by Pods that read it",
    )
    loaded = plan_for(
        model(cached, status=loading.status, generation=2, finalizers=FINALIZED),
        running,
        finished_job(only(loading, "Job")),
        CACHE_CONFIG,
    )
    [new_pod] = desired(loaded, "Pod")
    assert new_pod["metadata"]["name"] != running["metadata"]["name"]
    ready = condition(loaded, "Ready")
    assert ready is not None and ready["reason"] == "RollingOut"


def test_a_failed_load_says_why_and_keeps_its_job() -> None:
    loading = plan_for(model(CACHED, finalizers=FINALIZED), CACHE_CONFIG)
    failed_job = finished_job(only(loading, "Job"), failed=True)

    failed = plan_for(
        model(CACHED, status=loading.status, finalizers=FINALIZED), CACHE_CONFIG, failed_job
    )

    cache = condition(failed, "CacheLoaded")
    assert cache is not None
    assert (cache["status"], cache["reason"]) == ("False", "LoadFailed")
    assert cache["message"] == (
        "Job load-cache-llm failed (BackoffLimitExceeded: Job has reached the specified "
        "backoff limit); see its logs, and delete it to try again"
    )
    assert [e.reason for e in failed.events] == ["CacheLoadFailed"]
    assert [j["metadata"]["name"] for j in desired(failed, "Job")] == ["load-cache-llm"]
    assert desired(failed, "Pod") == []


def running_job(manifest: dict[str, Any]) -> dict[str, Any]:
    """A Job as observed while its Pod runs: no condition yet."""
    job = finished_job(manifest)
    job["status"] = {"active": 1}
    return job


def test_an_edit_the_running_load_job_cannot_take_leaves_it_as_made_and_says_so() -> None:
    loading = plan_for(model(CACHED, finalizers=FINALIZED), CACHE_CONFIG)
    running = running_job(only(loading, "Job"))
    edited = {**CACHED, "env": {"X": "2"}}

    plan = plan_for(
        model(edited, status=loading.status, generation=2, finalizers=FINALIZED),
        CACHE_CONFIG,
        running,
    )

    # Applied as the spec now is, the API server refused it on every plan.
    assert (
        only(plan, "Job")["spec"]["template"] == expected("cached_gs_load_job")["spec"]["template"]
    )
    cache = condition(plan, "CacheLoaded")
    assert cache is not None
    assert (cache["status"], cache["reason"]) == ("False", "LoadingAsCreated")
    assert cache["message"] == (
        "Job load-cache-llm loads the files with the settings it was created with: a Job's "
        "pod template cannot change (spec.template.spec.containers[0].env[0].value); delete "
        "the Job to load with the edited spec"
    )
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "CacheLoadingAsCreated")]
    assert desired(plan, "Pod") == []


def test_a_failed_load_job_from_an_earlier_spec_is_replaced_by_one_of_the_edited_spec() -> None:
    loading = plan_for(model(CACHED, finalizers=FINALIZED), CACHE_CONFIG)
    failed_job = finished_job(only(loading, "Job"), failed=True)
    edited = {**CACHED, "env": {"X": "2"}}

    replacing = plan_for(
        model(edited, status=loading.status, generation=2, finalizers=FINALIZED),
        CACHE_CONFIG,
        failed_job,
    )

    assert desired(replacing, "Job") == []  # pruned
    assert PruneRule(api_version="batch/v1", kind="Job") in replacing.prune
    cache = condition(replacing, "CacheLoaded")
    assert cache is not None
    assert (cache["status"], cache["reason"]) == ("False", "Reloading")
    assert cache["message"] == (
        "Job load-cache-llm failed (BackoffLimitExceeded: Job has reached the specified "
        "backoff limit) with settings the spec has changed since "
        "(spec.template.spec.containers[0].env[0].value): it is replaced by one made from "
        "the edited spec"
    )
    assert replacing.status is not None and replacing.status["cache"] == {"loaded": False}

    gone = plan_for(
        model(edited, status=replacing.status, generation=2, finalizers=FINALIZED), CACHE_CONFIG
    )
    [job] = desired(gone, "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["env"][0] == {
        "name": "X",
        "value": "2",
    }
    loading_again = condition(gone, "CacheLoaded")
    assert loading_again is not None and loading_again["reason"] == "Loading"


def test_an_unchanged_load_job_is_applied_as_the_spec_makes_it() -> None:
    loading = plan_for(model(CACHED, finalizers=FINALIZED), CACHE_CONFIG)
    running = running_job(only(loading, "Job"))

    plan = plan_for(
        model(CACHED, status=loading.status, finalizers=FINALIZED), CACHE_CONFIG, running
    )

    assert only(plan, "Job") == expected("cached_gs_load_job")
    cache = condition(plan, "CacheLoaded")
    assert cache is not None and cache["reason"] == "Loading"


@pytest.mark.parametrize(
    ("spec", "config"),
    [
        ({"resourceProfile": "gone:1"}, CACHE_CONFIG),
        ({}, models_config("cacheProfiles: [not, a, mapping]\n")),
    ],
    ids=["unknown-profile", "invalid-configuration"],
)
def test_a_configuration_problem_keeps_the_loaded_cache_and_fixing_it_loads_nothing_again(
    spec: dict[str, Any], config: dict[str, Any]
) -> None:
    finalizers = ["kubeai.org/cache-eviction"]
    starting = plan_for(model(CACHED, status={"cache": {"loaded": True}}), CACHE_CONFIG)
    pod = observed_pod(only(starting, "Pod"), uid="p-1")
    serving = plan_for(
        model(CACHED, status=starting.status, finalizers=finalizers), CACHE_CONFIG, pod
    )
    loaded = serving.status

    broken = plan_for(model({**CACHED, **spec}, status=loaded, finalizers=finalizers), config, pod)

    assert broken.status is not None and broken.status["cache"] == {"loaded": True}
    fixed = plan_for(model(CACHED, status=broken.status, finalizers=finalizers), CACHE_CONFIG, pod)
    assert desired(fixed, "Job") == []  # the files are not downloaded again
    assert [p["metadata"]["name"] for p in desired(fixed, "Pod")] == [pod["metadata"]["name"]]
    assert fixed.status is not None and fixed.status["cache"] == {"loaded": True}
    assert [e.reason for e in fixed.events] == ["Configured", "ModelReady"]


def test_the_cache_volume_names_only_a_persistent_volume_when_there_is_no_class() -> None:
    config = models_config(
        "cacheProfiles:\n  pv:\n    sharedFilesystem: {persistentVolumeName: nfs-0, size: 1Ti}\n"
    )
    plan = plan_for(model({**CACHED, "cacheProfile": "pv"}), config)
    [volume] = plan.shared
    assert volume["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "1Ti"}},
        "storageClassName": "",
        "volumeName": "nfs-0",
    }


def cache_pvc(uid: str, **metadata: Any) -> dict[str, Any]:
    """The shared volume as observed, with its uid."""
    volume = {**expected("cache_volume"), "status": {"phase": "Bound"}}
    volume["metadata"] = {**volume["metadata"], "uid": uid, **metadata}
    return volume


def test_the_files_are_loaded_again_into_a_volume_made_anew() -> None:
    finalizers = ["kubeai.org/cache-eviction"]
    loading = plan_for(model(CACHED, finalizers=FINALIZED), CACHE_CONFIG, cache_pvc("pvc-1"))
    job = finished_job(only(loading, "Job"))
    loaded = plan_for(
        model(CACHED, status=loading.status, finalizers=finalizers),
        CACHE_CONFIG,
        cache_pvc("pvc-1"),
        job,
    )
    assert loaded.status is not None
    assert loaded.status["cache"] == {"loaded": True, "volumeUID": "pvc-1"}
    serving = plan_for(
        model(CACHED, status=loaded.status, finalizers=finalizers), CACHE_CONFIG, cache_pvc("pvc-1")
    )
    assert len(desired(serving, "Pod")) == 1

    # Deleted (the files with it): no Pods on a volume that is going or not there yet.
    for gone in [(cache_pvc("pvc-1", deletionTimestamp="2026-01-01T11:00:00Z"),), ()]:
        waiting = plan_for(
            model(CACHED, status=serving.status, finalizers=finalizers), CACHE_CONFIG, *gone
        )
        assert desired(waiting, "Pod") == []
        assert only(waiting, "Job") == expected("cached_gs_load_job")
        assert waiting.status is not None and waiting.status["cache"] == {"loaded": False}
        reloading = condition(waiting, "CacheLoaded")
        assert reloading is not None and reloading["reason"] == "Loading"

    # Made anew: loaded into it once more, then served from it.
    again = plan_for(
        model(CACHED, status=waiting.status, finalizers=finalizers),
        CACHE_CONFIG,
        cache_pvc("pvc-2"),
    )
    assert (desired(again, "Pod"), desired(again, "Job")) == ([], [expected("cached_gs_load_job")])
    reloaded = plan_for(
        model(CACHED, status=again.status, finalizers=finalizers),
        CACHE_CONFIG,
        cache_pvc("pvc-2"),
        job,
    )
    assert reloaded.status is not None
    assert reloaded.status["cache"] == {"loaded": True, "volumeUID": "pvc-2"}
    assert len(desired(reloaded, "Pod")) == 1


def test_a_cache_loaded_before_its_volume_was_recorded_stays_loaded_and_records_it() -> None:
    plan = plan_for(model(CACHED, status={"cache": {"loaded": True}}), CACHE_CONFIG, cache_pvc("p"))
    assert plan.status is not None and plan.status["cache"] == {"loaded": True, "volumeUID": "p"}
    assert (len(desired(plan, "Pod")), desired(plan, "Job")) == (1, [])


# ------------------------------------------------------------------ deletion


def deleting(**extra: Any) -> dict[str, Any]:
    return model(
        CACHED,
        status={"cache": {"loaded": True}},
        deletionTimestamp="2026-01-01T11:59:00Z",
        finalizers=["kubeai.org/cache-eviction"],
        **extra,
    )


CACHE_PVC = {**expected("cache_volume"), "status": {"phase": "Bound"}}
CACHE_PVC["metadata"] = {**CACHE_PVC["metadata"], "uid": "pvc-1"}


def test_a_deleted_cached_model_loses_its_pods_evicts_its_files_then_its_finalizer() -> None:
    serving = plan_for(model(CACHED, status={"cache": {"loaded": True}}), CACHE_CONFIG)
    pod = observed_pod(only(serving, "Pod"), uid="p-1")

    evicting = plan_for(deleting(), CACHE_CONFIG, CACHE_PVC, pod)

    assert evicting.delete == (
        ObjectRef(
            api_version="v1", kind="Pod", name=pod["metadata"]["name"], namespace="ai", uid="p-1"
        ),
    )
    assert desired(evicting, "Pod") == []
    assert only(evicting, "Job") == expected("evict_job")
    assert evicting.finalizers is None  # kept while the files are evicted
    evicted = condition(evicting, "CacheEvicted")
    assert evicted is not None and evicted["reason"] == "Evicting"

    done = plan_for(deleting(), CACHE_CONFIG, CACHE_PVC, finished_job(only(evicting, "Job")))
    assert done.finalizers == ()
    assert [e.reason for e in done.events][-1] == "CacheEvicted"


def test_an_eviction_under_way_keeps_its_job_as_made_when_the_configuration_changes() -> None:
    evicting = plan_for(deleting(), CACHE_CONFIG, CACHE_PVC)
    running = running_job(only(evicting, "Job"))
    new_image = models_config(
        "cacheProfiles:\n  fast:\n    sharedFilesystem: {storageClassName: nfs-rwx}\n"
        "modelLoading:\n  image: loader:2\n"
    )

    plan = plan_for(deleting(), new_image, CACHE_PVC, running)

    assert only(plan, "Job")["spec"]["template"] == expected("evict_job")["spec"]["template"]
    assert plan.finalizers is None


def test_without_the_volume_the_finalizer_goes_at_once() -> None:
    plan = plan_for(deleting(), CACHE_CONFIG)
    assert (plan.finalizers, desired(plan, "Job")) == ((), [])


def test_a_cache_volume_never_bound_holds_no_files_and_keeps_no_finalizer() -> None:
    # Upstream's issue 286 (decision 0202): a storage class that does not exist left the
    # claim Pending, and the Model stuck on its finalizer with the evict Job's pod Pending.
    pending = {**CACHE_PVC, "status": {"phase": "Pending"}}
    plan = plan_for(deleting(), CACHE_CONFIG, pending)
    assert (plan.finalizers, desired(plan, "Job")) == ((), [])
    evicted = condition(plan, "CacheEvicted")
    assert evicted is not None
    assert (evicted["status"], evicted["reason"], evicted["message"]) == (
        "True",
        "NothingCached",
        "PersistentVolumeClaim shared-model-cache-fast was never bound: no files to remove",
    )


def test_a_load_waiting_for_its_volume_to_bind_says_so() -> None:
    pending = {**CACHE_PVC, "status": {"phase": "Pending"}}
    plan = plan_for(model(CACHED, finalizers=["kubeai.org/cache-eviction"]), CACHE_CONFIG, pending)
    assert desired(plan, "Job") == [expected("cached_gs_load_job")]
    loading = condition(plan, "CacheLoaded")
    assert loading is not None
    assert (loading["reason"], loading["message"]) == (
        "VolumeNotBound",
        "Job load-cache-llm loads the files once PersistentVolumeClaim "
        "shared-model-cache-fast is bound; it is Pending (if it stays so, see its Events: a "
        "storage class that does not exist?)",
    )
    bound = plan_for(
        model(CACHED, finalizers=["kubeai.org/cache-eviction"]), CACHE_CONFIG, CACHE_PVC
    )
    assert condition(bound, "CacheLoaded")["reason"] == "Loading"  # type: ignore[index]


def test_a_failed_eviction_keeps_the_finalizer_and_says_how_to_let_go() -> None:
    evicting = plan_for(deleting(), CACHE_CONFIG, CACHE_PVC)
    failed = finished_job(only(evicting, "Job"), failed=True)
    plan = plan_for(deleting(), CACHE_CONFIG, CACHE_PVC, failed)
    evicted = condition(plan, "CacheEvicted")
    assert evicted is not None and evicted["reason"] == "EvictionFailed"
    assert "remove its finalizer kubeai.org/cache-eviction" in evicted["message"]
    assert plan.finalizers is None
    assert [e.reason for e in plan.events] == ["CacheEvictionFailed"]


def test_the_evict_job_pulls_with_the_namespaces_secrets_as_the_load_job_does() -> None:
    # Without them a loader image only the namespace's secret pulls left the evict Job's Pod
    # waiting for its image, and the Model held by its finalizer, for good.
    team_registry = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "AIMNamespaceConfig",
        "metadata": {"name": "defaults", "namespace": "ai", "uid": "aim-1"},
        "spec": {"images": {"imagePullSecrets": ["team-registry"]}},
    }
    with_registry = models_config(
        "cacheProfiles:\n  fast:\n    sharedFilesystem: {storageClassName: nfs-rwx}\n"
        "modelServerPods:\n  imagePullSecrets: [{name: platform-registry}]\n"
    )
    wanted = [{"name": "platform-registry"}, {"name": "team-registry"}]

    loading = plan_for(model(CACHED, finalizers=FINALIZED), with_registry, team_registry)
    evicting = plan_for(deleting(), with_registry, team_registry, CACHE_PVC)

    for plan in (loading, evicting):
        assert only(plan, "Job")["spec"]["template"]["spec"]["imagePullSecrets"] == wanted


LOAD_JOB_REF = ObjectRef(
    api_version="batch/v1",
    kind="Job",
    name="load-cache-llm",
    namespace="ai",
    uid="uid-load-cache-llm",
)
"""The load Job of ``CACHED``, as a plan names it to delete (by uid)."""


def test_a_model_deleted_while_loading_evicts_only_once_the_load_job_and_its_pods_are_gone() -> (
    None
):
    # Evicted in the same plan as the load Job went (in the background), a loader still
    # writing left files on the shared volume after the eviction (decision 0255).
    load = running_job(only(plan_for(model(CACHED, finalizers=FINALIZED), CACHE_CONFIG), "Job"))

    deleting_it = plan_for(deleting(), CACHE_CONFIG, CACHE_PVC, load)
    assert (deleting_it.delete, desired(deleting_it, "Job")) == ((LOAD_JOB_REF,), [])
    waiting = condition(deleting_it, "CacheEvicted")
    assert waiting is not None
    assert (waiting["status"], waiting["reason"], waiting["message"]) == (
        "False",
        "WaitingForLoad",
        "Job load-cache-llm is being deleted; the files are evicted once it and its Pods are gone",
    )
    assert deleting_it.finalizers is None

    going = {**load, "metadata": {**load["metadata"], "deletionTimestamp": "2026-01-01T12:00:00Z"}}
    still = plan_for(deleting(), CACHE_CONFIG, CACHE_PVC, going)
    assert (still.delete, desired(still, "Job")) == ((), [])
    assert condition(still, "CacheEvicted")["reason"] == "WaitingForLoad"  # type: ignore[index]

    gone = plan_for(deleting(), CACHE_CONFIG, CACHE_PVC)
    assert only(gone, "Job") == expected("evict_job")


def test_a_load_job_is_waited_for_even_while_its_volume_is_not_observed_yet_or_unbound() -> None:
    # The planner's view of the shared volume may lag the load Job's (another watch): judged
    # "no volume, nothing to evict", the Model went at once, the garbage collector deleted
    # its load Job in the background, and a loader still writing left its files (a CI run).
    load = running_job(only(plan_for(model(CACHED, finalizers=FINALIZED), CACHE_CONFIG), "Job"))
    pending = {**CACHE_PVC, "status": {"phase": "Pending"}}

    for volume in ((), (pending,)):
        plan = plan_for(deleting(), CACHE_CONFIG, *volume, load)

        assert (plan.delete, plan.finalizers, desired(plan, "Job")) == ((LOAD_JOB_REF,), None, [])
        assert condition(plan, "CacheEvicted")["reason"] == "WaitingForLoad"  # type: ignore[index]

    # Once the load Job is gone, a volume not there holds nothing to evict.
    assert plan_for(deleting(), CACHE_CONFIG).finalizers == ()


def planned_at(owner: dict[str, Any], *objects: dict[str, Any], now: datetime) -> PlanningResult:
    """The whole planning result (the plan and when to plan again) at ``now``."""
    cluster = ClusterState.from_wire(objects=[owner, *objects], namespaces=["ai"])
    return plan_object(owner=owner, context=PlanningContext.of(cluster), now=now)


def test_a_model_deleted_while_its_load_job_is_being_made_waits_for_it_before_evicting() -> None:
    # The plan that makes the load Job may still be carried out when the Model is deleted.
    # Judged "no load Job" at once, the eviction ran first and the loader wrote its files
    # after it, where no eviction removes them (decision 0290).
    loading = plan_for(model(CACHED, finalizers=FINALIZED), CACHE_CONFIG, CACHE_PVC)
    assert condition(loading, "CacheLoaded")["reason"] == "Loading"  # type: ignore[index]
    deleted_at = datetime(2026, 1, 1, 11, 59, tzinfo=UTC)

    def deleted(status: dict[str, Any] | None) -> dict[str, Any]:
        return model(
            CACHED,
            status=status,
            deletionTimestamp="2026-01-01T11:59:00Z",
            finalizers=FINALIZED,
        )

    waiting = planned_at(deleted(loading.status), CACHE_CONFIG, CACHE_PVC, now=NOW)
    assert waiting.plan is not None
    assert (waiting.plan.delete, waiting.plan.finalizers, desired(waiting.plan, "Job")) == (
        (),
        None,
        [],
    )
    said = condition(waiting.plan, "CacheEvicted")
    assert said is not None
    assert (said["status"], said["reason"], said["message"]) == (
        "False",
        "WaitingForLoadJob",
        "Job load-cache-llm was made for the files and is not seen yet; it is deleted once "
        "seen, and the files are evicted once it and its Pods are gone",
    )
    assert waiting.replan_at == deleted_at + timedelta(seconds=320)

    # The load Job seen: deleted, and waited for; once gone, the files are evicted.
    load = running_job(only(loading, "Job"))
    seen = plan_for(deleted(waiting.plan.status), CACHE_CONFIG, CACHE_PVC, load)
    assert (seen.delete, desired(seen, "Job")) == ((LOAD_JOB_REF,), [])
    gone = plan_for(deleted(seen.status), CACHE_CONFIG, CACHE_PVC)
    assert only(gone, "Job") == expected("evict_job")

    # Never seen (the executor gave up on the plan that made it): evicted once the executor
    # can no longer be making it.
    late = planned_at(
        deleted(waiting.plan.status),
        CACHE_CONFIG,
        CACHE_PVC,
        now=deleted_at + timedelta(seconds=320),
    )
    assert late.plan is not None and late.replan_at is None
    assert only(late.plan, "Job") == expected("evict_job")


def deleted_while_loading() -> dict[str, Any]:
    """``CACHED`` deleted at 11:59 while its last plan said the load Job was made."""
    loading = plan_for(model(CACHED, finalizers=FINALIZED), CACHE_CONFIG, CACHE_PVC)
    return model(
        CACHED,
        status=loading.status,
        deletionTimestamp="2026-01-01T11:59:00Z",
        finalizers=FINALIZED,
    )


def test_a_deleted_model_whose_volume_goes_too_does_not_wait_for_a_load_job() -> None:
    # Its namespace deleted, say: the volume takes the files with it, whatever a late loader
    # writes, so the Model's finalizer goes at once, as before decision 0290.
    going = {**CACHE_PVC, "metadata": {**CACHE_PVC["metadata"], "deletionTimestamp": "x"}}
    namespace_going = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ai", "uid": "ns-uid", "deletionTimestamp": "x"},
    }

    # The volume still seen in a Namespace being deleted goes too (and no Job can be made).
    for objects in ((going,), (namespace_going,), (namespace_going, CACHE_PVC)):
        result = planned_at(deleted_while_loading(), CACHE_CONFIG, *objects, now=NOW)

        assert result.plan is not None and result.replan_at is None
        assert (result.plan.finalizers, desired(result.plan, "Job")) == ((), [])


def test_a_deleted_model_waits_for_its_load_job_while_its_volume_is_not_seen_or_not_bound() -> None:
    # The plan that made the load Job applied the volume with it, and the planner may see
    # neither yet (decision 0292); a volume whose storage class waits for the first consumer
    # stays Pending until the loader's pod binds it. Judged "nothing to evict", the Model
    # went, and a loader that ran then left its files on the volume, which stays.
    pending = {**CACHE_PVC, "status": {"phase": "Pending"}}

    for volume in ((), (pending,)):
        result = planned_at(deleted_while_loading(), CACHE_CONFIG, *volume, now=NOW)

        assert result.plan is not None
        assert (result.plan.finalizers, desired(result.plan, "Job")) == (None, [])
        assert condition(result.plan, "CacheEvicted")["reason"] == "WaitingForLoadJob"  # type: ignore[index]
        assert result.replan_at == datetime(2026, 1, 1, 11, 59, tzinfo=UTC) + timedelta(seconds=320)

    # Never seen: once the executor can no longer be making it, nothing to evict.
    late = NOW + timedelta(seconds=300)
    for volume in ((), (pending,)):
        result = planned_at(deleted_while_loading(), CACHE_CONFIG, *volume, now=late)
        assert result.plan is not None and result.replan_at is None
        assert result.plan.finalizers == ()


@pytest.mark.parametrize(
    "cache_loaded",
    [
        pytest.param(None, id="no word of a load"),
        pytest.param(("True", "Loaded"), id="loaded"),
        pytest.param(("False", "AddingFinalizer"), id="no load Job made yet"),
        pytest.param(("False", "LoadFailed"), id="the load failed"),
    ],
)
def test_a_deleted_model_whose_last_plan_made_no_load_job_does_not_wait_for_one(
    cache_loaded: tuple[str, str] | None,
) -> None:
    conditions = (
        []
        if cache_loaded is None
        else [
            {
                "type": "CacheLoaded",
                "status": cache_loaded[0],
                "reason": cache_loaded[1],
                "message": "",
                "lastTransitionTime": "2026-01-01T11:00:00Z",
            }
        ]
    )
    owner = model(
        CACHED,
        status={"cache": {"loaded": cache_loaded == ("True", "Loaded")}, "conditions": conditions},
        deletionTimestamp="2026-01-01T11:59:00Z",
        finalizers=FINALIZED,
    )

    result = planned_at(owner, CACHE_CONFIG, CACHE_PVC, now=NOW)

    assert result.plan is not None and result.replan_at is None
    assert only(result.plan, "Job") == expected("evict_job")


def test_a_model_deleted_while_the_configuration_is_invalid_waits_for_its_loader_image() -> None:
    # The chart's default loader image, which a cluster pulling only from its mirror cannot
    # pull, was used instead of the platform's (decision 0255).
    invalid = models_config("modelRollouts: {surge: -1}\n")

    plan = plan_for(deleting(), invalid, CACHE_PVC)

    assert (desired(plan, "Job"), plan.finalizers) == ([], None)
    waiting = condition(plan, "CacheEvicted")
    assert waiting is not None
    assert (waiting["status"], waiting["reason"], waiting["message"]) == (
        "False",
        "InvalidConfiguration",
        "waiting for a valid system configuration to make Job evict-cache-llm with its loader "
        "image: the system configuration kaiwo-system/kaiwo-models is invalid: models.yaml: "
        "modelRollouts.surge: Input should be greater than or equal to 0",
    )
    # An eviction made before goes on as it was made, and ends.
    made = plan_for(deleting(), CACHE_CONFIG, CACHE_PVC)
    running = running_job(only(made, "Job"))
    going_on = plan_for(deleting(), invalid, CACHE_PVC, running)
    assert only(going_on, "Job")["spec"]["template"] == expected("evict_job")["spec"]["template"]
    done = plan_for(deleting(), invalid, CACHE_PVC, finished_job(only(made, "Job")))
    assert done.finalizers == ()


def test_a_model_without_cache_never_carries_the_finalizer() -> None:
    plan = plan_for(model({**BASE, "replicas": 1}, finalizers=["kubeai.org/cache-eviction", "x/y"]))
    assert plan.finalizers == ()


# ------------------------------------------------------------------ adapters


ADAPTERS: dict[str, Any] = {
    **BASE,
    "replicas": 2,
    "adapters": [
        {"name": "sql", "url": "hf://org/sql-lora"},
        {"name": "chat", "url": "s3://bucket/chat-lora"},
    ],
}


def test_the_wanted_adapters_and_the_loader_script_are_a_configmap() -> None:
    plan = plan_for(model(ADAPTERS))

    config_map = only(plan, "ConfigMap")
    assert config_map["metadata"]["name"] == "model-llm-adapters"
    assert json.loads(config_map["data"]["adapters.json"]) == [
        {
            "name": "chat",
            "url": "s3://bucket/chat-lora",
            "hash": string_hash("s3://bucket/chat-lora"),
        },
        {"name": "sql", "url": "hf://org/sql-lora", "hash": string_hash("hf://org/sql-lora")},
    ]
    assert "load_lora_adapter" in config_map["data"]["loader.py"]


def test_the_loaders_may_label_only_the_models_own_pods() -> None:
    plan = plan_for(model(ADAPTERS, finalizers=[]))
    pods = sorted(p["metadata"]["name"] for p in desired(plan, "Pod"))

    role = only(plan, "Role")
    binding = only(plan, "RoleBinding")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"], "resourceNames": pods}
    ]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "model-llm-adapter-loader",
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "default", "namespace": "ai"}]
    assert refusals(plan, owner=LIVE) == ()


def test_changing_the_adapters_restarts_nothing() -> None:
    before = desired(plan_for(model(ADAPTERS)), "Pod")
    fewer = {**ADAPTERS, "adapters": ADAPTERS["adapters"][:1]}
    after = desired(plan_for(model(fewer)), "Pod")
    assert [p["metadata"]["name"] for p in after] == [p["metadata"]["name"] for p in before]
    assert after[0]["spec"] == before[0]["spec"]


def test_adapters_loaded_shows_when_every_ready_pod_reports_every_adapter() -> None:
    plan = plan_for(model(ADAPTERS))
    sql, chat = string_hash("hf://org/sql-lora"), string_hash("s3://bucket/chat-lora")
    loaded = {"adapter.kubeai.org/sql": sql, "adapter.kubeai.org/chat": chat}
    pods = desired(plan, "Pod")
    both = observed_pod(pods[0], uid="p-0", labels=loaded)
    one = observed_pod(pods[1], uid="p-1", labels={"adapter.kubeai.org/sql": sql})

    partly = plan_for(model(ADAPTERS), both, one)
    found = condition(partly, "AdaptersLoaded")
    assert found is not None
    assert (found["status"], found["message"]) == (
        "False",
        "1 of 2 Ready Pods have loaded all 2 adapters",
    )

    everywhere = plan_for(model(ADAPTERS), both, observed_pod(pods[1], uid="p-1", labels=loaded))
    found = condition(everywhere, "AdaptersLoaded")
    assert found is not None and found["status"] == "True"


def test_removing_the_adapters_drops_their_condition() -> None:
    plan = plan_for(model(ADAPTERS))
    pods = [observed_pod(p, uid=f"p-{i}") for i, p in enumerate(desired(plan, "Pod"))]
    loading = plan_for(model(ADAPTERS, status=plan.status), *pods)
    assert condition(loading, "AdaptersLoaded") is not None
    removed = {key: value for key, value in ADAPTERS.items() if key != "adapters"}

    edited = plan_for(model(removed, status=loading.status, generation=2), *pods)

    assert condition(edited, "AdaptersLoaded") is None
    assert [c["type"] for c in (edited.status or {})["conditions"]] == ["Configured", "Ready"]
    assert edited.events == (
        EventIntent(
            type="Normal",
            reason="RolloutStarted",
            message="Replacing 2 Pods of an earlier spec; 0 of 2 replicas Ready",
        ),
    )


def test_an_empty_adapter_list_keeps_its_loader_and_drops_the_condition() -> None:
    plan = plan_for(model(ADAPTERS))
    pods = [observed_pod(p, uid=f"p-{i}") for i, p in enumerate(desired(plan, "Pod"))]
    loading = plan_for(model(ADAPTERS, status=plan.status), *pods)

    emptied = plan_for(model({**ADAPTERS, "adapters": []}, status=loading.status), *pods)

    assert condition(emptied, "AdaptersLoaded") is None
    assert [p["metadata"]["name"] for p in desired(emptied, "Pod")] == [
        p["metadata"]["name"] for p in desired(plan, "Pod")
    ]


@pytest.mark.parametrize(
    ("text", "label"),
    # The FNV-1a (32 bit) test vectors 0x811c9dc5, 0xe40c292c and 0xbf9cf968 in decimal,
    # each digit mapped as upstream maps it (0-9 -> 4 5 6 7 8 9 b c d f).
    [("", "65bb57b6b5"), ("a", "7d6b446664"), ("foobar", "7658c79c64")],
)
def test_adapter_labels_are_upstreams_string_hash(text: str, label: str) -> None:
    assert string_hash(text) == label


# ------------------------------------------------------------------ status and Events


def test_a_new_model_announces_itself_and_ready_follows_its_pods() -> None:
    first = plan_for(model({**BASE, "replicas": 1}))
    assert [e.reason for e in first.events] == ["Configured"]
    ready = condition(first, "Ready")
    assert ready is not None and (ready["status"], ready["reason"], ready["message"]) == (
        "False",
        "ReplicasNotReady",
        "0 of 1 replicas Ready",
    )
    running = observed_pod(only(first, "Pod"), uid="p-1")

    second = plan_for(model({**BASE, "replicas": 1}, status=first.status), running)

    assert [e.reason for e in second.events] == ["ModelReady"]
    assert second.status is not None
    assert second.status["replicas"] == {"all": 1, "ready": 1}
    assert second.status["observedGeneration"] == 1
    ready = condition(second, "Ready")
    assert ready is not None and (ready["status"], ready["reason"]) == ("True", "ReplicasReady")


def test_a_rollout_is_announced_once() -> None:
    first = plan_for(model({**BASE, "replicas": 1}))
    running = observed_pod(only(first, "Pod"), uid="p-1")
    settled = plan_for(model({**BASE, "replicas": 1}, status=first.status), running)
    changed = {**BASE, "replicas": 1, "args": ["--x"]}

    rolling = plan_for(model(changed, status=settled.status, generation=2), running)

    assert [e.reason for e in rolling.events] == ["RolloutStarted"]
    ready = condition(rolling, "Ready")
    assert ready is not None and ready["message"] == (
        "Replacing 1 Pods of an earlier spec; 0 of 1 replicas Ready"
    )
    again = plan_for(model(changed, status=rolling.status, generation=2), running)
    assert again.events == ()


def test_a_server_pod_that_cannot_pull_its_image_is_named_with_one_warning() -> None:
    # Ready said only "0 of 1 replicas Ready" while the kubelet could not pull the image.
    first = plan_for(model({**BASE, "replicas": 1}))
    manifest = only(first, "Pod")
    stuck = observed_pod(manifest, uid="p-1", ready=False)
    stuck["status"]["containerStatuses"] = [
        {
            "name": "server",
            "ready": False,
            "state": {"waiting": {"reason": "ErrImagePull", "message": "not found"}},
        }
    ]
    name = manifest["metadata"]["name"]

    failing = plan_for(model({**BASE, "replicas": 1}, status=first.status), stuck)

    told = (
        f"0 of 1 replicas Ready; pod {name}: container server is waiting: ErrImagePull (not found)"
    )
    assert failing.events == (EventIntent(type="Warning", reason="ReplicasFailing", message=told),)
    ready = condition(failing, "Ready")
    assert ready is not None and (ready["status"], ready["reason"], ready["message"]) == (
        "False",
        "ReplicasFailing",
        told,
    )
    stuck["status"]["containerStatuses"][0]["state"]["waiting"] = {"reason": "ImagePullBackOff"}
    again = plan_for(model({**BASE, "replicas": 1}, status=failing.status), stuck)
    assert again.events == ()


def test_every_model_plan_passes_admission() -> None:
    plans = [
        plan_for(model(ADAPTERS)),
        plan_for(model(CACHED), CACHE_CONFIG),
        plan_for(deleting(), CACHE_CONFIG, CACHE_PVC),
        plan_for(model({**BASE, "files": [{"path": "/a", "content": "b"}], "replicas": 3})),
    ]
    for plan in plans:
        assert refusals(plan, owner=LIVE) == ()


def test_parts_kept_per_spec_version_still_follow_the_model_as_observed_now() -> None:
    from kaiwo_planner.domain.planning import plan_object
    from kaiwo_planner.domain.state.cluster import ClusterState
    from kaiwo_planner.domain.state.planning_context import PlanningContext

    from tests.unit.planner.models.building import NOW

    contexts: list[PlanningContext] = []

    def planned(owner: dict[str, Any]) -> Any:
        # One context carried along, as the planner service keeps it.
        cluster = ClusterState.from_wire(objects=[owner], namespaces=["ai"])
        context = (
            contexts[-1].moved_to(cluster, changed=[("kubeai.org", "Model")])
            if contexts
            else PlanningContext.of(cluster)
        )
        contexts.append(context)
        return plan_object(owner=owner, context=context, now=NOW).plan

    one = planned(model({**BASE, "replicas": 1}))
    # Same uid and generation (the kept parts are reused), other replicas and finalizers.
    three = planned(model({**BASE, "replicas": 3}, finalizers=["kubeai.org/cache-eviction"]))
    assert len(desired(one, "Pod")) == 1
    assert len(desired(three, "Pod")) == 3
    assert three.finalizers == ()
    # A new generation is a new spec: built afresh.
    other = planned(model({**BASE, "replicas": 1, "image": "x:1"}, generation=2))
    assert only(other, "Pod")["spec"]["containers"][0]["image"] == "x:1"


def test_an_oss_model_loads_with_the_alibaba_keys_and_an_s3_one_with_the_aws_keys() -> None:
    oss = plan_for(
        model({**CACHED, "url": "oss://bucket/qwen", "env": {}}, finalizers=FINALIZED), CACHE_CONFIG
    )
    [loader] = only(oss, "Job")["spec"]["template"]["spec"]["containers"]
    assert loader["args"] == ["oss://bucket/qwen", "/models/llm-u-1"]
    assert loader["env"] == [
        {
            "name": "OSS_ACCESS_KEY_ID",
            "valueFrom": {
                "secretKeyRef": {"name": "kubeai-alibaba", "key": "accessKeyID", "optional": True}
            },
        },
        {
            "name": "OSS_ACCESS_KEY_SECRET",
            "valueFrom": {
                "secretKeyRef": {
                    "name": "kubeai-alibaba",
                    "key": "accessKeySecret",
                    "optional": True,
                }
            },
        },
    ]
    assert loader["volumeMounts"] == [
        {"name": "models", "mountPath": "/models/llm-u-1", "subPath": "models/llm-u-1"}
    ]
    s3 = plan_for(
        model({**CACHED, "url": "s3://bucket/qwen", "env": {}}, finalizers=FINALIZED), CACHE_CONFIG
    )
    [loader] = only(s3, "Job")["spec"]["template"]["spec"]["containers"]
    assert [v["name"] for v in loader["env"]] == ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]
