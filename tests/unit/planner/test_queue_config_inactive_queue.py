"""A KaiwoQueueConfig is not READY while Kueue admits no workloads to one of its ClusterQueues
(the queue's ``Active`` condition is False), unless Kueue is only catching up with objects
just created, or the queue's ``stopPolicy`` holds it (decision 0121). Expected values by hand.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoConfig
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import KaiwoQueueConfig
from kaiwo_contracts.plans import EventIntent, Plan
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


def test_a_flavor_naming_a_topology_nobody_creates_fails_with_kueues_words() -> None:
    p = plan(spec_with(), flavor(), cluster_queue(inactive("TopologyNotFound", NO_TOPOLOGY)))

    message = f"Kueue admits no workloads to ClusterQueue q (TopologyNotFound): {NO_TOPOLOGY}"
    assert phase_and_ready(p) == ("FAILED", "False", "ClusterQueueInactive", message)
    assert p.events == (
        EventIntent(type="Warning", reason="KaiwoQueueConfigFailed", message=message),
    )
    # The objects are still applied as the spec says: adding the Topology fixes the queue.
    assert [o["kind"] for o in p.desired] == ["ClusterQueue", "ResourceFlavor"]


def test_a_missing_admission_check_fails() -> None:
    p = plan(
        spec_with(admission_checks=True),
        flavor(),
        cluster_queue(inactive("AdmissionCheckNotFound", NO_CHECK), admission_checks=True),
    )

    assert phase_and_ready(p) == (
        "FAILED",
        "False",
        "ClusterQueueInactive",
        f"Kueue admits no workloads to ClusterQueue q (AdmissionCheckNotFound): {NO_CHECK}",
    )


def test_ready_again_once_kueue_admits_to_the_queue() -> None:
    failed = plan(spec_with(), flavor(), cluster_queue(inactive("TopologyNotFound", NO_TOPOLOGY)))
    assert failed.status is not None

    p = plan(
        spec_with(topologies=True),
        flavor(),
        kueue("Topology", "racks", LEVELS),
        cluster_queue(ACTIVE),
        status=failed.status,
    )

    assert phase_and_ready(p) == (
        "READY",
        "True",
        "KueueObjectsMatch",
        "Kueue objects match the KaiwoQueueConfig",
    )
    assert [e.reason for e in p.events] == ["KaiwoQueueConfigReady"]


def test_kueue_catching_up_with_a_topology_created_with_the_queue_is_on_its_way() -> None:
    p = plan(
        spec_with(topologies=True),
        flavor(),
        kueue("Topology", "racks", LEVELS),
        cluster_queue(inactive("TopologyNotFound", NO_TOPOLOGY)),
    )

    assert phase_and_ready(p) == ("PENDING", "False", "KueueObjectsPending", ON_THE_WAY)
    assert p.events == ()


def test_kueue_catching_up_with_a_flavor_created_with_the_queue_is_on_its_way() -> None:
    flavor_missing = "Can't admit new workloads: references missing ResourceFlavor(s): [gpu]."
    p = plan(
        spec_with(topologies=True),
        flavor(),
        kueue("Topology", "racks", LEVELS),
        cluster_queue(inactive("FlavorNotFound", flavor_missing)),
    )

    assert phase_and_ready(p) == ("PENDING", "False", "KueueObjectsPending", ON_THE_WAY)


def test_a_verdict_kueue_gave_an_earlier_spec_of_the_queue_is_not_taken() -> None:
    p = plan(
        spec_with(),
        flavor(),
        cluster_queue(inactive("AdmissionCheckNotFound", NO_CHECK), generation=2),
    )

    assert phase_and_ready(p) == ("PENDING", "False", "KueueObjectsPending", ON_THE_WAY)


def test_a_queue_its_stop_policy_holds_is_as_the_user_asked() -> None:
    stopped = copy.deepcopy(spec_with(topologies=True))
    stopped["clusterQueues"][0]["spec"]["stopPolicy"] = "Hold"
    live = cluster_queue(inactive("Stopped", "Can't admit new workloads: is stopped."))
    live["spec"]["stopPolicy"] = "Hold"

    p = plan(stopped, flavor(), kueue("Topology", "racks", LEVELS), live)

    assert phase_and_ready(p)[:3] == ("READY", "True", "KueueObjectsMatch")


def test_objects_on_their_way_come_before_kueues_verdict() -> None:
    # The Topology is not observed yet: Kueue's TopologyNotFound is expected, not a failure.
    p = plan(
        spec_with(topologies=True),
        flavor(),
        cluster_queue(inactive("TopologyNotFound", NO_TOPOLOGY)),
    )

    assert phase_and_ready(p) == ("PENDING", "False", "KueueObjectsPending", ON_THE_WAY)
    assert p.events == ()


def test_kueue_catching_up_with_a_flavor_whose_topology_is_missing_is_not_yet_a_failure() -> None:
    # Seen on the real Kueue: FlavorNotFound comes first, TopologyNotFound a moment later.
    # The flavor exists, so only the second is the user's to fix.
    flavor_missing = "Can't admit new workloads: references missing ResourceFlavor(s): [gpu]."
    p = plan(spec_with(), flavor(), cluster_queue(inactive("FlavorNotFound", flavor_missing)))

    assert phase_and_ready(p) == ("PENDING", "False", "KueueObjectsPending", ON_THE_WAY)
    assert p.events == ()


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
