"""``kaiwo scheduler install|name`` reach the cluster every other command reaches: the stack's
of ``kaiwo up`` (its ``stack.json``) when no ``--kubeconfig`` is given, not ``~/.kube/config``
(decision 0240)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from kaiwo_cli.main import app
from kaiwo_cli.stack.state import StackState
from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kubefake import FakeKubeServer


@pytest.fixture
async def stack_cluster(tmp_path: Path) -> AsyncIterator[tuple[Path, KubernetesAsyncioAdapter]]:
    """A fake cluster, and a state directory whose ``stack.json`` names its kubeconfig."""
    async with FakeKubeServer(kubeconfig_path=tmp_path / "cluster" / "kubeconfig") as server:
        for crd in custom_resource_definitions(SERVED_KINDS):
            server.store.register_crd(crd)
        state_dir = tmp_path / "stack"
        StackState(
            nats_url="nats://127.0.0.1:4222",
            cli_credentials_file=state_dir / "credentials" / "cli.nk",
            event_store_url=f"sqlite:///{state_dir / 'events.db'}",
            kubeconfig=server.kubeconfig_path,
        ).write(state_dir)
        async with await KubernetesAsyncioAdapter.from_kubeconfig(server.kubeconfig_path) as kube:
            yield state_dir, kube


async def test_scheduler_name_changes_the_stacks_cluster_found_by_kaiwo_state(
    tmp_path: Path, stack_cluster: tuple[Path, KubernetesAsyncioAdapter]
) -> None:
    state_dir, kube = stack_cluster
    # Where the client library would look without the stack: nothing there.
    env = {"KAIWO_STATE": str(state_dir), "KUBECONFIG": str(tmp_path / "no-kubeconfig")}

    result = await asyncio.to_thread(
        CliRunner().invoke, app, ["scheduler", "name", "default-scheduler"], env=env
    )

    assert result.exit_code == 0, result.output
    assert result.stdout == "KaiwoConfig kaiwo names default-scheduler\n"
    config = await kube.get(resources.KAIWO_CONFIG, "kaiwo")
    assert config["spec"]["scheduling"]["kubeSchedulerName"] == "default-scheduler"


async def test_scheduler_name_takes_the_state_directory_as_a_flag(
    tmp_path: Path, stack_cluster: tuple[Path, KubernetesAsyncioAdapter]
) -> None:
    state_dir, kube = stack_cluster
    env = {"KAIWO_STATE": str(tmp_path / "elsewhere"), "KUBECONFIG": str(tmp_path / "none")}

    result = await asyncio.to_thread(
        CliRunner().invoke,
        app,
        ["scheduler", "name", "my-scheduler", "--state", str(state_dir)],
        env=env,
    )

    assert result.exit_code == 0, result.output
    config = await kube.get(resources.KAIWO_CONFIG, "kaiwo")
    assert config["spec"]["scheduling"]["kubeSchedulerName"] == "my-scheduler"
