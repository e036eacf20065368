"""A resync publishes no plan for a running workload whose children are all wanted, on the
real API server (decision 0250).

A periodic resync publishes a plan again when the cluster still holds a child the plan's
prune would delete: of a pruned kind, carrying the owner's inventory labels, controlled by
the owner, not desired, not being deleted. That relies on the children as the API server
gives them back: a running KaiwoJob has its download Job, its data volume (with the
``kubernetes.io/pvc-protection`` finalizer the API server adds), its Job, the Pods of both and
Kueue's Workload. None of them may look like a stray, or every resync would publish the
plan of every running workload again. Checked here with the whole operator, the test playing
the kubelet and Kueue.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Final

import pytest
from kaiwo_contracts.events.streams import PLAN_STREAM
from kaiwo_contracts.events.subjects import plan_subject
from kaiwo_kube import resources

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pipeline, running_pipeline
from tests.real_cluster import RealCluster

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.timeout(360),
]

RESYNC_SECONDS: Final = 2
RESYNCS_WATCHED: Final = 4


async def plans_of(pipeline: Pipeline, subject: str) -> int:
    info = await pipeline.js.stream_info(PLAN_STREAM, subjects_filter=subject)
    return (info.state.subjects or {}).get(subject, 0)


async def test_a_running_workloads_children_get_no_plan_from_a_resync(
    real_cluster: RealCluster, tmp_path: Path
) -> None:
    async with running_pipeline(
        tmp_path, real=real_cluster, service_env={"KAIWO_RESYNC_EVERY_SECONDS": str(RESYNC_SECONDS)}
    ) as pipeline:
        name, ns = "running", pipeline.namespace
        await pipeline.kube.create(actors.training_job(name, namespace=ns))
        async with pipeline.stall_explained(name):
            await pipeline.reaches(name, "DOWNLOADING")
            await pipeline.appears(resources.JOB, f"{name}-download")
            await pipeline.jobs.pod_succeeded(f"{name}-download", namespace=ns)
            main = await pipeline.appears(resources.JOB, name)
            await pipeline.reaches(name, "PENDING")
            await actors.kueue_admits(pipeline.kube, main)
            await pipeline.jobs.pod_running(name, namespace=ns, ready=True)
            owner = await pipeline.reaches(name, "RUNNING")
        await pipeline.settled()
        uid = owner["metadata"]["uid"]
        subject = plan_subject(kind="KaiwoJob", namespace=ns, uid=uid)
        before = await plans_of(pipeline, subject)

        await asyncio.sleep(RESYNC_SECONDS * RESYNCS_WATCHED)
        await pipeline.settled()
        assert await plans_of(pipeline, subject) == before
        # The children the resyncs judged are there, and are the owner's.
        for resource, child in ((resources.JOB, name), (resources.JOB, f"{name}-download")):
            found = await pipeline.child(resource, child)
            assert found is not None
            [reference] = found["metadata"]["ownerReferences"]
            assert (reference["uid"], reference["controller"]) == (uid, True)
        assert (await pipeline.kaiwo_job(name))["status"]["status"] == "RUNNING"
