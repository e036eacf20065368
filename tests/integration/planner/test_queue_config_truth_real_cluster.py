"""On the real API server, with Kueue's CRDs and their CEL rules: a KaiwoQueueConfig change the
API server refuses in place is carried out by delete and create, not while admitted workloads
use the object, and the status tells the truth throughout (decision 0048).

The operator's decision path runs without the bus, as the watcher, planner and executor would:
each round reads the KaiwoQueueConfig and its Kueue objects from the API server into the
planner's projection, plans it with the one planning entry point and carries the plan out with
one :class:`PlanExecutor` (its memo kept between rounds, as the service keeps it). The test
plays Kueue where it must (a ClusterQueue's status).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any, Final

import pytest
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_executor.apply_plan import PlanExecutor
from kaiwo_executor.execution_memo import ExecutionMemo
from kaiwo_kube import Invalid, NotFound
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kube.resources import (
    EVENT,
    KAIWO_QUEUE_CONFIG,
    KUEUE_CLUSTER_QUEUE,
    KUEUE_LOCAL_QUEUE,
    KUEUE_RESOURCE_FLAVOR,
    KUEUE_TOPOLOGY,
    KUEUE_WORKLOAD,
    KUEUE_WORKLOAD_PRIORITY_CLASS,
)
from kaiwo_planner.domain.state.projection import Projection
from kaiwo_runtime.kv import MemoryKeyValue

from tests.planning_calls import planned
from tests.real_cluster import RealCluster

pytestmark = [pytest.mark.k8s]

KUEUE: Final = "kueue.x-k8s.io/v1beta1"
MANAGED: Final = "app.kubernetes.io/managed-by=kaiwo"
MANAGED_KINDS: Final = (
    KUEUE_TOPOLOGY,
    KUEUE_RESOURCE_FLAVOR,
    KUEUE_CLUSTER_QUEUE,
    KUEUE_LOCAL_QUEUE,
    KUEUE_WORKLOAD_PRIORITY_CLASS,
)
ON_THE_WAY: Final = "Kueue objects are being created or updated to match the KaiwoQueueConfig"
IN_USE: Final = "kueue.x-k8s.io/resource-in-use"
ROUNDS: Final = 8
"""Rounds of observe, plan, execute a change may take (it settles in two or three)."""
NOW: Final = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class Operator:
    """The watcher, planner and executor of one KaiwoQueueConfig, one round at a time."""

    def __init__(self, kube: KubernetesAsyncioAdapter) -> None:
        self.kube = kube
        self.executor = PlanExecutor(kube, ExecutionMemo(MemoryKeyValue()), clock=self._now)
        self.rounds = 0

    def _now(self) -> datetime:
        return NOW.replace(second=self.rounds % 60)

    async def round(self) -> dict[str, Any]:
        """Observe, plan, execute; the KaiwoQueueConfig as it is afterwards."""
        self.rounds += 1
        owner = await self.kube.get(KAIWO_QUEUE_CONFIG, "kaiwo")
        projection = Projection()
        seen = [owner]
        for resource in MANAGED_KINDS:
            seen += (await self.kube.list(resource, label_selector=MANAGED)).items
        seen += (await self.kube.list(KUEUE_WORKLOAD)).items
        for sequence, obj in enumerate(seen, start=1):
            projection.apply(observed(obj), sequence=sequence)
        plan = planned(owner=owner, cluster=projection.cluster_state(), now=self._now())
        assert plan is not None
        decision = PlanDecidedV1.of(
            plan, absent=projection.missing(plan.desired), drifted=projection.drifted(plan.desired)
        )
        execution = await self.executor.execute(decision, plan_id=uuid.uuid4().hex)
        await self.executor.remember(execution)
        return await self.kube.get(KAIWO_QUEUE_CONFIG, "kaiwo")

    async def until(self, settled: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        for _ in range(ROUNDS):
            queue_config = await self.round()
            if settled(queue_config):
                return queue_config
        raise AssertionError(f"not settled after {ROUNDS} rounds: {queue_config.get('status')}")


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


def ready(queue_config: dict[str, Any]) -> dict[str, Any]:
    [condition] = [
        c for c in queue_config.get("status", {}).get("conditions", []) if c["type"] == "Ready"
    ]
    return condition


def phase(queue_config: dict[str, Any]) -> str:
    return str(queue_config.get("status", {}).get("status", ""))


def is_ready(queue_config: dict[str, Any]) -> bool:
    return phase(queue_config) == "READY"


def spec(flavor: dict[str, Any], queue: str) -> dict[str, Any]:
    resources = [{"name": "cpu", "nominalQuota": "8"}]
    return {
        "topologies": [
            {
                "metadata": {"name": "qt-topology"},
                "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]},
            }
        ],
        "resourceFlavors": [flavor],
        "clusterQueues": [
            {
                "name": queue,
                "spec": {
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [{"name": flavor["name"], "resources": resources}],
                        }
                    ]
                },
            }
        ],
    }


@pytest.fixture
async def kube(real_cluster: RealCluster) -> AsyncIterator[KubernetesAsyncioAdapter]:
    adapter = await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig)
    try:
        yield adapter
    finally:
        with contextlib.suppress(NotFound):
            await adapter.delete(KAIWO_QUEUE_CONFIG, "kaiwo")
        for resource in MANAGED_KINDS:
            for obj in (await adapter.list(resource, label_selector=MANAGED)).items:
                meta = obj["metadata"]
                with contextlib.suppress(NotFound):
                    await adapter.delete(resource, meta["name"], namespace=meta.get("namespace"))
        await adapter.close()


async def queue_config(kube: KubernetesAsyncioAdapter, body: dict[str, Any]) -> None:
    manifest = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo"},
        "spec": body,
    }
    await kube.apply(manifest, field_manager="admin", force=True)


async def flavor(kube: KubernetesAsyncioAdapter, name: str) -> dict[str, Any]:
    return await kube.get(KUEUE_RESOURCE_FLAVOR, name)


async def held_by_kueue(kube: KubernetesAsyncioAdapter, name: str) -> dict[str, Any]:
    """The flavor with Kueue's finalizer, as Kueue's controller adds it (Kueue then keeps a
    flavor any ClusterQueue names; the test stack runs only Kueue's CRDs)."""
    patch = {"metadata": {"finalizers": [IN_USE]}}
    return await kube.merge_patch(KUEUE_RESOURCE_FLAVOR, name, patch, field_manager="kueue")


async def events(kube: KubernetesAsyncioAdapter, reason: str) -> list[dict[str, Any]]:
    """This test's Events of ``reason`` on the KaiwoQueueConfig (each test has its own)."""
    owner = await kube.get(KAIWO_QUEUE_CONFIG, "kaiwo")
    found = await kube.list(EVENT, namespace="default", field_selector=f"reason={reason}")
    return [e for e in found.items if e["involvedObject"].get("uid") == owner["metadata"]["uid"]]


async def test_a_flavors_topology_removed_is_carried_out_by_delete_and_create(
    kube: KubernetesAsyncioAdapter,
) -> None:
    name = f"qt-gpu-{uuid.uuid4().hex[:6]}"
    with_topology = {"name": name, "nodeLabels": {"pool": "a"}, "topologyName": "qt-topology"}
    await queue_config(kube, spec(with_topology, "qt-queue"))
    operator = Operator(kube)

    first = await operator.round()
    # Planned before anything existed: not READY.
    assert phase(first) == "PENDING"
    assert ready(first)["message"] == ON_THE_WAY
    settled = await operator.until(is_ready)
    assert ready(settled)["message"] == "Kueue objects match the KaiwoQueueConfig"
    old = await held_by_kueue(kube, name)

    # The API server refuses the change in place: Kueue's CEL rule.
    change = {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": {"pool": "a", "kaiwo/worker": "true"}},
    }
    with pytest.raises(Invalid, match="topologyName is immutable when topologyName is set"):
        await kube.apply(change, field_manager="kaiwo", force=True)

    await queue_config(kube, spec({"name": name, "nodeLabels": {"pool": "a"}}, "qt-queue"))
    rounds_before_the_change = operator.rounds
    replanned = await operator.round()
    # The plan that replaced it says so; the executor deleted and created it in that round.
    assert phase(replanned) == "PENDING"
    assert ready(replanned)["message"] == (
        "Kueue objects are not yet as the KaiwoQueueConfig describes: "
        f"ResourceFlavor {name} is deleted to be created again: spec.topologyName cannot "
        "change in place (topologyName is immutable when topologyName is set); "
        "spec.nodeLabels cannot change in place (nodeLabels are immutable when topologyName "
        "is set)"
    )
    settled = await operator.until(is_ready)

    new = await flavor(kube, name)
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert new["spec"] == {"nodeLabels": {"kaiwo/worker": "true", "pool": "a"}}
    assert operator.rounds == rounds_before_the_change + 2, "replaced in one round, then READY"
    assert ready(settled)["message"] == "Kueue objects match the KaiwoQueueConfig"
    recreated = await events(kube, "KaiwoQueueConfigResourceFlavorRecreated")
    assert [e["type"] for e in recreated] == ["Normal"]
    assert recreated[0]["message"].startswith(f"ResourceFlavor {name} is deleted to be created")
    assert await events(kube, "ApplyFailed") == []


async def test_a_flavor_admitted_workloads_use_is_kept_until_they_are_gone(
    kube: KubernetesAsyncioAdapter,
) -> None:
    name = f"qt-gpu-{uuid.uuid4().hex[:6]}"
    with_topology = {"name": name, "nodeLabels": {"pool": "a"}, "topologyName": "qt-topology"}
    await queue_config(kube, spec(with_topology, "qt-busy"))
    operator = Operator(kube)
    await operator.until(is_ready)
    old = await held_by_kueue(kube, name)
    # Kueue admitted a workload on the flavor (the test plays Kueue's ClusterQueue status).
    usage = {
        "admittedWorkloads": 1,
        "reservingWorkloads": 1,
        "flavorsReservation": [{"name": name, "resources": [{"name": "cpu", "total": "2"}]}],
    }
    await kube.patch_status(
        KUEUE_CLUSTER_QUEUE, "qt-busy", usage, field_manager="kueue", method="merge"
    )

    await queue_config(kube, spec({"name": name, "nodeLabels": {"pool": "a"}}, "qt-busy"))
    held = await operator.until(lambda kqc: ready(kqc)["reason"] == "KueueObjectInUse")

    assert phase(held) == "PENDING"
    assert ready(held)["message"] == (
        f"ResourceFlavor {name}: spec.topologyName cannot change in place (topologyName is "
        "immutable when topologyName is set); spec.nodeLabels cannot change in place "
        "(nodeLabels are immutable when topologyName is set); it is not deleted to be created "
        "again while admitted workloads use it (ClusterQueue qt-busy holds quota of it)"
    )
    kept = await flavor(kube, name)
    assert kept["metadata"]["uid"] == old["metadata"]["uid"]
    assert kept["spec"] == old["spec"]
    assert [e["type"] for e in await events(kube, "KueueObjectInUse")] == ["Warning"]
    assert await events(kube, "ApplyFailed") == []

    # The workload finished: Kueue's counts drop to zero, and the change is carried out.
    idle = {"admittedWorkloads": 0, "reservingWorkloads": 0, "flavorsReservation": []}
    await kube.patch_status(
        KUEUE_CLUSTER_QUEUE, "qt-busy", idle, field_manager="kueue", method="merge"
    )
    settled = await operator.until(is_ready)
    new = await flavor(kube, name)
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert "topologyName" not in new["spec"]
    assert ready(settled)["message"] == "Kueue objects match the KaiwoQueueConfig"


async def test_an_apply_the_api_server_refuses_shows_on_the_status(
    kube: KubernetesAsyncioAdapter,
) -> None:
    name = f"qt-gpu-{uuid.uuid4().hex[:6]}"
    # Kueue requires a node label on a flavor with a topology; nothing in Kaiwo checks it.
    await queue_config(kube, spec({"name": name, "topologyName": "qt-topology"}, "qt-refused"))
    operator = Operator(kube)

    refused = await operator.until(
        lambda kqc: any(c["type"] == "ApplyRefused" for c in kqc["status"].get("conditions", []))
    )

    assert phase(refused) == "PENDING"
    assert ready(refused)["message"] == ON_THE_WAY
    [condition] = [c for c in refused["status"]["conditions"] if c["type"] == "ApplyRefused"]
    assert condition["status"] == "True"
    assert condition["reason"] == "Invalid"
    assert condition["message"].startswith(f"the API server refused: ResourceFlavor {name}: ")
    assert "spec: Invalid value" in condition["message"]
    assert "at least one nodeLabel is required when topology is set" in condition["message"]
    warnings = await events(kube, "ApplyFailed")
    assert warnings and warnings[0]["type"] == "Warning"

    # Fixed by the administrator: the condition goes and the status is READY.
    fixed = {"name": name, "topologyName": "qt-topology", "nodeLabels": {"pool": "a"}}
    await queue_config(kube, spec(fixed, "qt-refused"))
    settled = await operator.until(is_ready)
    assert [c["type"] for c in settled["status"]["conditions"]] == ["Ready"]
