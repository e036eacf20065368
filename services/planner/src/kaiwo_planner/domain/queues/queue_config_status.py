"""The KaiwoQueueConfig's status: its Ready condition, its phase and the Events they tell.

READY only when each Kueue object is as desired and Kueue admits workloads to each
ClusterQueue (the message then names what the operator added to the user's spec); PENDING
while one is missing, on its way, being replaced, or held because admitted workloads use it,
or one removed from the spec is kept by Kueue while they do (``KueueObjectInUse``, a Warning
each time its message changes, decision 0126), the message then also saying how much of the
default queue's quota is held back meanwhile (decision 0142); FAILED with what is wrong
with the spec, or with Kueue's reason when it admits no workloads to a ClusterQueue
(``ClusterQueueInactive``, decision 0121).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import KaiwoQueueConfigSpec
from kaiwo_contracts.plans import EventIntent

from kaiwo_planner.domain.queues.kueue_sync import InactiveQueue, ObjectVerdict
from kaiwo_planner.domain.queues.quota_held_back import HeldBack
from kaiwo_planner.domain.state.first_few import first_few
from kaiwo_planner.domain.status.conditions import ConditionSpec, merge_conditions

READY_CONDITION = "Ready"
PENDING_REASON = "KueueObjectsPending"
"""Some Kueue object is missing, being updated, replaced or held by another owner."""
IN_USE_REASON = "KueueObjectInUse"
"""An immutable change waits: the object it needs replaced is used by admitted workloads; or
an object removed from the spec is kept by Kueue while they use it."""
INACTIVE_REASON = "ClusterQueueInactive"
"""Every object is as desired, but Kueue admits no workloads to a ClusterQueue (its Active
condition is False, e.g. a flavor names a Topology that does not exist): FAILED."""
MAX_OBJECTS_NAMED = 5
ON_THE_WAY = "Kueue objects are being created or updated to match the KaiwoQueueConfig"


def generated_note(
    effective: KaiwoQueueConfigSpec,
    written: KaiwoQueueConfigSpec,
    *,
    left_out: Sequence[str] = (),
) -> str:
    """What the spec in force adds to or changes in the user's spec, for the Ready message.

    ``left_out``: the nodes node-pool discovery leaves out for their ``kaiwo/nodepool`` set
    elsewhere (decision 0229), named when something was generated from the nodes, so a
    default queue without those nodes' quota says why."""
    user_flavors = {f.name: f for f in written.resource_flavors or ()}
    user_queues = {q.name: q for q in written.cluster_queues or ()}
    flavors = [f.name for f in effective.resource_flavors or () if user_flavors.get(f.name) != f]
    queues = [q.name for q in effective.cluster_queues or () if user_queues.get(q.name) != q]
    parts = []
    if queues:
        parts.append("ClusterQueues " + ", ".join(queues))
    if flavors:
        parts.append("ResourceFlavors " + ", ".join(flavors))
    if not parts:
        return ""
    note = f" (generated from the nodes: {'; '.join(parts)})"
    if left_out:
        nodes = first_few(list(left_out), shown=MAX_OBJECTS_NAMED)
        note += f"; left out of the node pools, their kaiwo/nodepool set elsewhere: {nodes}"
    return note


def ready_condition(
    spec: KaiwoQueueConfigSpec,
    missing_namespaces: Sequence[str],
    judged: Sequence[ObjectVerdict],
    *,
    generated: str,
    inactive: Sequence[InactiveQueue] = (),
    leaving: Sequence[ObjectVerdict] = (),
    held_back: HeldBack | None = None,
    set_elsewhere: str = "",
) -> ConditionSpec:
    """The Ready condition: the first problem found, or that the objects match.

    ``inactive``: the ClusterQueues Kueue admits no workloads to, as observed; one where
    Kueue has not caught up with objects just created (``settling``) is on its way.
    ``leaving``: objects the spec no longer holds that Kueue keeps while admitted workloads
    use them (:func:`~kaiwo_planner.domain.queues.kueue_sync.leaving_objects`).
    ``held_back``: the default ClusterQueue's quota lowered while such a queue still holds
    some of the same nodes (decision 0142): said after them, in the same condition.
    ``set_elsewhere``: the note of what the observed objects carry that the spec leaves unset
    (:func:`set_elsewhere_note`), said after a match."""
    spec_problem = _spec_problem(spec, missing_namespaces)
    if spec_problem is not None:
        return spec_problem
    held = [*(v for v in judged if v.state == "held"), *leaving]
    if held or held_back is not None:
        parts = [_named(held)] if held else []
        if held_back is not None:
            parts.append(held_back.describe())
        return ConditionSpec(READY_CONDITION, "False", IN_USE_REASON, "; ".join(parts))
    # Objects on their way (created or updated, not yet observed) are not named: each one
    # coming back would change the message, and so publish a plan and write a status, for
    # every object of a new KaiwoQueueConfig. A refused apply is named by the executor.
    named = [v for v in judged if v.state in ("foreign", "replaced", "deleting")]
    on_the_way = any(v.state in ("missing", "updating") for v in judged)
    if named:
        message = "Kueue objects are not yet as the KaiwoQueueConfig describes: " + _named(named)
        if on_the_way:
            message += "; other Kueue objects are being created or updated"
        return ConditionSpec(READY_CONDITION, "False", PENDING_REASON, message)
    # Kueue's verdict on a queue counts only once every object is as desired: before that,
    # or while Kueue catches up with objects just created (settling), they are on their way.
    refused = [queue for queue in inactive if not queue.settling]
    if on_the_way or (inactive and not refused):
        return ConditionSpec(READY_CONDITION, "False", PENDING_REASON, ON_THE_WAY)
    if refused:
        return ConditionSpec(READY_CONDITION, "False", INACTIVE_REASON, _named(refused))
    return ConditionSpec(
        READY_CONDITION,
        "True",
        "KueueObjectsMatch",
        "Kueue objects match the KaiwoQueueConfig"
        + generated
        + (f"; {set_elsewhere}" if set_elsewhere else ""),
    )


SET_ELSEWHERE_REASON = "KueueFieldsSetElsewhere"


def set_elsewhere_note(set_elsewhere: Sequence[str]) -> str:
    """What the Ready message says last, and the Warning says, of fields set outside the
    KaiwoQueueConfig (decision 0274); empty when there are none."""
    if not set_elsewhere:
        return ""
    named = first_few(list(set_elsewhere), shown=MAX_OBJECTS_NAMED, separator="; ")
    return (
        f"{named}, set outside the KaiwoQueueConfig, which leaves what it does not set: "
        "Kueue lends the queue's unused quota to its cohort and lets it borrow there. Name "
        "the cohort in the KaiwoQueueConfig to keep it, or remove it from the ClusterQueue"
    )


def _spec_problem(
    spec: KaiwoQueueConfigSpec, missing_namespaces: Sequence[str]
) -> ConditionSpec | None:
    """What is wrong with the spec itself: LocalQueues in missing namespaces, or ClusterQueues
    naming flavors it does not define."""
    if missing_namespaces:
        return ConditionSpec(
            READY_CONDITION,
            "False",
            "NamespaceNotFound",
            "LocalQueues cannot be created in missing namespaces: " + ", ".join(missing_namespaces),
        )
    flavors = {f.name for f in spec.resource_flavors or ()}
    unknown = sorted(
        {
            f"{queue.name}/{flavor.name}"
            for queue in spec.cluster_queues or ()
            for group in queue.spec.resource_groups or ()
            for flavor in group.flavors
            if flavor.name not in flavors
        }
    )
    if unknown:
        return ConditionSpec(
            READY_CONDITION,
            "False",
            "ResourceFlavorNotFound",
            "ClusterQueues refer to ResourceFlavors that are not defined: " + ", ".join(unknown),
        )
    return None


def _named(verdicts: Sequence[ObjectVerdict] | Sequence[InactiveQueue]) -> str:
    """The first :data:`MAX_OBJECTS_NAMED` objects described, and how many more."""
    return first_few(
        [v.describe() for v in verdicts], shown=MAX_OBJECTS_NAMED, separator="; ", and_more="; and "
    )


def recreate_events(judged: Sequence[ObjectVerdict]) -> list[EventIntent]:
    """Upstream's ``KaiwoQueueConfig<Kind>Recreated``, once per object the plan replaces."""
    return [
        EventIntent(
            type="Normal",
            reason=f"KaiwoQueueConfig{v.manifest.get('kind')}Recreated",
            message=v.describe(),
        )
        for v in judged
        if v.state == "replaced"
    ]


def queue_config_status(
    previous: Mapping[str, Any],
    verdict: ConditionSpec,
    *,
    generation: int | None,
    now: datetime,
    set_elsewhere: str = "",
) -> tuple[dict[str, Any], tuple[EventIntent, ...]]:
    """The status with ``verdict`` merged, and the Events of a change of phase; and a Warning
    when a READY verdict names other fields ``set_elsewhere`` (the note it ends with,
    :func:`set_elsewhere_note`)."""
    if verdict.status == "True":
        phase = WorkloadStatus.READY
    elif verdict.reason in (PENDING_REASON, IN_USE_REASON):
        phase = WorkloadStatus.PENDING
    else:
        phase = WorkloadStatus.FAILED
    status = {
        "status": phase.value,
        "conditions": merge_conditions(
            previous.get("conditions") or (), [verdict], generation=generation or 0, now=now
        ),
    }
    before = next(
        (
            c
            for c in previous.get("conditions") or ()
            if isinstance(c, Mapping) and c.get("type") == READY_CONDITION
        ),
        {},
    )
    if verdict.reason == IN_USE_REASON:
        if before.get("reason") == IN_USE_REASON and before.get("message") == verdict.message:
            return status, ()
        return status, (EventIntent(type="Warning", reason=IN_USE_REASON, message=verdict.message),)
    told = _set_elsewhere_told(before, verdict, set_elsewhere)
    if previous.get("status") == phase.value or phase is WorkloadStatus.PENDING:
        return status, told
    if phase is WorkloadStatus.READY:
        return status, (
            EventIntent(type="Normal", reason="KaiwoQueueConfigReady", message=verdict.message),
            *told,
        )
    return status, (
        EventIntent(type="Warning", reason="KaiwoQueueConfigFailed", message=verdict.message),
    )


def _set_elsewhere_told(
    before: Mapping[str, Any], verdict: ConditionSpec, note: str
) -> tuple[EventIntent, ...]:
    """A Warning when a READY verdict first carries ``note`` (:func:`set_elsewhere_note`), or
    another one than the Ready condition said before."""
    if verdict.status != "True" or not note:
        return ()
    said = str(before.get("message") or "")
    if before.get("status") == "True" and said.endswith(f"; {note}"):
        return ()
    return (EventIntent(type="Warning", reason=SET_ELSEWHERE_REASON, message=note),)
