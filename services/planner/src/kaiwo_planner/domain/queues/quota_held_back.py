"""Quota a leaving ClusterQueue still holds is held back from the generated default queue
(decision 0142). Pure.

When an administrator renames KaiwoConfig's default cluster queue, or removes a ClusterQueue
from the KaiwoQueueConfig, while jobs run in it, the operator prunes the old queue and Kueue's
``resource-in-use`` finalizer keeps it until its admitted workloads finish. The generated
default queue's quota is computed from the nodes (decision 0110), so without this the new
queue would get the full quota of the nodes the old queue's jobs still run on, and Kueue
would admit workloads for GPUs that are taken: their pods then wait Pending in the scheduler.

So, at each plan, from the objects as observed:

* **Leaving queues** (:func:`leaving_queue_usage`): the KaiwoQueueConfig's own ClusterQueues
  that the plan no longer wants (about to be pruned, or being deleted and kept by Kueue),
  with what Kueue reports they hold per flavor and resource: the larger of
  ``status.flavorsReservation`` and ``status.flavorsUsage``.
* **Held back** (:func:`hold_back`): the generated default ClusterQueue's ``nominalQuota`` of
  each flavor and resource a leaving queue holds is lowered by that amount (never below 0).
  What was taken off is written on the queue (:data:`HELD_BACK_ANNOTATION`), so a default
  queue made once (its quotas read back from the cluster, decision 0110) is read back at its
  full quota (:func:`give_back`) and is not lowered twice.
* Once Kueue lets the old queue go (or its workloads finish and it reports no usage), nothing
  is held back: the next plan asks for the full quota again, without the annotation.

Only the quota the operator computes is lowered. ClusterQueues the user wrote keep the quota
the user wrote, whatever a leaving queue holds: the user chose those numbers (and may have
meant to overcommit); the status names the leaving queue and its users as decision 0126 says.
Kueue's finalizer is never touched.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal
from typing import Any, Final

from kaiwo_contracts.crds.quantity import quantity_value

from kaiwo_planner.domain.state.first_few import first_few

HELD_BACK_ANNOTATION: Final = "kaiwo.silogen.ai/quota-held-back"
"""On the generated default ClusterQueue: what was taken off its nominal quota, as JSON
``{flavor: {resource: quantity}}``; absent when nothing is held back."""

_GIB: Final = Decimal(2**30)
MAX_HOLDERS_NAMED: Final = 3


@dataclass(frozen=True, slots=True)
class LeavingUsage:
    """What a leaving ClusterQueue holds, per flavor and resource, as Kueue reports it."""

    queue: str
    held: Mapping[str, Mapping[str, Decimal]]
    """flavor -> resource -> amount (only amounts above 0)."""


@dataclass(frozen=True, slots=True)
class HeldBack:
    """The generated default queue's quota lowered because leaving queues still hold it."""

    queue: str
    """The default ClusterQueue whose quota is lowered."""
    holders: tuple[LeavingUsage, ...]
    """The leaving queues whose usage of the default queue's flavors lowered it."""

    def describe(self) -> str:
        """For the Ready condition: which queue, why, by how much, until when."""
        holders = first_few(
            [f"ClusterQueue {h.queue} ({_amounts(h.held)})" for h in self.holders],
            shown=MAX_HOLDERS_NAMED,
        )
        return (
            f"ClusterQueue {self.queue}'s nominal quota is lowered by what admitted workloads "
            f"of a ClusterQueue no longer in force still hold of the same nodes: {holders}; "
            "it comes back once Kueue lets them go"
        )


def leaving_queue_usage(
    observed: Iterable[Mapping[str, Any]], *, wanted: Iterable[str]
) -> tuple[LeavingUsage, ...]:
    """The usage of each observed ClusterQueue not in ``wanted`` (by name) that holds some.

    ``observed``: the KaiwoQueueConfig's own ClusterQueues as the cluster holds them (the
    caller selects them: its labels and controller reference). Sorted by name."""
    wanted_names = set(wanted)
    found = []
    for queue in observed:
        if queue.get("kind") != "ClusterQueue":
            continue
        name = str((queue.get("metadata") or {}).get("name", ""))
        if name in wanted_names:
            continue
        held = _held(queue.get("status") or {})
        if held:
            found.append(LeavingUsage(name, held))
    return tuple(sorted(found, key=lambda usage: usage.queue))


def _held(status: Mapping[str, Any]) -> dict[str, dict[str, Decimal]]:
    held: dict[str, dict[str, Decimal]] = {}
    for field in ("flavorsReservation", "flavorsUsage"):
        for flavor in status.get(field) or ():
            if not isinstance(flavor, Mapping):
                continue
            for resource in flavor.get("resources") or ():
                if not isinstance(resource, Mapping):
                    continue
                amount = quantity_value(str(resource.get("total", "0")))
                if amount is None or not amount.is_finite() or amount <= 0:
                    continue
                per_flavor = held.setdefault(str(flavor.get("name", "")), {})
                key = str(resource.get("name", ""))
                per_flavor[key] = max(per_flavor.get(key, Decimal(0)), amount)
    return held


def hold_back(
    queue: Mapping[str, Any], leaving: Sequence[LeavingUsage]
) -> tuple[dict[str, Any], HeldBack | None]:
    """The ClusterQueue manifest ``queue`` with each ``nominalQuota`` lowered by what the
    ``leaving`` queues hold of that flavor and resource (not below 0), and the annotation
    saying what was taken off; ``queue`` unchanged and None when nothing is held back."""
    held: dict[str, dict[str, Decimal]] = {}
    for usage in leaving:
        for flavor, amounts in usage.held.items():
            for resource, amount in amounts.items():
                per_flavor = held.setdefault(flavor, {})
                per_flavor[resource] = per_flavor.get(resource, Decimal(0)) + amount
    spec = queue.get("spec") or {}
    taken: dict[str, dict[str, str]] = {}

    def lowered(flavor: str, resource: str, nominal: Decimal) -> str | None:
        holding = held.get(flavor, {}).get(resource)
        if holding is None or nominal <= 0:
            return None
        text = quantity_text(max(nominal - holding, Decimal(0)))
        taken.setdefault(flavor, {})[resource] = quantity_text(
            nominal - (quantity_value(text) or Decimal(0))
        )
        return text

    groups = _with_quotas(spec.get("resourceGroups") or (), lowered)
    if not taken:
        return dict(queue), None
    holders = tuple(u for u in leaving if any(flavor in taken for flavor in u.held))
    metadata = dict(queue.get("metadata") or {})
    metadata["annotations"] = {
        **(metadata.get("annotations") or {}),
        HELD_BACK_ANNOTATION: json.dumps(taken, sort_keys=True, separators=(",", ":")),
    }
    lowered_queue = {**queue, "metadata": metadata, "spec": {**spec, "resourceGroups": groups}}
    return lowered_queue, HeldBack(str(metadata.get("name", "")), holders)


def give_back(
    groups: Sequence[Mapping[str, Any]], annotations: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """``groups`` (a standing default queue's, as observed) with what
    :data:`HELD_BACK_ANNOTATION` says was taken off added back: its full quota. Without the
    annotation, or with one that does not read as ours, ``groups`` as they are."""
    taken = _taken(annotations.get(HELD_BACK_ANNOTATION))

    def restored(flavor: str, resource: str, nominal: Decimal) -> str | None:
        amount = taken.get(flavor, {}).get(resource)
        return None if amount is None else quantity_text(nominal + amount)

    return _with_quotas(groups, restored)


def _with_quotas(
    groups: Iterable[Mapping[str, Any]], new_quota: Callable[[str, str, Decimal], str | None]
) -> list[dict[str, Any]]:
    """``groups`` with each ``nominalQuota`` that reads as a finite amount replaced by
    ``new_quota(flavor, resource, nominal)``, or kept where that gives None."""
    changed = []
    for group in groups:
        flavors = []
        for flavor in group.get("flavors") or ():
            name = str(flavor.get("name", ""))
            resources = []
            for resource in flavor.get("resources") or ():
                nominal = quantity_value(str(resource.get("nominalQuota", "")))
                quota = None
                if nominal is not None and nominal.is_finite():
                    quota = new_quota(name, str(resource.get("name", "")), nominal)
                resources.append(resource if quota is None else {**resource, "nominalQuota": quota})
            flavors.append({**flavor, "resources": resources})
        changed.append({**group, "flavors": flavors})
    return changed


def _taken(text: Any) -> dict[str, dict[str, Decimal]]:
    if not isinstance(text, str):
        return {}
    try:
        wire = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(wire, dict):
        return {}
    taken: dict[str, dict[str, Decimal]] = {}
    for flavor, resources in wire.items():
        if not isinstance(resources, dict):
            continue
        for resource, quantity in resources.items():
            amount = quantity_value(str(quantity))
            if amount is not None and amount.is_finite() and amount > 0:
                taken.setdefault(str(flavor), {})[str(resource)] = amount
    return taken


def quantity_text(value: Decimal) -> str:
    """A non-negative amount as a Kubernetes quantity: whole GiB as ``Gi``, other whole
    numbers plain, fractions in thousandths (rounded down: a quota is never raised)."""
    if value == value.to_integral_value():
        whole = int(value)
        if whole and value % _GIB == 0:
            return f"{whole // 2**30}Gi"
        return str(whole)
    return f"{int((value * 1000).to_integral_value(rounding=ROUND_FLOOR))}m"


def _amounts(held: Mapping[str, Mapping[str, Decimal]]) -> str:
    return "; ".join(
        f"{flavor}: "
        + ", ".join(f"{resource} {quantity_text(amount)}" for resource, amount in sorted(r.items()))
        for flavor, r in sorted(held.items())
    )
