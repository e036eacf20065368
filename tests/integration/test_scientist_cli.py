"""The scientist's commands against a running operator, with no flag but the workload: each
finds the stack through its state directory, as after ``kaiwo up`` (or ``make demo``).

On the fake API server the test runs from the directory holding ``.kaiwo`` (found as git finds
``.git``); on the real one it names the state directory with ``$KAIWO_STATE``. In both, the
test plays Kueue and the kubelet (``cluster_actors``) while ``kaiwo submit --wait`` follows
the example KaiwoJob to COMPLETE.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from click.testing import CliRunner
from kaiwo_cli.commands.up import next_steps
from kaiwo_cli.main import app
from kaiwo_cli.stack.state import StackState
from kaiwo_kube import resources
from kaiwo_kube.plain_client import read_plain_credentials

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pipeline, running_pipeline
from tests.real_cluster import REPO_ROOT, RealCluster
from tests.waiting import Pending, eventually

# A shared, loaded machine may start the session's real API server inside this module.
pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow, pytest.mark.timeout(240)]

EXAMPLE: Final = REPO_ROOT / "examples" / "kaiwojob-gpu-training.yaml"
NORMAL_PRIORITY: Final = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "normal-priority"},
    "value": 100,
}
NAME: Final = "llama-3-8b-sft"
USER: Final = "alice@example.com"


async def kaiwo(
    *arguments: str, env: Mapping[str, str | None] | None = None, stdin: str | None = None
) -> Any:
    """The ``kaiwo`` command in a thread (it runs its own event loop), with no stack named
    unless ``env`` names one: what it finds, it finds itself."""
    environment: dict[str, str | None] = {"COLUMNS": "200", "KAIWO_STATE": None, **(env or {})}
    return await asyncio.to_thread(
        CliRunner().invoke, app, list(arguments), env=environment, input=stdin
    )


def scientist_config(directory: Path) -> dict[str, str]:
    config = directory / "kaiwo-config.yaml"
    config.write_text(f"user: {USER}\n")
    return {"KAIWOCONFIG": str(config)}


async def play_the_cluster(pipeline: Pipeline, name: str) -> None:
    """Kueue and the kubelet through the job's life: the download succeeds, Kueue admits the
    Job, its pod runs, then succeeds."""
    ns = pipeline.namespace
    await pipeline.appears(resources.JOB, f"{name}-download")
    await pipeline.jobs.pod_succeeded(f"{name}-download", namespace=ns)
    main = await pipeline.appears(resources.JOB, name)
    await pipeline.reaches(name, "PENDING")
    await actors.kueue_admits(pipeline.kube, main)
    await pipeline.jobs.pod_running(name, namespace=ns, ready=True)
    await pipeline.reaches(name, "RUNNING")
    await pipeline.jobs.pod_succeeded(name, namespace=ns)


def phases_followed(output: str) -> list[str]:
    """The phases ``--wait`` printed for the job, in order."""
    return re.findall(rf"KaiwoJob [\w-]+/{NAME}: ([A-Z]+)\s*$", output, flags=re.MULTILINE)


async def test_on_the_fake_a_scientist_submits_follows_and_inspects_a_job_with_no_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where kaiwo up ran: its state is ./.kaiwo
    (tmp_path / "examples").symlink_to(REPO_ROOT / "examples")  # a checkout's layout
    env = scientist_config(tmp_path)
    # What the banner of `kaiwo up --fake` tells the user to type, run as printed.
    banner = [
        line.split()[1:]
        for line in next_steps(Path(".kaiwo"), fake=True).splitlines()
        if line.startswith("  kaiwo ")
    ]
    assert banner == [
        ["apply", "-f", "examples/kaiwoqueueconfig.yaml"],
        ["submit", "-f", "examples/kaiwojob-gpu-training.yaml", "--wait"],
        ["list", "-A"],
        ["status", f"ml-team/{NAME}"],
        ["queues"],
        ["events", "explain", f"ml-team/{NAME}"],
    ]
    apply, submit, list_all, status_of, queues_of, explain = banner
    async with running_pipeline(tmp_path / ".kaiwo", gpu_cluster=False) as pipeline:
        await actors.register_gpu_node(pipeline.kube)
        applied = await kaiwo(*apply, env=env)
        assert applied.exit_code == 0, applied.output

        submitted = asyncio.create_task(kaiwo(*submit, env=env))
        await play_the_cluster(pipeline, NAME)
        result = await submitted

        assert result.exit_code == 0, result.output
        assert f"kaiwojob.kaiwo.silogen.ai/{NAME} submitted in ml-team" in result.output
        followed = phases_followed(result.output)
        assert followed[-1] == "COMPLETE", result.output
        assert {"DOWNLOADING", "PENDING"} <= set(followed), result.output

        assert (await kaiwo(*list_all, env=env)).exit_code == 0
        listed = await kaiwo("list", env=env)
        assert listed.exit_code == 0, listed.output
        assert listed.output.splitlines()[1].split()[:6] == [
            "ml-team",
            "KaiwoJob",
            NAME,
            USER,
            "team-nlp",
            "COMPLETE",
        ]
        assert (await kaiwo("list", "--user", "bob@example.com", env=env)).output.strip() == (
            "No workloads of bob@example.com found."
        )

        status = await kaiwo(*status_of, env=env)
        assert status.exit_code == 0, status.output
        assert "Phase:     COMPLETE" in status.output
        assert re.search(rf"Job/{NAME}\s+Complete", status.output), status.output
        assert re.search(rf"Job/{NAME}-download\s+Complete", status.output), status.output

        queues = await kaiwo(*queues_of, env=env)
        assert queues.exit_code == 0, queues.output
        assert re.search(r"ml-team\s+team-nlp\s+team-nlp", queues.output), queues.output

        # The recorder stores events as they come, in its own process: on a loaded machine
        # it may not have stored the workload's observations yet, or its last plan.
        async def explained_complete() -> Any:
            explained = await kaiwo(*explain, env=env)
            assert explained.exit_code == 0 or "no recorded observation" in explained.output
            if explained.exit_code == 0 and "status COMPLETE" in explained.output:
                return explained
            return Pending(explained.output)

        await eventually(explained_complete, what="kaiwo events explain tells of COMPLETE")
        via_child = await kaiwo("events", "explain", f"Job/ml-team/{NAME}-download", env=env)
        # stdout: stderr names the cluster the events are of (decision 0042).
        assert via_child.stdout.startswith(f"Job ml-team/{NAME}-download belongs to KaiwoJob")

        deleted = await kaiwo("delete", f"ml-team/{NAME}", env=env)
        assert deleted.exit_code == 0, deleted.output
        assert (
            await actors.get_or_none(pipeline.kube, resources.KAIWO_JOB, NAME, namespace="ml-team")
            is None
        )


def example_for(namespace: str) -> str:
    """The example KaiwoJob in ``namespace``, leaving user and queue to the CLI, on one pod
    (the played kubelet reports one pod per Job)."""
    document = yaml.safe_load(EXAMPLE.read_text())
    document["metadata"]["namespace"] = namespace
    for key in ("user", "clusterQueue", "replicas", "gpusPerReplica"):
        document["spec"].pop(key)
    document["spec"]["gpus"] = 4
    return yaml.safe_dump(document)


async def test_on_the_real_api_server_submit_list_status_logs_and_delete(
    tmp_path: Path, real_cluster: RealCluster
) -> None:
    state = tmp_path / "state"
    env = {**scientist_config(tmp_path), "KAIWO_STATE": str(state)}
    async with running_pipeline(state, real=real_cluster) as pipeline:
        ns = pipeline.namespace
        # The example's priorityClass, as a platform team would have made it: a workload
        # naming a PriorityClass the cluster lacks ends in ERROR (decision 0045).
        await pipeline.kube.apply(NORMAL_PRIORITY, field_manager="test")
        submitted = asyncio.create_task(
            kaiwo(
                "submit",
                "-f",
                "-",
                "--queue",
                actors.QUEUE,
                "--wait",
                "--timeout",
                "60",
                env=env,
                stdin=example_for(ns),
            )
        )
        await play_the_cluster(pipeline, NAME)
        result = await submitted

        assert result.exit_code == 0, result.output
        # The commands talked to it without the client library (certificates suffice).
        recorded = StackState.read(state).kubeconfig
        assert recorded is not None and read_plain_credentials(recorded) is not None
        assert f"(user {USER}, queue {actors.QUEUE})" in result.output
        assert phases_followed(result.output)[-1] == "COMPLETE", result.output
        stored = await pipeline.kaiwo_job(NAME)
        assert (stored["spec"]["user"], stored["spec"]["clusterQueue"]) == (USER, actors.QUEUE)

        listed = await kaiwo("list", "-n", ns, env=env)
        assert listed.output.splitlines()[1].split()[:6] == [
            ns,
            "KaiwoJob",
            NAME,
            USER,
            actors.QUEUE,
            "COMPLETE",
        ]
        status = await kaiwo("status", NAME, "-n", ns, env=env)
        assert "Phase:     COMPLETE" in status.output
        [pod] = (
            await pipeline.kube.list(
                resources.POD, namespace=ns, label_selector=f"{actors.JOB_NAME_LABEL}={NAME}"
            )
        ).items
        pod_name = pod["metadata"]["name"]
        assert re.search(rf"Pod/{pod_name}\s+Succeeded", status.output), status.output

        # No kubelet runs the containers here: each pod is named, with what it wrote.
        logs = await kaiwo("logs", f"{ns}/{NAME}", "--tail", "10", env=env)
        assert f"pod {pod_name} (Succeeded), container" in logs.output, logs.output

        deleted = await kaiwo("delete", f"{ns}/{NAME}", env=env)
        assert deleted.exit_code == 0, deleted.output
        assert (
            await actors.get_or_none(pipeline.kube, resources.KAIWO_JOB, NAME, namespace=ns) is None
        )
