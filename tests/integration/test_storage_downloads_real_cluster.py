"""Storage and downloads of a KaiwoJob with the whole operator against the session's real API
server (decision 0248): the real Job controller and garbage collector, the tests playing the
kubelets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any, Final

import pytest
import pytest_asyncio
from kaiwo_kube import resources

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pipeline, running_pipeline
from tests.real_cluster import RealCluster

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="module"),
]

RESYNC_SECONDS: Final = 3.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pipeline(
    real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Pipeline]:
    async with running_pipeline(
        tmp_path_factory.mktemp("kaiwo"),
        real=real_cluster,
        service_env={"KAIWO_RESYNC_EVERY_SECONDS": f"{RESYNC_SECONDS:g}"},
    ) as running:
        yield running


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    [found] = [c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind]
    return found


async def test_a_finished_download_job_someone_removes_is_not_run_again(
    pipeline: Pipeline,
) -> None:
    """The download succeeded and the KaiwoJob's own Job exists; someone deletes the finished
    download Job (``kubectl delete job``, a clean-up policy). The data is still in its claim:
    the download is not run again and the Job is left as it is. Before decision 0248 the
    operator made the download Job again, which downloaded anew, and deleted the KaiwoJob's
    Job meanwhile (DOWNLOADING again)."""
    name, ns, kube = "kept-download", pipeline.namespace, pipeline.kube
    await kube.create(actors.training_job(name, namespace=ns))
    await pipeline.reaches(name, "DOWNLOADING")
    await pipeline.appears(resources.JOB, f"{name}-download")
    await pipeline.jobs.pod_succeeded(f"{name}-download", namespace=ns)
    main = await pipeline.appears(resources.JOB, name)
    await pipeline.reaches(name, "PENDING")
    await pipeline.settled(within=60)

    await kube.delete(resources.JOB, f"{name}-download", namespace=ns)
    # Gone, then three of the operator's resyncs with everything settled.
    await pipeline.settled(within=60)
    await asyncio.sleep(3 * RESYNC_SECONDS)
    await pipeline.settled(within=60)

    download = await actors.get_or_none(kube, resources.JOB, f"{name}-download", namespace=ns)
    assert download is None
    job = await actors.get_or_none(kube, resources.JOB, name, namespace=ns)
    assert job is not None and job["metadata"]["uid"] == main["metadata"]["uid"]
    workload = await kube.get(resources.KAIWO_JOB, name, namespace=ns)
    assert workload["status"]["status"] == "PENDING"
    assert condition(workload, "DownloadJobSucceeded")["status"] == "True"


async def test_a_failed_download_tells_what_the_downloader_said(pipeline: Pipeline) -> None:
    """The downloader exits 1 with "NoSuchBucket" (a bucket name mistyped): the Job controller
    fails the download Job (no retries), and the KaiwoJob is FAILED, which is final. Its
    condition and Event said "Download job failed" and "Workload has failed" alone, and the
    user had to find the download pod before it went (decision 0248)."""
    name, ns, kube = "bad-bucket", pipeline.namespace, pipeline.kube
    created = await kube.create(actors.training_job(name, namespace=ns))
    await pipeline.reaches(name, "DOWNLOADING")
    await pipeline.appears(resources.JOB, f"{name}-download")
    pod = await pipeline.jobs.job_pod(f"{name}-download", namespace=ns)
    finished = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    terminated = {
        "exitCode": 1,
        "reason": "Error",
        "message": "NoSuchBucket: datasets",
        "startedAt": finished,
        "finishedAt": finished,
    }
    container = {
        "name": "data-downloader",
        "image": pod["spec"]["containers"][0]["image"],
        "imageID": "",
        "ready": False,
        "restartCount": 0,
        "state": {"terminated": terminated},
    }
    await kube.patch_status(
        resources.POD,
        pod["metadata"]["name"],
        {"phase": "Failed", "startTime": finished, "containerStatuses": [container]},
        namespace=ns,
        field_manager="kubelet",
        method="merge",
    )

    workload = await pipeline.reaches(name, "FAILED")

    told = (
        f"Download job failed: Job {name}-download: Job has reached the specified backoff "
        f"limit; pod {pod['metadata']['name']}: container data-downloader exited with code 1 "
        "(Error): NoSuchBucket: datasets"
    )
    download = condition(workload, "DownloadJobSucceeded")
    assert (download["status"], download["reason"], download["message"]) == (
        "False",
        "JobFailed",
        told,
    )
    await pipeline.settled(within=60)
    events = await kube.list(
        resources.EVENT,
        namespace=ns,
        field_selector=f"involvedObject.uid={created['metadata']['uid']}",
    )
    assert [e["message"] for e in events.items if e["reason"] == "WorkloadFailed"] == [
        f"Workload has failed: JobFailed: {told}"
    ]


async def test_an_edit_of_what_a_finished_download_fetched_is_told(pipeline: Pipeline) -> None:
    """A second file added to the S3 download once the download succeeded: the ConfigMap
    takes the edit, the finished download Job does not run again, and the user is told so
    (decision 0248); before, nothing was downloaded and nothing said."""
    name, ns, kube = "more-files", pipeline.namespace, pipeline.kube
    created = await kube.create(actors.training_job(name, namespace=ns))
    await pipeline.reaches(name, "DOWNLOADING")
    first = await pipeline.appears(resources.JOB, f"{name}-download")
    await pipeline.jobs.pod_succeeded(f"{name}-download", namespace=ns)
    await pipeline.appears(resources.JOB, name)
    await pipeline.reaches(name, "PENDING")
    await pipeline.settled(within=60)

    files = [
        {"path": "train.jsonl", "targetPath": "train.jsonl"},
        {"path": "eval.jsonl", "targetPath": "eval.jsonl"},
    ]
    workload = await kube.get(resources.KAIWO_JOB, name, namespace=ns)
    s3 = workload["spec"]["storage"]["data"]["download"]["s3"]
    s3[0]["buckets"][0]["files"] = files
    patch = {"spec": {"storage": {"data": {"download": {"s3": s3}}}}}
    await kube.merge_patch(resources.KAIWO_JOB, name, patch, namespace=ns)
    await pipeline.settled(within=60)
    await asyncio.sleep(RESYNC_SECONDS)
    await pipeline.settled(within=60)

    events = await kube.list(
        resources.EVENT,
        namespace=ns,
        field_selector=f"involvedObject.uid={created['metadata']['uid']}",
    )
    assert [e["message"] for e in events.items if e["reason"] == "SettingsIgnored"] == [
        "The download configuration was edited (storage.data.download, "
        "storage.huggingFace.preCacheRepos or their mount paths) after download Job "
        f"{name}-download finished: nothing more is downloaded, and the workload runs on what "
        "that download fetched. A download runs once; delete and re-create the workload to "
        "download what the spec says now"
    ]
    download = await kube.get(resources.JOB, f"{name}-download", namespace=ns)
    assert download["metadata"]["uid"] == first["metadata"]["uid"]
    workload = await kube.get(resources.KAIWO_JOB, name, namespace=ns)
    assert workload["status"]["status"] == "PENDING"
