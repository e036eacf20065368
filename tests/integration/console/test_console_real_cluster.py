"""Who may read what in the console, answered by a real API server (decision 0051).

The console authenticates as its own ServiceAccount ``kaiwo-console``, bound to the role
deploy/k8s/base/rbac.yaml gives it. Tenants: ServiceAccount ``alice`` in namespace A with a
Role granting ``list`` on ``kaiwojobs.kaiwo.silogen.ai`` there; ``ops`` in namespace B with a
ClusterRole granting ``list`` on nodes. What must hold: alice sees A and not B, and not the
nodes; ops sees the nodes and no namespace's workloads; the console's own account may ask
the two reviews and cannot read a KaiwoJob or a node itself.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio
from kaiwo_console.metrics import ConsoleMetrics
from kaiwo_contracts.access import NODES_ACCESS, WORKLOADS_ACCESS, ResourceAccess
from kaiwo_kube import KubeError, NotFound, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_runtime.kubernetes_access import AccessSettings, KubernetesAccess

from tests.integration.gateway.test_gateway_access_real_cluster import (
    _delete_namespace,
    issue_token,
    operator_namespace_ready,
)
from tests.integration.rbac.service_accounts import (
    rbac_installed,
    service_kubeconfig,
)
from tests.real_cluster import RealCluster

pytestmark = [pytest.mark.k8s, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]


@dataclass
class Readers:
    console: KubernetesAsyncioAdapter
    team_a: str
    team_b: str
    tokens: dict[str, str]

    def access(self, resource: ResourceAccess) -> KubernetesAccess:
        return KubernetesAccess(
            self.console, AccessSettings(resource=resource), metrics=ConsoleMetrics()
        )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def readers(
    real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Readers]:
    directory = tmp_path_factory.mktemp("console-access")
    suffix = uuid.uuid4().hex[:6]
    team_a, team_b = f"co-team-a-{suffix}", f"co-team-b-{suffix}"
    node_reader = f"co-node-reader-{suffix}"
    admin = await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig)
    async with contextlib.AsyncExitStack() as exits:
        exits.push_async_callback(admin.close)
        await operator_namespace_ready(admin)
        await exits.enter_async_context(rbac_installed(admin))
        for namespace, account in ((team_a, "alice"), (team_b, "ops")):
            await admin.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
            exits.push_async_callback(_delete_namespace, admin, namespace)
            await admin.create(
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": account, "namespace": namespace},
                }
            )
        await admin.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "workload-reader", "namespace": team_a},
                "rules": [
                    {
                        "apiGroups": ["kaiwo.silogen.ai"],
                        "resources": ["kaiwojobs"],
                        "verbs": ["get", "list"],
                    }
                ],
            }
        )
        await admin.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "alice-reads", "namespace": team_a},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "workload-reader",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": team_a}],
            }
        )
        await admin.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": node_reader},
                "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}],
            }
        )
        exits.push_async_callback(_delete, admin, "ClusterRole", node_reader)
        await admin.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": node_reader},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": node_reader,
                },
                "subjects": [{"kind": "ServiceAccount", "name": "ops", "namespace": team_b}],
            }
        )
        exits.push_async_callback(_delete, admin, "ClusterRoleBinding", node_reader)
        kubeconfig = await service_kubeconfig(real_cluster.kubeconfig, "console", directory)
        console = await KubernetesAsyncioAdapter.from_kubeconfig(kubeconfig)
        exits.push_async_callback(console.close)
        yield Readers(
            console=console,
            team_a=team_a,
            team_b=team_b,
            tokens={
                "alice": await issue_token(real_cluster.kubeconfig, team_a, "alice"),
                "ops": await issue_token(real_cluster.kubeconfig, team_b, "ops"),
            },
        )


async def _delete(admin: KubernetesAsyncioAdapter, kind: str, name: str) -> None:
    """A cluster-scoped RBAC object (ClusterRole, ClusterRoleBinding) this module made."""
    resource = resources.ResourceType(
        group="rbac.authorization.k8s.io",
        version="v1",
        plural=f"{kind.lower()}s",
        kind=kind,
        namespaced=False,
    )
    with contextlib.suppress(NotFound):
        await admin.delete(resource, name)


async def test_a_reader_sees_the_namespaces_they_may_list_kaiwojobs_in(readers: Readers) -> None:
    workloads = readers.access(WORKLOADS_ACCESS)

    alice = await workloads.authenticate(readers.tokens["alice"])
    ops = await workloads.authenticate(readers.tokens["ops"])

    assert alice is not None and ops is not None
    assert await workloads.may_use(alice, readers.team_a)
    assert not await workloads.may_use(alice, readers.team_b)
    assert not await workloads.may_use(ops, readers.team_a)
    assert not await workloads.may_use(ops, readers.team_b)


async def test_the_gpu_nodes_page_needs_the_right_to_list_nodes(readers: Readers) -> None:
    nodes = readers.access(NODES_ACCESS)

    alice = await nodes.authenticate(readers.tokens["alice"])
    ops = await nodes.authenticate(readers.tokens["ops"])

    assert alice is not None and ops is not None
    assert not await nodes.may_use(alice, "")
    assert await nodes.may_use(ops, "")


async def test_the_console_itself_reads_nothing_in_the_cluster(readers: Readers) -> None:
    for resource, namespace in ((resources.KAIWO_JOB, readers.team_a), (resources.NODE, None)):
        with pytest.raises(KubeError):
            await readers.console.list(resource, namespace=namespace)
