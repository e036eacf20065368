"""A KaiwoQueueConfig whose ClusterQueue the real Kueue will not admit to is not READY
(decision 0121): the whole operator on the real stack (Kueue's manager and webhooks, the
API server). Nothing of Kueue is played by the test.

A flavor names a Topology the spec does not list: every object is created as asked, yet
Kueue marks the ClusterQueue inactive (``TopologyNotFound``) and would leave every workload
of it pending. The status says FAILED in Kueue's words, with a Warning Event; once the
Topology is listed it turns READY. A ClusterQueue naming an AdmissionCheck nobody created
fails the same way (``AdmissionCheckNotFound``).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

import pytest
import pytest_asyncio
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pending, Pipeline, eventually, running_pipeline
from tests.real_cluster import RealCluster

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(600),
]

STEP: Final = 90.0
MATCH: Final = "Kueue objects match the KaiwoQueueConfig"


def queue_config_spec(
    flavor: str, topology: str, *, list_topology: bool, admission_check: str | None = None
) -> dict[str, Any]:
    queue_spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": flavor, "resources": [{"name": "cpu", "nominalQuota": "8"}]}],
            }
        ]
    }
    if admission_check is not None:
        queue_spec["admissionChecks"] = [admission_check]
    spec: dict[str, Any] = {
        "resourceFlavors": [
            {"name": flavor, "nodeLabels": {"kaiwo-test/pool": "a"}, "topologyName": topology}
        ],
        "clusterQueues": [{"name": "inactive-q", "spec": queue_spec}],
    }
    if list_topology:
        spec["topologies"] = [
            {
                "metadata": {"name": topology},
                "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]},
            }
        ]
    return spec


async def apply_queue_config(kube: KubernetesAsyncioAdapter, spec: dict[str, Any]) -> None:
    manifest = {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": actors.QUEUE_CONFIG},
        "spec": spec,
    }
    await kube.apply(manifest, field_manager="cluster-admin", force=True)


def ready(queue_config: Mapping[str, Any]) -> dict[str, Any]:
    for found in (queue_config.get("status") or {}).get("conditions") or ():
        if found.get("type") == "Ready":
            return dict(found)
    return {}


async def queue_config_where(pipeline: Pipeline, what: str, holds: Any) -> dict[str, Any]:
    async def check() -> dict[str, Any] | Pending:
        found = await pipeline.kube.get(resources.KAIWO_QUEUE_CONFIG, actors.QUEUE_CONFIG)
        return found if holds(found) else Pending(f"{found.get('status')}")

    return await eventually(check, what=what, within=STEP)


def failed_because(reason: str) -> Any:
    def holds(found: Mapping[str, Any]) -> bool:
        status = found.get("status") or {}
        return status.get("status") == "FAILED" and reason in ready(found).get("message", "")

    return holds


def is_ready(found: Mapping[str, Any]) -> bool:
    status = found.get("status") or {}
    return status.get("status") == "READY" and ready(found).get("message") == MATCH


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    real_stack: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Pipeline]:
    async with running_pipeline(
        tmp_path_factory.mktemp("kaiwo"), real=real_stack, gpu_cluster=False
    ) as pipeline:
        yield pipeline


async def test_a_queue_kueue_will_not_admit_to_fails_until_the_spec_is_fixed(
    stack: Pipeline,
) -> None:
    pipeline, kube = stack, stack.kube
    suffix = uuid.uuid4().hex[:6]
    flavor, topology = f"inactive-{suffix}", f"racks-{suffix}"

    await apply_queue_config(kube, queue_config_spec(flavor, topology, list_topology=False))
    failed = await queue_config_where(
        pipeline, "FAILED for the missing Topology", failed_because("TopologyNotFound")
    )
    condition = ready(failed)
    assert condition["status"] == "False"
    assert condition["reason"] == "ClusterQueueInactive"
    # Kueue's own words name the Topology and the flavor.
    assert condition["message"].startswith(
        "Kueue admits no workloads to ClusterQueue inactive-q (TopologyNotFound): "
    )
    assert f'there is no Topology "{topology}" for TAS flavor "{flavor}"' in condition["message"]
    live = await kube.get(resources.KUEUE_CLUSTER_QUEUE, "inactive-q")
    [active] = [c for c in live["status"]["conditions"] if c["type"] == "Active"]
    assert (active["status"], active["reason"]) == ("False", "TopologyNotFound")

    async def warned() -> list[Any] | Pending:
        events = await kube.list(
            resources.EVENT, namespace="default", field_selector="reason=KaiwoQueueConfigFailed"
        )
        found = [e for e in events.items if topology in e["message"] and e["type"] == "Warning"]
        return found or Pending(f"{[e['message'] for e in events.items]}")

    await eventually(warned, what="the Warning Event", within=STEP)

    # Listing the Topology makes Kueue admit to the queue: READY.
    await apply_queue_config(kube, queue_config_spec(flavor, topology, list_topology=True))
    await queue_config_where(pipeline, "READY once the Topology exists", is_ready)

    # A queue naming an AdmissionCheck nobody created: FAILED in Kueue's words again.
    await apply_queue_config(
        kube,
        queue_config_spec(
            flavor, topology, list_topology=True, admission_check=f"missing-{suffix}"
        ),
    )
    failed = await queue_config_where(
        pipeline, "FAILED for the missing AdmissionCheck", failed_because("AdmissionCheck")
    )
    assert ready(failed)["reason"] == "ClusterQueueInactive"
    assert f"missing-{suffix}" in ready(failed)["message"]

    await apply_queue_config(kube, queue_config_spec(flavor, topology, list_topology=True))
    await queue_config_where(pipeline, "READY without the AdmissionCheck", is_ready)
