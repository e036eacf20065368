"""A KaiwoQueueConfig's status tells whether its Kueue objects are as desired, and a change
Kueue's CRDs refuse in place is planned as delete and create, except while admitted workloads
use the object (decision 0048). Expected values by hand."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from kaiwo_contracts.confinement import refusals
from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoConfig
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import KaiwoQueueConfig
from kaiwo_contracts.plans import EventIntent, FinalizerRelease, ObjectRef, Plan
from kaiwo_planner.domain.queues.kueue_sync import ImmutableChange, immutable_changes
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
QUEUE_SPEC = {
    "namespaceSelector": {},
    "resourceGroups": [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": "gpu", "resources": [{"name": "cpu", "nominalQuota": "8"}]}],
        }
    ],
}
SPEC_WITHOUT_TOPOLOGY = {
    "resourceFlavors": [{"name": "gpu", "nodeLabels": {"pool": "a"}}],
    "clusterQueues": [{"name": "q", "spec": QUEUE_SPEC}],
}
IN_USE = "kueue.x-k8s.io/resource-in-use"
TOPOLOGY_RULE = "topologyName is immutable when topologyName is set"
LABELS_RULE = "nodeLabels are immutable when topologyName is set"
RECREATE_MESSAGE = (
    "ResourceFlavor gpu is deleted to be created again: "
    f"spec.topologyName cannot change in place ({TOPOLOGY_RULE}); "
    f"spec.nodeLabels cannot change in place ({LABELS_RULE})"
)


def kueue(kind: str, name: str, spec: dict[str, Any], *, uid: str, **extra: Any) -> dict[str, Any]:
    metadata = {
        "name": name,
        "uid": uid,
        "resourceVersion": "5",
        "labels": dict(LABELS),
        "ownerReferences": [dict(OWNER)],
        **extra.pop("metadata", {}),
    }
    return {"apiVersion": KUEUE, "kind": kind, "metadata": metadata, "spec": spec, **extra}


def flavor_with_topology(**metadata: Any) -> dict[str, Any]:
    spec = {"topologyName": "default-topology", "nodeLabels": {"pool": "a"}}
    return kueue("ResourceFlavor", "gpu", spec, uid="rf-old", metadata=metadata)


def queue(status: dict[str, Any] | None = None) -> dict[str, Any]:
    extra = {"status": status} if status is not None else {}
    return kueue("ClusterQueue", "q", copy.deepcopy(QUEUE_SPEC), uid="cq-1", **extra)


def plan(
    spec: dict[str, Any],
    *objects: dict[str, Any],
    workloads: tuple[dict[str, Any], ...] = (),
    status: dict[str, Any] | None = None,
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
        cluster=ClusterState.from_wire(objects=objects, kueue_workloads=workloads),
        now=NOW,
    )


def flavor_in(p: Plan) -> dict[str, Any]:
    [flavor] = [o for o in p.desired if o["kind"] == "ResourceFlavor"]
    return flavor


def ready_condition(p: Plan) -> dict[str, Any]:
    assert p.status is not None
    [condition] = [c for c in p.status["conditions"] if c["type"] == "Ready"]
    return condition


def test_removing_a_flavors_topology_deletes_it_and_creates_it_anew() -> None:
    p = plan(SPEC_WITHOUT_TOPOLOGY, flavor_with_topology(), queue())

    assert p.delete == (
        ObjectRef(api_version=KUEUE, kind="ResourceFlavor", name="gpu", uid="rf-old"),
    )
    assert flavor_in(p)["spec"] == {"nodeLabels": {"kaiwo/worker": "true", "pool": "a"}}
    assert p.status is not None and p.status["status"] == "PENDING"
    assert ready_condition(p) == {
        "type": "Ready",
        "status": "False",
        "observedGeneration": 2,
        "lastTransitionTime": "2026-01-01T12:00:00Z",
        "reason": "KueueObjectsPending",
        "message": "Kueue objects are not yet as the KaiwoQueueConfig describes: "
        + RECREATE_MESSAGE,
    }
    assert p.events == (
        EventIntent(
            type="Normal",
            reason="KaiwoQueueConfigResourceFlavorRecreated",
            message=RECREATE_MESSAGE,
        ),
    )


def test_a_flavor_admitted_workloads_use_is_kept_and_the_status_says_why() -> None:
    reserving = {
        "admittedWorkloads": 2,
        "reservingWorkloads": 2,
        "flavorsReservation": [{"name": "gpu", "resources": [{"name": "cpu", "total": "4"}]}],
    }
    p = plan(SPEC_WITHOUT_TOPOLOGY, flavor_with_topology(), queue(reserving))

    assert p.delete == ()
    # The guarded fields stay as they are; nothing the API server refuses is asked for.
    assert flavor_in(p)["spec"] == {"topologyName": "default-topology", "nodeLabels": {"pool": "a"}}
    assert p.status is not None and p.status["status"] == "PENDING"
    message = (
        f"ResourceFlavor gpu: spec.topologyName cannot change in place ({TOPOLOGY_RULE}); "
        f"spec.nodeLabels cannot change in place ({LABELS_RULE}); it is not deleted to be "
        "created again while admitted workloads use it (ClusterQueue q holds quota of it)"
    )
    assert ready_condition(p)["reason"] == "KueueObjectInUse"
    assert ready_condition(p)["message"] == message
    assert p.events == (EventIntent(type="Warning", reason="KueueObjectInUse", message=message),)

    # Planned again with that status, the warning is not repeated.
    again = plan(SPEC_WITHOUT_TOPOLOGY, flavor_with_topology(), queue(reserving), status=p.status)
    assert again.events == ()
    assert again.status == p.status


def test_a_kueue_workload_assigned_to_the_flavor_holds_it_too() -> None:
    workload = {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": "job-train-1a2b3",
            "namespace": "ml",
            "uid": "wl-1",
            "resourceVersion": "3",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "uid": "job-1"}],
        },
        "spec": {"queueName": "q"},
        "status": {
            "admission": {
                "clusterQueue": "q",
                "podSetAssignments": [{"name": "main", "flavors": {"cpu": "gpu"}}],
            }
        },
    }
    p = plan(SPEC_WITHOUT_TOPOLOGY, flavor_with_topology(), queue(), workloads=(workload,))
    assert p.delete == ()
    assert ready_condition(p)["message"].endswith(
        "while admitted workloads use it (Workloads ml/job-train-1a2b3)"
    )

    finished = copy.deepcopy(workload)
    finished["status"]["conditions"] = [{"type": "Finished", "status": "True"}]
    p = plan(SPEC_WITHOUT_TOPOLOGY, flavor_with_topology(), queue(), workloads=(finished,))
    assert [ref.uid for ref in p.delete] == ["rf-old"]


def test_a_flavor_still_being_deleted_is_waited_for() -> None:
    terminating = flavor_with_topology(deletionTimestamp="2026-01-01T11:59:00Z")
    p = plan(SPEC_WITHOUT_TOPOLOGY, terminating, queue())

    # Named again so the executor creates the new one (once the old is gone), never updates it.
    assert p.delete == (
        ObjectRef(api_version=KUEUE, kind="ResourceFlavor", name="gpu", uid="rf-old"),
    )
    assert ready_condition(p)["message"] == (
        "Kueue objects are not yet as the KaiwoQueueConfig describes: "
        "ResourceFlavor gpu is being deleted; it is created again once it is gone"
    )
    assert p.events == ()


def test_a_mutable_change_is_applied_in_place() -> None:
    spec = copy.deepcopy(SPEC_WITHOUT_TOPOLOGY)
    spec["resourceFlavors"] = [
        {
            "name": "gpu",
            "nodeLabels": {"pool": "a"},
            "topologyName": "default-topology",
            "taints": [{"key": "gpu", "effect": "NoSchedule"}],
        }
    ]
    topology = kueue(
        "Topology",
        "default-topology",
        {
            "levels": [
                {"nodeLabel": "kaiwo/topology-block"},
                {"nodeLabel": "kaiwo/topology-rack"},
                {"nodeLabel": "kubernetes.io/hostname"},
            ]
        },
        uid="topo-1",
    )
    p = plan(spec, flavor_with_topology(), queue(), topology)

    assert p.delete == ()
    assert p.events == ()
    assert ready_condition(p)["message"] == (
        "Kueue objects are being created or updated to match the KaiwoQueueConfig"
    )


def test_everything_as_desired_is_ready() -> None:
    flavor = kueue(
        "ResourceFlavor", "gpu", {"nodeLabels": {"kaiwo/worker": "true", "pool": "a"}}, uid="rf"
    )
    p = plan(SPEC_WITHOUT_TOPOLOGY, flavor, queue({"admittedWorkloads": 3}))
    assert p.status is not None and p.status["status"] == "READY"
    assert ready_condition(p)["message"] == "Kueue objects match the KaiwoQueueConfig"
    assert p.delete == ()


def test_an_object_another_owner_holds_is_not_ready() -> None:
    flavor = kueue(
        "ResourceFlavor", "gpu", {"nodeLabels": {"kaiwo/worker": "true", "pool": "a"}}, uid="rf"
    )
    flavor["metadata"]["ownerReferences"] = []
    p = plan(SPEC_WITHOUT_TOPOLOGY, flavor, queue())
    assert ready_condition(p)["message"] == (
        "Kueue objects are not yet as the KaiwoQueueConfig describes: "
        "ResourceFlavor gpu exists and is not this KaiwoQueueConfig's"
    )
    assert p.delete == ()


def test_the_fields_kueue_guards() -> None:
    levels = {"levels": [{"nodeLabel": "a"}]}
    assert immutable_changes(
        "Topology", live={"spec": levels}, wanted={"spec": {"levels": [{"nodeLabel": "b"}]}}
    ) == (ImmutableChange("spec.levels", "field is immutable"),)
    assert immutable_changes("Topology", live={"spec": levels}, wanted={"spec": levels}) == ()
    assert immutable_changes(
        "LocalQueue", live={"spec": {"clusterQueue": "a"}}, wanted={"spec": {"clusterQueue": "b"}}
    ) == (ImmutableChange("spec.clusterQueue", "field is immutable"),)
    # Without a topology a flavor's labels and tolerations may change, and it may gain one.
    assert (
        immutable_changes(
            "ResourceFlavor",
            live={"spec": {"nodeLabels": {"a": "1"}}},
            wanted={"spec": {"nodeLabels": {"a": "2"}, "topologyName": "t"}},
        )
        == ()
    )
    toleration = {"key": "k", "operator": "Exists", "effect": "NoSchedule"}
    assert immutable_changes(
        "ResourceFlavor",
        live={"spec": {"topologyName": "t", "nodeLabels": {"a": "1"}}},
        wanted={
            "spec": {"topologyName": "t", "nodeLabels": {"a": "1"}, "tolerations": [toleration]}
        },
    ) == (
        ImmutableChange("spec.tolerations", "tolerations are immutable when topologyName is set"),
    )
    # A ClusterQueue has no field its CRD guards so.
    assert (
        immutable_changes(
            "ClusterQueue", live={"spec": {"cohort": "a"}}, wanted={"spec": {"cohort": "b"}}
        )
        == ()
    )


def test_kueues_finalizer_is_released_from_a_flavor_replaced_and_only_then() -> None:
    held_by_kueue = flavor_with_topology(finalizers=[IN_USE, "example.com/other"])
    p = plan(SPEC_WITHOUT_TOPOLOGY, held_by_kueue, queue())

    old = ObjectRef(api_version=KUEUE, kind="ResourceFlavor", name="gpu", uid="rf-old")
    assert p.delete == (old,)
    # Kueue keeps a flavor any ClusterQueue names; only its own finalizer is taken off.
    assert p.release_finalizers == (FinalizerRelease(target=old, finalizers=(IN_USE,)),)
    owner = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo", "uid": "kqc-uid"},
    }
    assert refusals(p, owner=owner) == ()

    # Still deleting (a plan before did delete it): released again, as long as nobody uses it.
    deleting = flavor_with_topology(finalizers=[IN_USE], deletionTimestamp="2026-01-01T11:59:00Z")
    p = plan(SPEC_WITHOUT_TOPOLOGY, deleting, queue())
    assert p.release_finalizers == (FinalizerRelease(target=old, finalizers=(IN_USE,)),)
    busy = {"admittedWorkloads": 1, "reservingWorkloads": 1}
    busy["flavorsUsage"] = [{"name": "gpu", "resources": [{"name": "cpu", "total": "1"}]}]
    p = plan(SPEC_WITHOUT_TOPOLOGY, deleting, queue(busy))
    assert p.delete == (old,)
    assert p.release_finalizers == ()

    # In use, nothing is deleted and nothing released.
    p = plan(SPEC_WITHOUT_TOPOLOGY, held_by_kueue, queue(busy))
    assert (p.delete, p.release_finalizers) == ((), ())


def test_the_confinement_releases_only_kueues_finalizer_of_an_object_the_plan_deletes() -> None:
    p = plan(SPEC_WITHOUT_TOPOLOGY, flavor_with_topology(finalizers=[IN_USE]), queue())
    owner = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo", "uid": "kqc-uid"},
    }
    queue_ref = ObjectRef(api_version=KUEUE, kind="ClusterQueue", name="q", uid="cq-1")
    [release] = p.release_finalizers
    forged = p.model_copy(
        update={
            "release_finalizers": (
                FinalizerRelease(target=queue_ref, finalizers=(IN_USE,)),
                release.model_copy(update={"finalizers": ("example.com/other",)}),
            )
        }
    )
    assert refusals(forged, owner=owner) == (
        "finalizers of ClusterQueue/q: not an object the plan deletes",
        "finalizers of ResourceFlavor/gpu: may not release example.com/other",
    )


# ------------------------------------------------ objects removed from the spec Kueue keeps (0126)

READY_FLAVOR = {"nodeLabels": {"kaiwo/worker": "true", "pool": "a"}}


def removed_queue(status: dict[str, Any]) -> dict[str, Any]:
    """ClusterQueue ``old``, removed from the spec and pruned: Kueue's finalizer keeps it."""
    return kueue(
        "ClusterQueue",
        "old",
        copy.deepcopy(QUEUE_SPEC),
        uid="cq-old",
        status=status,
        metadata={"deletionTimestamp": "2026-01-01T11:59:00Z", "finalizers": [IN_USE]},
    )


def test_a_removed_queue_kueue_keeps_for_its_admitted_workloads_is_told() -> None:
    flavor = kueue("ResourceFlavor", "gpu", READY_FLAVOR, uid="rf")
    leaving = removed_queue({"admittedWorkloads": 1, "reservingWorkloads": 1})
    p = plan(SPEC_WITHOUT_TOPOLOGY, flavor, queue(), leaving)

    # Not READY while the cluster still holds a queue the spec does not: the status says which,
    # why and until when; one Warning; nothing more is asked of it (Kueue's to release).
    message = (
        "ClusterQueue old is no longer in the KaiwoQueueConfig and is being deleted; Kueue keeps "
        "it while admitted workloads use it (ClusterQueue old: 1 admitted, 1 reserving quota); "
        "it is gone once they finish"
    )
    assert p.status is not None and p.status["status"] == "PENDING"
    assert ready_condition(p)["reason"] == "KueueObjectInUse"
    assert ready_condition(p)["message"] == message
    assert p.events == (EventIntent(type="Warning", reason="KueueObjectInUse", message=message),)
    assert p.delete == () and p.release_finalizers == ()
    assert [o["metadata"]["name"] for o in p.desired if o["kind"] == "ClusterQueue"] == ["q"]

    # Planned again with that status: no second Warning.
    again = plan(SPEC_WITHOUT_TOPOLOGY, flavor, queue(), leaving, status=p.status)
    assert again.events == ()

    # The workload finished (Kueue counts none): nothing to tell, READY.
    idle = plan(SPEC_WITHOUT_TOPOLOGY, flavor, queue(), removed_queue({}), status=p.status)
    assert idle.status is not None and idle.status["status"] == "READY"
    assert [e.reason for e in idle.events] == ["KaiwoQueueConfigReady"]


def test_a_queue_being_deleted_and_wanted_again_names_what_keeps_it() -> None:
    # KaiwoConfig's default queue name changed and changed back while a job ran in it.
    flavor = kueue("ResourceFlavor", "gpu", READY_FLAVOR, uid="rf")
    terminating = queue({"admittedWorkloads": 1})
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T11:59:00Z"
    p = plan(SPEC_WITHOUT_TOPOLOGY, flavor, terminating)

    assert ready_condition(p)["message"] == (
        "Kueue objects are not yet as the KaiwoQueueConfig describes: ClusterQueue q is being "
        "deleted; Kueue keeps it while admitted workloads use it (ClusterQueue q: 1 admitted, "
        "0 reserving quota); it is created again once it is gone"
    )


# ------------------------------------------ a ClusterQueue edited by hand is not READY (0226)

TWO_FLAVOR_QUEUE = {
    "resourceGroups": [
        {
            "coveredResources": ["cpu"],
            "flavors": [
                {"name": "gpu", "resources": [{"name": "cpu", "nominalQuota": "8"}]},
                {"name": "spare", "resources": [{"name": "cpu", "nominalQuota": "4"}]},
            ],
        }
    ],
}
TWO_FLAVORS = {
    "resourceFlavors": [
        {"name": "gpu", "nodeLabels": {"pool": "a"}},
        {"name": "spare", "nodeLabels": {"pool": "b"}},
    ],
    "clusterQueues": [{"name": "q", "spec": TWO_FLAVOR_QUEUE}],
}
QUEUE_AS_SERVED = {
    # What the API server holds after the operator's apply: what it sent (namespaceSelector
    # {} and the resource groups, quantities canonical) and the defaults of Kueue's CRD.
    "namespaceSelector": {},
    "resourceGroups": [
        {
            "coveredResources": ["cpu"],
            "flavors": [
                {"name": "gpu", "resources": [{"name": "cpu", "nominalQuota": "8"}]},
                {"name": "spare", "resources": [{"name": "cpu", "nominalQuota": "4"}]},
            ],
        }
    ],
    "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
    "preemption": {
        "borrowWithinCohort": {"policy": "Never"},
        "reclaimWithinCohort": "Never",
        "withinClusterQueue": "Never",
    },
    "queueingStrategy": "BestEffortFIFO",
    "stopPolicy": "None",
}
UPDATING = "Kueue objects are being created or updated to match the KaiwoQueueConfig"


def two_flavor_plan(
    queue_spec: dict[str, Any],
    status: dict[str, Any] | None = None,
    *,
    queue_config: dict[str, Any] = TWO_FLAVORS,
) -> Plan:
    flavors = [
        kueue(
            "ResourceFlavor",
            "gpu",
            {"nodeLabels": {"kaiwo/worker": "true", "pool": "a"}},
            uid="rf-a",
        ),
        kueue(
            "ResourceFlavor",
            "spare",
            {"nodeLabels": {"kaiwo/worker": "true", "pool": "b"}},
            uid="rf-b",
        ),
    ]
    return plan(
        queue_config, *flavors, kueue("ClusterQueue", "q", queue_spec, uid="cq-1"), status=status
    )


def edited(edit: Any) -> dict[str, Any]:
    spec = copy.deepcopy(QUEUE_AS_SERVED)
    edit(spec)
    return spec


def test_a_queue_as_the_operator_applied_it_is_ready() -> None:
    p = two_flavor_plan(copy.deepcopy(QUEUE_AS_SERVED))
    assert ready_condition(p)["reason"] == "KueueObjectsMatch"


def test_a_queue_whose_flavors_were_reordered_by_hand_is_not_ready() -> None:
    # Kueue tries the flavors in this order: "spare" first is another queue.
    p = two_flavor_plan(edited(lambda s: s["resourceGroups"][0]["flavors"].reverse()))
    assert p.status is not None and p.status["status"] == "PENDING"
    assert ready_condition(p)["reason"] == "KueueObjectsPending"
    assert ready_condition(p)["message"] == UPDATING


def test_a_queue_whose_namespace_selector_was_narrowed_by_hand_is_not_ready() -> None:
    p = two_flavor_plan(
        edited(lambda s: s.update(namespaceSelector={"matchLabels": {"team": "x"}}))
    )
    assert ready_condition(p)["message"] == UPDATING


def test_a_queue_given_more_quota_by_hand_is_not_ready() -> None:
    def extra_flavor(spec: dict[str, Any]) -> None:
        spec["resourceGroups"][0]["flavors"].append(
            {"name": "zz", "resources": [{"name": "cpu", "nominalQuota": "1000"}]}
        )

    def extra_group(spec: dict[str, Any]) -> None:
        spec["resourceGroups"].append(
            {
                "coveredResources": ["amd.com/gpu"],
                "flavors": [
                    {"name": "zz", "resources": [{"name": "amd.com/gpu", "nominalQuota": "64"}]}
                ],
            }
        )

    def lending_limit(spec: dict[str, Any]) -> None:
        spec["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = "0"

    for edit in (extra_flavor, extra_group, lending_limit):
        assert ready_condition(two_flavor_plan(edited(edit)))["message"] == UPDATING, edit.__name__


SET_ELSEWHERE = (
    "ClusterQueue q is in cohort someone-elses, set outside the KaiwoQueueConfig, which leaves "
    "what it does not set: Kueue lends the queue's unused quota to its cohort and lets it "
    "borrow there. Name the cohort in the KaiwoQueueConfig to keep it, or remove it from the "
    "ClusterQueue"
)


def test_a_cohort_another_manager_added_is_left_as_it_is_and_told() -> None:
    # The operator sends no cohort: its forced apply cannot take away another manager's field
    # (checked on the real API server), so it neither counts nor is asked again (0226); the
    # queue lends and borrows there, which the KaiwoQueueConfig says, once (0274).
    p = two_flavor_plan(edited(lambda s: s.update(cohort="someone-elses")))
    said = ready_condition(p)
    assert (said["reason"], said["message"]) == (
        "KueueObjectsMatch",
        f"Kueue objects match the KaiwoQueueConfig; {SET_ELSEWHERE}",
    )
    told = [e for e in p.events if e.reason == "KueueFieldsSetElsewhere"]
    assert [(e.type, e.message) for e in told] == [("Warning", SET_ELSEWHERE)]

    again = two_flavor_plan(edited(lambda s: s.update(cohort="someone-elses")), p.status)
    assert [e for e in again.events if e.reason == "KueueFieldsSetElsewhere"] == []
    gone = two_flavor_plan(copy.deepcopy(QUEUE_AS_SERVED), p.status)
    assert ready_condition(gone)["message"] == "Kueue objects match the KaiwoQueueConfig"


def test_a_cohort_set_elsewhere_under_kueues_v1beta2_name_is_told_and_one_the_spec_names_not():
    v1beta2 = two_flavor_plan(edited(lambda s: s.update(cohortName="someone-elses")))
    assert (
        ready_condition(v1beta2)["message"]
        == f"Kueue objects match the KaiwoQueueConfig; {SET_ELSEWHERE}"
    )

    named = copy.deepcopy(TWO_FLAVORS)
    named["clusterQueues"][0]["spec"]["cohort"] = "team"
    own = two_flavor_plan(edited(lambda s: s.update(cohort="team")), queue_config=named)
    assert ready_condition(own)["message"] == "Kueue objects match the KaiwoQueueConfig"
    assert [e for e in own.events if e.reason == "KueueFieldsSetElsewhere"] == []
