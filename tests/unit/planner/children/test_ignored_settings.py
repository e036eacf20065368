"""Settings a workload gives that have no effect are told, naming the field and the fix
(decision 0119); settings that do take effect are not."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_planner.domain.children.workload_children import DownloadState, plan_children
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation

ONE_REPLICA = GpuAllocation(gpus=0, gpus_per_replica=0, replicas=1, vendor="amd")
TWO_REPLICAS = GpuAllocation(gpus=0, gpus_per_replica=0, replicas=2, vendor="amd")

DISABLED_STORAGE = (
    "spec.storage.data and spec.storage.huggingFace are ignored because "
    "spec.storage.storageEnabled is not true: no PersistentVolumeClaim is created, nothing is "
    "downloaded and nothing is mounted; set spec.storage.storageEnabled: true to use it"
)


def test_storage_sized_without_storage_enabled_is_told_and_creates_nothing(make_job):
    job = make_job(
        {
            "storage": {
                "data": {
                    "storageSize": "10Gi",
                    "download": {"git": [{"repository": "https://x/y.git", "targetPath": "y"}]},
                },
                "huggingFace": {"storageSize": "5Gi", "preCacheRepos": [{"repoId": "a/b"}]},
            }
        }
    )

    decision = plan_children(
        workload=job, allocation=ONE_REPLICA, config=None, download_state=DownloadState.PENDING
    )

    assert decision.notes == (DISABLED_STORAGE,)
    assert [m["kind"] for m in decision.desired] == ["Job"]


def test_only_the_sections_that_ask_for_something_are_named(make_job):
    job = make_job(
        {"storage": {"data": {"mountPath": "/d"}, "huggingFace": {"storageSize": "1Gi"}}}
    )

    decision = plan_children(workload=job, allocation=ONE_REPLICA, config=None)

    assert decision.notes == (
        "spec.storage.huggingFace is ignored because spec.storage.storageEnabled is not true: "
        "no PersistentVolumeClaim is created, nothing is downloaded and nothing is mounted; "
        "set spec.storage.storageEnabled: true to use it",
    )


def test_a_job_spec_of_a_ray_kaiwojob_is_told(make_job):
    job = make_job({"ray": True, "job": {"spec": {"backoffLimit": 2}}})

    decision = plan_children(workload=job, allocation=ONE_REPLICA, config=None)

    assert decision.notes == (
        "spec.job is ignored: the KaiwoJob runs as a RayJob (ray: true or spec.rayJob given); "
        "put Ray settings in spec.rayJob, or set ray: false and leave out spec.rayJob to run "
        "spec.job",
    )


def test_a_ray_kaiwoservices_entrypoint_and_deployment_are_told(make_service):
    service = make_service(
        {
            "ray": True,
            "entrypoint": "python serve.py",
            "deployment": {"spec": {"replicas": 2}},
            "serveConfigV2": "applications: []",
        }
    )

    decision = plan_children(workload=service, allocation=ONE_REPLICA, config=None)

    assert decision.notes == (
        "spec.deployment is ignored: the KaiwoService runs as a RayService (ray: true or "
        "spec.rayService given); set ray: false and leave out spec.rayService to run "
        "spec.deployment",
        "spec.entrypoint is ignored for a Ray KaiwoService: define the Ray Serve applications "
        "in spec.serveConfigV2 (or spec.rayService)",
    )


def test_serve_config_of_a_deployment_is_told(make_service):
    service = make_service({"serveConfigV2": "applications: []", "entrypoint": "python s.py"})

    decision = plan_children(workload=service, allocation=ONE_REPLICA, config=None)

    assert decision.notes == (
        "spec.serveConfigV2 is ignored: it is only used with ray: true (a RayService); the "
        "KaiwoService runs as a Deployment",
    )


def test_a_deployments_own_replicas_replaced_by_spec_replicas_are_told(make_service):
    service = make_service(
        {"deployment": {"spec": {"replicas": 3, "template": {"spec": {"containers": [{}]}}}}}
    )

    decision = plan_children(workload=service, allocation=ONE_REPLICA, config=None)

    (deployment,) = decision.desired
    assert deployment["spec"]["replicas"] == 1
    assert decision.notes == (
        "spec.deployment.spec.replicas (3) is replaced by 1, from spec.replicas (default 1), "
        "which sets the Deployment's replicas; set spec.replicas instead",
    )


def test_ray_worker_group_sizes_replaced_by_spec_replicas_are_told(make_job):
    cluster = {
        "headGroupSpec": {"template": {"spec": {"containers": [{"name": "head"}]}}},
        "workerGroupSpecs": [
            {
                "groupName": "small",
                "replicas": 2,
                "minReplicas": 1,
                "maxReplicas": 4,
                "template": {"spec": {"containers": [{"name": "worker"}]}},
            }
        ],
    }
    job = make_job({"replicas": 2, "rayJob": {"spec": {"rayClusterSpec": cluster}}})

    decision = plan_children(workload=job, allocation=TWO_REPLICAS, config=None)

    assert decision.notes == (
        "spec.rayJob.spec.rayClusterSpec: workerGroupSpecs[0].minReplicas (1), "
        "workerGroupSpecs[0].maxReplicas (4) are replaced by 2, from spec.replicas (default 1) "
        "and spec.gpus, which set every worker group's replicas, minReplicas and maxReplicas; "
        "set spec.replicas instead",
    )


@pytest.mark.parametrize(
    "spec",
    [
        {"storage": {"storageEnabled": True, "data": {"storageSize": "1Gi"}}},
        {"storage": {"accessMode": "ReadWriteOnce"}},
        {"ray": True, "entrypoint": "python train.py"},
        {"deployment": {"spec": {"replicas": 1}}},
        {"replicas": 2, "deployment": {"spec": {"replicas": 2}}},
        {"ray": True, "serveConfigV2": "applications: []"},
    ],
)
def test_settings_that_take_effect_are_not_told(make_job, make_service, spec: dict[str, Any]):
    workload = (
        make_service(spec) if "deployment" in spec or "serveConfigV2" in spec else make_job(spec)
    )
    allocation = TWO_REPLICAS if spec.get("replicas") == 2 else ONE_REPLICA

    decision = plan_children(workload=workload, allocation=allocation, config=None)

    assert decision.notes == ()


@pytest.mark.parametrize("kind", ["job", "deployment"])
def test_container_args_an_entrypoint_replaces_are_dropped_and_told(make_job, make_service, kind):
    # The reference: entrypoint "populates the command and args fields" (decision 0193).
    # Kept, /bin/sh -c took them as $0 and on, and the script never saw them.
    container = {"name": "main", "image": "busybox", "args": ["--epochs", "1"]}
    child = {"spec": {"template": {"spec": {"containers": [container]}}}}
    spec = {"entrypoint": "python train.py", kind: child}
    workload = make_job(spec) if kind == "job" else make_service(spec)

    decision = plan_children(workload=workload, allocation=ONE_REPLICA, config=None)

    assert decision.notes == (
        f"spec.{kind}.spec.template.spec.containers[0].args (--epochs 1) are dropped: "
        "spec.entrypoint sets the container's command and args (/bin/sh -c with the "
        "entrypoint); put the arguments in spec.entrypoint",
    )
    (made,) = [
        m for m in decision.desired if m["kind"] == ("Job" if kind == "job" else "Deployment")
    ]
    first = made["spec"]["template"]["spec"]["containers"][0]
    assert first["command"] == ["/bin/sh", "-c", "python train.py"]
    assert "args" not in first


def test_container_args_without_an_entrypoint_are_kept_and_not_told(make_job):
    container = {"name": "main", "image": "busybox", "command": ["python"], "args": ["t.py"]}
    job = make_job({"job": {"spec": {"template": {"spec": {"containers": [container]}}}}})

    decision = plan_children(workload=job, allocation=ONE_REPLICA, config=None)

    assert decision.notes == ()
    (made,) = [m for m in decision.desired if m["kind"] == "Job"]
    first = made["spec"]["template"]["spec"]["containers"][0]
    assert (first["command"], first["args"]) == (["python"], ["t.py"])
