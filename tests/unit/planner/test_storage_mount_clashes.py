"""Storage mount paths that clash only once KaiwoConfig's defaults apply, or that take the
download Job's own mounts, are told as an invalid spec naming the field (decision 0254)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_contracts.plans import Plan
from kaiwo_planner.domain.state.cluster import ClusterState

from tests.planning_calls import planned
from tests.unit.planner.test_planning import queue_config

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
INVALID = "The spec is invalid, nothing was changed: "
GIT_DOWNLOAD = {"git": [{"repository": "https://example.com/r.git", "targetPath": "r"}]}


def kaiwo_job(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": "job-uid",
            "generation": 1,
            "creationTimestamp": "2026-01-01T11:58:00Z",
        },
        "spec": {"image": "busybox", "entrypoint": "python train.py", **spec},
    }


def kaiwo_config(data_path: str, hf_path: str) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {"storage": {"defaultDataMountPath": data_path, "defaultHfMountPath": hf_path}},
    }


def plan_of(spec: dict[str, Any], config: dict[str, Any]) -> Plan:
    owner = kaiwo_job(spec)
    cluster = ClusterState.from_wire(
        nodes=[], objects=[owner, config, queue_config({"name": "kaiwo"})], namespaces=["team-a"]
    )
    plan = planned(owner=owner, cluster=cluster, now=NOW)
    assert plan is not None and plan.status is not None
    return plan


def valid_condition(plan: Plan) -> tuple[str, str, str] | None:
    assert plan.status is not None
    for found in plan.status["conditions"]:
        if found["type"] == "Valid":
            return found["status"], found["reason"], found["message"]
    return None


@pytest.mark.parametrize(
    ("storage", "secret_volumes", "message"),
    [
        # The data path given equal to KaiwoConfig's HF default: named at the path left unset.
        (
            {
                "data": {"storageSize": "1Gi", "mountPath": "/models"},
                "huggingFace": {"storageSize": "1Gi"},
            },
            [],
            "spec.storage.huggingFace.mountPath: huggingFace.mountPath (/models, KaiwoConfig's "
            "defaultHfMountPath) must differ from data.mountPath (/models): a container mounts "
            "one volume at a path, so the data volume would not be mounted; give "
            "huggingFace.mountPath a path of its own",
        ),
        # A secret volume at the data volume's default path.
        (
            {"data": {"storageSize": "1Gi"}},
            [{"name": "key", "secretName": "credentials", "mountPath": "/datasets"}],
            "spec.secretVolumes: secret volume key is mounted at /datasets, KaiwoConfig's "
            "defaultDataMountPath: a pod's mounts are merged by path, so the storage volume "
            "would not be mounted; mount key elsewhere or give data.mountPath a path of its own",
        ),
        # Given paths: the models' rule (the CRD's too), for an object stored before it.
        (
            {"data": {"storageSize": "1Gi", "mountPath": "/data"}},
            [{"name": "key", "secretName": "credentials", "mountPath": "/data"}],
            "spec.secretVolumes: secretVolumes must not be named data or hf nor mounted at "
            "data.mountPath or huggingFace.mountPath: a pod's volumes are merged by name and "
            "its mounts by path, so the storage volume would not be mounted (e.g. name the "
            "entry api-key and mount it at /etc/secrets/api-key)",
        ),
        # A volume the download Job fills, given the Job's own configuration mount: the
        # models' rule (the CRD's too, decision 0262), for an object stored before it.
        (
            {"data": {"storageSize": "1Gi", "mountPath": "/config", "download": GIT_DOWNLOAD}},
            [],
            "spec.storage.data.mountPath: data.mountPath must not be /config, /app/secrets or "
            "under it when data.download is given: the download Job mounts its configuration "
            "at /config and the Secrets it reads under /app/secrets, so the API server would "
            "refuse the Job (e.g. /workload)",
        ),
    ],
)
def test_a_mount_path_that_cannot_work_is_told_naming_the_field(
    storage: dict[str, Any], secret_volumes: list[dict[str, str]], message: str
) -> None:
    spec = {"storage": {"storageEnabled": True, **storage}, "secretVolumes": secret_volumes}

    plan = plan_of(spec, kaiwo_config("/datasets", "/models"))

    assert valid_condition(plan) == ("False", "InvalidSpec", INVALID + message)
    assert plan.desired == ()


def test_a_download_into_a_default_path_the_download_job_mounts_is_told() -> None:
    """KaiwoConfig's default, which no CEL rule sees, under the download Job's Secrets."""
    data = {"storageSize": "1Gi", "download": GIT_DOWNLOAD}
    spec = {"storage": {"storageEnabled": True, "data": data}}

    plan = plan_of(spec, kaiwo_config("/app/secrets/data", "/models"))

    assert valid_condition(plan) == (
        "False",
        "InvalidSpec",
        INVALID + "spec.storage.data.mountPath: /app/secrets/data, KaiwoConfig's "
        "defaultDataMountPath is where the download Job mounts its own configuration (/config) "
        "or the Secrets it reads (under /app/secrets), so the API server would refuse the Job; "
        "give the volume another mount path (e.g. /workload or /hf_cache)",
    )


@pytest.mark.parametrize(
    "storage",
    [
        # Paths of their own; /config without a download (no download Job mounts it).
        {
            "data": {"storageSize": "1Gi", "mountPath": "/data"},
            "huggingFace": {"storageSize": "1Gi"},
        },
        {"data": {"storageSize": "1Gi", "mountPath": "/config"}},
    ],
)
def test_mount_paths_that_work_are_valid(storage: dict[str, Any]) -> None:
    spec = {"storage": {"storageEnabled": True, **storage}}

    plan = plan_of(spec, kaiwo_config("/datasets", "/models"))

    # Never invalid, so no Valid condition is written (it flips to True only after False).
    assert valid_condition(plan) is None
    # Planned through: the workload's Job is desired.
    assert "Job" in [manifest["kind"] for manifest in plan.desired]
