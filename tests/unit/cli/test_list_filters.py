"""``kaiwo list --kind`` and ``--status`` take what they say and refuse the rest, naming the
flag (exit 2), instead of matching nothing and printing "No workloads found" (decision 0240)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from kaiwo_cli.commands.options import WORKLOAD_PHASES
from kaiwo_cli.main import app
from kaiwo_contracts.crds.kaiwo_v1alpha1.workload_status import WorkloadStatus
from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kubefake import FakeKubeServer


@pytest.fixture
async def kubeconfig(tmp_path: Path) -> AsyncIterator[Path]:
    """A cluster holding one KaiwoJob ml-team/train (phase NEW) and no KaiwoService."""
    async with FakeKubeServer(kubeconfig_path=tmp_path / "kubeconfig") as server:
        for crd in custom_resource_definitions(SERVED_KINDS):
            server.store.register_crd(crd)
        async with await KubernetesAsyncioAdapter.from_kubeconfig(server.kubeconfig_path) as kube:
            await kube.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-team"}}
            )
            await kube.create(
                {
                    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
                    "kind": "KaiwoJob",
                    "metadata": {"name": "train", "namespace": "ml-team"},
                    "spec": {"image": "busybox", "entrypoint": "echo hi", "user": "alice"},
                },
                field_manager="test",
            )
        yield server.kubeconfig_path


async def kaiwo_list(tmp_path: Path, kubeconfig: Path, *arguments: str) -> Result:
    env = {"KAIWO_STATE": str(tmp_path / "no-stack"), "KAIWOCONFIG": str(tmp_path / "none")}
    command = ["list", "-o", "name", *arguments, "--kubeconfig", str(kubeconfig)]
    return await asyncio.to_thread(CliRunner().invoke, app, command, env=env)


@pytest.mark.parametrize("kind", ["job", "KaiwoJob", "kaiwojob", "JOB"])
async def test_kind_takes_the_kind_in_any_case_and_upstreams_job(
    tmp_path: Path, kubeconfig: Path, kind: str
) -> None:
    result = await kaiwo_list(tmp_path, kubeconfig, "--kind", kind)

    assert result.exit_code == 0, result.output
    assert result.stdout == "kaiwojob.kaiwo.silogen.ai/train\n"


async def test_kind_service_lists_no_job(tmp_path: Path, kubeconfig: Path) -> None:
    result = await kaiwo_list(tmp_path, kubeconfig, "--kind", "service")

    assert result.exit_code == 0, result.output
    assert result.stdout == ""  # no names, no line (kubectl get -o name likewise)
    assert result.stderr == "No workloads found.\n"


async def test_a_kind_that_is_none_is_refused_naming_the_flag(
    tmp_path: Path, kubeconfig: Path
) -> None:
    result = await kaiwo_list(tmp_path, kubeconfig, "--kind", "jobs")

    assert result.exit_code == 2, result.output
    assert (
        "Error: Invalid value for '--kind': 'jobs' is not KaiwoJob or KaiwoService "
        "(or job, service)\n"
    ) in result.stderr


async def test_a_phase_in_any_case_is_taken(tmp_path: Path, kubeconfig: Path) -> None:
    result = await kaiwo_list(tmp_path, kubeconfig, "--status", "new")

    assert result.exit_code == 0, result.output
    assert result.stdout == "kaiwojob.kaiwo.silogen.ai/train\n"


async def test_a_status_that_is_no_phase_is_refused_naming_the_flag(
    tmp_path: Path, kubeconfig: Path
) -> None:
    result = await kaiwo_list(tmp_path, kubeconfig, "--status", "RUNING")

    assert result.exit_code == 2, result.output
    assert (
        "Error: Invalid value for '--status': 'RUNING' is not a phase (NEW, DOWNLOADING, "
        "PENDING, STARTING, READY, RUNNING, COMPLETE, ERROR, FAILED, TERMINATING, TERMINATED)\n"
    ) in result.stderr


def test_the_phases_are_the_operators() -> None:
    assert {*WORKLOAD_PHASES} == {status.value or "NEW" for status in WorkloadStatus}
