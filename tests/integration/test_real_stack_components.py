"""The session's whole real stack (``real_stack``, ``tests/real_stack.py``) without the
operator: what the fixture promises of Kueue's webhooks and conversion, and of kwok's nodes
and Stages, checked where they are decided (the end-to-end tests with the operator are
``test_real_stack.py``)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, Final

import pytest
import pytest_asyncio
from kaiwo_kube import KubeError, NotFound, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kube.resources import ResourceType
from kaiwo_sandbox.fleet import NODE_TYPES, NodeSpec

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pending, eventually
from tests.real_cluster import RealCluster
from tests.real_stack import register_kwok_nodes, remove_nodes

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="module"),
    # The first test starts the session's whole stack (20-45 s, minutes on a busy machine).
    pytest.mark.timeout(600),
]

NAMESPACE: Final = "stack-components"
NODE: Final = NodeSpec("components-mi300x-1", NODE_TYPES["amd-mi300x"])
CLUSTER_QUEUE_V1BETA2: Final = ResourceType(
    group="kueue.x-k8s.io",
    version="v1beta2",
    plural="clusterqueues",
    kind="ClusterQueue",
    namespaced=False,
)
STEP: Final = 90.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kube(real_stack: RealCluster) -> AsyncIterator[KubernetesAsyncioAdapter]:
    async with await KubernetesAsyncioAdapter.from_kubeconfig(real_stack.kubeconfig) as client:
        await register_kwok_nodes(client, [NODE])
        await actors.create_namespace(client, NAMESPACE)
        try:
            yield client
        finally:
            with contextlib.suppress(NotFound):
                await client.delete(resources.NAMESPACE, NAMESPACE)
            with contextlib.suppress(NotFound):
                await client.delete(resources.KUEUE_CLUSTER_QUEUE, "components")

            async def gone() -> bool | Pending:
                found = await actors.get_or_none(
                    client, resources.NAMESPACE, NAMESPACE, namespace=None
                )
                return True if found is None else Pending("terminating")

            await eventually(gone, what=f"namespace {NAMESPACE} deleted", within=STEP)
            await remove_nodes(client, [NODE.name])


def job(name: str, *, labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": "1"}},
                        }
                    ],
                },
            },
        },
    }


async def test_kueues_webhooks_answer_the_api_server(kube: KubernetesAsyncioAdapter) -> None:
    """The mutating webhook suspends a queued Job as it is created; the validating one
    refuses a queue name that is not one."""
    queued = job("queued", labels={actors.QUEUE_NAME_LABEL: "nowhere"}, annotations={})
    created = await kube.create(queued)
    assert created["spec"]["suspend"] is True
    bad = job("bad-queue", labels={actors.QUEUE_NAME_LABEL: "Not_A_Name"}, annotations={})
    with pytest.raises(KubeError, match=r"vjob\.kb\.io"):
        await kube.create(bad)


async def test_kueue_converts_what_the_operator_writes(kube: KubernetesAsyncioAdapter) -> None:
    """A v1beta1 ClusterQueue (the version the operator writes) is stored as v1beta2 by
    Kueue's conversion webhook: ``cohort`` becomes ``cohortName``."""
    await kube.create(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": "components"},
            "spec": {"cohort": "research", "namespaceSelector": {}, "resourceGroups": []},
        }
    )
    stored = await kube.get(CLUSTER_QUEUE_V1BETA2, "components")
    assert stored["spec"]["cohortName"] == "research"
    assert "cohort" not in stored["spec"]
    served = await kube.get(resources.KUEUE_CLUSTER_QUEUE, "components")
    assert served["spec"]["cohort"] == "research"


async def test_kwoks_node_is_ready_with_its_capacity_and_lease(
    kube: KubernetesAsyncioAdapter,
) -> None:
    node = await kube.get(resources.NODE, NODE.name)
    assert node["status"]["allocatable"]["amd.com/gpu"] == "8"
    # kwok holds the node's Lease (in its own name) and renews it, as the kubelet would.
    lease = await kube.get(resources.LEASE, NODE.name, namespace="kube-node-lease")
    assert lease["spec"]["leaseDurationSeconds"] == 40
    assert lease["spec"]["renewTime"]
    [owner] = lease["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("Node", NODE.name)


async def test_a_pod_asked_to_fail_fails_with_its_message(kube: KubernetesAsyncioAdapter) -> None:
    """Not queued (no Kueue), bound by the default scheduler, run by kwok for its annotated
    time, then Failed with the annotation's message; its Job fails as the Job controller
    decides."""
    failing = job(
        "failing",
        labels={},
        annotations={
            "sandbox.kaiwo.silogen.ai/run-seconds": "1",
            "sandbox.kaiwo.silogen.ai/fail": "FileNotFoundError: /workload/tokenizer.json",
        },
    )
    await kube.create(failing)

    async def job_failed() -> dict[str, Any] | Pending:
        found = await kube.get(resources.JOB, "failing", namespace=NAMESPACE)
        conditions = (found.get("status") or {}).get("conditions") or []
        failed = any(c["type"] == "Failed" and c["status"] == "True" for c in conditions)
        return found if failed else Pending(str(found.get("status")))

    await eventually(job_failed, what="the Job failed", within=STEP)
    [pod] = (
        await kube.list(
            resources.POD, namespace=NAMESPACE, label_selector=f"{actors.JOB_NAME_LABEL}=failing"
        )
    ).items
    assert pod["spec"]["nodeName"] == NODE.name
    [container] = pod["status"]["containerStatuses"]
    assert container["state"]["terminated"]["exitCode"] == 1
    assert container["state"]["terminated"]["message"] == (
        "FileNotFoundError: /workload/tokenizer.json"
    )


async def test_a_deleted_running_pod_is_stopped_and_removed(
    kube: KubernetesAsyncioAdapter,
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "serving", "namespace": NAMESPACE},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]},
    }
    await kube.create(pod)

    async def running() -> bool | Pending:
        found = await kube.get(resources.POD, "serving", namespace=NAMESPACE)
        phase = (found.get("status") or {}).get("phase")
        return True if phase == "Running" else Pending(str(phase))

    await eventually(running, what="the pod runs", within=STEP)
    await kube.delete(resources.POD, "serving", namespace=NAMESPACE)

    async def removed() -> bool | Pending:
        found = await actors.get_or_none(kube, resources.POD, "serving", namespace=NAMESPACE)
        return True if found is None else Pending(str((found.get("status") or {}).get("phase")))

    await eventually(removed, what="the deleted pod is gone", within=STEP)
