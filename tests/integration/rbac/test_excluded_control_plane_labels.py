"""``excludeMasterNodesFromNodePools`` turned on at runtime (decision 0224), on a real API
server: the whole operator runs as ``kaiwo up`` runs it, each service as its own ServiceAccount
(deploy/k8s/base/rbac.yaml) and the executor under its admission policies
(deploy/k8s/base/admission-policy.yaml), as in tests/integration/rbac/test_least_privilege.py.

A GPU control-plane node and a GPU worker; the setting off, ``dynamicallyUpdateDefaultClusterQueue``
on, so both nodes are in the discovered pool and get its labels. The admin labels the control
plane ``team=infra`` and relabels its ``kaiwo/gpu-model`` with ``kubectl label --overwrite``
(the label is then theirs, by the real API server's ``managedFields``). Turned on, the setting
must take the operator's ``kaiwo/nodepool`` and ``kaiwo/worker`` off the control plane,
through the executor's own identity and the nodes' policy, and leave the admin's labels, the
topology labels and the worker's labels alone; then the executor writes the node no more.
Before, the control plane kept every pool label: Kueue's flavor still selected it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import pytest
from kaiwo_cli.stack.local import LocalStack, StackOptions
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import SERVICE_ENV, Pending, eventually
from tests.integration.rbac.service_accounts import (
    rbac_installed,
    refusal_in_force,
    service_kubeconfig,
    service_user,
)
from tests.integration.rbac.test_least_privilege import forget_kaiwo_config, forget_singletons
from tests.real_cluster import RealCluster

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow, pytest.mark.timeout(300)]

SERVICES: Final = ("watcher", "planner", "executor", "recorder")
CONTROL_PLANE: Final = "excl-control-plane"
WORKER: Final = "excl-worker"
POOL: Final = "amd-mi300x-8gpu-115core-921gi"
"""Both nodes: 8 MI300X, 128 cores and 1 TiB (90 % of each, as the pool's name says)."""
TOPOLOGY: Final = {"kaiwo/topology-block": "block-a", "kaiwo/topology-rack": "rack-a"}
POOL_LABELS: Final = {
    "kaiwo/nodepool": POOL,
    "kaiwo/worker": "true",
    "kaiwo/gpu-model": "mi300x",
    **TOPOLOGY,
}
ADMINS_MODEL: Final = "mi300x-reserved"
STEP: Final = 90.0
QUIET_SECONDS: Final = 6.0


def kaiwo_config(*, exclude: bool) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": actors.KAIWO_CONFIG},
        "spec": {
            "dynamicallyUpdateDefaultClusterQueue": True,
            "nodes": {"excludeMasterNodesFromNodePools": exclude},
        },
    }


async def register(kube: KubernetesAsyncioAdapter, name: str, *, control_plane: bool) -> None:
    """The node as its kubelet registers it (the control-plane role label as kubeadm sets it)."""
    node = actors.GpuNode(name)
    manifest = node.manifest(not_ready_taint=False)
    if control_plane:
        manifest["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] = ""
    await kube.create(manifest, field_manager="kubelet")
    await kube.patch_status(
        resources.NODE, name, node.status(), field_manager="kubelet", method="merge"
    )


async def admin_labels(kube: KubernetesAsyncioAdapter, name: str, labels: dict[str, str]) -> None:
    """``kubectl label --overwrite node <name> ...``."""
    patch = {"metadata": {"labels": labels}}
    await kube.merge_patch(resources.NODE, name, patch, field_manager="kubectl-label")


def kaiwo_labels(node: dict[str, Any]) -> dict[str, str]:
    labels = node["metadata"].get("labels") or {}
    return {key: value for key, value in labels.items() if key.startswith("kaiwo/")}


def labels_owned_by(node: dict[str, Any], manager: str) -> set[str]:
    owned: set[str] = set()
    for entry in node["metadata"].get("managedFields") or ():
        if entry.get("manager") == manager:
            labels = entry.get("fieldsV1", {}).get("f:metadata", {}).get("f:labels", {})
            owned.update(key.removeprefix("f:") for key in labels)
    return owned


async def labelled(kube: KubernetesAsyncioAdapter, name: str, wanted: dict[str, str]) -> Any:
    async def check() -> dict[str, Any] | Pending:
        node = await kube.get(resources.NODE, name)
        found = kaiwo_labels(node)
        return node if found == wanted else Pending(f"{name}: {found}")

    return await eventually(check, what=f"{name} labelled {wanted}", within=STEP)


async def service_kubeconfigs(real: RealCluster, directory: Path) -> dict[str, Path]:
    await asyncio.to_thread(directory.mkdir, parents=True)
    return {name: await service_kubeconfig(real.kubeconfig, name, directory) for name in SERVICES}


async def nodes_policy_in_force(
    admin: KubernetesAsyncioAdapter, executor: KubernetesAsyncioAdapter
) -> None:
    """Until the API server enforces the nodes' policy (its informer picks up new bindings a
    moment after they are made): the admin's label, removed as the executor, is refused by
    it; removed before that, it is put back and asked again."""
    removal = {"metadata": {"labels": {"team": None}}}
    await refusal_in_force(
        lambda: executor.merge_patch(resources.NODE, CONTROL_PLANE, removal, field_manager="kaiwo"),
        lambda: admin_labels(admin, CONTROL_PLANE, {"team": "infra"}),
        refused_by="kaiwo-executor-nodes",
        what="the nodes' admission policy in force",
    )


@contextlib.asynccontextmanager
async def operator_as_its_service_accounts(
    real: RealCluster, state_dir: Path, kubeconfigs: dict[str, Path]
) -> AsyncIterator[None]:
    options = StackOptions(
        state_dir=state_dir,
        kubeconfig=real.kubeconfig,  # kaiwo up's own look at the cluster; each service has its own
        scheduler="existing",
        seed_fake_cluster=False,
        service_env=SERVICE_ENV,
        env_by_service={
            name: {"KAIWO_KUBECONFIG": str(path)} for name, path in kubeconfigs.items()
        },
        ready_timeout=90.0,
    )
    async with LocalStack(options):
        yield


async def test_turned_on_the_control_planes_pool_labels_go_and_the_admins_stay(
    real_cluster: RealCluster, tmp_path: Path
) -> None:
    audit = real_cluster.audit_log
    if audit is None:
        pytest.skip("needs the audit log of the session's own control plane")
    async with contextlib.AsyncExitStack() as exits:
        kube = await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig)
        exits.push_async_callback(kube.close)
        await exits.enter_async_context(rbac_installed(kube))
        # After the operator stopped (callbacks run last first): the nodes and the singletons.
        exits.push_async_callback(forget_kaiwo_config, kube)
        exits.push_async_callback(actors.remove_queue_config, kube)
        for name in (CONTROL_PLANE, WORKER):
            exits.push_async_callback(actors.remove_node, kube, name)
        await forget_singletons(kube)
        await register(kube, CONTROL_PLANE, control_plane=True)
        await register(kube, WORKER, control_plane=False)
        await admin_labels(kube, CONTROL_PLANE, {"team": "infra"})
        await exits.enter_async_context(actors.node_heartbeat(kube))
        # The nodes' policy reads the KaiwoConfig (decision 0211): it is there first.
        await kube.create(kaiwo_config(exclude=False))
        await kube.create(
            {
                "apiVersion": actors.KAIWO_API,
                "kind": "KaiwoQueueConfig",
                "metadata": {"name": actors.QUEUE_CONFIG},
                "spec": {},
            }
        )
        kubeconfigs = await service_kubeconfigs(real_cluster, tmp_path / "kubeconfigs")
        executor = await KubernetesAsyncioAdapter.from_kubeconfig(kubeconfigs["executor"])
        exits.push_async_callback(executor.close)
        await nodes_policy_in_force(kube, executor)
        await exits.enter_async_context(
            operator_as_its_service_accounts(real_cluster, tmp_path / "kaiwo", kubeconfigs)
        )

        # The setting off: the control plane is in the pool like the worker.
        labelled_off = await labelled(kube, CONTROL_PLANE, POOL_LABELS)
        assert {"kaiwo/nodepool", "kaiwo/worker"} <= labels_owned_by(labelled_off, "kaiwo")
        await labelled(kube, WORKER, POOL_LABELS)
        # The admin's relabel makes kaiwo/gpu-model theirs; the operator leaves it so.
        await admin_labels(kube, CONTROL_PLANE, {"kaiwo/gpu-model": ADMINS_MODEL})

        mark = audit.mark()
        await kube.merge_patch(
            resources.KAIWO_CONFIG,
            actors.KAIWO_CONFIG,
            {"spec": {"nodes": {"excludeMasterNodesFromNodePools": True}}},
            field_manager="cluster-admin",
        )
        excluded = await labelled(
            kube, CONTROL_PLANE, {"kaiwo/gpu-model": ADMINS_MODEL, **TOPOLOGY}
        )
        assert excluded["metadata"]["labels"]["team"] == "infra"
        assert excluded["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] == ""
        assert not {"kaiwo/nodepool", "kaiwo/worker"} & labels_owned_by(excluded, "kaiwo")
        assert kaiwo_labels(await kube.get(resources.NODE, WORKER)) == POOL_LABELS

        # Settled: the executor writes the nodes no more (level-triggered).
        await asyncio.sleep(QUIET_SECONDS)
        node_writes = [
            r
            for r in audit.events(since=mark)
            if r.user == service_user("executor") and r.resource == "nodes"
        ]
        # The removal went through the nodes' policy as the executor: one patch answered 200
        # (a 409 is a node changed between read and patch, read and patched again).
        assert [(r.verb, r.name) for r in node_writes if r.code == 200] == [
            ("patch", CONTROL_PLANE)
        ], node_writes
        assert {r.code for r in node_writes} <= {200, 409}, node_writes
