"""KaiwoJob and KaiwoService models: defaults, validation messages, lossless round trips."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_contracts.crds.kaiwo_v1alpha1 import (
    KaiwoJob,
    KaiwoJobList,
    KaiwoJobSpec,
    KaiwoService,
    KaiwoServiceList,
    StorageSpec,
    WorkloadStatus,
)
from kaiwo_contracts.validation import validate_manifest
from pydantic import ValidationError

# A KaiwoJob as the API server returns it: defaulted fields filled in, managedFields, status
# with conditions, and an embedded Job with fields the model does not know about.
KAIWOJOB_FROM_API: dict[str, Any] = {
    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoJob",
    "metadata": {
        "name": "sft-llama",
        "namespace": "ml-team",
        "uid": "5f0c1f57-8f0e-4d36-9f1e-2f6c1e0d7a11",
        "resourceVersion": "918273",
        "generation": 2,
        "creationTimestamp": "2025-06-02T08:15:00Z",
        "labels": {"team": "nlp"},
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
        "finalizers": ["kaiwo.silogen.ai/finalizer"],
        "managedFields": [
            {
                "manager": "kubectl-client-side-apply",
                "operation": "Update",
                "apiVersion": "kaiwo.silogen.ai/v1alpha1",
                "time": "2025-06-02T08:15:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {".": {}, "f:gpus": {}, "f:job": {}}},
            },
            {
                "manager": "kaiwo-executor",
                "operation": "Update",
                "apiVersion": "kaiwo.silogen.ai/v1alpha1",
                "time": "2025-06-02T08:16:10Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:status": {}, "f:conditions": {}}},
                "subresource": "status",
            },
        ],
    },
    "spec": {
        "user": "alice@example.com",
        "gpus": 4,
        "gpuVendor": "amd",
        "replicas": 1,
        "ray": False,
        "dangerous": False,
        "duration": "1h30m",
        "clusterQueue": "team-nlp",
        "priorityClass": "normal-priority",
        "resources": {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"cpu": 16}},
        "env": [
            {"name": "MODE", "value": "train"},
            {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "tok"}}},
            {
                "name": "CPU_LIMIT",
                "valueFrom": {
                    "resourceFieldRef": {
                        "containerName": "main",
                        "resource": "limits.cpu",
                        "divisor": "1m",
                    }
                },
            },
        ],
        "storage": {
            "storageEnabled": True,
            "storageClassName": "rwx-nfs",
            "accessMode": "ReadWriteMany",
            "data": {"mountPath": "/workload", "storageSize": "10Gi"},
        },
        "job": {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "sft-llama", "labels": {"x": "y"}},
            "spec": {
                "backoffLimit": 0,
                "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": []}]},
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "someFutureField": {"nested": [1, 2, 3]},
                        "containers": [{"name": "main", "command": ["python", "train.py"]}],
                    }
                },
            },
        },
    },
    "status": {
        "status": "RUNNING",
        "startTime": "2025-06-02T08:16:05Z",
        "duration": 65,
        "observedGeneration": 2,
        "conditions": [
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "Workload is admitted",
                "lastTransitionTime": "2025-06-02T08:15:40Z",
            },
            {
                "type": "Preemptable",
                "status": "False",
                "observedGeneration": 2,
                "reason": "DurationNotExceeded",
                "message": "Workload is running and the duration has not been exceeded",
                "lastTransitionTime": "2025-06-02T08:16:05Z",
            },
        ],
    },
}

KAIWOSERVICE_FROM_API: dict[str, Any] = {
    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoService",
    "metadata": {
        "name": "llm-serve",
        "namespace": "ml-team",
        "uid": "0b7d7d8e-7a27-4a4e-a1e4-9d0cf2a6b3c2",
        "resourceVersion": "42",
        "generation": 1,
        "creationTimestamp": "2025-06-02T09:00:00Z",
        "managedFields": [
            {
                "manager": "kubectl",
                "operation": "Apply",
                "apiVersion": "kaiwo.silogen.ai/v1alpha1",
                "time": "2025-06-02T09:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:serveConfigV2": {}}},
            }
        ],
    },
    "spec": {
        "gpus": 4,
        "gpuVendor": "amd",
        "replicas": 2,
        "gpusPerReplica": 2,
        "ray": True,
        "dangerous": False,
        "serveConfigV2": "applications:\n- name: llm\n  import_path: serve:app\n",
        "rayService": {
            "apiVersion": "ray.io/v1",
            "kind": "RayService",
            "spec": {"rayClusterConfig": {"headGroupSpec": {"rayStartParams": {}}}},
        },
    },
    "status": {
        "status": "STARTING",
        "conditions": [
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "Workload is admitted",
                "lastTransitionTime": "2025-06-02T09:00:30Z",
            }
        ],
    },
}


def _errors(model: type[KaiwoJob | KaiwoService], data: dict[str, Any]) -> list[tuple[Any, str]]:
    with pytest.raises(ValidationError) as caught:
        model.from_wire(data)
    return [(error["loc"], error["msg"]) for error in caught.value.errors()]


# ------------------------------------------------------------------ round trips


def test_kaiwojob_from_the_api_server_round_trips_exactly() -> None:
    original = copy.deepcopy(KAIWOJOB_FROM_API)

    job = KaiwoJob.from_wire(original)

    assert job.to_wire() == KAIWOJOB_FROM_API
    assert original == KAIWOJOB_FROM_API  # parsing does not modify the input


def test_kaiwojob_from_the_api_server_reads_typed_values() -> None:
    job = KaiwoJob.from_wire(KAIWOJOB_FROM_API)

    assert job.status.status is WorkloadStatus.RUNNING
    assert job.status.start_time == datetime(2025, 6, 2, 8, 16, 5, tzinfo=UTC)
    assert job.status.condition("Preemptable") is not None
    assert job.status.condition("Missing") is None
    assert job.spec.duration == "1h30m"
    assert job.spec.resources is not None
    assert job.spec.resources.limits == {"cpu": 16}
    assert job.spec.job is not None
    assert job.spec.job["spec"]["template"]["spec"]["someFutureField"] == {"nested": [1, 2, 3]}
    assert job.spec.is_ray_job is False
    assert job.metadata.managed_fields is not None
    assert job.metadata.managed_fields[1]["subresource"] == "status"


def test_kaiwoservice_from_the_api_server_round_trips_exactly() -> None:
    service = KaiwoService.from_wire(KAIWOSERVICE_FROM_API)

    assert service.to_wire() == KAIWOSERVICE_FROM_API
    assert service.spec.is_ray_service is True
    assert service.status.status is WorkloadStatus.STARTING


def test_lists_round_trip_with_list_metadata() -> None:
    job_list = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJobList",
        "metadata": {"resourceVersion": "918300", "continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"},
        "items": [KAIWOJOB_FROM_API],
    }
    service_list = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoServiceList",
        "metadata": {"resourceVersion": "43"},
        "items": [KAIWOSERVICE_FROM_API],
    }

    assert KaiwoJobList.from_wire(job_list).to_wire() == job_list
    assert KaiwoServiceList.from_wire(service_list).to_wire() == service_list
    assert KaiwoJobList.from_wire(job_list).items[0].metadata.name == "sft-llama"


def test_snake_case_names_are_accepted_and_written_back_in_camel_case() -> None:
    spec = KaiwoJobSpec.model_validate({"gpus_per_replica": 2, "replicas": 2, "ray": True})

    assert spec.to_wire() == {"gpusPerReplica": 2, "replicas": 2, "ray": True}


# ------------------------------------------------------------------ defaults


def test_spec_defaults_follow_the_api_reference() -> None:
    spec = KaiwoJob.from_wire({"metadata": {"name": "j"}}).spec

    assert spec.gpus == 0
    assert spec.gpu_vendor == "amd"
    assert spec.replicas == 1
    assert spec.ray is False
    assert spec.dangerous is False
    assert spec.gpus_per_replica is None
    assert spec.storage is None


def test_storage_defaults_follow_the_api_reference() -> None:
    storage = StorageSpec.from_wire({"storageEnabled": True, "data": {}, "huggingFace": {}})

    assert storage.access_mode == "ReadWriteMany"
    assert storage.data is not None
    assert storage.data.mount_path == "/workload"
    assert storage.hugging_face is not None
    assert storage.hugging_face.mount_path == "/hf_cache"


def test_defaults_are_not_written_back_so_manifests_stay_as_given() -> None:
    manifest = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoService",
        "metadata": {"name": "s"},
        "spec": {"image": "busybox"},
    }

    assert KaiwoService.from_wire(manifest).to_wire() == manifest


def test_a_new_object_is_not_yet_processed_and_serialises_with_its_type() -> None:
    job = KaiwoJob.model_validate({"metadata": {"name": "fresh"}})

    assert job.status.status is WorkloadStatus.NEW
    assert job.to_wire() == {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": "fresh"},
    }


# ------------------------------------------------------------------ validation


def test_duration_must_be_hours_minutes_seconds() -> None:
    assert _errors(KaiwoJob, {"spec": {"duration": "1 hour"}}) == [
        (("spec", "duration"), "must be a duration such as 30m, 1h or 1h30m, got '1 hour'")
    ]
    assert _errors(KaiwoService, {"spec": {"duration": "1.5h"}})[0][0] == ("spec", "duration")
    for accepted in ("30s", "45m", "8h", "1h30m", "1h0m0s"):
        assert KaiwoJob.from_wire({"spec": {"duration": accepted}}).spec.duration == accepted


def test_gpus_per_replica_requires_replicas() -> None:
    assert _errors(KaiwoJob, {"spec": {"gpusPerReplica": 2}}) == [
        (
            ("spec",),
            "replicas must be specified when gpusPerReplica is (the API reference requires "
            "both); add replicas, e.g. replicas: 1",
        )
    ]
    assert KaiwoJob.from_wire({"spec": {"gpusPerReplica": 2, "replicas": 3}}).spec.replicas == 3


@pytest.mark.parametrize("field", ["gpus", "replicas"])
def test_gpu_and_replica_counts_cannot_be_negative(field: str) -> None:
    spec: dict[str, Any] = {field: -1, "replicas": 1} if field != "replicas" else {field: -1}

    assert _errors(KaiwoJob, {"spec": spec}) == [
        (("spec", field), "Input should be greater than or equal to 0")
    ]


@pytest.mark.parametrize("count", [-1, 0])
def test_gpus_per_replica_when_given_is_at_least_one(count: int) -> None:
    assert _errors(KaiwoJob, {"spec": {"gpusPerReplica": count, "replicas": 1}}) == [
        (("spec", "gpusPerReplica"), "Input should be greater than or equal to 1")
    ]


@pytest.mark.parametrize("vendor", ["amd\nnvidia", "amd\n", "", "a" * 64, "amd gpu"])
def test_a_gpu_vendor_is_a_label_value(vendor: str) -> None:
    [(where, _message)] = _errors(KaiwoJob, {"spec": {"gpuVendor": vendor}})

    assert where == ("spec", "gpuVendor")
    for accepted in ("amd", "NVIDIA", "intel", "vendor_x.1"):
        assert KaiwoJob.from_wire({"spec": {"gpuVendor": accepted}}).spec.gpu_vendor == accepted


def test_unknown_fields_are_rejected_with_their_path() -> None:
    errors = _errors(KaiwoJob, {"spec": {"gpu": 1, "storage": {"dataa": {}}}})

    assert (("spec", "gpu"), "Extra inputs are not permitted") in errors
    assert (("spec", "storage", "dataa"), "Extra inputs are not permitted") in errors


def test_access_mode_is_one_of_the_kubernetes_modes() -> None:
    assert _errors(KaiwoJob, {"spec": {"storage": {"accessMode": "RWX"}}}) == [
        (
            ("spec", "storage", "accessMode"),
            "Input should be 'ReadWriteOnce', 'ReadOnlyMany', 'ReadWriteMany' or "
            "'ReadWriteOncePod'",
        )
    ]


def test_an_embedded_object_may_leave_out_its_type_but_not_give_another_kind() -> None:
    manifest = {"spec": {"job": {"spec": {"backoffLimit": 1}}}}
    assert KaiwoJob.from_wire(manifest).spec.job == {"spec": {"backoffLimit": 1}}
    assert KaiwoJob.from_wire(manifest).to_wire()["spec"] == manifest["spec"]
    assert _errors(KaiwoJob, {"spec": {"rayJob": {"apiVersion": "batch/v1", "kind": "Job"}}}) == [
        (("spec", "rayJob"), "must be a RayJob object, got kind 'Job'")
    ]
    assert _errors(
        KaiwoService, {"spec": {"deployment": {"apiVersion": "ray.io/v1", "kind": "RayService"}}}
    ) == [(("spec", "deployment"), "must be a Deployment object, got kind 'RayService'")]


def test_download_items_name_their_required_fields() -> None:
    data = {
        "spec": {
            "storage": {
                "data": {
                    "storageSize": "1Gi",
                    "download": {
                        "s3": [{"buckets": [{"name": "b"}]}],
                        "git": [{"repository": "https://github.com/example/repo.git"}],
                    },
                }
            }
        }
    }

    prefix = ("spec", "storage", "data", "download")
    assert _errors(KaiwoJob, data) == [
        ((*prefix, "s3", 0, "endpointUrl"), "Field required"),
        ((*prefix, "git", 0, "targetPath"), "Field required"),
    ]


def test_secret_references_need_both_name_and_key() -> None:
    data = {
        "spec": {
            "storage": {
                "data": {
                    "download": {
                        "gcs": [{"applicationCredentials": {"secretName": "gcs"}, "buckets": []}]
                    }
                }
            }
        }
    }

    assert _errors(KaiwoJob, data) == [
        (
            ("spec", "storage", "data", "download", "gcs", 0, "applicationCredentials"),
            "secretName and secretKey must be given together (the Secret and its key)",
        )
    ]


def _with_data_downloads(download: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"storage": {"data": {"download": download}}}}


DOWNLOAD_AT = ("spec", "storage", "data", "download")


def test_a_secret_file_is_an_absolute_path_outside_the_download_jobs_own_mounts() -> None:
    def with_file(file: str) -> dict[str, Any]:
        reference = {"secretName": "gcp", "secretKey": "key.json", "file": file}
        return _with_data_downloads({"gcs": [{"applicationCredentials": reference, "buckets": []}]})

    def refused(file: str) -> list[tuple[Any, str]]:
        return _errors(KaiwoJob, with_file(file))

    at = (*DOWNLOAD_AT, "gcs", 0, "applicationCredentials", "file")
    assert refused("key.json") == [
        (
            at,
            "file is where the download Job's container reads the Secret's value: an absolute "
            "path (e.g. /etc/credentials/key), or unset for /app/secrets/<secretName>/<secretKey>",
        )
    ]
    for within in ("/app/secrets/other/key.json", "/config/key.json", "/config"):
        assert refused(within) == [
            (
                at,
                f"file {within} is within /app/secrets or /config, which the download Job "
                "mounts itself: give a path outside them, or leave file unset",
            )
        ]
    # Its own default path, any other absolute path, and empty (the default) are accepted.
    for accepted in ("/app/secrets/gcp/key.json", "/etc/gcp/key.json", ""):
        KaiwoJob.from_wire(with_file(accepted))


def test_two_secret_values_are_never_given_one_file() -> None:
    s3 = {
        "endpointUrl": "https://s3.example.com",
        "accessKeyId": {"secretName": "s3", "secretKey": "id", "file": "/etc/creds"},
        "secretKey": {"secretName": "s3", "secretKey": "key", "file": "/etc/creds"},
        "buckets": [],
    }

    errors = _errors(KaiwoJob, _with_data_downloads({"s3": [s3]}))

    assert errors == [
        (
            (*DOWNLOAD_AT, "s3", 0, "secretKey", "file"),
            "file /etc/creds is where key id of Secret s3 is mounted already: each file holds "
            "one value",
        )
    ]
    # The same value at one file, twice, is one mount.
    s3["secretKey"] = {"secretName": "s3", "secretKey": "id", "file": "/etc/creds"}
    KaiwoJob.from_wire(_with_data_downloads({"s3": [s3]}))


def test_env_var_needs_a_name_and_known_sources() -> None:
    errors = _errors(
        KaiwoJob, {"spec": {"env": [{"value": "x"}, {"name": "A", "valueFrom": {"vault": {}}}]}}
    )

    assert errors == [
        (("spec", "env", 0, "name"), "Field required"),
        (("spec", "env", 1, "valueFrom", "vault"), "Extra inputs are not permitted"),
    ]


def test_kind_and_api_version_are_fixed() -> None:
    errors = _errors(KaiwoJob, {"apiVersion": "kaiwo.silogen.ai/v1", "kind": "KaiwoService"})

    assert errors == [
        (("apiVersion",), "Input should be 'kaiwo.silogen.ai/v1alpha1'"),
        (("kind",), "Input should be 'KaiwoJob'"),
    ]


# ------------------------------------------------------------------ status values


def test_status_accepts_the_reference_values_and_the_upstream_ones() -> None:
    wire_values = [member.value for member in WorkloadStatus]

    assert wire_values == [
        "",
        "DOWNLOADING",
        "PENDING",
        "STARTING",
        "READY",
        "RUNNING",
        "COMPLETE",
        "ERROR",
        "FAILED",
        "TERMINATING",
        "TERMINATED",
    ]
    for value in wire_values:
        status = {"status": value}
        assert KaiwoJob.from_wire({"status": status}).to_wire()["status"] == status


def test_unknown_status_is_rejected() -> None:
    errors = _errors(KaiwoService, {"status": {"status": "HEALTHY"}})

    assert [loc for loc, _ in errors] == [("status", "status")]


def test_terminal_statuses() -> None:
    terminal = {status for status in WorkloadStatus if status.is_terminal}

    assert terminal == {WorkloadStatus.COMPLETE, WorkloadStatus.FAILED, WorkloadStatus.TERMINATED}


# ------------------------------------------------------------------ storage predicates


def test_storage_predicates_decide_whether_a_download_job_runs() -> None:
    without_size = StorageSpec.from_wire(
        {"data": {"download": {"git": [{"repository": "r", "targetPath": "t"}]}}}
    )
    with_data_download = StorageSpec.from_wire(
        {
            "data": {
                "storageSize": "5Gi",
                "download": {"git": [{"repository": "r", "targetPath": "t"}]},
            }
        }
    )
    with_hf = StorageSpec.from_wire(
        {"huggingFace": {"storageSize": "5Gi", "preCacheRepos": [{"repoId": "org/m"}]}}
    )
    # Storage not enabled, so the models accept it: nothing downloads without a volume.
    hf_without_size = StorageSpec.from_wire(
        {"huggingFace": {"preCacheRepos": [{"repoId": "org/m"}]}}
    )

    assert (without_size.has_data, without_size.has_downloads) == (False, False)
    assert (with_data_download.has_data, with_data_download.has_downloads) == (True, True)
    assert (with_hf.has_hf_downloads, with_hf.has_downloads) == (True, True)
    assert (hf_without_size.has_hf_downloads, hf_without_size.has_downloads) == (False, False)


GIT_DOWNLOAD = {"git": [{"repository": "r", "targetPath": "t"}]}
DATA_SIZE_MESSAGE = (
    "storageSize is required when data.download is given: the download Job fills a volume of "
    "that size before the workload starts (e.g. storageSize: 100Gi)"
)
HF_SIZE_MESSAGE = (
    "storageSize is required when huggingFace.preCacheRepos is given: the download Job fills "
    "a volume of that size before the workload starts (e.g. storageSize: 50Gi)"
)

SHARED_MOUNT_PATH_MESSAGE = (
    "huggingFace.mountPath must differ from data.mountPath: a container mounts one volume at a "
    "path, so the data volume would not be mounted (e.g. data at /workload, the Hugging Face "
    "cache at /hf_cache)"
)


@pytest.mark.parametrize(
    ("storage", "problems"),
    [
        (
            {"storageEnabled": True, "data": {"download": GIT_DOWNLOAD}},
            [("spec.storage.data.storageSize", DATA_SIZE_MESSAGE)],
        ),
        (
            {"storageEnabled": True, "huggingFace": {"preCacheRepos": [{"repoId": "org/m"}]}},
            [("spec.storage.huggingFace.storageSize", HF_SIZE_MESSAGE)],
        ),
        (
            {
                "storageEnabled": True,
                "data": {"download": GIT_DOWNLOAD},
                "huggingFace": {"preCacheRepos": [{"repoId": "org/m"}]},
            },
            [
                ("spec.storage.data.storageSize", DATA_SIZE_MESSAGE),
                ("spec.storage.huggingFace.storageSize", HF_SIZE_MESSAGE),
            ],
        ),
        # Both volumes at one path: the pods would mount only the HF cache (decision 0248).
        (
            {
                "storageEnabled": True,
                "data": {"storageSize": "5Gi", "mountPath": "/data"},
                "huggingFace": {"storageSize": "5Gi", "mountPath": "/data"},
            },
            [("spec.storage.huggingFace.mountPath", SHARED_MOUNT_PATH_MESSAGE)],
        ),
        # Paths that differ, a path left to KaiwoConfig, a volume not made: accepted.
        (
            {
                "storageEnabled": True,
                "data": {"storageSize": "5Gi", "mountPath": "/data"},
                "huggingFace": {"storageSize": "5Gi", "mountPath": "/data/hf"},
            },
            [],
        ),
        (
            {
                "storageEnabled": True,
                "data": {"storageSize": "5Gi", "mountPath": "/data"},
                "huggingFace": {"storageSize": "5Gi"},
            },
            [],
        ),
        (
            {
                "storageEnabled": True,
                "data": {"mountPath": "/data"},
                "huggingFace": {"storageSize": "5Gi", "mountPath": "/data"},
            },
            [],
        ),
        # Nothing to download, or storage not enabled (then all of it is ignored): accepted.
        ({"storageEnabled": True, "data": {"download": {}}}, []),
        ({"storageEnabled": True, "huggingFace": {"preCacheRepos": []}}, []),
        ({"storageEnabled": False, "data": {"download": GIT_DOWNLOAD}}, []),
    ],
)
def test_a_download_without_its_volumes_size_is_refused_naming_the_field(
    storage: dict[str, Any], problems: list[tuple[str, str]]
) -> None:
    manifest = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": "train", "namespace": "team-a"},
        "spec": {"image": "busybox", "storage": storage},
    }

    found = validate_manifest(manifest)

    assert [(problem.path, problem.message) for problem in found] == problems


SECRET_VOLUME_IN_PLACE_MESSAGE = (
    "secretVolumes must not be named data or hf nor mounted at data.mountPath or "
    "huggingFace.mountPath: a pod's volumes are merged by name and its mounts by path, so the "
    "storage volume would not be mounted (e.g. name the entry api-key and mount it at "
    "/etc/secrets/api-key)"
)
SIZED_VOLUMES = {
    "storageEnabled": True,
    "data": {"storageSize": "5Gi", "mountPath": "/data"},
    "huggingFace": {"storageSize": "5Gi", "mountPath": "/hf"},
}


@pytest.mark.parametrize(
    ("storage", "secret_volume", "refused"),
    [
        # At a storage volume's path, or named like its pod volume: the claim would not be
        # mounted (decision 0254).
        (SIZED_VOLUMES, {"name": "key", "mountPath": "/data"}, True),
        (SIZED_VOLUMES, {"name": "key", "mountPath": "/hf"}, True),
        (SIZED_VOLUMES, {"name": "data", "mountPath": "/keys"}, True),
        (SIZED_VOLUMES, {"name": "hf", "mountPath": "/keys"}, True),
        # A name and a path of its own (nested is fine): accepted.
        (SIZED_VOLUMES, {"name": "key", "mountPath": "/data/keys"}, False),
        # The volume not made, storage not enabled, or the path left to KaiwoConfig (the
        # planner checks that one): accepted here.
        (
            {"storageEnabled": True, "data": {"mountPath": "/data"}},
            {"name": "data", "mountPath": "/data"},
            False,
        ),
        ({**SIZED_VOLUMES, "storageEnabled": False}, {"name": "hf", "mountPath": "/hf"}, False),
        (
            {"storageEnabled": True, "data": {"storageSize": "5Gi"}},
            {"name": "key", "mountPath": "/workload"},
            False,
        ),
    ],
)
def test_a_secret_volume_in_place_of_a_storage_volume_is_refused_naming_the_field(
    storage: dict[str, Any], secret_volume: dict[str, str], refused: bool
) -> None:
    manifest = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoService",
        "metadata": {"name": "serve", "namespace": "team-a"},
        "spec": {
            "image": "busybox",
            "storage": storage,
            "secretVolumes": [{"secretName": "credentials", **secret_volume}],
        },
    }

    found = validate_manifest(manifest)

    assert [(problem.path, problem.message) for problem in found] == (
        [("spec.secretVolumes", SECRET_VOLUME_IN_PLACE_MESSAGE)] if refused else []
    )


# ------------------------------------------------------------------ CRD metadata


def test_crd_metadata_of_the_workload_kinds() -> None:
    job_crd, service_crd = KaiwoJob.crd, KaiwoService.crd

    assert job_crd.crd_name == "kaiwojobs.kaiwo.silogen.ai"
    assert job_crd.scope == "Namespaced"
    assert job_crd.short_names == ("kj", "kjob")
    assert job_crd.categories == ("kaiwo",)
    assert [(c.name, c.type, c.json_path) for c in job_crd.printer_columns] == [
        ("Status", "string", ".status.status"),
        ("StartTime", "string", ".status.startTime"),
        ("CompletionTime", "string", ".status.completionTime"),
        ("Duration(s)", "integer", ".status.duration"),
    ]
    assert job_crd.status_subresource is True
    assert service_crd.crd_name == "kaiwoservices.kaiwo.silogen.ai"
    assert service_crd.short_names == ("ks", "kaiwosvc")
    assert [c.name for c in service_crd.printer_columns] == ["Status", "StartTime", "Duration(s)"]


def test_schema_keeps_patterns_and_open_subtrees_for_the_crd_generator() -> None:
    spec_schema = KaiwoJob.model_json_schema()["$defs"]["KaiwoJobSpec"]["properties"]

    assert {
        "type": "string",
        "pattern": "^([0-9]+(s|m|h))+$",
        "maxLength": 64,
        "x-kubernetes-validations": [
            {
                "rule": "duration(self) >= duration('0s')",
                "message": "must be a duration Go can hold (at most 2562047h), not negative",
            }
        ],
    } in spec_schema["duration"]["anyOf"]
    job_schema = spec_schema["job"]["anyOf"][0]
    assert job_schema["x-kubernetes-preserve-unknown-fields"] is True
    assert job_schema["x-kubernetes-embedded-resource"] is True


def test_conditions_have_distinct_types() -> None:
    condition = {
        "type": "Admitted",
        "status": "True",
        "reason": "Admitted",
        "lastTransitionTime": "2025-06-02T08:15:40Z",
    }

    assert _errors(KaiwoJob, {"status": {"conditions": [condition, condition]}}) == [
        (("status", "conditions"), "conditions must have distinct types; repeated: Admitted")
    ]


def test_conditions_are_a_list_map_keyed_by_type() -> None:
    status_schema = KaiwoService.model_json_schema()["$defs"]["KaiwoServiceStatus"]
    conditions = status_schema["properties"]["conditions"]["anyOf"][0]

    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]


def test_queue_and_priority_class_names_must_be_label_values() -> None:
    # Found by fuzzing planning: priorityClass ":" became the Job's
    # kueue.x-k8s.io/priority-class label, which the API server refuses (422).
    from kaiwo_contracts.validation import Problem, validate_manifest

    manifest = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": "a", "namespace": "team-a"},
        "spec": {"image": "x", "priorityClass": ":", "clusterQueue": "q" * 64},
    }
    assert validate_manifest(manifest) == [
        Problem("spec.clusterQueue", "must be at most 63 characters long"),
        Problem(
            "spec.priorityClass",
            "must be a name of lower-case letters, digits, '-' and '.' (it becomes a label),"
            " got ':'",
        ),
    ]
    manifest["spec"] = {"image": "x", "priorityClass": "high", "clusterQueue": "gpu.team-a"}
    assert validate_manifest(manifest) == []


def test_pod_template_spec_labels_must_be_kubernetes_labels() -> None:
    # Found by fuzzing planning: the key "hf://org/model" reached the pod template of every
    # child, which the API server refuses (422).
    from kaiwo_contracts.validation import validate_manifest

    def problems(labels: dict[str, str]) -> list[str]:
        manifest = {
            "apiVersion": "kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoJob",
            "metadata": {"name": "a", "namespace": "team-a"},
            "spec": {"image": "x", "podTemplateSpecLabels": labels},
        }
        return [problem.path for problem in validate_manifest(manifest)]

    assert problems({"app.kubernetes.io/name": "ok", "team": "a_B.1", "empty": ""}) == []
    for bad in (
        {"hf://org/model": "x"},
        {"a" * 64: "x"},
        {"Upper.Case/name": "x"},
        {"team": "-leading"},
        {"team": "v" * 64},
    ):
        assert problems(bad) == ["spec.podTemplateSpecLabels"], bad
