"""KaiwoConfig: seed defaults, validation messages, lossless round trips, the example."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from kaiwo_contracts.crds.config_v1alpha1 import (
    KaiwoConfig,
    KaiwoConfigList,
    KaiwoConfigSpec,
    KaiwoStorageConfig,
)
from kaiwo_contracts.crds.schema import custom_resource_definition
from kaiwo_contracts.validation import Problem, validate_manifest
from kaiwo_kubefake.schema_defaulting import apply_defaults
from kaiwo_kubefake.structural_schema import parse_schema
from pydantic import ValidationError

# A KaiwoConfig as the API server returns it: every CRD default materialised, managedFields.
KAIWOCONFIG_FROM_API: dict[str, Any] = {
    "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoConfig",
    "metadata": {
        "name": "kaiwo",
        "uid": "0d3c0a5e-3c0f-4f57-a8f4-3b5e8c1d2e01",
        "resourceVersion": "4411",
        "generation": 3,
        "creationTimestamp": "2025-05-12T09:00:00Z",
        "managedFields": [
            {
                "manager": "kaiwo-operator",
                "operation": "Update",
                "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
                "time": "2025-05-12T09:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {}},
            }
        ],
    },
    "spec": {
        "defaultClusterQueueName": "kaiwo",
        "defaultClusterQueueCohortName": "kaiwo",
        "dynamicallyUpdateDefaultClusterQueue": True,
        "defaultTopologyName": "default-topology",
        "ray": {"defaultRayImage": "ghcr.io/silogen/rocm-ray:6.4", "headPodMemory": "1Gi"},
        # The CRD has no default for the mount paths (decision 0112).
        "storage": {"defaultStorageClass": "rwx-nfs"},
        "nodes": {
            "defaultGpuResourceKey": "amd.com/gpu",
            "defaultGpuTaintKey": "kaiwo.silogen.ai/gpu",
            "excludeMasterNodesFromNodePools": False,
            "addTaintsToGpuNodes": False,
        },
        "scheduling": {
            "kubeSchedulerName": "kaiwo-scheduler",
            "pendingThresholdForPreemption": "1s",
        },
        "resourceMonitoring": {
            "lowUtilizationThreshold": 1,
            "profile": "gpu",
            "terminateUnderutilized": False,
            "terminateUnderutilizedAfter": "24h",
        },
        "gpuPreemption": {},
    },
}


def _with_spec(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": spec,
    }


def _single_error(error: ValidationError) -> tuple[tuple[str | int, ...], str]:
    errors = error.errors()
    assert len(errors) == 1, errors
    return errors[0]["loc"], errors[0]["msg"]


# ------------------------------------------------------------------ defaults


def test_an_empty_spec_reads_as_every_seed_default() -> None:
    spec = KaiwoConfig.from_wire(_with_spec({})).spec

    assert spec.default_cluster_queue_name == "kaiwo"
    assert spec.default_cluster_queue_cohort_name == "kaiwo"
    assert spec.dynamically_update_default_cluster_queue is False
    assert spec.default_topology_name == "default-topology"
    assert spec.ray.default_ray_image == "ghcr.io/silogen/rocm-ray:6.4"
    assert spec.ray.head_pod_memory == "16Gi"
    assert spec.storage.default_storage_class is None
    assert spec.storage.default_data_mount_path == "/workload"
    assert spec.storage.default_hf_mount_path == "/hf_cache"
    assert spec.data is None
    assert spec.nodes.default_gpu_resource_key == "amd.com/gpu"
    assert spec.nodes.default_gpu_taint_key == "kaiwo.silogen.ai/gpu"
    assert spec.nodes.exclude_master_nodes_from_node_pools is False
    assert spec.nodes.add_taints_to_gpu_nodes is False
    assert spec.scheduling.kube_scheduler_name == "kaiwo-scheduler"
    assert spec.scheduling.pending_threshold_for_preemption == "5m"
    assert spec.resource_monitoring.low_utilization_threshold == 1.0
    assert spec.resource_monitoring.target_namespaces is None
    assert spec.resource_monitoring.profile == "gpu"
    assert spec.resource_monitoring.terminate_underutilized is False
    assert spec.resource_monitoring.terminate_underutilized_after == "24h"
    assert spec.gpu_preemption.default_threshold is None
    assert spec.gpu_preemption.default_grace_period is None
    assert spec.gpu_preemption.default_policy is None
    assert spec.gpu_preemption.default_aggregation is None
    assert spec.gpu_preemption.default_ttl is None


def test_a_partly_set_section_keeps_defaults_for_the_rest() -> None:
    spec = KaiwoConfig.from_wire(_with_spec({"ray": {"headPodMemory": "1Gi"}})).spec

    assert spec.ray.head_pod_memory == "1Gi"
    assert spec.ray.default_ray_image == "ghcr.io/silogen/rocm-ray:6.4"


def test_a_config_without_spec_has_the_default_spec() -> None:
    config = KaiwoConfig.from_wire(
        {"apiVersion": "config.kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoConfig"}
    )

    assert config.spec.default_cluster_queue_name == "kaiwo"
    assert config.metadata.name is None


def test_the_default_config_is_the_singleton_named_kaiwo() -> None:
    assert KaiwoConfig.default().to_wire() == {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
    }


def test_a_config_built_in_python_is_sent_with_its_type() -> None:
    config = KaiwoConfig(spec=KaiwoConfigSpec(default_cluster_queue_name="team-a"))

    assert config.to_wire() == {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "spec": {"defaultClusterQueueName": "team-a"},
    }


# ------------------------------------------------------------------ round trips


def test_a_config_from_the_api_server_round_trips_unchanged() -> None:
    wire = copy.deepcopy(KAIWOCONFIG_FROM_API)

    assert KaiwoConfig.from_wire(wire).to_wire() == KAIWOCONFIG_FROM_API


def test_a_config_with_every_optional_field_round_trips() -> None:
    wire = _with_spec(
        {
            "resourceMonitoring": {
                "targetNamespaces": ["ml-research"],
                "lowUtilizationThreshold": 2.5,
            },
            "gpuPreemption": {
                "defaultThreshold": 12.5,
                "defaultGracePeriod": "1h30m",
                "defaultPolicy": "Always",
                "defaultAggregation": "Avg",
                "defaultTTL": "0",
            },
            "data": {"defaultStorageClass": "legacy"},
        }
    )

    assert KaiwoConfig.from_wire(copy.deepcopy(wire)).to_wire() == wire


def test_a_list_round_trips_and_reads_its_items() -> None:
    wire = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfigList",
        "metadata": {"resourceVersion": "4412", "continue": ""},
        "items": [copy.deepcopy(KAIWOCONFIG_FROM_API)],
    }

    parsed = KaiwoConfigList.from_wire(copy.deepcopy(wire))

    assert parsed.items[0].spec.ray.head_pod_memory == "1Gi"
    assert parsed.to_wire() == wire


def test_the_ttl_field_keeps_its_upstream_spelling() -> None:
    config = KaiwoConfig.from_wire(_with_spec({"gpuPreemption": {"defaultTTL": "24h"}}))

    assert config.spec.gpu_preemption.default_ttl == "24h"
    assert config.to_wire()["spec"]["gpuPreemption"] == {"defaultTTL": "24h"}


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize("value", ["30s", "5m", "24h", "1h30m", "2h0m10s"])
def test_terminate_after_accepts_hours_minutes_and_seconds(value: str) -> None:
    config = KaiwoConfig.from_wire(
        _with_spec({"resourceMonitoring": {"terminateUnderutilizedAfter": value}})
    )

    assert config.spec.resource_monitoring.terminate_underutilized_after == value


@pytest.mark.parametrize("value", ["1d", "1.5h", "300ms", "", "h", "10", "1h 30m"])
def test_terminate_after_rejects_what_the_seed_pattern_rejects(value: str) -> None:
    with pytest.raises(ValidationError) as caught:
        KaiwoConfig.from_wire(
            _with_spec({"resourceMonitoring": {"terminateUnderutilizedAfter": value}})
        )

    assert _single_error(caught.value) == (
        ("spec", "resourceMonitoring", "terminateUnderutilizedAfter"),
        "must be a duration such as 30s, 5m or 1h30m, at most 2562047h",
    )


@pytest.mark.parametrize("value", ["1s", "1.5h", "300ms", "0", "1h30m", "2m3.5s"])
def test_pending_threshold_accepts_go_durations(value: str) -> None:
    config = KaiwoConfig.from_wire(
        _with_spec({"scheduling": {"pendingThresholdForPreemption": value}})
    )

    assert config.spec.scheduling.pending_threshold_for_preemption == value


@pytest.mark.parametrize("value", ["5 minutes", "5", "1d", ""])
def test_pending_threshold_rejects_what_go_cannot_parse(value: str) -> None:
    with pytest.raises(ValidationError) as caught:
        KaiwoConfig.from_wire(_with_spec({"scheduling": {"pendingThresholdForPreemption": value}}))

    assert _single_error(caught.value) == (
        ("spec", "scheduling", "pendingThresholdForPreemption"),
        "must be a duration such as 30s, 5m or 1h30m, at most 2562047h",
    )


def test_grace_period_rejects_a_day_count() -> None:
    with pytest.raises(ValidationError) as caught:
        KaiwoConfig.from_wire(_with_spec({"gpuPreemption": {"defaultGracePeriod": "2d"}}))

    assert _single_error(caught.value) == (
        ("spec", "gpuPreemption", "defaultGracePeriod"),
        "must be a duration such as 30s, 5m or 1h30m, at most 2562047h",
    )


def test_low_utilization_threshold_has_minimum_zero() -> None:
    with pytest.raises(ValidationError) as caught:
        KaiwoConfig.from_wire(_with_spec({"resourceMonitoring": {"lowUtilizationThreshold": -0.5}}))

    assert _single_error(caught.value) == (
        ("spec", "resourceMonitoring", "lowUtilizationThreshold"),
        "Input should be greater than or equal to 0",
    )


def test_zero_utilization_threshold_is_allowed() -> None:
    config = KaiwoConfig.from_wire(
        _with_spec({"resourceMonitoring": {"lowUtilizationThreshold": 0}})
    )

    assert config.spec.resource_monitoring.low_utilization_threshold == 0


def test_profile_only_accepts_gpu() -> None:
    with pytest.raises(ValidationError) as caught:
        KaiwoConfig.from_wire(_with_spec({"resourceMonitoring": {"profile": "cpu"}}))

    assert _single_error(caught.value) == (
        ("spec", "resourceMonitoring", "profile"),
        "Input should be 'gpu'",
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("defaultThreshold", 100.5, "Input should be less than or equal to 100"),
        ("defaultThreshold", -1, "Input should be greater than or equal to 0"),
        ("defaultPolicy", "Never", "Input should be 'OnPressure' or 'Always'"),
        ("defaultAggregation", "Median", "Input should be 'Min', 'Max' or 'Avg'"),
    ],
)
def test_gpu_preemption_bounds_and_enums(field: str, value: Any, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        KaiwoConfig.from_wire(_with_spec({"gpuPreemption": {field: value}}))

    assert _single_error(caught.value) == (("spec", "gpuPreemption", field), message)


def test_a_misspelt_field_is_rejected_by_name() -> None:
    with pytest.raises(ValidationError) as caught:
        KaiwoConfig.from_wire(_with_spec({"nodes": {"defaultGpuResourceKeys": "nvidia.com/gpu"}}))

    assert _single_error(caught.value) == (
        ("spec", "nodes", "defaultGpuResourceKeys"),
        "Extra inputs are not permitted",
    )


def test_another_group_version_is_rejected() -> None:
    wire = _with_spec({})
    wire["apiVersion"] = "kaiwo.silogen.ai/v1alpha1"

    with pytest.raises(ValidationError) as caught:
        KaiwoConfig.from_wire(wire)

    assert _single_error(caught.value) == (
        ("apiVersion",),
        "Input should be 'config.kaiwo.silogen.ai/v1alpha1'",
    )


def test_configs_are_frozen() -> None:
    config = KaiwoConfig.default()

    with pytest.raises(ValidationError):
        config.spec = KaiwoConfigSpec()  # type: ignore[misc]


# ------------------------------------------------------------------ storage vs. legacy data


def test_effective_storage_is_storage_when_data_is_absent() -> None:
    spec = KaiwoConfig.from_wire(_with_spec({"storage": {"defaultStorageClass": "fast"}})).spec

    assert spec.effective_storage == KaiwoStorageConfig(
        default_storage_class="fast",
        default_data_mount_path="/workload",
        default_hf_mount_path="/hf_cache",
    )


def test_legacy_data_fills_what_storage_leaves_unset() -> None:
    spec = KaiwoConfig.from_wire(
        _with_spec(
            {
                "data": {"defaultStorageClass": "legacy", "defaultHfMountPath": "/old-hf"},
                "storage": {"defaultHfMountPath": "/hf"},
            }
        )
    ).spec

    assert spec.effective_storage == KaiwoStorageConfig(
        default_storage_class="legacy",
        default_data_mount_path="/workload",
        default_hf_mount_path="/hf",
    )


def test_legacy_data_applies_once_the_api_server_filled_in_the_crds_defaults() -> None:
    # The API server stores `storage: {}` and its defaults before the operator reads the object;
    # a default for a mount path there would win over `data` on every cluster.
    schema = custom_resource_definition(KaiwoConfig)["spec"]["versions"][0]["schema"]
    legacy = {"data": {"defaultDataMountPath": "/mnt/data", "defaultHfMountPath": "/mnt/hf"}}
    stored = apply_defaults(_with_spec(legacy), parse_schema(schema["openAPIV3Schema"]))

    assert stored["spec"]["storage"] == {}
    assert KaiwoConfig.from_wire(stored).spec.effective_storage == KaiwoStorageConfig(
        default_data_mount_path="/mnt/data", default_hf_mount_path="/mnt/hf"
    )


# ------------------------------------------------------------------ CRD metadata and example


def test_crd_is_cluster_scoped_without_status() -> None:
    info = KaiwoConfig.crd

    assert info.api_version == "config.kaiwo.silogen.ai/v1alpha1"
    assert info.kind == "KaiwoConfig"
    assert info.crd_name == "kaiwoconfigs.config.kaiwo.silogen.ai"
    assert info.scope == "Cluster"
    assert info.status_subresource is False
    assert info.scale is None


def test_nested_sections_default_to_an_empty_object_in_the_schema() -> None:
    properties = KaiwoConfigSpec.model_json_schema()["properties"]

    for section in ("ray", "storage", "nodes", "scheduling", "resourceMonitoring", "gpuPreemption"):
        assert properties[section]["default"] == {}, section


def test_the_example_is_the_singleton_and_validates(repo_root: Path) -> None:
    wire = yaml.safe_load((repo_root / "examples" / "kaiwoconfig.yaml").read_text())

    config = KaiwoConfig.from_wire(wire)

    assert config.metadata.name == "kaiwo"
    assert config.spec.dynamically_update_default_cluster_queue is True
    assert config.spec.resource_monitoring.terminate_underutilized_after == "2h30m"
    assert config.spec.gpu_preemption.default_policy == "OnPressure"
    assert config.to_wire() == wire


def test_the_default_queue_and_topology_names_must_be_object_names() -> None:
    # Found by fuzzing: defaultClusterQueueName "" made planning the KaiwoQueueConfig raise.
    manifest = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {
            "defaultClusterQueueName": "",
            "defaultClusterQueueCohortName": "Team_A",
            "defaultTopologyName": "a..b",
        },
    }
    assert validate_manifest(manifest) == [
        Problem("spec.defaultClusterQueueName", "must not be empty"),
        Problem(
            "spec.defaultClusterQueueCohortName",
            "must be a lowercase RFC 1123 name such as team-a or gpu.pool-1",
        ),
        Problem(
            "spec.defaultTopologyName",
            "must be a lowercase RFC 1123 name such as team-a or gpu.pool-1",
        ),
    ]


def test_the_default_queue_name_fits_in_a_label_value() -> None:
    # Found by fuzzing planning: a 76-character name became the kueue.x-k8s.io/queue-name
    # label of every child, which the API server refuses (label values hold 63).
    manifest = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {"defaultClusterQueueName": "q" * 64},
    }
    assert validate_manifest(manifest) == [
        Problem("spec.defaultClusterQueueName", "must be at most 63 characters long"),
    ]
    assert validate_manifest({**manifest, "spec": {"defaultClusterQueueName": "q" * 63}}) == []


@pytest.mark.parametrize("field", ["defaultGpuTaintKey", "defaultGpuResourceKey"])
def test_the_gpu_taint_and_resource_keys_are_kubernetes_qualified_names(field: str) -> None:
    # Found by fuzzing planning: defaultGpuTaintKey "" became the key of a Node taint, which
    # the API server refuses.
    def problems(value: str) -> list[str]:
        manifest = {
            "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoConfig",
            "metadata": {"name": "kaiwo"},
            "spec": {"nodes": {field: value}},
        }
        return [problem.path for problem in validate_manifest(manifest)]

    for good in ("kaiwo.silogen.ai/gpu", "amd.com/gpu", "gpu", "a/B_c.d-e"):
        assert problems(good) == [], good
    for bad in ("", "/gpu", "Amd.com/gpu", "amd.com/", "-gpu", "a b", "x/" + "n" * 64):
        assert problems(bad) == [f"spec.nodes.{field}"], bad


@pytest.mark.parametrize("name", ["kaiwo-scheduler", "gpu.scheduler-2", ""])
def test_the_scheduler_name_is_one_a_pod_accepts(name: str) -> None:
    # Every workload pod's spec.schedulerName: the API server accepts a DNS subdomain, or
    # empty for its default scheduler.
    manifest = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {"scheduling": {"kubeSchedulerName": name}},
    }
    assert validate_manifest(manifest) == []


def test_a_scheduler_name_no_pod_accepts_is_refused_naming_the_field() -> None:
    # Before, "Kaiwo_Scheduler" was accepted and every workload's child apply was refused.
    manifest = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {"scheduling": {"kubeSchedulerName": "Kaiwo_Scheduler"}},
    }
    assert validate_manifest(manifest) == [
        Problem(
            "spec.scheduling.kubeSchedulerName",
            "must be empty or a lowercase RFC 1123 name such as team-a or gpu.pool-1",
        )
    ]
