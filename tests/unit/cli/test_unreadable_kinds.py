"""What the scientist's commands do when RBAC refuses a kind (403): a scientist with ``edit``
in their namespace (with ``kaiwo-workload-editor``) may list Jobs, Pods and KaiwoJobs there,
but no RayJobs, AppWrappers or Kueue Workloads, and nothing across namespaces. The commands
go on with what they may read and name what they could not (decision 0138)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kaiwo_cli.cluster_access import (
    Children,
    ClusterError,
    ClusterTarget,
    children_of,
    readable_kueue_workloads,
)
from kaiwo_cli.commands.capacity import every_node, namespace_queues
from kaiwo_cli.commands.workload_access import read_in_scope
from kaiwo_kube import KubeError, ObjectList, resources
from kaiwo_kube.resources import ResourceType

JOB_UID = "uid-train"
TRAIN = {
    "kind": "KaiwoJob",
    "metadata": {"name": "train", "namespace": "ml-team", "uid": JOB_UID},
}


def forbidden(resource: ResourceType) -> KubeError:
    return KubeError(f"{resource.plural} is forbidden", code=403, reason="Forbidden")


class NamespaceEditor:
    """Answers lists as the API server answers a user bound to ``edit`` in ml-team."""

    def __init__(self, refused: set[str], objects: dict[str, list[dict[str, Any]]]) -> None:
        self.refused = refused
        self.objects = objects

    async def get(self, resource: ResourceType, name: str, *, namespace: str | None = None) -> Any:
        raise AssertionError(f"no get expected: {resource.kind} {namespace}/{name}")

    async def list(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        del label_selector, field_selector
        if resource.kind in self.refused or namespace is None:
            raise forbidden(resource)
        return ObjectList(items=self.objects.get(resource.kind, []), resource_version="7")


def test_children_the_caller_may_not_list_are_named_not_taken_for_none() -> None:
    job = {"metadata": {"name": "train", "namespace": "ml-team"}}
    kube = NamespaceEditor({"RayJob", "RayService", "AppWrapper", "HTTPRoute"}, {"Job": [job]})

    found = asyncio.run(children_of(kube, TRAIN))

    assert found == Children(
        objects=({"apiVersion": "batch/v1", "kind": "Job", **job},),
        unreadable=("RayJob", "RayService", "AppWrapper", "HTTPRoute"),
    )


def test_a_ray_services_ray_service_is_found_by_the_run_id_it_carries() -> None:
    """The AppWrapper controller makes a Ray service's RayService from the operator's
    template, labelled with the workload's uid as its run-id, not as its owner (decision
    0185); every other child carries the owner label."""
    asked: dict[str, str | None] = {}

    class Recording(NamespaceEditor):
        async def list(
            self, resource: ResourceType, *, label_selector: str | None = None, **_: Any
        ) -> ObjectList:
            asked[resource.kind] = label_selector
            return ObjectList(items=[], resource_version="7")

    asyncio.run(children_of(Recording(set(), {}), TRAIN))

    assert asked.pop("RayService") == f"kaiwo.silogen.ai/run-id={JOB_UID}"
    assert set(asked.values()) == {f"kaiwo.silogen.ai/owner-uid={JOB_UID}"}
    assert "AppWrapper" in asked


def test_kueue_workloads_refused_are_none_and_other_failures_still_fail() -> None:
    refused = NamespaceEditor({"Workload"}, {})
    assert asyncio.run(readable_kueue_workloads(refused, namespace="ml-team")) is None

    class Broken(NamespaceEditor):
        async def list(self, resource: ResourceType, **_: Any) -> ObjectList:
            raise KubeError("etcdserver: request timed out", code=504)

    with pytest.raises(KubeError, match="request timed out"):
        asyncio.run(children_of(Broken(set(), {}), TRAIN))


def kubeconfig_in(tmp_path: Path, namespace: str) -> ClusterTarget:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: mine\n"
        f"contexts:\n- name: mine\n  context: {{cluster: c, user: u, namespace: {namespace}}}\n"
    )
    return ClusterTarget(kubeconfig=path)


def test_refused_every_namespace_a_list_reads_the_contexts_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kube = NamespaceEditor(set(), {"KaiwoJob": [TRAIN]})

    async def read(where: str | None) -> list[dict[str, Any]]:
        return (await kube.list(resources.KAIWO_JOB, namespace=where)).items

    found, scope = asyncio.run(
        read_in_scope("list", kubeconfig_in(tmp_path, "ml-team"), None, read, every_asked=False)
    )

    assert (found, scope) == ([TRAIN], "ml-team")
    assert capsys.readouterr().err == (
        "kaiwo list: you may not list every namespace; showing ml-team, your context's "
        "namespace (-n for another)\n"
    )


def test_asked_for_every_namespace_with_a_the_refusal_stands(tmp_path: Path) -> None:
    kube = NamespaceEditor(set(), {})

    async def read(where: str | None) -> list[dict[str, Any]]:
        return (await kube.list(resources.KAIWO_JOB, namespace=where)).items

    with pytest.raises(KubeError, match="kaiwojobs is forbidden"):
        asyncio.run(
            read_in_scope("list", kubeconfig_in(tmp_path, "ml-team"), None, read, every_asked=True)
        )


LOCAL_QUEUE = {
    "metadata": {"name": "research", "namespace": "ml-team"},
    "spec": {"clusterQueue": "research-gpus"},
    "status": {"pendingWorkloads": 1, "reservingWorkloads": 0, "admittedWorkloads": 0},
}


def test_refused_cluster_queues_queues_shows_the_namespaces_local_queues_and_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Decision 0143: a namespace's ``edit`` (with the deployment's viewer rules) reads its
    LocalQueues, not the ClusterQueues nor Kueue's Workloads."""
    kube = NamespaceEditor({"ClusterQueue", "Workload"}, {"LocalQueue": [LOCAL_QUEUE]})

    shown = asyncio.run(namespace_queues(kube, "ml-team", named=False))

    assert shown == (
        "NAMESPACE   LOCALQUEUE   CLUSTERQUEUE    PENDING   RESERVING   ADMITTED   FLAVOR   "
        "RESOURCE   USED\n"
        "ml-team     research     research-gpus   1         0           0          -        "
        "-          -\n"
        "\n"
        "Pending workloads: (not shown: your credentials may not list Kueue Workloads)"
    )
    assert capsys.readouterr().err == (
        "kaiwo queues: your credentials may not list ClusterQueues, so the cluster's queues "
        "and quotas are not shown; showing the LocalQueues of ml-team, your context's "
        "namespace (-n for another)\n"
    )


def test_local_queues_of_a_namespace_named_with_n_and_the_workloads_waiting_if_readable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    waiting = {
        "metadata": {
            "name": "job-train",
            "namespace": "ml-team",
            "ownerReferences": [{"kind": "Job", "name": "train"}],
        },
        "spec": {"queueName": "research"},
    }
    kube = NamespaceEditor({"ClusterQueue"}, {"LocalQueue": [LOCAL_QUEUE], "Workload": [waiting]})

    shown = asyncio.run(namespace_queues(kube, "ml-team", named=True))

    assert shown.split("\n\n")[1] == (
        "Pending workloads:\n"
        "LOCALQUEUE         POSITION   WORKLOAD    PRIORITY   AGE\n"
        "ml-team/research   1          Job/train   0          <unknown>"
    )
    assert capsys.readouterr().err.endswith("showing the LocalQueues of ml-team\n")


def test_local_queues_refused_too_is_the_servers_refusal_with_nothing_said_before(
    capsys: pytest.CaptureFixture[str],
) -> None:
    kube = NamespaceEditor({"ClusterQueue", "LocalQueue"}, {})

    with pytest.raises(KubeError, match="localqueues is forbidden"):
        asyncio.run(namespace_queues(kube, "ml-team", named=False))
    assert capsys.readouterr().err == ""


def test_nodes_refused_is_one_line_that_names_them_and_what_to_do() -> None:
    with pytest.raises(ClusterError) as refused:
        asyncio.run(every_node(NamespaceEditor({"Node"}, {})))

    assert str(refused.value) == (
        "your credentials may not list Nodes, which are cluster-wide (nodes is forbidden); "
        "ask a cluster administrator for read access to Nodes, or see the GPUs your "
        "workloads use with kaiwo gpus"
    )

    class Broken(NamespaceEditor):
        async def list(self, resource: ResourceType, **_: Any) -> ObjectList:
            raise KubeError("etcdserver: request timed out", code=504)

    with pytest.raises(KubeError, match="request timed out"):
        asyncio.run(every_node(Broken(set(), {})))
