"""Every quantity and duration field of the seeds follows Kubernetes' (and Go's) grammar.

Hostile values are refused by the models with an error naming the field; the values the
grammar allows pass. Fields: storageSize (data, huggingFace), resources requests/limits,
headPodMemory, the KaiwoQueueConfig quotas, duration, pendingThresholdForPreemption,
terminateUnderutilizedAfter, defaultGracePeriod, defaultTtl.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from kaiwo_contracts.crds.go_duration import duration_nanoseconds
from kaiwo_contracts.crds.quantity import quantity_value
from kaiwo_contracts.validation import validate_manifest

HOSTILE_QUANTITIES = ["1e100Gi", "NaN", "-10Gi", "1.5.5Gi", "Infinity", "1gi", "", "1e100", "8Ei"]
VALID_QUANTITIES = ["16Gi", "500m", "1.5Gi", ".5", "1e3", "+1Ki", "7Ei", "9223372036854775807"]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("16Gi", Decimal(17179869184)),
        ("500m", Decimal("0.5")),
        ("1e3", Decimal(1000)),
        ("1.5Ki", Decimal(1536)),
        ("2k", Decimal(2000)),
        ("1e100Gi", None),
        ("NaN", None),
        ("-10Gi", None),
        ("1.5.5Gi", None),
    ],
)
def test_quantity_values(text: str, value: Decimal | None) -> None:
    assert quantity_value(text) == value


@pytest.mark.parametrize(
    ("text", "nanoseconds"),
    [
        ("1h30m", 5_400_000_000_000),
        ("1.5h", 5_400_000_000_000),
        ("300ms", 300_000_000),
        ("0", 0),
        ("2562047h", 9_223_369_200_000_000_000),
        ("2562048h", None),
        ("99999999999999h", None),
        ("1d", None),
        ("1", None),
        ("", None),
    ],
)
def test_go_duration_values(text: str, nanoseconds: int | None) -> None:
    assert duration_nanoseconds(text) == nanoseconds


def job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": "j", "namespace": "ml-team"},
        "spec": {"image": "busybox", **spec},
    }


def config(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": spec,
    }


def queue_config(quota: Any) -> dict[str, Any]:
    flavors = [{"name": "gpu", "resources": [{"name": "amd.com/gpu", "nominalQuota": quota}]}]
    groups = [{"coveredResources": ["amd.com/gpu"], "flavors": flavors}]
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {"clusterQueues": [{"name": "q", "spec": {"resourceGroups": groups}}]},
    }


QUANTITY_FIELDS = {
    "spec.storage.data.storageSize": lambda v: job(storage={"data": {"storageSize": v}}),
    "spec.storage.huggingFace.storageSize": lambda v: job(
        storage={"huggingFace": {"storageSize": v}}
    ),
    "spec.resources.requests.memory": lambda v: job(resources={"requests": {"memory": v}}),
    "spec.resources.limits.cpu": lambda v: job(resources={"limits": {"cpu": v}}),
    "spec.ray.headPodMemory": lambda v: config(ray={"headPodMemory": v}),
    "spec.clusterQueues[0].spec.resourceGroups[0].flavors[0].resources[0].nominalQuota": (
        queue_config
    ),
}

DURATION_FIELDS = {
    "spec.duration": lambda v: job(duration=v),
    "spec.scheduling.pendingThresholdForPreemption": lambda v: config(
        scheduling={"pendingThresholdForPreemption": v}
    ),
    "spec.resourceMonitoring.terminateUnderutilizedAfter": lambda v: config(
        resourceMonitoring={"terminateUnderutilizedAfter": v}
    ),
    "spec.gpuPreemption.defaultGracePeriod": lambda v: config(
        gpuPreemption={"defaultGracePeriod": v}
    ),
    "spec.gpuPreemption.defaultTTL": lambda v: config(gpuPreemption={"defaultTTL": v}),
}


def paths(document: dict[str, Any]) -> list[str]:
    return [problem.path for problem in validate_manifest(document)]


@pytest.mark.parametrize("field", sorted(QUANTITY_FIELDS))
@pytest.mark.parametrize("value", HOSTILE_QUANTITIES)
def test_a_hostile_quantity_is_refused_naming_the_field(field: str, value: str) -> None:
    assert paths(QUANTITY_FIELDS[field](value)) == [field]


@pytest.mark.parametrize("field", sorted(QUANTITY_FIELDS))
@pytest.mark.parametrize("value", VALID_QUANTITIES)
def test_a_valid_quantity_passes(field: str, value: str) -> None:
    assert paths(QUANTITY_FIELDS[field](value)) == []


@pytest.mark.parametrize("field", sorted(DURATION_FIELDS))
@pytest.mark.parametrize("value", ["99999999999999h", "2562048h", "-1h", "1d", "NaN"])
def test_a_hostile_duration_is_refused_naming_the_field(field: str, value: str) -> None:
    assert paths(DURATION_FIELDS[field](value)) == [field]


@pytest.mark.parametrize("field", sorted(DURATION_FIELDS))
@pytest.mark.parametrize("value", ["30s", "1h30m", "2562047h"])
def test_a_valid_duration_passes(field: str, value: str) -> None:
    assert paths(DURATION_FIELDS[field](value)) == []


@pytest.mark.parametrize("field", ["gpus", "replicas", "gpusPerReplica"])
def test_counts_beyond_int32_are_refused(field: str) -> None:
    spec: dict[str, Any] = {field: 2**63, "replicas": 1} if field != "replicas" else {field: 2**63}
    problems = validate_manifest(job(**spec))
    assert [p.path for p in problems] == [f"spec.{field}"]
    assert "2147483647" in problems[0].message
