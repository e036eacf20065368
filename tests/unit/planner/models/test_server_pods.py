"""The model-server Pod of each engine and URL scheme, against Pods written out by hand."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.planner.models.building import (
    expected,
    model,
    models_config,
    only,
    plan_for,
    pod_hash_of,
)

AIM_CONFIG = {
    "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
    "kind": "AIMNamespaceConfig",
    "metadata": {"name": "defaults", "namespace": "ai", "uid": "aim-1"},
    "spec": {
        "images": {"imagePullSecrets": ["team-registry"]},
        "credentials": {"huggingFaceToken": {"secretName": "team-hf", "secretKey": "hf-token"}},
    },
}

CASES: dict[str, tuple[dict[str, Any], tuple[dict[str, Any], ...]]] = {
    "vllm_hf_pod": (
        {
            "url": "hf://meta-llama/Llama-3.1-8B-Instruct",
            "engine": "VLLM",
            "resourceProfile": "amd-gpu-mi300x:2",
            "args": ["--max-model-len=8192"],
            "env": {"B": "2", "A": "1"},
            "envFrom": [{"secretRef": {"name": "extra"}}],
            "priorityClassName": "high",
            "replicas": 1,
        },
        (),
    ),
    "vllm_s3_streamed_pod": (
        {
            "url": "s3://models/llama/8b",
            "engine": "VLLM",
            "resourceProfile": "nvidia-gpu-l4:1",
            "env": {"AWS_ENDPOINT_URL": "http://minio:9000"},
            "minReplicas": 1,
        },
        (),
    ),
    "vllm_pvc_pod": (
        {"url": "pvc://weights/llama/8b", "engine": "VLLM", "replicas": 1},
        (),
    ),
    "ollama_pull_pod": (
        {
            "url": "ollama://qwen2:0.5b?insecure=true",
            "engine": "OLlama",
            "features": ["TextGeneration"],
            "resourceProfile": "cpu:2",
            "replicas": 1,
            "autoscalingDisabled": True,
        },
        (),
    ),
    "ollama_pvc_pod": (
        {
            "url": "pvc://ollama-store?model=nomic-embed-text",
            "engine": "OLlama",
            "features": ["TextEmbedding"],
            "args": ["--verbose"],
            "replicas": 1,
        },
        (),
    ),
    "fasterwhisper_hf_pod": (
        {
            "url": "hf://Systran/faster-whisper-medium.en",
            "engine": "FasterWhisper",
            "features": ["SpeechToText"],
            "resourceProfile": "cpu:1",
            "replicas": 1,
        },
        (AIM_CONFIG,),
    ),
    "infinity_hf_pod": (
        {
            "url": "hf://BAAI/bge-small-en-v1.5",
            "engine": "Infinity",
            "features": ["TextEmbedding"],
            "resourceProfile": "cpu:1",
            "args": ["--batch-size=32"],
            "replicas": 1,
        },
        (),
    ),
    "adapters_files_pod": (
        {
            "url": "hf://meta-llama/Llama-3.1-8B",
            "engine": "VLLM",
            "adapters": [{"name": "sql", "url": "hf://org/sql-lora"}],
            "files": [{"path": "/config/chat.jinja", "content": "{{ messages }}"}],
            "envFrom": [{"secretRef": {"name": "bucket-creds"}}],
            "replicas": 1,
        },
        (),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_server_pod_is_upstreams(case: str) -> None:
    spec, objects = CASES[case]

    pod = only(plan_for(model(spec), *objects), "Pod")

    assert pod == expected(case, pod_hash=pod_hash_of(pod))


def test_a_cached_model_reads_its_directory_in_the_shared_volume() -> None:
    config = models_config(
        "cacheProfiles:\n  fast:\n    sharedFilesystem: {storageClassName: nfs-rwx}\n"
    )
    spec = {
        "url": "gs://bucket/llama",
        "engine": "VLLM",
        "resourceProfile": "cpu:1",
        "cacheProfile": "fast",
        "env": {"X": "1"},
        "replicas": 1,
    }
    loaded = model(spec, status={"cache": {"loaded": True}})

    pod = only(plan_for(loaded, config), "Pod")

    assert pod == expected("cached_gs_pod", pod_hash=pod_hash_of(pod))


def test_the_hash_names_what_the_pod_runs_and_nothing_else() -> None:
    spec = CASES["vllm_hf_pod"][0]
    first = only(plan_for(model(spec)), "Pod")
    relabelled = only(plan_for(model(spec, labels={"team": "a"}, generation=2)), "Pod")
    other_args = only(plan_for(model({**spec, "args": ["--max-model-len=4096"]})), "Pod")
    other_image = only(plan_for(model({**spec, "image": "registry.local/vllm:1"})), "Pod")

    assert pod_hash_of(relabelled) == pod_hash_of(first)
    assert len({pod_hash_of(first), pod_hash_of(other_args), pod_hash_of(other_image)}) == 3
    assert other_image["spec"]["containers"][0]["image"] == "registry.local/vllm:1"


def test_env_is_sorted_by_name_and_a_users_variable_wins_over_a_credential() -> None:
    spec = {
        "url": "hf://org/repo",
        "engine": "VLLM",
        "env": {"Z": "z", "HF_TOKEN": "mine", "M": "m"},
        "replicas": 1,
    }

    [server] = only(plan_for(model(spec)), "Pod")["spec"]["containers"]

    assert server["env"] == [
        {"name": "HF_TOKEN", "value": "mine"},
        {"name": "M", "value": "m"},
        {"name": "Z", "value": "z"},
    ]


def test_the_namespace_s3_credential_of_the_models_endpoint_is_used() -> None:
    namespace_config = {
        **AIM_CONFIG,
        "spec": {
            "credentials": {
                "s3": [
                    {
                        "endpointUrl": "http://other:9000",
                        "accessKeyId": {"secretName": "other", "secretKey": "id"},
                        "secretAccessKey": {"secretName": "other", "secretKey": "key"},
                    },
                    {
                        "endpointUrl": "http://minio:9000/",
                        "accessKeyId": {"secretName": "minio", "secretKey": "id"},
                        "secretAccessKey": {"secretName": "minio", "secretKey": "key"},
                    },
                ]
            }
        },
    }
    spec = CASES["vllm_s3_streamed_pod"][0]

    [server] = only(plan_for(model(spec), namespace_config), "Pod")["spec"]["containers"]

    assert server["env"][1:] == [
        {
            "name": "AWS_ACCESS_KEY_ID",
            "valueFrom": {"secretKeyRef": {"name": "minio", "key": "id", "optional": True}},
        },
        {
            "name": "AWS_SECRET_ACCESS_KEY",
            "valueFrom": {"secretKeyRef": {"name": "minio", "key": "key", "optional": True}},
        },
    ]


def aws_env(secret: str) -> list[dict[str, Any]]:
    return [
        {
            "name": "AWS_ACCESS_KEY_ID",
            "valueFrom": {"secretKeyRef": {"name": secret, "key": "id", "optional": True}},
        },
        {
            "name": "AWS_SECRET_ACCESS_KEY",
            "valueFrom": {"secretKeyRef": {"name": secret, "key": "key", "optional": True}},
        },
    ]


def s3_entry(secret: str, endpoint_url: str | None = None) -> dict[str, Any]:
    return {
        **({"endpointUrl": endpoint_url} if endpoint_url is not None else {}),
        "accessKeyId": {"secretName": secret, "secretKey": "id"},
        "secretAccessKey": {"secretName": secret, "secretKey": "key"},
    }


def test_a_model_without_an_endpoint_takes_the_namespaces_aws_entry() -> None:
    # The API reference's own example entry names AWS's endpoint; a Model without
    # AWS_ENDPOINT_URL reads from AWS (decision 0233), not with the system Secret.
    namespace_config = {
        **AIM_CONFIG,
        "spec": {
            "credentials": {
                "s3": [
                    s3_entry("minio", "http://minio:9000"),
                    s3_entry("aws", "https://s3.us-east-1.amazonaws.com"),
                ]
            }
        },
    }
    spec = {k: v for k, v in CASES["vllm_s3_streamed_pod"][0].items() if k != "env"}

    [server] = only(plan_for(model(spec), namespace_config), "Pod")["spec"]["containers"]

    assert [
        e for e in server["env"] if e["name"].startswith("AWS_") and "valueFrom" in e
    ] == aws_env("aws")


def test_a_namespace_s3_entry_naming_no_secret_is_passed_over_for_a_model() -> None:
    namespace_config = {
        **AIM_CONFIG,
        "spec": {
            "credentials": {
                "s3": [{"endpointUrl": "http://minio:9000"}, s3_entry("default")],
            }
        },
    }
    spec = CASES["vllm_s3_streamed_pod"][0]

    [server] = only(plan_for(model(spec), namespace_config), "Pod")["spec"]["containers"]

    assert [
        e for e in server["env"] if e["name"].startswith("AWS_") and "valueFrom" in e
    ] == aws_env("default")


def test_the_configuration_sets_service_account_contexts_pull_secrets_and_probes() -> None:
    config = models_config(
        """\
modelServerPods:
  serviceAccountName: models
  podSecurityContext: {runAsNonRoot: true}
  securityContext: null
  imagePullSecrets: [{name: registry}]
modelServers:
  VLLM:
    probes:
      startup: {httpGet: {path: /ping, port: http}, failureThreshold: 60}
secretNames:
  huggingface: hf
"""
    )

    pod = only(plan_for(model({"url": "hf://o/r", "engine": "VLLM", "replicas": 1}), config), "Pod")

    spec = pod["spec"]
    [server] = spec["containers"]
    assert spec["serviceAccountName"] == "models"
    assert spec["securityContext"] == {"runAsNonRoot": True}
    assert spec["imagePullSecrets"] == [{"name": "registry"}]
    assert "securityContext" not in server
    assert server["startupProbe"] == {
        "httpGet": {"path": "/ping", "port": "http"},
        "failureThreshold": 60,
    }
    assert server["readinessProbe"]["httpGet"]["path"] == "/health"
    assert server["env"][-1]["valueFrom"]["secretKeyRef"]["name"] == "hf"
