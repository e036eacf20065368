"""``kaiwo nodes`` on a cluster without GPU nodes says so (it printed two empty tables)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from click.testing import CliRunner
from kaiwo_cli.main import app
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kubefake import FakeKubeServer


async def test_a_cluster_without_gpu_nodes_is_said_to_have_none(tmp_path: Path) -> None:
    async with FakeKubeServer(kubeconfig_path=tmp_path / "kubeconfig") as server:
        async with await KubernetesAsyncioAdapter.from_kubeconfig(server.kubeconfig_path) as kube:
            cpu_only = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "cpu-1"},
                "status": {"allocatable": {"cpu": "8", "memory": "32Gi"}},
            }
            await kube.create(cpu_only)
        env = {"KAIWO_STATE": str(tmp_path / "no-stack"), "KAIWOCONFIG": str(tmp_path / "none")}
        kubeconfig = str(server.kubeconfig_path)

        def kaiwo_nodes(*arguments: str) -> tuple[int, str]:
            result = CliRunner().invoke(
                app, ["nodes", *arguments, "--kubeconfig", kubeconfig], env=env
            )
            return result.exit_code, result.output

        assert await asyncio.to_thread(kaiwo_nodes) == (
            0,
            "No GPU nodes among the 1 nodes\n",
        )
        assert await asyncio.to_thread(kaiwo_nodes, "amd") == (
            0,
            "No amd GPU nodes among the 1 nodes\n",
        )
