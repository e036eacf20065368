"""A workload the cluster lacks is "nothing to show", exit 1 as the docs say, in ``status``,
``delete`` and ``logs``; 2 stays for a cluster that cannot be reached or refuses (decision
0141). ``kaiwo events explain`` of a workload the store lacks: ``test_events_command``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from kaiwo_cli.main import app
from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kubefake import FakeKubeServer


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


async def kaiwo(tmp_path: Path, kubeconfig: Path, *arguments: str) -> Result:
    env = {"KAIWO_STATE": str(tmp_path / "no-stack"), "KAIWOCONFIG": str(tmp_path / "none")}
    command = [*arguments, "--kubeconfig", str(kubeconfig)]
    return await asyncio.to_thread(CliRunner().invoke, app, command, env=env)


@pytest.mark.parametrize("command", ["status", "delete", "logs"])
async def test_a_workload_the_cluster_lacks_is_nothing_to_show(
    tmp_path: Path, cluster: Any, command: str
) -> None:
    server, _kube = cluster

    result = await kaiwo(tmp_path, server.kubeconfig_path, command, "ml-team/nope")

    assert result.exit_code == 1, result.output
    assert result.stderr == f"kaiwo {command}: no KaiwoJob or KaiwoService ml-team/nope\n"


async def test_logs_of_a_workload_with_no_pods_yet_is_nothing_to_show(
    tmp_path: Path, cluster: Any
) -> None:
    server, kube = cluster
    await kube.create(
        {
            "apiVersion": "kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoJob",
            "metadata": {"name": "train", "namespace": "ml-team"},
            "spec": {"image": "busybox", "entrypoint": "echo hi"},
        },
        field_manager="test",
    )

    result = await kaiwo(tmp_path, server.kubeconfig_path, "logs", "ml-team/train")

    assert result.exit_code == 1, result.output
    assert result.stderr == "kaiwo logs: KaiwoJob ml-team/train has no pods yet (phase NEW)\n"


async def test_an_unreachable_cluster_is_still_2(tmp_path: Path, cluster: Any) -> None:
    server, _kube = cluster
    kubeconfig = tmp_path / "gone"
    kubeconfig.write_text(server.kubeconfig_path.read_text())
    await server.stop()

    result = await kaiwo(tmp_path, kubeconfig, "status", "ml-team/nope")

    assert result.exit_code == 2, result.output


def workload(kind: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "ml-team"},
        "spec": {"image": "busybox"},
    }


@pytest.mark.parametrize("command", ["status", "delete", "logs"])
async def test_a_job_and_a_service_of_one_name_are_told_apart_by_their_kind_never_guessed(
    tmp_path: Path, cluster: Any, command: str
) -> None:
    # Train as KaiwoJob llama, serve as KaiwoService llama: "kaiwo delete ml-team/llama" must
    # not pick one (it picked the job); upstream's <job|service>/<name> says which.
    server, kube = cluster
    for kind in ("KaiwoJob", "KaiwoService"):
        await kube.create(workload(kind, "llama"), field_manager="test")

    result = await kaiwo(tmp_path, server.kubeconfig_path, command, "ml-team/llama")

    assert result.exit_code == 1, result.output
    assert result.stderr == (
        f"kaiwo {command}: both a KaiwoJob and a KaiwoService ml-team/llama exist: say which, "
        "as job/ml-team/llama or service/ml-team/llama\n"
    )


async def test_a_kind_before_the_reference_picks_the_workload(tmp_path: Path, cluster: Any) -> None:
    server, kube = cluster
    for kind in ("KaiwoJob", "KaiwoService"):
        await kube.create(workload(kind, "llama"), field_manager="test")
    kubeconfig = server.kubeconfig_path

    deleted = await kaiwo(tmp_path, kubeconfig, "delete", "service/ml-team/llama")
    assert deleted.exit_code == 0, deleted.output
    assert deleted.output == "kaiwoservice.kaiwo.silogen.ai/llama deleted from ml-team\n"
    # Only the service went; the job is reached by its kind, by -n, and now alone by name.
    shown = await kaiwo(tmp_path, kubeconfig, "status", "job/llama", "-n", "ml-team", "-o", "name")
    assert (shown.exit_code, shown.output) == (0, "kaiwojob.kaiwo.silogen.ai/llama\n")
    alone = await kaiwo(tmp_path, kubeconfig, "status", "ml-team/llama", "-o", "name")
    assert (alone.exit_code, alone.output) == (0, "kaiwojob.kaiwo.silogen.ai/llama\n")
    missing = await kaiwo(tmp_path, kubeconfig, "status", "KaiwoService/ml-team/llama")
    assert missing.exit_code == 1
    assert missing.stderr == "kaiwo status: no KaiwoService ml-team/llama\n"


async def test_upstreams_status_of_queues_or_nodes_says_where_they_are(
    tmp_path: Path, cluster: Any
) -> None:
    server, _kube = cluster

    result = await kaiwo(tmp_path, server.kubeconfig_path, "status", "ml-team/queues")

    assert result.exit_code == 1
    assert result.stderr == (
        "kaiwo status: no KaiwoJob or KaiwoService ml-team/queues (the queues: kaiwo queues)\n"
    )
