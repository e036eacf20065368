"""What ``kaiwo status`` and ``kaiwo queues`` read for their estimates, answered by a real API
server (decision 0055): a reader who may list Kueue's objects and the workloads in every
namespace gets all of them (what waits ahead in other namespaces counts); a tenant who may
list them only in their namespace is refused the cluster-wide lists (403) and gets their
namespace's, and the CLI says the estimate counts only those."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from click.testing import CliRunner
from kaiwo_cli.cluster_access import queue_world
from kaiwo_cli.main import app
from kaiwo_kube import NotFound, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter

from tests.integration.gateway.test_gateway_access_real_cluster import (
    _delete_namespace,
    issue_token,
)
from tests.real_cluster import RealCluster

pytestmark = [pytest.mark.k8s, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]

KUEUE = "kueue.x-k8s.io/v1beta1"


@dataclass
class Cluster:
    admin: KubernetesAsyncioAdapter
    tenant_kubeconfig: Path
    mine: str
    theirs: str


def rbac(kind: str, name: str, namespace: str | None = None, **body: Any) -> dict[str, Any]:
    metadata = {"name": name} | ({"namespace": namespace} if namespace else {})
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": metadata,
        **body,
    }


def kueue_workload(name: str, namespace: str) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "busybox",
        "resources": {"requests": {"amd.com/gpu": "8"}, "limits": {"amd.com/gpu": "8"}},
    }
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "queueName": "research",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
                }
            ],
        },
    }


async def token_kubeconfig(admin_kubeconfig: Path, token: str, path: Path) -> Path:
    admin = yaml.safe_load(await asyncio.to_thread(admin_kubeconfig.read_text))
    [context] = [c for c in admin["contexts"] if c["name"] == admin["current-context"]]
    [cluster] = [c for c in admin["clusters"] if c["name"] == context["context"]["cluster"]]
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": "tenant", "user": {"token": token}}],
        "contexts": [{"name": "tenant", "context": {"cluster": cluster["name"], "user": "tenant"}}],
        "current-context": "tenant",
    }
    await asyncio.to_thread(path.write_text, yaml.safe_dump(document, sort_keys=False))
    return path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(
    real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Cluster]:
    suffix = uuid.uuid4().hex[:6]
    mine, theirs = f"eta-mine-{suffix}", f"eta-theirs-{suffix}"
    queue_reader = f"eta-queue-reader-{suffix}"
    admin = await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig)
    async with contextlib.AsyncExitStack() as exits:
        exits.push_async_callback(admin.close)
        for namespace in (mine, theirs):
            await admin.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
            exits.push_async_callback(_delete_namespace, admin, namespace)
            await admin.create(
                {
                    "apiVersion": KUEUE,
                    "kind": "LocalQueue",
                    "metadata": {"name": "research", "namespace": namespace},
                    "spec": {"clusterQueue": "research"},
                }
            )
            await admin.create(kueue_workload(f"waiting-in-{namespace}", namespace))
        await admin.create(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "tenant", "namespace": mine},
            }
        )
        await admin.create(
            rbac(
                "Role",
                "queue-reader",
                mine,
                rules=[
                    {
                        "apiGroups": ["kueue.x-k8s.io"],
                        "resources": ["workloads", "localqueues"],
                        "verbs": ["list"],
                    },
                    {
                        "apiGroups": ["kaiwo.silogen.ai"],
                        "resources": ["kaiwojobs", "kaiwoservices"],
                        "verbs": ["list"],
                    },
                ],
            )
        )
        subjects = [{"kind": "ServiceAccount", "name": "tenant", "namespace": mine}]
        await admin.create(
            rbac(
                "RoleBinding",
                "tenant-reads-queues",
                mine,
                roleRef={
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "queue-reader",
                },
                subjects=subjects,
            )
        )
        await admin.create(
            rbac(
                "ClusterRole",
                queue_reader,
                rules=[
                    {
                        "apiGroups": ["kueue.x-k8s.io"],
                        "resources": ["clusterqueues"],
                        "verbs": ["list"],
                    }
                ],
            )
        )
        exits.push_async_callback(_delete_cluster_rbac, admin, queue_reader)
        await admin.create(
            rbac(
                "ClusterRoleBinding",
                queue_reader,
                roleRef={
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": queue_reader,
                },
                subjects=subjects,
            )
        )
        token = await issue_token(real_cluster.kubeconfig, mine, "tenant")
        path = await token_kubeconfig(
            real_cluster.kubeconfig, token, tmp_path_factory.mktemp("eta") / "tenant.kubeconfig"
        )
        yield Cluster(admin=admin, tenant_kubeconfig=path, mine=mine, theirs=theirs)


async def _delete_cluster_rbac(admin: KubernetesAsyncioAdapter, name: str) -> None:
    for kind in ("ClusterRoleBinding", "ClusterRole"):
        resource = resources.ResourceType(
            group="rbac.authorization.k8s.io",
            version="v1",
            plural=f"{kind.lower()}s",
            kind=kind,
            namespaced=False,
        )
        with contextlib.suppress(NotFound):
            await admin.delete(resource, name)


def namespaces_of(objects: list[dict[str, Any]]) -> set[str]:
    return {str(o["metadata"].get("namespace")) for o in objects}


async def test_a_reader_of_every_namespace_counts_what_waits_in_all_of_them(
    cluster: Cluster,
) -> None:
    world = await queue_world(cluster.admin, namespace=cluster.mine)

    assert world.whole
    assert {cluster.mine, cluster.theirs} <= namespaces_of(world.kueue_workloads)


async def test_a_tenant_refused_the_cluster_wide_lists_counts_its_own_namespace(
    cluster: Cluster,
) -> None:
    async with await KubernetesAsyncioAdapter.from_kubeconfig(cluster.tenant_kubeconfig) as kube:
        world = await queue_world(kube, namespace=cluster.mine)

    assert not world.whole
    assert namespaces_of(world.kueue_workloads) == {cluster.mine}
    assert namespaces_of(world.local_queues) == {cluster.mine}


async def test_kaiwo_queues_says_the_tenants_estimate_counts_its_namespace_only(
    cluster: Cluster,
) -> None:
    env = {**os.environ, "COLUMNS": "250"}
    arguments = ["queues", "-n", cluster.mine, "--kubeconfig", str(cluster.tenant_kubeconfig)]

    done = await asyncio.to_thread(CliRunner().invoke, app, arguments, env=env)

    assert done.exit_code == 0, done.output
    assert f"Workload/waiting-in-{cluster.mine}" in done.output
    assert f"waiting-in-{cluster.theirs}" not in done.output
    assert "estimated from the workloads of this namespace only" in done.output
