"""The example subscriber (``examples/subscriber.py``) as a user runs it: a separate process
with the ``subscriber`` identity ``kaiwo up`` provisioned, printing the public events of one
KaiwoJob while the operator takes it through its whole life on the real API server."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any, Final

import pytest
from kaiwo_kube import resources

from tests.integration.conftest import real_sqlite
from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import STEP_SECONDS, Pending, eventually
from tests.real_cluster import REPO_ROOT

pytestmark = [pytest.mark.nats, pytest.mark.slow]

EXAMPLE: Final = REPO_ROOT / "examples" / "subscriber.py"
NAME: Final = "told-job"


async def lines_until(stream: asyncio.StreamReader, last: str, *, within: float) -> list[str]:
    """Lines of ``stream`` up to and including the first whose transition is ``last``."""
    lines: list[str] = []
    async with asyncio.timeout(within):
        while True:
            raw = await stream.readline()
            if not raw:
                return lines  # the subscriber exited: its stderr says why
            lines.append(raw.decode().rstrip("\n"))
            if lines[-1].split()[1] == last:
                return lines


async def a_whole_life(pipeline: Any) -> None:
    """A KaiwoJob with a download, from creation to completion; Kueue's admission is seen
    before the pod starts (so it is told in PENDING)."""
    kube, namespace = pipeline.kube, pipeline.namespace
    await kube.create(actors.training_job(NAME, namespace=namespace))
    await pipeline.reaches(NAME, "DOWNLOADING")
    await pipeline.appears(resources.JOB, f"{NAME}-download")
    await pipeline.jobs.pod_succeeded(f"{NAME}-download", namespace=namespace)
    main = await pipeline.appears(resources.JOB, NAME)
    await pipeline.reaches(NAME, "PENDING")
    await actors.kueue_admits(kube, main)

    async def admitted() -> bool | Pending:
        conditions = (await pipeline.kaiwo_job(NAME)).get("status", {}).get("conditions", [])
        told = {c["type"]: c["status"] for c in conditions}
        return True if told.get("Admitted") == "True" else Pending(f"conditions {told}")

    await eventually(admitted, what=f"{NAME} admitted")
    await pipeline.jobs.pod_running(NAME, namespace=namespace, ready=False)
    await pipeline.reaches(NAME, "STARTING")
    await pipeline.jobs.pod_running(NAME, namespace=namespace, ready=True)
    await pipeline.reaches(NAME, "RUNNING")
    await pipeline.jobs.pod_succeeded(NAME, namespace=namespace)
    await pipeline.reaches(NAME, "COMPLETE")


@pytest.mark.parametrize("pipeline", [real_sqlite()], indirect=True)
async def test_the_example_subscriber_prints_the_whole_life_of_a_kaiwojob(pipeline: Any) -> None:
    env = {**os.environ, "KAIWO_STATE_DIR": str(pipeline.stack.options.state_dir)}
    subscriber = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE),
        "--namespace",
        pipeline.namespace,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        await a_whole_life(pipeline)
        assert subscriber.stdout is not None
        lines = await lines_until(subscriber.stdout, "completed", within=STEP_SECONDS)
    finally:
        subscriber.terminate()
        _, errors = await subscriber.communicate()
    assert lines, errors.decode()

    where = f"{pipeline.namespace}/{NAME}"
    told = [line.split()[1:] for line in lines]
    # The admitted version and the next one (pod started) can reach the planner as one: a
    # watch that restarts under load relists, and the relist shows only the newest version.
    # Subscribers are then told "admitted" with the phase that version shows.
    assert told[3][3] in ("phase=PENDING", "phase=STARTING"), told[3]
    told[3][3] = "phase=PENDING"
    assert told == [
        ["submitted", "KaiwoJob", where, "phase=-", "queue=kaiwo"],
        ["phase-changed", "KaiwoJob", where, "phase=DOWNLOADING", "from=-", "queue=kaiwo"],
        ["phase-changed", "KaiwoJob", where, "phase=PENDING", "from=DOWNLOADING", "queue=kaiwo"],
        ["admitted", "KaiwoJob", where, "phase=PENDING", "reason=Admitted", "queue=kaiwo"],
        ["phase-changed", "KaiwoJob", where, "phase=STARTING", "from=PENDING", "queue=kaiwo"],
        ["phase-changed", "KaiwoJob", where, "phase=RUNNING", "from=STARTING", "queue=kaiwo"],
        ["phase-changed", "KaiwoJob", where, "phase=COMPLETE", "from=RUNNING", "queue=kaiwo"],
        ["completed", "KaiwoJob", where, "phase=COMPLETE", "queue=kaiwo"],
    ]
