"""While a ClusterQueue the operator pruned still holds quota (Kueue keeps it for its admitted
workloads), the generated default queue's quota of the same flavors is lowered by that much,
and comes back once it is gone (decision 0142). Expected values by hand."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoConfig
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import KaiwoQueueConfig
from kaiwo_contracts.plans import EventIntent, Plan
from kaiwo_planner.domain.queues.queue_config import plan_queue_config
from kaiwo_planner.domain.queues.quota_held_back import (
    HELD_BACK_ANNOTATION,
    LeavingUsage,
    give_back,
    hold_back,
    leaving_queue_usage,
    quantity_text,
)
from kaiwo_planner.domain.state.cluster import ClusterState

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
KUEUE = "kueue.x-k8s.io/v1beta1"
AMD_POOL = "amd-mi300x-8gpu-115core-1843gi"
LABELS = {"app.kubernetes.io/managed-by": "kaiwo", "kaiwo.silogen.ai/queue-config": "kaiwo"}
OWNER = {
    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoQueueConfig",
    "name": "kaiwo",
    "uid": "kqc-uid",
    "controller": True,
    "blockOwnerDeletion": True,
}
IN_USE = "kueue.x-k8s.io/resource-in-use"


def quota(cpu: str, memory: str, gpus: str, flavor: str = AMD_POOL) -> dict[str, Any]:
    return {
        "name": flavor,
        "resources": [
            {"name": "cpu", "nominalQuota": cpu},
            {"name": "memory", "nominalQuota": memory},
            {"name": "amd.com/gpu", "nominalQuota": gpus},
        ],
    }


def cluster_queue(name: str, *flavors: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name, **metadata},
        "spec": {
            "namespaceSelector": {},
            "cohort": "kaiwo",
            "resourceGroups": [
                {"coveredResources": ["cpu", "memory", "amd.com/gpu"], "flavors": list(flavors)}
            ],
        },
    }


def usage(flavor: str, **totals: str) -> list[dict[str, Any]]:
    """Kueue's ``flavorsUsage`` entry; ``gpu`` stands for ``amd.com/gpu``."""
    return [
        {
            "name": flavor,
            "resources": [
                {"name": "amd.com/gpu" if name == "gpu" else name, "total": total, "borrowed": "0"}
                for name, total in totals.items()
            ],
        }
    ]


# ------------------------------------------------------------------------ the pure functions


def test_the_default_queue_is_lowered_by_what_the_leaving_queue_holds() -> None:
    queue = cluster_queue(
        "research", quota("230", "3686Gi", "16"), quota("14", "57Gi", "0", flavor="cpu-pool")
    )
    leaving = [
        LeavingUsage(
            "kaiwo",
            {AMD_POOL: {"amd.com/gpu": Decimal(8), "cpu": Decimal(2), "memory": Decimal(4 << 30)}},
        )
    ]

    lowered, held_back = hold_back(queue, leaving)

    assert lowered == cluster_queue(
        "research",
        quota("228", "3682Gi", "8"),
        quota("14", "57Gi", "0", flavor="cpu-pool"),
        annotations={
            HELD_BACK_ANNOTATION: (
                '{"amd-mi300x-8gpu-115core-1843gi":{"amd.com/gpu":"8","cpu":"2","memory":"4Gi"}}'
            )
        },
    )
    assert held_back is not None
    assert held_back.describe() == (
        "ClusterQueue research's nominal quota is lowered by what admitted workloads of a "
        "ClusterQueue no longer in force still hold of the same nodes: ClusterQueue kaiwo "
        f"({AMD_POOL}: amd.com/gpu 8, cpu 2, memory 4Gi); it comes back once Kueue lets them go"
    )
    # The quota it was: given back from the annotation (a made-once queue read back).
    annotations = lowered["metadata"]["annotations"]
    assert (
        give_back(lowered["spec"]["resourceGroups"], annotations)
        == (queue["spec"]["resourceGroups"])
    )


def test_never_below_zero_and_only_what_was_taken_is_recorded() -> None:
    queue = cluster_queue("research", quota("115", "1843Gi", "8"))
    two = [
        LeavingUsage("a", {AMD_POOL: {"amd.com/gpu": Decimal(6), "cpu": Decimal("0.5")}}),
        LeavingUsage("b", {AMD_POOL: {"amd.com/gpu": Decimal(6)}}),
        LeavingUsage("c", {"other-flavor": {"amd.com/gpu": Decimal(8)}}),
    ]

    lowered, held_back = hold_back(queue, two)

    assert lowered["spec"]["resourceGroups"][0]["flavors"] == [quota("114500m", "1843Gi", "0")]
    assert lowered["metadata"]["annotations"] == {
        HELD_BACK_ANNOTATION: f'{{"{AMD_POOL}":{{"amd.com/gpu":"8","cpu":"500m"}}}}'
    }
    assert held_back is not None
    assert [holder.queue for holder in held_back.holders] == ["a", "b"]  # c holds other nodes
    assert (
        give_back(lowered["spec"]["resourceGroups"], lowered["metadata"]["annotations"])
        == (queue["spec"]["resourceGroups"])
    )


def test_nothing_held_of_its_flavors_leaves_the_queue_as_it_is() -> None:
    queue = cluster_queue("research", quota("115", "1843Gi", "8"))
    other = [LeavingUsage("c", {"other-flavor": {"amd.com/gpu": Decimal(8)}})]

    assert hold_back(queue, other) == (queue, None)
    assert give_back(queue["spec"]["resourceGroups"], {}) == queue["spec"]["resourceGroups"]
    assert (
        give_back(queue["spec"]["resourceGroups"], {HELD_BACK_ANNOTATION: "not json"})
        == (queue["spec"]["resourceGroups"])
    )


def test_a_leaving_queue_holds_the_larger_of_kueues_reservation_and_usage() -> None:
    old = cluster_queue("old", quota("115", "1843Gi", "8"))
    old["status"] = {
        "flavorsReservation": usage(AMD_POOL, gpu="8", cpu="3", memory="0"),
        "flavorsUsage": usage(AMD_POOL, gpu="4", cpu="4", memory="1073741824"),
    }
    idle = cluster_queue("idle", quota("115", "1843Gi", "8"))
    idle["status"] = {"flavorsUsage": usage(AMD_POOL, gpu="0", cpu="0")}
    wanted = cluster_queue("research", quota("115", "1843Gi", "8"))
    wanted["status"] = {"flavorsUsage": usage(AMD_POOL, gpu="8")}

    assert leaving_queue_usage([wanted, old, idle], wanted=["research"]) == (
        LeavingUsage(
            "old",
            {AMD_POOL: {"amd.com/gpu": Decimal(8), "cpu": Decimal(4), "memory": Decimal(1 << 30)}},
        ),
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Decimal(0), "0"),
        (Decimal(8), "8"),
        (Decimal(1 << 30), "1Gi"),
        (Decimal((1 << 30) + 1), "1073741825"),
        (Decimal("0.5"), "500m"),
        (Decimal("0.0005"), "0m"),
    ],
)
def test_amounts_written_as_quantities(value: Decimal, text: str) -> None:
    assert quantity_text(value) == text


# ------------------------------------------------------------- the plan, a default queue renamed

NODE_LABELS = {"kaiwo/nodepool": AMD_POOL}


def old_default_queue(status: dict[str, Any], *, deleting: bool = True) -> dict[str, Any]:
    """ClusterQueue ``kaiwo``, the default queue before the rename, as Kueue keeps it."""
    meta: dict[str, Any] = {
        "uid": "cq-old",
        "labels": dict(LABELS),
        "ownerReferences": [dict(OWNER)],
    }
    if deleting:
        meta |= {"deletionTimestamp": "2026-01-01T11:59:00Z", "finalizers": [IN_USE]}
    queue = cluster_queue("kaiwo", quota("115", "1843Gi", "8"), **meta)
    queue["status"] = status
    return queue


HOLDING = {
    "admittedWorkloads": 1,
    "reservingWorkloads": 1,
    "flavorsReservation": usage(AMD_POOL, gpu="8", cpu="4", memory="16Gi"),
    "flavorsUsage": usage(AMD_POOL, gpu="8", cpu="4", memory="16Gi"),
}


def plan(
    nodes: list[dict[str, Any]],
    *objects: dict[str, Any],
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    **settings: Any,
) -> Plan:
    wire: dict[str, Any] = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo", "uid": "kqc-uid", "generation": 2, "resourceVersion": "9"},
        "spec": spec or {},
    }
    if status is not None:
        wire["status"] = status
    return plan_queue_config(
        queue_config=KaiwoQueueConfig.from_wire(wire),
        kaiwo_config=KaiwoConfig.from_wire(
            {"metadata": {"name": "kaiwo"}, "spec": {"defaultClusterQueueName": "research"}}
            | {"spec": {"defaultClusterQueueName": "research", **settings}}
        ),
        cluster=ClusterState.from_wire(nodes=nodes, objects=objects, namespaces=("ml",)),
        now=NOW,
    )


def research_in(p: Plan) -> dict[str, Any]:
    [queue] = [
        o for o in p.desired if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "research"
    ]
    return queue


def as_applied(p: Plan) -> list[dict[str, Any]]:
    """The plan's Kueue objects as the cluster holds them once applied."""
    objects = []
    for number, manifest in enumerate(p.desired, start=1):
        if not manifest["apiVersion"].startswith("kueue.x-k8s.io/"):
            continue
        obj = copy.deepcopy(manifest)
        obj["metadata"] |= {"uid": f"kueue-{number}", "resourceVersion": str(number)}
        objects.append(obj)
    return objects


def ready(p: Plan) -> dict[str, Any]:
    assert p.status is not None
    [condition] = [c for c in p.status["conditions"] if c["type"] == "Ready"]
    return condition


HELD_MESSAGE = (
    "ClusterQueue kaiwo is no longer in the KaiwoQueueConfig and is being deleted; Kueue keeps "
    "it while admitted workloads use it (ClusterQueue kaiwo: 1 admitted, 1 reserving quota); "
    "it is gone once they finish; ClusterQueue research's nominal quota is lowered by what "
    "admitted workloads of a ClusterQueue no longer in force still hold of the same nodes: "
    f"ClusterQueue kaiwo ({AMD_POOL}: amd.com/gpu 8, cpu 4, memory 16Gi); it comes back once "
    "Kueue lets them go"
)


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_renamed_default_queue_gets_only_what_the_old_one_does_not_hold(
    make_node: Any, dynamic: bool
) -> None:
    nodes = [make_node("mi300x-0", gpu="mi300x", cpu="128", memory="2Ti")]
    setting = {"dynamicallyUpdateDefaultClusterQueue": dynamic}
    first = plan(nodes, old_default_queue(HOLDING), **setting)

    # The node's 8 GPUs, 115 cores, 1843Gi are the old queue's job's: 0, 111, 1827Gi are left.
    lowered = research_in(first)
    assert lowered["spec"]["resourceGroups"][0]["flavors"] == [quota("111", "1827Gi", "0")]
    assert lowered["metadata"]["annotations"] == {
        HELD_BACK_ANNOTATION: f'{{"{AMD_POOL}":{{"amd.com/gpu":"8","cpu":"4","memory":"16Gi"}}}}'
    }
    assert first.status is not None and first.status["status"] == "PENDING"
    assert ready(first)["reason"] == "KueueObjectInUse"
    assert ready(first)["message"] == HELD_MESSAGE
    assert first.events == (
        EventIntent(type="Warning", reason="KueueObjectInUse", message=HELD_MESSAGE),
    )
    assert first.release_finalizers == ()  # Kueue's finalizer is Kueue's

    # Planned again once applied (a made-once queue's quota read back): not lowered twice,
    # and nothing more to tell.
    again = plan(
        nodes, old_default_queue(HOLDING), *as_applied(first), status=first.status, **setting
    )
    assert research_in(again) == lowered
    assert again.events == ()

    # The job is done and Kueue lets the old queue go: the full quota, no annotation, READY.
    gone = plan(nodes, *as_applied(again), status=again.status, **setting)
    restored = research_in(gone)
    assert restored["spec"]["resourceGroups"][0]["flavors"] == [quota("115", "1843Gi", "8")]
    assert "annotations" not in restored["metadata"]
    settled = plan(nodes, *as_applied(gone), status=gone.status, **setting)
    assert settled.status is not None and settled.status["status"] == "READY"
    assert research_in(settled) == restored


def test_the_old_queue_about_to_be_pruned_already_counts(make_node: Any) -> None:
    # The first plan after the rename: the old queue is not yet being deleted (this plan
    # prunes it), and its job already runs on the node. The new queue is never made whole.
    nodes = [make_node("mi300x-0", gpu="mi300x", cpu="128", memory="2Ti")]
    first = plan(nodes, old_default_queue(HOLDING, deleting=False))
    assert research_in(first)["spec"]["resourceGroups"][0]["flavors"] == [
        quota("111", "1827Gi", "0")
    ]
    assert ready(first)["message"] == HELD_MESSAGE.split("; it is gone once they finish; ")[1]


def test_a_queue_the_user_wrote_keeps_the_quota_the_user_wrote(make_node: Any) -> None:
    nodes = [make_node("mi300x-0", gpu="mi300x", cpu="128", memory="2Ti")]
    users = {
        "resourceFlavors": [{"name": AMD_POOL, "nodeLabels": NODE_LABELS}],
        "clusterQueues": [
            {
                "name": "team",
                "spec": {
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory", "amd.com/gpu"],
                            "flavors": [quota("115", "1843Gi", "8")],
                        }
                    ]
                },
            }
        ],
    }
    p = plan(nodes, old_default_queue(HOLDING), spec=users)

    [team] = [o for o in p.desired if o["kind"] == "ClusterQueue"]
    assert team["spec"]["resourceGroups"][0]["flavors"] == [quota("115", "1843Gi", "8")]
    assert "annotations" not in team["metadata"]
    assert "lowered" not in ready(p)["message"]
