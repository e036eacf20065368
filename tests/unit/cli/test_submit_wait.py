"""``kaiwo submit --wait`` stops where a workload will not move by itself, and its exit status
tells "the workload failed" (1), "unreachable" (2) and "timed out" (3) apart."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from kaiwo_cli.main import app
from kaiwo_cli.workload_follow import failure_reason
from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kubefake import FakeKubeServer

JOB = {
    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoJob",
    "metadata": {"name": "train", "namespace": "ml-team"},
    "spec": {"image": "busybox", "entrypoint": "echo hi", "user": "alice@example.com"},
}


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[FakeKubeServer, KubernetesAsyncioAdapter]]:
    async with FakeKubeServer(kubeconfig_path=tmp_path / "kubeconfig") as server:
        for crd in custom_resource_definitions(SERVED_KINDS):
            server.store.register_crd(crd)
        kube = await KubernetesAsyncioAdapter.from_kubeconfig(server.kubeconfig_path)
        async with kube:
            await kube.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-team"}}
            )
            yield server, kube


async def submit(
    tmp_path: Path, kubeconfig: Path, *extra: str, job: dict[str, Any] = JOB
) -> Result:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(job))
    arguments = ["submit", "-f", str(manifest), "--wait", "--kubeconfig", str(kubeconfig), *extra]
    # A pipe's width (80 columns), as in CI logs or `| tee`.
    env = {
        "KAIWO_STATE": str(tmp_path / "no-stack"),
        "KAIWOCONFIG": str(tmp_path / "none"),
        "COLUMNS": "80",
    }
    return await asyncio.to_thread(CliRunner().invoke, app, arguments, env=env)


async def created(kube: KubernetesAsyncioAdapter) -> dict[str, Any]:
    for _ in range(200):
        listed = await kube.list(resources.KAIWO_JOB, namespace="ml-team")
        if listed.items:
            return listed.items[0]
        await asyncio.sleep(0.05)
    raise AssertionError("kaiwo submit never created the job")


async def test_wait_stops_on_error_and_names_the_reason(tmp_path: Path, cluster: Any) -> None:
    server, kube = cluster
    running = asyncio.create_task(submit(tmp_path, server.kubeconfig_path))
    await created(kube)
    await kube.patch_status(
        resources.KAIWO_JOB,
        "train",
        {
            "status": "ERROR",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "ClusterQueueNotFound",
                    "message": "ClusterQueue kaiwo does not exist",
                    "lastTransitionTime": "2026-03-01T12:00:00Z",
                }
            ],
        },
        namespace="ml-team",
        field_manager="kaiwo-status",
        method="merge",
    )

    result = await asyncio.wait_for(running, 60)

    assert result.exit_code == 1, result.output
    assert (
        "kaiwo submit: KaiwoJob ml-team/train: ERROR "
        "(ClusterQueueNotFound: ClusterQueue kaiwo does not exist)"
    ) in result.output


async def test_a_failure_reason_is_printed_as_the_container_wrote_it(
    tmp_path: Path, cluster: Any
) -> None:
    # A container's message is free text: read as rich markup, "[/workload]" crashed the
    # command with a traceback and "[bold]" vanished.
    server, kube = cluster
    running = asyncio.create_task(submit(tmp_path, server.kubeconfig_path))
    await created(kube)
    message = "container main exited with code 1: KeyError [/workload] in [bold]step[/]"
    await kube.patch_status(
        resources.KAIWO_JOB,
        "train",
        {
            "status": "FAILED",
            "conditions": [condition("ChildHealthy", "False", "BackoffLimitExceeded", message)],
        },
        namespace="ml-team",
        field_manager="kaiwo-status",
        method="merge",
    )

    result = await asyncio.wait_for(running, 60)

    assert result.exit_code == 1, result.output
    line = f"KaiwoJob ml-team/train: FAILED (BackoffLimitExceeded: {message})"
    followed = rf"^\d\d:\d\d:\d\d  {re.escape(line)}$"
    assert re.search(followed, result.stderr, re.MULTILINE), result.stderr
    assert result.stderr.endswith(f"kaiwo submit: {line}\n")


async def test_a_long_name_is_followed_on_one_line_in_a_pipe(tmp_path: Path, cluster: Any) -> None:
    # Wrapped at 80 columns, "KaiwoJob ml-team/<name>: COMPLETE" was cut over three lines.
    server, kube = cluster
    name = "llama-3-70b-instruct-sft-lora-r16-alpha32-lr2e-5-epochs3-seed42"
    job = {**JOB, "metadata": {"name": name, "namespace": "ml-team"}}
    running = asyncio.create_task(submit(tmp_path, server.kubeconfig_path, job=job))
    await created(kube)
    await kube.patch_status(
        resources.KAIWO_JOB,
        name,
        {"status": "COMPLETE"},
        namespace="ml-team",
        field_manager="kaiwo-status",
        method="merge",
    )

    result = await asyncio.wait_for(running, 60)

    assert result.exit_code == 0, result.output
    assert re.search(
        rf"^\d\d:\d\d:\d\d  KaiwoJob ml-team/{name}: COMPLETE$", result.stderr, re.MULTILINE
    ), result.stderr


async def test_a_timeout_is_not_an_unreachable_cluster(tmp_path: Path, cluster: Any) -> None:
    server, _kube = cluster

    result = await submit(tmp_path, server.kubeconfig_path, "--timeout", "1")

    assert result.exit_code == 3, result.output
    assert "kaiwo submit: KaiwoJob ml-team/train: not settled within 1 s" in result.output


async def test_an_unreachable_cluster_exits_2(tmp_path: Path, cluster: Any) -> None:
    server, _kube = cluster
    kubeconfig = tmp_path / "gone"
    kubeconfig.write_text(server.kubeconfig_path.read_text())
    await server.stop()

    result = await submit(tmp_path, kubeconfig, "--timeout", "5")

    assert result.exit_code == 2, result.output


def condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": message}


SCHEDULABLE = condition("Schedulable", "True", "Schedulable", "Cluster has sufficient GPUs")
ADMITTED = condition("Admitted", "True", "Admitted", "Workload is admitted")


def test_the_reason_of_a_failure_is_its_false_condition_not_the_first_one() -> None:
    # It said "(Schedulable: Cluster has sufficient GPUs)" for a job whose container failed.
    failed = {
        "status": {
            "status": "FAILED",
            "conditions": [
                SCHEDULABLE,
                ADMITTED,
                condition("ChildHealthy", "False", "BackoffLimitExceeded", "Job train: exit 1"),
            ],
        }
    }
    assert failure_reason(failed) == " (BackoffLimitExceeded: Job train: exit 1)"


def test_a_terminated_workload_names_why_it_was_stopped() -> None:
    terminated = {
        "status": {
            "status": "TERMINATED",
            "conditions": [
                SCHEDULABLE,
                condition(
                    "WorkloadTerminatedEarly", "True", "DurationExceeded", "Workload duration"
                ),
            ],
        }
    }
    assert failure_reason(terminated) == " (DurationExceeded: Workload duration)"
    running = {"status": {"status": "RUNNING", "conditions": [SCHEDULABLE]}}
    assert failure_reason(running) == ""


def test_a_healthy_false_condition_is_not_the_reason_of_a_failure() -> None:
    # On the real stack the monitor's ResourceUnderutilization (False: utilization is normal)
    # came first, and `--wait` said the job failed because "GPU utilization is at or above 1%".
    failed = {
        "status": {
            "status": "FAILED",
            "conditions": [
                SCHEDULABLE,
                ADMITTED,
                condition(
                    "ResourceUnderutilization",
                    "False",
                    "GpuUtilizationNormal",
                    "GPU utilization is at or above 1% of the requested GPUs",
                ),
                condition("ChildHealthy", "False", "BackoffLimitExceeded", "Job train: exit 1"),
            ],
        }
    }
    assert failure_reason(failed) == " (BackoffLimitExceeded: Job train: exit 1)"


def test_the_most_telling_failing_condition_explains_an_error() -> None:
    # As the planner's public `failed` event: Schedulable before ChildSpecApplied, whatever
    # their order on the status; a False condition of no known kind still explains.
    error = {
        "status": {
            "status": "ERROR",
            "conditions": [
                condition("ChildSpecApplied", "False", "ApplyFailed", "Job train: refused"),
                condition("Schedulable", "False", "WrongQueueNamespace", "queue research: no"),
            ],
        }
    }
    assert failure_reason(error) == " (WrongQueueNamespace: queue research: no)"
    other = {"status": {"status": "ERROR", "conditions": [condition("Custom", "False", "X", "y")]}}
    assert failure_reason(other) == " (X: y)"
