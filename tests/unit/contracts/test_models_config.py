"""The system configuration of Models: the chart's defaults, merging a document over them,
and what it refuses. Expected values written out by hand from upstream's chart."""

from __future__ import annotations

import pytest
from kaiwo_contracts.models_config import ModelsConfig, merged_over
from pydantic import ValidationError


def test_without_a_document_the_charts_defaults_apply() -> None:
    config = ModelsConfig.from_document(None)
    assert config.model_servers.vllm.images["default"] == "vllm/vllm-openai:v0.10.2"
    assert config.model_servers.ollama.images["amd-gpu"] == "ollama/ollama:0.11.11-rocm"
    assert config.model_servers.for_engine("Infinity").images["cpu"] == (
        "michaelf34/infinity:0.0.77-cpu"
    )
    assert config.model_loading.image == "ghcr.io/kubeai-project/kubeai-model-loader:v0.14.0"
    assert config.model_rollouts.surge == 1
    assert config.secret_names.huggingface == "kubeai-huggingface"
    l4 = config.resource_profiles["nvidia-gpu-l4"]
    assert (l4.image_name, l4.requests, l4.limits) == (
        "nvidia-gpu",
        {"nvidia.com/gpu": "1", "cpu": "6", "memory": "24Gi"},
        {"nvidia.com/gpu": "1"},
    )
    assert config.resource_profiles["cpu"].requests == {"cpu": 1, "memory": "2Gi"}
    assert config.cache_profiles == {}
    assert config.model_server_pods.security_context == {
        "readOnlyRootFilesystem": False,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }


def test_a_document_merges_over_the_defaults_as_helm_values_do() -> None:
    config = ModelsConfig.from_document(
        {
            "modelServers": {"VLLM": {"images": {"amd-gpu": "registry.local/vllm:rocm"}}},
            "resourceProfiles": {
                "cpu": None,
                "amd-gpu-mi300x": {"requests": {"cpu": "8", "memory": "64Gi"}},
            },
            "cacheProfiles": {"fast": {"sharedFilesystem": {"storageClassName": "nfs"}}},
            "modelRollouts": {"surge": 0},
        }
    )
    assert config.model_servers.vllm.images["amd-gpu"] == "registry.local/vllm:rocm"
    assert config.model_servers.vllm.images["default"] == "vllm/vllm-openai:v0.10.2"
    assert "cpu" not in config.resource_profiles
    mi300x = config.resource_profiles["amd-gpu-mi300x"]
    assert (mi300x.limits, mi300x.requests) == (
        {"amd.com/gpu": "1"},
        {"cpu": "8", "memory": "64Gi"},
    )
    fast = config.cache_profiles["fast"].shared_filesystem
    assert (fast.storage_class_name, fast.persistent_volume_name, fast.size) == (
        "nfs",
        None,
        "10Gi",
    )
    assert config.model_rollouts.surge == 0


def test_lists_are_replaced_not_merged() -> None:
    assert merged_over({"a": [1, 2], "b": {"c": 1}}, {"a": [3], "b": {"d": 2}}) == {
        "a": [3],
        "b": {"c": 1, "d": 2},
    }


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"cacheProfiles": {"x": {"sharedFilesystem": {}}}}, "cacheProfiles.x.sharedFilesystem"),
        ({"modelRollouts": {"surge": -1}}, "modelRollouts.surge"),
        ({"resourceProfiles": {"a:b": {}}}, "resourceProfiles"),
        ({"modelLoading": {"image": ""}}, "modelLoading.image"),
        ({"resourceProfiles": {"cpu": {"requests": {"cpu": True}}}}, "resourceProfiles.cpu"),
        ({"modelServers": {"vLLM": {}}}, "modelServers.vLLM"),
        ({"messaging": {"streams": [{"requestsURL": "nats://x"}]}}, "messaging.streams"),
        ({"metricsAdress": ":8080"}, "metricsAdress"),
    ],
)
def test_mistakes_are_refused_naming_the_field(document: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        ModelsConfig.from_document(document)
    locations = [".".join(str(p) for p in error["loc"]) for error in raised.value.errors()]
    assert any(location.startswith(field) for location in locations), locations


def test_a_document_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(ValueError, match="mapping"):
        ModelsConfig.from_document(["cpu"])  # type: ignore[arg-type]


def test_upstreams_chart_document_pastes_in_whole() -> None:
    # The keys upstream's chart writes for its own process (kubeai's system.yaml): accepted,
    # read by nothing here (decision 0199); before, each one made every Model unconfigured.
    config = ModelsConfig.from_document(
        {
            "secretNames": {"huggingface": "kubeai-huggingface"},
            "modelAutoscaling": {
                "interval": "10s",
                "timeWindow": "10m",
                "stateConfigMapName": "kubeai-autoscaler-state",
            },
            "messaging": {"errorMaxBackoff": "30s", "streams": []},
            "metricsAddr": ":8080",
            "healthAddress": ":8081",
            "leaderElection": {"leaseDuration": "15s", "renewDeadline": "10s"},
            "allowPodAddressOverride": False,
        }
    )

    default = ModelsConfig.from_document(None)
    assert config.model_autoscaling.max_replicas == default.model_autoscaling.max_replicas == 8
    assert (config.model_servers, config.resource_profiles, config.secret_names) == (
        default.model_servers,
        default.resource_profiles,
        default.secret_names,
    )
