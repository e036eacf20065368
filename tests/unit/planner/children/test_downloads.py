"""The download ConfigMap's content and the download Job for each source kind."""

from __future__ import annotations

import json

from kaiwo_planner.domain.children.downloads import download_config, download_job
from kaiwo_planner.domain.settings.workload_inputs import HfRepoInput, StorageInputs
from kaiwo_planner.domain.state.workload_identity import WorkloadIdentity

IDENTITY = WorkloadIdentity(
    api_version="kaiwo.silogen.ai/v1alpha1",
    kind="KaiwoJob",
    name="j",
    namespace="ns",
    uid="u",
    workload_type="job",
)
GCS_AND_AZURE = {
    "gcs": [
        {
            "applicationCredentials": {"secretName": "gcp", "secretKey": "key.json"},
            "buckets": [{"name": "g", "files": [{"path": "a.txt", "targetPath": "a.txt"}]}],
        }
    ],
    "azureBlob": [
        {
            "connectionString": {
                "secretName": "az",
                "secretKey": "conn",
                "file": "/custom/path",
            },
            "containers": [
                {"name": "c", "folders": [{"path": "p", "targetPath": "t", "glob": "*.bin"}]}
            ],
        }
    ],
}


def test_config_names_the_mounted_secret_files_and_keeps_a_given_file():
    storage = StorageInputs(data_size="1Gi", data_mount_path="/data", downloads=GCS_AND_AZURE)

    assert download_config(storage) == {
        "downloadRoot": "/data",
        "hfHome": "",
        "gcs": [
            {
                "applicationCredentials": {
                    "secretName": "gcp",
                    "secretKey": "key.json",
                    "file": "/app/secrets/gcp/key.json",
                },
                "buckets": [{"name": "g", "files": [{"path": "a.txt", "targetPath": "a.txt"}]}],
            }
        ],
        "azureBlob": [
            {
                "connectionString": {
                    "secretName": "az",
                    "secretKey": "conn",
                    "file": "/custom/path",
                },
                "containers": [
                    {"name": "c", "folders": [{"path": "p", "targetPath": "t", "glob": "*.bin"}]}
                ],
            }
        ],
    }
    # The input is not modified.
    assert "file" not in GCS_AND_AZURE["gcs"][0]["applicationCredentials"]


def test_object_downloads_need_a_data_volume():
    storage = StorageInputs(downloads=GCS_AND_AZURE, hf_size="1Gi", hf_repos=(HfRepoInput("o/m"),))

    config = download_config(storage)

    assert config == {"downloadRoot": "", "hfHome": "/hf_cache", "hf": [{"repoId": "o/m"}]}


def test_hf_only_download_job_mounts_the_cache_and_nothing_else():
    storage = StorageInputs(hf_size="5Gi", hf_mount_path="/cache", hf_repos=(HfRepoInput("o/m"),))

    job = download_job(IDENTITY, storage)

    pod = job["spec"]["template"]["spec"]
    assert pod["volumes"] == [
        {"name": "config", "configMap": {"name": "j-download"}},
        {"name": "hf", "persistentVolumeClaim": {"claimName": "j-hf"}},
    ]
    assert pod["containers"][0]["volumeMounts"] == [
        {"name": "config", "mountPath": "/config"},
        {"name": "hf", "mountPath": "/cache"},
    ]
    assert pod["containers"][0]["env"] == [{"name": "HF_HOME", "value": "/cache"}]
    assert "ttlSecondsAfterFinished" not in job["spec"]
    assert "kueue.x-k8s.io/queue-name" not in job["metadata"]["labels"]


def test_the_config_never_contains_secret_values():
    storage = StorageInputs(data_size="1Gi", downloads=GCS_AND_AZURE)

    text = json.dumps(download_config(storage))

    assert "secretName" in text
    assert "value" not in text


def test_secret_volume_names_are_dns_labels_for_any_secret_name():
    # A Secret's name is a DNS subdomain (dots, up to 253 characters); a pod volume's name
    # must be a DNS label (no dots, at most 63): "secret-s3.creds" made the API server refuse
    # the download Job. Names that were valid stay as they were.
    long_name = "team-a-object-storage-credentials-for-the-nightly-training-run"
    downloads = {
        "s3": [
            {
                "endpointUrl": "https://s3.example.com",
                "accessKeyId": {"secretName": "s3.creds", "secretKey": "id"},
                "secretKey": {"secretName": long_name, "secretKey": "key"},
                "buckets": [{"name": "b"}],
            }
        ],
        "gcs": GCS_AND_AZURE["gcs"],
    }
    storage = StorageInputs(data_size="1Gi", data_mount_path="/data", downloads=downloads)

    pod = download_job(IDENTITY, storage)["spec"]["template"]["spec"]

    assert pod["volumes"][2:] == [
        {
            "name": "secret-s3-creds-90422086",
            "secret": {"secretName": "s3.creds", "items": [{"key": "id", "path": "id"}]},
        },
        {
            "name": "secret-team-a-object-storage-credentials-for-the-night-4eb7d6c3",
            "secret": {"secretName": long_name, "items": [{"key": "key", "path": "key"}]},
        },
        {
            "name": "secret-gcp",
            "secret": {"secretName": "gcp", "items": [{"key": "key.json", "path": "key.json"}]},
        },
    ]
    assert pod["containers"][0]["volumeMounts"][2:] == [
        {"name": "secret-s3-creds-90422086", "mountPath": "/app/secrets/s3.creds"},
        {
            "name": "secret-team-a-object-storage-credentials-for-the-night-4eb7d6c3",
            "mountPath": f"/app/secrets/{long_name}",
        },
        {"name": "secret-gcp", "mountPath": "/app/secrets/gcp"},
    ]


def test_a_key_given_its_own_file_is_mounted_there_and_in_its_secrets_directory():
    storage = StorageInputs(data_size="1Gi", data_mount_path="/data", downloads=GCS_AND_AZURE)

    (container,) = download_job(IDENTITY, storage)["spec"]["template"]["spec"]["containers"]

    assert container["volumeMounts"][2:] == [
        {"name": "secret-gcp", "mountPath": "/app/secrets/gcp"},
        {"name": "secret-az", "mountPath": "/app/secrets/az"},
        {"name": "secret-az", "mountPath": "/custom/path", "subPath": "conn", "readOnly": True},
    ]


def test_a_given_file_at_its_default_path_or_twice_is_mounted_once():
    reference = {"secretName": "gcp", "secretKey": "key.json"}
    downloads = {
        "gcs": [
            {"applicationCredentials": {**reference, "file": "/app/secrets/gcp/key.json"}},
            {"applicationCredentials": {**reference, "file": "/etc/key.json"}},
            {"applicationCredentials": {**reference, "file": "/etc/key.json"}},
        ]
    }
    storage = StorageInputs(data_size="1Gi", data_mount_path="/data", downloads=downloads)

    (container,) = download_job(IDENTITY, storage)["spec"]["template"]["spec"]["containers"]

    assert container["volumeMounts"][2:] == [
        {"name": "secret-gcp", "mountPath": "/app/secrets/gcp"},
        {
            "name": "secret-gcp",
            "mountPath": "/etc/key.json",
            "subPath": "key.json",
            "readOnly": True,
        },
    ]
