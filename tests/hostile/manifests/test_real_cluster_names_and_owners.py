"""On the real API server: long-named workloads get children it accepts, and a forged child in
another namespace changes nothing of the workload it names.

The operator's decision path runs without the bus: the objects the watcher would observe are
read from the real API server into the planner's projection, planned with the one planning
entry point and carried out by the executor's :class:`PlanExecutor` on the real API server.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_executor.apply_plan import PlanExecutor
from kaiwo_executor.execution_memo import ExecutionMemo
from kaiwo_kube import NotFound
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kube.resources import DEPLOYMENT, JOB, KAIWO_JOB, KAIWO_SERVICE, NAMESPACE
from kaiwo_planner.domain.state.projection import Projection
from kaiwo_runtime.kv import MemoryKeyValue

from tests.planning_calls import planned
from tests.real_cluster import RealCluster

pytestmark = [pytest.mark.k8s]

KAIWO_API = "kaiwo.silogen.ai/v1alpha1"
OWNER_LABEL = "kaiwo.silogen.ai/owner-uid"
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def kube(real_cluster: RealCluster) -> AsyncIterator[tuple[KubernetesAsyncioAdapter, str]]:
    adapter = await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig)
    namespace = f"hostile-names-{uuid.uuid4().hex[:6]}"
    await adapter.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    try:
        yield adapter, namespace
    finally:
        with contextlib.suppress(NotFound):
            await adapter.delete(NAMESPACE, namespace)
        await adapter.close()


def queue_config() -> dict[str, Any]:
    """The default queue ``kaiwo`` as the planner sees it (it need not exist on the server:
    the API server takes a Job whatever queue its label names)."""
    flavors = [{"name": "cpu", "resources": [{"name": "cpu", "nominalQuota": 256}]}]
    return {
        "apiVersion": KAIWO_API,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo", "uid": "kqc-uid", "resourceVersion": "1"},
        "spec": {
            "resourceFlavors": [{"name": "cpu"}],
            "clusterQueues": [
                {
                    "name": "kaiwo",
                    "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": flavors}]},
                }
            ],
        },
    }


def observed(obj: dict[str, Any]) -> ObservedObjectV1:
    meta = obj["metadata"]
    return ObservedObjectV1(
        kind=obj["kind"],
        api_version=obj["apiVersion"],
        namespace=meta.get("namespace"),
        name=meta["name"],
        uid=meta["uid"],
        resource_version=meta["resourceVersion"],
        event_type="ADDED",
        object=obj,
    )


async def plan_and_execute(
    adapter: KubernetesAsyncioAdapter, owner: dict[str, Any], *seen: dict[str, Any]
) -> None:
    """Observe ``owner`` and ``seen`` (and the queue), plan ``owner``, carry the plan out."""
    projection = Projection()
    for sequence, obj in enumerate([queue_config(), *seen, owner], start=1):
        projection.apply(observed(obj), sequence=sequence)
    plan = planned(owner=owner, cluster=projection.cluster_state(), now=NOW)
    assert plan is not None
    executor = PlanExecutor(adapter, ExecutionMemo(MemoryKeyValue()), clock=lambda: NOW)
    execution = await executor.execute(PlanDecidedV1.of(plan), plan_id=uuid.uuid4().hex)
    assert execution.failed == (), execution.failed


@pytest.mark.parametrize(
    ("kind", "resource", "child"),
    [("KaiwoJob", KAIWO_JOB, JOB), ("KaiwoService", KAIWO_SERVICE, DEPLOYMENT)],
)
async def test_a_workload_with_a_253_character_name_gets_its_children(
    kube: tuple[KubernetesAsyncioAdapter, str], kind: str, resource: Any, child: Any
) -> None:
    adapter, namespace = kube
    name = ("very-long-workload-name-" * 11)[:252] + "z"
    assert len(name) == 253
    owner = await adapter.create(
        {
            "apiVersion": KAIWO_API,
            "kind": kind,
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"image": "busybox", "user": "a.person.with.a.long.address@example.com" * 3},
        }
    )

    await plan_and_execute(adapter, owner)

    uid = owner["metadata"]["uid"]
    children = await adapter.list(child, namespace=namespace, label_selector=f"{OWNER_LABEL}={uid}")
    [made] = children.items
    assert (
        made["metadata"]["name"]
        == "very-long-workload-name-very-long-workload-name-very-l-"
        + (made["metadata"]["name"][-8:])
    )
    assert len(made["metadata"]["name"]) == 63
    labels = made["metadata"]["labels"]
    assert len(labels["kaiwo.silogen.ai/name"]) == 63
    assert labels["kaiwo.silogen.ai/user"] == (
        "a.person.with.a.long.address-example.coma.person.with-1d210a3e"
    )
    stored = await adapter.get(resource, name, namespace=namespace)
    assert stored["status"]["status"] != "ERROR"


async def test_a_forged_child_in_another_namespace_does_not_fail_the_workload(
    kube: tuple[KubernetesAsyncioAdapter, str],
) -> None:
    adapter, namespace = kube
    other = f"{namespace}-vision"
    await adapter.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    try:
        owner = await adapter.create(
            {
                "apiVersion": KAIWO_API,
                "kind": "KaiwoJob",
                "metadata": {"name": "train", "namespace": namespace},
                "spec": {"image": "busybox"},
            }
        )
        forged = await adapter.create(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": "train",
                    "namespace": other,
                    "ownerReferences": [
                        {
                            "apiVersion": KAIWO_API,
                            "kind": "KaiwoJob",
                            "name": "train",
                            "uid": owner["metadata"]["uid"],
                        }
                    ],
                },
                "spec": {
                    "suspend": True,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "busybox"}],
                        }
                    },
                },
            }
        )
        forged["status"] = {"failed": 1, "conditions": [{"type": "Failed", "status": "True"}]}

        await plan_and_execute(adapter, owner, forged)

        stored = await adapter.get(KAIWO_JOB, "train", namespace=namespace)
        assert stored["status"]["status"] not in {"FAILED", "ERROR"}, stored["status"]
        selector = f"{OWNER_LABEL}={owner['metadata']['uid']}"
        own = await adapter.list(JOB, namespace=namespace, label_selector=selector)
        assert [j["metadata"]["name"] for j in own.items] == ["train"]
    finally:
        with contextlib.suppress(NotFound):
            await adapter.delete(NAMESPACE, other)
