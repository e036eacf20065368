"""What a plan asks of the cluster beyond its children and status, and the observed cluster
does not show: asked at a periodic resync (decisions 0250 and 0263).

The executor gives up on a plan whose API calls kept failing through every delivery (the API
server away longer than the retries). A resync makes good the children it left absent or
drifted and the status it did not write (decision 0234); the plan's other effects are
looked for here, each judged as the executor judges it, so a plan is published again only
for what the executor would still do:

- ``delete``: a child the plan deletes by uid (``Plan.delete``) still there, the owner's
  (its labels and controller) and not being deleted;
- ``release-finalizers``: a child being deleted that still carries a finalizer the plan takes
  off (``Plan.release_finalizers``);
- ``scale``: the owner's replicas not the plan's (``Plan.scale``), still those the decision
  started from, and the owner still the generation planned
  (:func:`kaiwo_contracts.replica_writes.replicas_verdict`, which the executor asks too);
- ``prune``: a child of the owner still there that the plan's prune would delete: of a kind
  a prune rule names (in the owner's namespace when the rule's kind is namespaced), carrying
  the prune selector's labels, controlled by the owner, not desired, not being deleted;
- ``finalizers``: the owner without a finalizer the plan names, or with one of the operator's
  it does not (``Plan.finalizers``);
- ``labels``: the owner's operator labels other than the plan's (``Plan.owner_labels``);
- ``preempt``: the workload the plan preempts (``Plan.preempt``, by uid) still there and not
  being deleted: for a deletion, that is all; for a scale to zero, its replicas not 0 and
  still those the decision started from;
- ``delete-owner``: the owner the plan deletes still there and not being deleted.

The planners leave ``finalizers`` and ``owner_labels`` out (None) once the owner carries
them, a scale once the Model is at its replicas and a preemption once its workload is gone
or at zero, and ask for no deletion of what is being deleted already, so a settled owner
shows every effect and nothing is published for it. A preemption goes only after the status
saying why is written (the executor's step 8): a status the owner does not show publishes
the plan anyway (decision 0234), so it is not looked at here.

Pure: the caller passes the owner, its children and a lookup by uid, as observed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from kaiwo_contracts import confinement as owner_kinds
from kaiwo_contracts.confinement.objects import is_owners
from kaiwo_contracts.plans import Plan
from kaiwo_contracts.replica_writes import replicas_verdict, to_zero

from kaiwo_planner.domain.state.index_entry import api_group_of, object_identity

DELETE: Final = "delete"
RELEASE_FINALIZERS: Final = "release-finalizers"
SCALE: Final = "scale"
PRUNE: Final = "prune"
FINALIZERS: Final = "finalizers"
LABELS: Final = "labels"
PREEMPT: Final = "preempt"
DELETE_OWNER: Final = "delete-owner"


def undone_effects(
    plan: Plan,
    owner: Mapping[str, Any],
    *,
    children: Sequence[Mapping[str, Any]],
    by_uid: Callable[[str], Mapping[str, Any] | None],
) -> tuple[str, ...]:
    """The effects of ``plan`` (names above, in the executor's order) that ``owner`` as
    observed, its observed ``children`` and the objects ``by_uid`` finds do not show."""
    metadata = _metadata(owner)
    undone: list[str] = []
    if any(_still_to_delete(plan, by_uid(target.uid or "")) for target in plan.delete):
        undone.append(DELETE)
    if any(
        _finalizers_to_release(plan, by_uid(release.target.uid or ""), release.finalizers)
        for release in plan.release_finalizers
    ):
        undone.append(RELEASE_FINALIZERS)
    if _scale_undone(plan, owner):
        undone.append(SCALE)
    if _unwanted_child(plan, children):
        undone.append(PRUNE)
    # Through the module: a dict imported by name would be state held by this one.
    confinement = owner_kinds.CONFINEMENTS.get((plan.owner.api_version, plan.owner.kind))
    if confinement is not None:  # the executor writes no metadata on another kind's owner
        if plan.finalizers is not None and _finalizers_differ(
            metadata.get("finalizers") or (), plan.finalizers, managed=confinement.finalizers
        ):
            undone.append(FINALIZERS)
        if plan.owner_labels is not None and _labels_differ(
            metadata.get("labels") or {}, plan.owner_labels, owns=confinement.owns_label
        ):
            undone.append(LABELS)
    if _preemption_undone(plan, by_uid):
        undone.append(PREEMPT)
    if plan.delete_owner and not metadata.get("deletionTimestamp"):
        undone.append(DELETE_OWNER)
    return tuple(undone)


def _scale_undone(plan: Plan, owner: Mapping[str, Any]) -> bool:
    """The executor would write the owner's replicas: they are not the plan's, are still
    those the decision started from, and the owner is still the generation planned."""
    intent = plan.scale
    if intent is None or _metadata(owner).get("uid") != intent.target.uid:
        return False  # a plan scales only its owner; another uid is another object
    verdict = replicas_verdict(
        owner, intent, preemption=False, planned_generation=plan.observed_generation
    )
    return verdict == "to-write"


def _preemption_undone(plan: Plan, by_uid: Callable[[str], Mapping[str, Any] | None]) -> bool:
    """The workload the plan preempts (found by the plan's uid) still runs and is not being
    stopped: there and not being deleted, and for a scale to zero the executor would write
    its replicas (not 0 yet, and still those the decision started from)."""
    intent = plan.preempt
    if intent is None:
        return False
    victim = by_uid(intent.target.uid or "")
    if victim is None or _metadata(victim).get("deletionTimestamp"):
        return False
    if intent.action == "delete":
        return True
    verdict = replicas_verdict(victim, to_zero(intent), preemption=True, planned_generation=None)
    return verdict == "to-write"


def _unwanted_child(plan: Plan, children: Iterable[Mapping[str, Any]]) -> bool:
    """A child the executor's prune would delete (``kaiwo_executor.deletions``): it lists
    each rule's kind by the selector, in the owner's namespace for a namespaced kind, and
    deletes what is not desired, not being deleted, and controlled by the owner."""
    owner = plan.owner
    if not plan.prune or not plan.prune_selector or not owner.uid:
        return False
    # The version is left out: it addresses the same object (the executor's keys do so too).
    rules = {(api_group_of(rule.api_version), rule.kind): rule.namespaced for rule in plan.prune}
    desired = {object_identity(manifest) for manifest in plan.desired}
    for child in children:
        group, kind, namespace, _ = identity = object_identity(child)
        namespaced = rules.get((group, kind))
        if namespaced is None or identity in desired:
            continue
        if namespaced and owner.namespace and namespace != owner.namespace:
            continue
        child_metadata = _metadata(child)
        if child_metadata.get("deletionTimestamp"):
            continue
        if is_owners(child_metadata, selector=plan.prune_selector, owner_uid=owner.uid):
            return True
    return False


def _still_to_delete(plan: Plan, child: Mapping[str, Any] | None) -> bool:
    """The child the plan deletes by uid is there, the owner's, and not being deleted."""
    if child is None:
        return False
    metadata = _metadata(child)
    return not metadata.get("deletionTimestamp") and is_owners(
        metadata, selector=plan.prune_selector, owner_uid=plan.owner.uid
    )


def _finalizers_to_release(
    plan: Plan, child: Mapping[str, Any] | None, finalizers: tuple[str, ...]
) -> bool:
    """The owner's child being deleted still carries one of ``finalizers`` (the executor
    takes them off only once it is being deleted)."""
    if child is None:
        return False
    metadata = _metadata(child)
    return (
        bool(metadata.get("deletionTimestamp"))
        and any(f in finalizers for f in metadata.get("finalizers") or ())
        and is_owners(metadata, selector=plan.prune_selector, owner_uid=plan.owner.uid)
    )


def _finalizers_differ(
    current: Iterable[str], wanted: tuple[str, ...], *, managed: frozenset[str]
) -> bool:
    """The executor would patch them: one wanted is missing, or one of the operator's is
    there unwanted (other controllers' finalizers are theirs)."""
    present = set(current)
    return any(f not in present for f in wanted) or any(
        f in managed and f not in wanted for f in present
    )


def _labels_differ(
    current: Mapping[str, Any], wanted: Mapping[str, str], *, owns: Callable[[str], bool]
) -> bool:
    """The operator's labels (keys ``owns`` accepts) are not exactly ``wanted``."""
    return any(current.get(key) != value for key, value in wanted.items()) or any(
        owns(str(key)) and key not in wanted for key in current
    )


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}
