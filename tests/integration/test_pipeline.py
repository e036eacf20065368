"""The operator as deployed: watcher, planner, executor and recorder as separate processes over
a real nats-server, a real event store (SQLite; PostgreSQL when one answers) and the fake or a
real API server. The test plays Kueue and the Job controller (on the fake) or the kubelet (on
the real server, whose Job controller runs) and follows one KaiwoJob with a data download from
creation to completion, then reads its story back from the event store."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from typing import Any

import pytest
from click.testing import CliRunner
from kaiwo_cli.main import app
from kaiwo_kube import resources

from tests.integration.conftest import FAKE_POSTGRES, FAKE_SQLITE, real_sqlite
from tests.managed_fields import field_managers_of

pytestmark = [pytest.mark.nats, pytest.mark.slow]

NAME = "llama-sft"
OBSERVED = "ai.silogen.kaiwo.obs.observed.v1"
PLANNED = "ai.silogen.kaiwo.plan.decided.v1"
APPLIED = "ai.silogen.kaiwo.res.applied.v1"


def owned_by(child: dict[str, Any], owner: dict[str, Any]) -> bool:
    [reference] = child["metadata"]["ownerReferences"]
    return (reference["kind"], reference["name"], reference["uid"], reference["controller"]) == (
        "KaiwoJob",
        NAME,
        owner["metadata"]["uid"],
        True,
    )


async def kaiwo(*arguments: str) -> Any:
    """The ``kaiwo`` command, in a thread: it runs its own event loop."""
    env = {**os.environ, "COLUMNS": "250"}
    return await asyncio.to_thread(CliRunner().invoke, app, list(arguments), env=env)


@pytest.mark.parametrize("pipeline", [FAKE_SQLITE, FAKE_POSTGRES, real_sqlite()], indirect=True)
async def test_a_kaiwojob_from_creation_to_completion(pipeline: Any) -> None:
    from tests.integration.pipeline import cluster_actors as actors

    kube, namespace = pipeline.kube, pipeline.namespace
    await kube.create(actors.training_job(NAME, namespace=namespace))

    # The storage comes first: the data volume, the download script and the download Job.
    job = await pipeline.reaches(NAME, "DOWNLOADING")
    download = await pipeline.appears(resources.JOB, f"{NAME}-download")
    volume = await pipeline.appears(resources.PERSISTENT_VOLUME_CLAIM, f"{NAME}-data")
    script = await pipeline.appears(resources.CONFIG_MAP, f"{NAME}-download")
    for child in (download, volume, script):
        assert owned_by(child, job)
        assert child["metadata"]["labels"]["kaiwo.silogen.ai/owner-uid"] == job["metadata"]["uid"]
        assert child["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kaiwo"
    assert await pipeline.child(resources.JOB, NAME) is None

    # The download succeeded. The training Job appears, suspended for Kueue.
    await pipeline.jobs.pod_succeeded(f"{NAME}-download", namespace=namespace)
    main = await pipeline.appears(resources.JOB, NAME)
    job = await pipeline.reaches(NAME, "PENDING")
    assert owned_by(main, job)
    assert main["spec"]["suspend"] is True
    labels = main["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "kaiwo"
    assert labels["kaiwo.silogen.ai/owner-uid"] == job["metadata"]["uid"]
    assert labels["kaiwo.silogen.ai/run-id"] == job["metadata"]["uid"]
    [container] = main["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"]["amd.com/gpu"] == "4"
    assert "startTime" not in job["status"]

    # Kueue admits the Job and unsuspends it; its pod starts.
    await actors.kueue_admits(kube, main)
    await pipeline.jobs.pod_running(NAME, namespace=namespace, ready=False)
    await pipeline.reaches(NAME, "STARTING")
    assert (await pipeline.child(resources.JOB, NAME))["spec"]["suspend"] is False

    await pipeline.jobs.pod_running(NAME, namespace=namespace, ready=True)
    job = await pipeline.reaches(NAME, "RUNNING")
    assert job["status"]["startTime"]
    assert "completionTime" not in job["status"]

    await pipeline.jobs.pod_succeeded(NAME, namespace=namespace)
    job = await pipeline.reaches(NAME, "COMPLETE")
    assert job["status"]["completionTime"] >= job["status"]["startTime"]
    conditions = {c["type"]: c["status"] for c in job["status"]["conditions"]}
    assert conditions == {
        "Schedulable": "True",
        "PvcReady": "False",  # no provisioner binds the volume, on either API server
        "DownloadJobSucceeded": "True",
        "Admitted": "True",
        "ChildSpecApplied": "True",
    }

    # The log: every message once, every consumer idle, no dead letters.
    await pipeline.settled()
    assert await pipeline.dead_letters() == 0
    if pipeline.real:
        # Kueue owns a Job's suspend once it exists: an operator that still applies it takes
        # it back from Kueue, and on a real server (whose Job controller answers each flip
        # with a status write) two plans in flight then flip it back and forth for ever.
        finished = await pipeline.child(resources.JOB, NAME)
        assert "kaiwo" not in field_managers_of(finished, "spec", "suspend")
    if pipeline.audit_log is not None:  # our own control plane (not KAIWO_TEST_KUBECONFIG's)
        # Settled means settled: an idle operator writes nothing.
        assert await pipeline.operator_writes_while_idle() == Counter()
    uid = job["metadata"]["uid"]
    async with pipeline.store() as store:
        story = await store.read_stream(f"workload/{uid}")
    assert [e.stream_version for e in story] == list(range(1, len(story) + 1))
    assert len({e.event_id for e in story}) == len(story)
    types = Counter(e.type for e in story)
    assert set(types) == {OBSERVED, PLANNED, APPLIED}
    assert types[PLANNED] == types[APPLIED]  # every plan carried out once
    plans = [e for e in story if e.type == PLANNED]
    phases = [p.data["plan"]["status"]["status"] for p in plans]
    assert _distinct_in_order(phases) == [
        "DOWNLOADING",
        "PENDING",
        "STARTING",
        "RUNNING",
        "COMPLETE",
    ]
    results = {e.causation_id: e for e in story if e.type == APPLIED}
    assert {p.event_id for p in plans} == set(results)
    observed_kinds = {e.data["kind"] for e in story if e.type == OBSERVED}
    children = {"KaiwoJob", "Job", "ConfigMap", "PersistentVolumeClaim", "Workload"}
    # On a real server the Job controller makes the pods, and the watcher sees them.
    assert observed_kinds == (children | {"Pod"} if pipeline.real else children)

    # The story told, and every plan of it reproduced by replay.
    explained = await kaiwo(
        "events", "explain", f"{namespace}/{NAME}", "--store", pipeline.store_url
    )
    assert explained.exit_code == 0, explained.output
    # Standard output only: the cluster line goes to stderr, which ``output`` interleaves.
    lines = explained.stdout.splitlines()
    assert lines[0].startswith(f"KaiwoJob {namespace}/{NAME} (uid {uid})")
    assert f"— {len(story)} recorded events" in lines[0]
    # Long lines are wrapped under their branch: read them joined again.
    text = " ".join(line.lstrip("│├└─ ") for line in lines)
    assert f"observed KaiwoJob {namespace}/{NAME} ADDED" in text
    for phase in ("DOWNLOADING", "PENDING", "STARTING", "RUNNING", "COMPLETE"):
        assert f"status {phase}" in text
    assert f"apply Job {namespace}/{NAME}-download applied" in text
    assert f"apply Job {namespace}/{NAME} applied" in text

    replayed = await kaiwo(
        "events", "replay", "--workload", f"{namespace}/{NAME}", "--store", pipeline.store_url
    )
    assert replayed.exit_code == 0, replayed.output
    summary = replayed.stdout.strip().splitlines()[-1]
    assert summary.startswith(f"{len(plans)} plans, {len(plans)} reproduced, 0 differ, 0 skipped")


def _distinct_in_order(values: list[str]) -> list[str]:
    return [v for i, v in enumerate(values) if i == 0 or values[i - 1] != v]
