"""A KaiwoQueueConfig's ClusterQueues as the real Kueue holds them (decision 0121). Expected
values by hand.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoConfig
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import KaiwoQueueConfig
from kaiwo_contracts.plans import Plan
from kaiwo_planner.domain.queues.queue_config import plan_queue_config
from kaiwo_planner.domain.state.cluster import ClusterState

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
KUEUE = "kueue.x-k8s.io/v1beta1"
LABELS = {"app.kubernetes.io/managed-by": "kaiwo", "kaiwo.silogen.ai/queue-config": "kaiwo"}
OWNER = {
    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoQueueConfig",
    "name": "kaiwo",
    "uid": "kqc-uid",
    "controller": True,
    "blockOwnerDeletion": True,
}
QUEUE_SPEC: dict[str, Any] = {
    "namespaceSelector": {},
    "resourceGroups": [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": "gpu", "resources": [{"name": "cpu", "nominalQuota": "8"}]}],
        }
    ],
}
LEVELS = {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}
NO_TOPOLOGY = 'Can\'t admit new workloads: there is no Topology "racks" for TAS flavor "gpu".'
NO_CHECK = "Can't admit new workloads: references missing AdmissionCheck(s): [prov]."
ON_THE_WAY = "Kueue objects are being created or updated to match the KaiwoQueueConfig"


def kueue(kind: str, name: str, spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    metadata = {
        "name": name,
        "uid": f"{kind}-{name}",
        "resourceVersion": "5",
        "generation": 1,
        "labels": dict(LABELS),
        "ownerReferences": [dict(OWNER)],
        **extra.pop("metadata", {}),
    }
    return {"apiVersion": KUEUE, "kind": kind, "metadata": metadata, "spec": spec, **extra}


def spec_with(*, topologies: bool = False, admission_checks: bool = False) -> dict[str, Any]:
    queue_spec = copy.deepcopy(QUEUE_SPEC)
    if admission_checks:
        queue_spec["admissionChecks"] = ["prov"]
    spec: dict[str, Any] = {
        "resourceFlavors": [{"name": "gpu", "nodeLabels": {"pool": "a"}, "topologyName": "racks"}],
        "clusterQueues": [{"name": "q", "spec": queue_spec}],
    }
    if topologies:
        spec["topologies"] = [{"metadata": {"name": "racks"}, "spec": LEVELS}]
    return spec


def flavor() -> dict[str, Any]:
    return kueue("ResourceFlavor", "gpu", {"topologyName": "racks", "nodeLabels": {"pool": "a"}})


def cluster_queue(
    active: dict[str, Any] | None, *, admission_checks: bool = False, generation: int = 1
) -> dict[str, Any]:
    spec = copy.deepcopy(QUEUE_SPEC)
    if admission_checks:  # as Kueue stores them
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov"}]}
    status = {"conditions": [{"type": "Active", **active}]} if active is not None else {}
    return kueue("ClusterQueue", "q", spec, status=status, metadata={"generation": generation})


def inactive(reason: str, message: str, observed_generation: int = 1) -> dict[str, Any]:
    return {
        "status": "False",
        "reason": reason,
        "message": message,
        "observedGeneration": observed_generation,
    }


ACTIVE = {"status": "True", "reason": "Ready", "message": "Can admit new workloads"}


def plan(
    spec: dict[str, Any], *objects: dict[str, Any], status: dict[str, Any] | None = None
) -> Plan:
    wire: dict[str, Any] = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo", "uid": "kqc-uid", "generation": 2, "resourceVersion": "9"},
        "spec": spec,
    }
    if status is not None:
        wire["status"] = status
    return plan_queue_config(
        queue_config=KaiwoQueueConfig.from_wire(wire),
        kaiwo_config=KaiwoConfig.from_wire({"metadata": {"name": "kaiwo"}, "spec": {}}),
        cluster=ClusterState.from_wire(objects=objects),
        now=NOW,
    )


def phase_and_ready(p: Plan) -> tuple[str, str, str, str]:
    assert p.status is not None
    [ready] = [c for c in p.status["conditions"] if c["type"] == "Ready"]
    return p.status["status"], ready["status"], ready["reason"], ready["message"]


def test_admission_checks_are_asked_for_in_the_form_kueue_stores() -> None:
    # Kueue 0.15+ serves `admissionChecks: [prov]` back as this strategy: asked for in the
    # other form, the queue never looked as asked and the KaiwoQueueConfig stayed PENDING.
    strategy = {"admissionChecks": [{"name": "prov"}]}
    stored = kueue(
        "ClusterQueue",
        "q",
        {**copy.deepcopy(QUEUE_SPEC), "admissionChecksStrategy": strategy},
        status={"conditions": [{"type": "Active", **ACTIVE}]},
    )

    p = plan(
        spec_with(topologies=True, admission_checks=True),
        flavor(),
        kueue("Topology", "racks", LEVELS),
        stored,
    )

    [queue] = [o for o in p.desired if o["kind"] == "ClusterQueue"]
    assert queue["spec"] == {**QUEUE_SPEC, "admissionChecksStrategy": strategy}
    assert phase_and_ready(p)[:3] == ("READY", "True", "KueueObjectsMatch")
