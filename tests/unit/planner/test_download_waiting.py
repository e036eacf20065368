"""A download pod that cannot start names what it waits for (decision 0254)."""

from __future__ import annotations

from typing import Any

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus
from kaiwo_planner.domain.status.conditions import ConditionSpec
from kaiwo_planner.domain.status.storage_phase import download_observation

JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "train-download", "namespace": "team-a", "uid": "job-uid"},
    "status": {"active": 1},
}


def download_pod(waiting: dict[str, str], volumes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-download-x7k2p",
            "namespace": "team-a",
            "ownerReferences": [{"kind": "Job", "name": "train-download", "uid": "job-uid"}],
        },
        "spec": {"volumes": volumes},
        "status": {
            "phase": "Pending",
            "containerStatuses": [{"name": "data-downloader", "state": {"waiting": waiting}}],
        },
    }


def test_a_download_pod_mounting_secrets_names_them_while_it_is_created() -> None:
    pod = download_pod(
        {"reason": "ContainerCreating"},
        [
            {"name": "config", "configMap": {"name": "train-download"}},
            {"name": "secret-s3-keys", "secret": {"secretName": "s3-keys"}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "train-data"}},
        ],
    )

    observed = download_observation(JOB, None, pods=[pod])

    assert observed == (
        WorkloadStatus.STARTING,
        ConditionSpec(
            "DownloadJobSucceeded",
            "False",
            "JobInProgress",
            "Download job starting: pod train-download-x7k2p is ContainerCreating; if it stays "
            "so, check that the Secret(s) it mounts exist in namespace team-a: s3-keys "
            "(kubectl describe pod train-download-x7k2p shows its Events)",
        ),
    )


def test_a_download_pod_whose_env_secret_is_missing_says_what_the_kubelet_said() -> None:
    pod = download_pod(
        {
            "reason": "CreateContainerConfigError",
            "message": 'secret "hf-token" not found',
        },
        [{"name": "config", "configMap": {"name": "train-download"}}],
    )

    observed = download_observation(JOB, None, pods=[pod])

    assert observed[1] == ConditionSpec(
        "DownloadJobSucceeded",
        "False",
        "JobInProgress",
        "Download job starting: pod train-download-x7k2p: container data-downloader "
        'CreateContainerConfigError: secret "hf-token" not found',
    )


def test_a_download_pod_of_another_job_or_mounting_no_secret_adds_nothing() -> None:
    no_secret = download_pod(
        {"reason": "ContainerCreating"},
        [{"name": "config", "configMap": {"name": "train-download"}}],
    )
    other = download_pod(
        {"reason": "ContainerCreating"}, [{"name": "k", "secret": {"secretName": "k"}}]
    )
    other["metadata"]["ownerReferences"][0]["uid"] = "another-job"

    observed = download_observation(JOB, None, pods=[no_secret, other])

    assert observed[1] == ConditionSpec(
        "DownloadJobSucceeded", "False", "JobInProgress", "Download job starting"
    )
