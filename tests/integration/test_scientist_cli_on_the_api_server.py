"""What the scientist's commands meet on the real API server that the fake one does not show.

A scientist with ``edit`` in their namespace and ``kaiwo-workload-editor``
(deploy/k8s/base/user-roles.yaml; docs/operations.md's user): RBAC refuses them Kueue
Workloads, RayJobs, AppWrappers and every list across namespaces (403). ``submit --wait``,
``status`` and ``list`` go on with what they may read and name what they could not, instead of
exiting 2 once the workload is created (decision 0138). The fake API server knows no RBAC.

Events: the API server lists them by name and stamps them to the second, so ``status`` orders
those of one second by the order they were written in.

No operator runs: the test writes the workload's status and Events as the operator would.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from click.testing import CliRunner
from kaiwo_cli.main import app
from kaiwo_kube import KubeError, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter

from tests.integration.gateway.test_gateway_access_real_cluster import (
    _delete_namespace,
    issue_token,
)
from tests.integration.pipeline.cluster_actors import get_or_none
from tests.real_cluster import REPO_ROOT, RealCluster
from tests.waiting import Pending, eventually

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(240)]

USER_ROLES: Final = REPO_ROOT / "deploy" / "k8s" / "base" / "user-roles.yaml"
NAME: Final = "train"


def rbac(kind: str, name: str, namespace: str, **body: Any) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        **body,
    }


def user_role_rules(name: str) -> list[dict[str, Any]]:
    """The rules of one of the deployment's user roles (aggregated to edit, or to view)."""
    [role] = [
        document
        for document in yaml.safe_load_all(USER_ROLES.read_text())
        if document["metadata"]["name"] == name
    ]
    return list(role["rules"])


def editor_rules() -> list[dict[str, Any]]:
    """The rules the deployment gives users who may create workloads (aggregated to edit)."""
    return user_role_rules("kaiwo-workload-editor")


KAIWO_USER_ROLES: Final = ("kaiwo-workload-editor", "kaiwo-workload-viewer")
"""What the deployment aggregates to ``edit``: the editor's rules, and the viewer's through
``view`` (which ``edit`` aggregates)."""


async def grant_edit(
    admin: KubernetesAsyncioAdapter, namespace: str, *, kaiwo_roles: bool = True
) -> None:
    """``edit`` and (unless told not) the rules the deployment aggregates to it in
    ``namespace`` only, to ServiceAccount ``scientist`` (the deployment's rules as Roles: a
    ClusterRole is shared by the session)."""
    await admin.create(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "scientist", "namespace": namespace},
        }
    )
    granted = [("ClusterRole", "edit")]
    for role in KAIWO_USER_ROLES if kaiwo_roles else ():
        await admin.create(rbac("Role", role, namespace, rules=user_role_rules(role)))
        granted.append(("Role", role))
    subjects = [{"kind": "ServiceAccount", "name": "scientist", "namespace": namespace}]
    for kind, role in granted:
        await admin.create(
            rbac(
                "RoleBinding",
                f"scientist-{role}",
                namespace,
                roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
                subjects=subjects,
            )
        )


async def scientist_kubeconfig(
    admin_kubeconfig: Path, token: str, namespace: str, path: Path
) -> Path:
    admin = yaml.safe_load(await asyncio.to_thread(admin_kubeconfig.read_text))
    [context] = [c for c in admin["contexts"] if c["name"] == admin["current-context"]]
    [cluster] = [c for c in admin["clusters"] if c["name"] == context["context"]["cluster"]]
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": "scientist", "user": {"token": token}}],
        "contexts": [
            {
                "name": "scientist",
                "context": {
                    "cluster": cluster["name"],
                    "user": "scientist",
                    "namespace": namespace,
                },
            }
        ],
        "current-context": "scientist",
    }
    await asyncio.to_thread(path.write_text, yaml.safe_dump(document, sort_keys=False))
    return path


async def kaiwo(*arguments: str, env: Mapping[str, str], stdin: str | None = None) -> Any:
    environment = {"COLUMNS": "200", **env}
    return await asyncio.to_thread(
        CliRunner().invoke, app, list(arguments), env=environment, input=stdin
    )


def job_in(namespace: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoJob",
            "metadata": {"name": NAME, "namespace": namespace},
            "spec": {
                "user": "alice@example.com",
                "clusterQueue": "research",
                "image": "busybox",
                "entrypoint": "echo hi",
            },
        }
    )


async def test_a_scientist_with_edit_in_their_namespace_submits_waits_and_inspects(
    real_cluster: RealCluster, tmp_path: Path
) -> None:
    namespace = f"scientist-{uuid.uuid4().hex[:6]}"
    admin = await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig)
    async with contextlib.AsyncExitStack() as exits:
        exits.push_async_callback(admin.close)
        await admin.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        exits.push_async_callback(_delete_namespace, admin, namespace)
        await grant_edit(admin, namespace)
        token = await issue_token(real_cluster.kubeconfig, namespace, "scientist")
        kubeconfig = await scientist_kubeconfig(
            real_cluster.kubeconfig, token, namespace, tmp_path / "scientist.kubeconfig"
        )
        scientist = await KubernetesAsyncioAdapter.from_kubeconfig(kubeconfig)
        exits.push_async_callback(scientist.close)

        async def granted() -> Any:
            try:  # the authorizer learns of new bindings through its informers
                return await scientist.list(resources.KAIWO_JOB, namespace=namespace)
            except KubeError as error:
                return Pending(str(error))

        await eventually(granted, what="the scientist may list KaiwoJobs")
        env = {
            "KAIWO_STATE": str(tmp_path / "no-stack"),
            "KAIWOCONFIG": str(tmp_path / "no-config"),
            "KUBECONFIG": str(kubeconfig),
        }

        submitted = asyncio.create_task(
            kaiwo(
                "submit", "-f", "-", "--wait", "--timeout", "120", env=env, stdin=job_in(namespace)
            )
        )
        await eventually(
            lambda: get_or_none(admin, resources.KAIWO_JOB, NAME, namespace=namespace),
            what="kaiwo submit creates the KaiwoJob",
        )
        # What the operator writes once its Job completed.
        await admin.patch_status(
            resources.KAIWO_JOB,
            NAME,
            {"status": "COMPLETE"},
            namespace=namespace,
            field_manager="kaiwo-status",
            method="merge",
        )
        result = await submitted

        assert result.exit_code == 0, result.output
        assert f"KaiwoJob {namespace}/{NAME}: COMPLETE" in result.output

        status = await kaiwo("status", NAME, env=env)
        assert status.exit_code == 0, status.output
        assert status.stdout.splitlines()[:4] == [
            f"KaiwoJob {namespace}/{NAME}",
            "Phase:     COMPLETE",
            "User:      alice@example.com",
            "Queue:     research",
        ]
        assert (
            "Children:\n"
            "  (none you may see yet)\n"
            "  (not shown: your credentials may not list RayJobs, RayServices, AppWrappers, "
            "HTTPRoutes)\n"
        ) in status.stdout

        listed = await kaiwo("list", env=env)
        assert listed.exit_code == 0, listed.output
        assert listed.stderr == (
            f"kaiwo list: you may not list every namespace; showing {namespace}, your "
            "context's namespace (-n for another)\n"
        )
        assert listed.stdout.splitlines()[1].split()[:6] == [
            namespace,
            "KaiwoJob",
            NAME,
            "alice@example.com",
            "research",
            "COMPLETE",
        ]


def core_event(name: str, reason: str, job: dict[str, Any]) -> dict[str, Any]:
    meta = job["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": "kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoJob",
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
        },
        "type": "Normal",
        "reason": reason,
        "message": reason,
        "firstTimestamp": "2026-01-01T12:00:00Z",
        "lastTimestamp": "2026-01-01T12:00:00Z",
        "count": 1,
        "source": {"component": "kaiwo-executor"},
    }


async def test_status_shows_the_events_of_one_second_in_the_order_they_were_written(
    real_cluster: RealCluster, tmp_path: Path
) -> None:
    namespace = f"events-{uuid.uuid4().hex[:6]}"
    admin = await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig)
    async with contextlib.AsyncExitStack() as exits:
        exits.push_async_callback(admin.close)
        await admin.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        exits.push_async_callback(_delete_namespace, admin, namespace)
        job = await admin.create(yaml.safe_load(job_in(namespace)))
        # Written first, named last: the server lists by name, the reverse of this.
        for name, reason in (("train.zz", "WorkloadPending"), ("train.aa", "WorkloadStarting")):
            await admin.create(core_event(name, reason, job))
        env = {"KAIWO_STATE": str(tmp_path / "no-stack"), "KAIWOCONFIG": str(tmp_path / "none")}

        status = await kaiwo(
            "status", f"{namespace}/{NAME}", "--kubeconfig", str(real_cluster.kubeconfig), env=env
        )

        assert status.exit_code == 0, status.output
        assert [line.split()[2] for line in status.stdout.split("Events:\n")[1].splitlines()] == [
            "REASON",
            "WorkloadPending",
            "WorkloadStarting",
        ]


@contextlib.asynccontextmanager
async def scientist_in_a_namespace(
    real_cluster: RealCluster, tmp_path: Path, *, kaiwo_roles: bool = True
) -> AsyncIterator[tuple[KubernetesAsyncioAdapter, str, dict[str, str]]]:
    """A namespace, its ``scientist`` bound to ``edit`` there (with the deployment's user
    roles unless told not), granted by now: the admin, the namespace and the CLI's env."""
    namespace = f"queues-{uuid.uuid4().hex[:6]}"
    admin = await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig)
    async with contextlib.AsyncExitStack() as exits:
        exits.push_async_callback(admin.close)
        await admin.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        exits.push_async_callback(_delete_namespace, admin, namespace)
        await grant_edit(admin, namespace, kaiwo_roles=kaiwo_roles)
        token = await issue_token(real_cluster.kubeconfig, namespace, "scientist")
        kubeconfig = await scientist_kubeconfig(
            real_cluster.kubeconfig, token, namespace, tmp_path / "scientist.kubeconfig"
        )
        scientist = await KubernetesAsyncioAdapter.from_kubeconfig(kubeconfig)
        exits.push_async_callback(scientist.close)
        # What only the last binding grants (the authorizer learns of bindings through
        # informers): the viewer's GpuWorkloads, else edit's Pods.
        last_granted = resources.GPU_WORKLOAD if kaiwo_roles else resources.POD

        async def granted() -> Any:
            try:
                return await scientist.list(last_granted, namespace=namespace)
            except KubeError as error:
                return Pending(str(error))

        await eventually(granted, what=f"the scientist may list {last_granted.plural}")
        yield (
            admin,
            namespace,
            {
                "KAIWO_STATE": str(tmp_path / "no-stack"),
                "KAIWOCONFIG": str(tmp_path / "no-config"),
                "KUBECONFIG": str(kubeconfig),
            },
        )


async def test_a_scientist_refused_cluster_queues_sees_the_local_queues_of_their_namespace(
    real_cluster: RealCluster, tmp_path: Path
) -> None:
    async with scientist_in_a_namespace(real_cluster, tmp_path) as (admin, namespace, env):
        await admin.create(
            {
                "apiVersion": resources.KUEUE_LOCAL_QUEUE.api_version,
                "kind": "LocalQueue",
                "metadata": {"name": "research", "namespace": namespace},
                "spec": {"clusterQueue": "research-gpus"},
            }
        )
        # What Kueue writes of a LocalQueue with one job running and two waiting.
        await admin.patch_status(
            resources.KUEUE_LOCAL_QUEUE,
            "research",
            {
                "pendingWorkloads": 2,
                "reservingWorkloads": 1,
                "admittedWorkloads": 1,
                "flavorUsage": [
                    {
                        "name": "mi300x",
                        "resources": [
                            {"name": "amd.com/gpu", "total": "4"},
                            {"name": "memory", "total": "256Gi"},
                        ],
                    }
                ],
            },
            namespace=namespace,
            field_manager="kueue-admission",
            method="merge",
        )

        shown = await kaiwo("queues", env=env)

        assert shown.exit_code == 0, shown.output
        assert shown.stderr == (
            "kaiwo queues: your credentials may not list ClusterQueues, so the cluster's "
            f"queues and quotas are not shown; showing the LocalQueues of {namespace}, your "
            "context's namespace (-n for another)\n"
        )
        gap = " " * (len(namespace) - len("NAMESPACE"))
        assert shown.stdout.splitlines() == [
            f"NAMESPACE{gap}   LOCALQUEUE   CLUSTERQUEUE    PENDING   RESERVING   ADMITTED   "
            "FLAVOR   RESOURCE      USED",
            f"{namespace}   research     research-gpus   2         1           1          "
            "mi300x   amd.com/gpu   4",
            # The queue's cells are blank on its next rows: 65 = 3 + 10 + 3 + 13 + 3 + 7 + 3
            # + 9 + 3 + 8 + 3, the columns and gaps up to FLAVOR.
            f"{' ' * len(namespace)}{' ' * 65}mi300x   memory        256Gi",
            "",
            "Pending workloads: (not shown: your credentials may not list Kueue Workloads)",
        ]

        elsewhere = await kaiwo("queues", "-n", "default", env=env)

        assert elsewhere.exit_code == 2, elsewhere.output
        assert "localqueues.kueue.x-k8s.io is forbidden" in elsewhere.stderr
        assert 'in the namespace "default"' in elsewhere.stderr


async def test_edit_alone_may_not_list_local_queues_and_queues_says_so(
    real_cluster: RealCluster, tmp_path: Path
) -> None:
    """``edit`` without the deployment's user roles: Kueue aggregates none of its roles to
    ``edit`` or ``view``, so LocalQueues are refused too, and that refusal is the answer."""
    async with scientist_in_a_namespace(real_cluster, tmp_path, kaiwo_roles=False) as (
        _admin,
        namespace,
        env,
    ):
        shown = await kaiwo("queues", env=env)

        assert shown.exit_code == 2, shown.output
        assert shown.stdout == ""
        assert shown.stderr.startswith(
            "kaiwo queues: localqueues.kueue.x-k8s.io is forbidden: User "
            f'"system:serviceaccount:{namespace}:scientist" cannot list resource "localqueues"'
        ), shown.stderr


async def test_nodes_refused_says_what_to_do_and_gpus_shows_the_workloads_gpus(
    real_cluster: RealCluster, tmp_path: Path
) -> None:
    async with scientist_in_a_namespace(real_cluster, tmp_path) as (_admin, namespace, env):
        nodes = await kaiwo("nodes", env=env)

        assert nodes.exit_code == 2, nodes.output
        assert nodes.stderr == (
            "kaiwo nodes: your credentials may not list Nodes, which are cluster-wide (nodes "
            f'is forbidden: User "system:serviceaccount:{namespace}:scientist" cannot list '
            'resource "nodes" in API group "" at the cluster scope); ask a cluster '
            "administrator for read access to Nodes, or see the GPUs your workloads use with "
            "kaiwo gpus\n"
        )

        gpus = await kaiwo("gpus", env=env)

        assert gpus.exit_code == 0, gpus.output
