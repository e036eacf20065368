"""A resync publishes no plan for a settled workload on the real API server (decision 0234).

A periodic resync publishes a plan again for an owner that does not show the status its plan
set, at any version: a status write the executor gave up on is written then. That relies on
the API server giving back the status it was written, equal to the plan's: otherwise every
resync would publish every owner's plan again. Checked here on the real API server, with the
whole operator, for a KaiwoJob that stays DOWNLOADING (nobody plays its download's Pod).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Final

import pytest
from kaiwo_contracts.events.streams import PLAN_STREAM
from kaiwo_contracts.events.subjects import plan_subject

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pipeline, running_pipeline
from tests.real_cluster import RealCluster

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.timeout(300),
]

RESYNC_SECONDS: Final = 2
RESYNCS_WATCHED: Final = 4


async def plans_of(pipeline: Pipeline, subject: str) -> int:
    info = await pipeline.js.stream_info(PLAN_STREAM, subjects_filter=subject)
    return (info.state.subjects or {}).get(subject, 0)


async def test_a_settled_workloads_status_is_not_published_again_by_a_resync(
    real_cluster: RealCluster, tmp_path: Path
) -> None:
    async with running_pipeline(
        tmp_path, real=real_cluster, service_env={"KAIWO_RESYNC_EVERY_SECONDS": str(RESYNC_SECONDS)}
    ) as pipeline:
        name = "settled"
        await pipeline.kube.create(actors.training_job(name, namespace=pipeline.namespace))
        owner = await pipeline.reaches(name, "DOWNLOADING")
        await pipeline.settled()
        subject = plan_subject(
            kind="KaiwoJob", namespace=pipeline.namespace, uid=owner["metadata"]["uid"]
        )
        before = await plans_of(pipeline, subject)
        assert before >= 1

        await asyncio.sleep(RESYNC_SECONDS * RESYNCS_WATCHED)
        await pipeline.settled()
        assert await plans_of(pipeline, subject) == before
        current = await pipeline.kaiwo_job(name)
        assert current["status"]["status"] == "DOWNLOADING"
