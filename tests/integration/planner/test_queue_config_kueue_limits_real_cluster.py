"""On the real API server with Kueue's CRDs (decision 0227): a ClusterQueue spec Kueue would
refuse is refused already in the KaiwoQueueConfig, naming the field; Kueue's newer settings
are taken and reach a ClusterQueue Kueue's CRD accepts; a flavor of 8 node labels of the
user's becomes a ResourceFlavor Kueue's CRD accepts, and one of 10 (the API reference's limit)
is accepted as a KaiwoQueueConfig and told FAILED, naming the flavor and the field.

The operator's decision path runs as in ``test_queue_config_truth_real_cluster`` (its
:class:`Operator`: observe, plan, execute, one round at a time).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, Final

import pytest
from kaiwo_kube import Invalid, NotFound
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kube.resources import (
    EVENT,
    KAIWO_QUEUE_CONFIG,
    KUEUE_CLUSTER_QUEUE,
    KUEUE_RESOURCE_FLAVOR,
)

from tests.integration.planner.test_queue_config_truth_real_cluster import (
    MANAGED,
    MANAGED_KINDS,
    Operator,
    is_ready,
    phase,
    ready,
)
from tests.real_cluster import RealCluster

pytestmark = [pytest.mark.k8s]

NAME: Final = "kaiwo"
KUEUE: Final = "kueue.x-k8s.io/v1beta1"


@pytest.fixture
async def kube(real_cluster: RealCluster) -> AsyncIterator[KubernetesAsyncioAdapter]:
    adapter = await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig)
    try:
        yield adapter
    finally:
        with contextlib.suppress(NotFound):
            await adapter.delete(KAIWO_QUEUE_CONFIG, NAME)
        for resource in MANAGED_KINDS:
            for obj in (await adapter.list(resource, label_selector=MANAGED)).items:
                meta = obj["metadata"]
                with contextlib.suppress(NotFound):
                    await adapter.delete(resource, meta["name"], namespace=meta.get("namespace"))
        await adapter.close()


def labels(count: int) -> dict[str, str]:
    return {f"example.com/label-{n}": "x" for n in range(count)}


def spec(
    flavor: dict[str, Any], *, quota: dict[str, Any] | None = None, **queue_spec: Any
) -> dict[str, Any]:
    resources = [{"name": "cpu", "nominalQuota": "8", **(quota or {})}]
    group = {
        "coveredResources": ["cpu"],
        "flavors": [{"name": flavor["name"], "resources": resources}],
    }
    return {
        "resourceFlavors": [flavor],
        "clusterQueues": [{"name": "kl-queue", "spec": {"resourceGroups": [group], **queue_spec}}],
    }


def queue_config(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": NAME},
        "spec": body,
    }


REFUSED: Final = [
    (
        "a borrowing limit without a cohort",
        spec({"name": "f"}, quota={"borrowingLimit": "2"}),
        "spec.clusterQueues[0].spec.resourceGroups",
        "borrowingLimit must be nil when cohort is empty",
    ),
    (
        "a lending limit without a cohort",
        spec({"name": "f"}, quota={"lendingLimit": "2"}),
        "spec.clusterQueues[0].spec.resourceGroups",
        "lendingLimit must be nil when cohort is empty",
    ),
    (
        "borrowing within the cohort without reclaiming",
        spec({"name": "f"}, preemption={"borrowWithinCohort": {"policy": "LowerPriority"}}),
        "spec.clusterQueues[0].spec.preemption.borrowWithinCohort.policy",
        "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
    ),
    (
        "a preference without TryNextFlavor",
        spec({"name": "f"}, flavorFungibility={"preference": "BorrowingOverPreemption"}),
        "spec.clusterQueues[0].spec.flavorFungibility.preference",
        "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
    ),
    (
        "a cohort that is no DNS name",
        spec({"name": "f"}, cohort="Team_A"),
        "spec.clusterQueues[0].spec.cohort",
        "should match",
    ),
]


@pytest.mark.parametrize(("what", "body", "field", "words"), REFUSED, ids=[r[0] for r in REFUSED])
async def test_a_cluster_queue_spec_kueue_refuses_is_refused_naming_the_field(
    kube: KubernetesAsyncioAdapter, what: str, body: dict[str, Any], field: str, words: str
) -> None:
    # Before, each was stored, and Kueue refused the ClusterQueue on every apply.
    with pytest.raises(Invalid) as raised:
        await kube.create(queue_config(body))

    assert [(cause["field"], words in cause["message"]) for cause in raised.value.causes] == [
        (field, True)
    ], what


async def test_kueues_own_limit_of_node_labels_holds_on_the_api_server(
    kube: KubernetesAsyncioAdapter,
) -> None:
    # What the planner is held to: Kueue's CRD takes 8 node labels on a ResourceFlavor, not 9.
    flavor = {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": "kl-nine", "labels": {"app.kubernetes.io/managed-by": "kaiwo"}},
        "spec": {"nodeLabels": labels(9)},
    }
    with pytest.raises(Invalid) as raised:
        await kube.create(flavor)
    assert raised.value.causes[0] == {
        "reason": "FieldValueTooMany",
        "message": "Too many: 9: must have at most 8 items",
        "field": "spec.nodeLabels",
    }
    flavor["spec"]["nodeLabels"] = labels(8)
    await kube.create(flavor)


async def test_a_flavor_of_eight_node_labels_and_kueues_newer_settings_become_ready(
    kube: KubernetesAsyncioAdapter,
) -> None:
    # Before, kaiwo/worker made the flavor's 8 labels 9, which Kueue refused, and the model
    # refused MayStopSearch, preference and admissionScope.
    settings = {
        "cohort": "shared",
        "flavorFungibility": {
            "whenCanBorrow": "TryNextFlavor",
            "whenCanPreempt": "TryNextFlavor",
            "preference": "PreemptionOverBorrowing",
        },
        "admissionScope": {"admissionMode": "NoAdmissionFairSharing"},
    }
    await kube.apply(
        queue_config(spec({"name": "kl-eight", "nodeLabels": labels(8)}, **settings)),
        field_manager="admin",
        force=True,
    )
    settled = await Operator(kube).until(is_ready)

    assert ready(settled)["message"] == "Kueue objects match the KaiwoQueueConfig"
    flavor = await kube.get(KUEUE_RESOURCE_FLAVOR, "kl-eight")
    assert flavor["spec"] == {"nodeLabels": labels(8)}
    queue = await kube.get(KUEUE_CLUSTER_QUEUE, "kl-queue")
    assert queue["spec"]["flavorFungibility"] == settings["flavorFungibility"]
    assert queue["spec"]["admissionScope"] == settings["admissionScope"]


async def test_a_flavor_of_ten_node_labels_is_taken_and_told_failed(
    kube: KubernetesAsyncioAdapter,
) -> None:
    # The API reference's limit is 10: the KaiwoQueueConfig is stored; Kueue's is 8, so the
    # flavor cannot be made, and the status and an Event say which and why (before: PENDING
    # with only the API server's refusal of each apply).
    await kube.apply(
        queue_config(spec({"name": "kl-ten", "nodeLabels": labels(10)})),
        field_manager="admin",
        force=True,
    )
    operator = Operator(kube)
    failed = await operator.until(lambda kqc: phase(kqc) == "FAILED")

    message = (
        "resourceFlavors[0] ('kl-ten').nodeLabels lists 10 labels: Kueue's ResourceFlavor "
        "takes at most 8 nodeLabels, so it cannot be created; list at most 8 (the labels that "
        "tell its nodes apart)"
    )
    assert ready(failed)["reason"] == "InvalidSpecInForce"
    assert ready(failed)["message"] == message
    with pytest.raises(NotFound):
        await kube.get(KUEUE_RESOURCE_FLAVOR, "kl-ten")
    owner = await kube.get(KAIWO_QUEUE_CONFIG, NAME)
    found = await kube.list(
        EVENT, namespace="default", field_selector="reason=KaiwoQueueConfigFailed"
    )
    told = [e for e in found.items if e["involvedObject"].get("uid") == owner["metadata"]["uid"]]
    assert [(e["type"], e["message"]) for e in told] == [("Warning", message)]
