"""Kueue-style admission decisions, with no I/O: which queued workloads get quota, and where.

The rules (a subset of Kueue's, see docs/sandbox.md):

* a workload is queued in a LocalQueue, which points at a ClusterQueue;
* within a ClusterQueue, higher priority first, then first come (creation time, then name);
* a ClusterQueue's resource groups each list flavors with a nominal quota per resource; a
  workload gets, for each group that covers something it asks for, the first flavor in
  which everything it asks for of that group still fits (used + asked <= nominal); when none
  does, the reason is Kueue's, for every flavor (more than the flavor's quota at all, or more
  than is left of it);
* asking for a resource no group covers makes the workload inadmissible;
* ``StrictFIFO`` stops at the first workload that does not fit; ``BestEffortFIFO`` (Kueue's
  default) lets later ones that fit go ahead.

There is no borrowing within cohorts and no preemption.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from kaiwo_sandbox.quantities import Requests


@dataclass(frozen=True, slots=True)
class FlavorQuota:
    name: str
    nominal: Mapping[str, Decimal]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered: frozenset[str]
    flavors: tuple[FlavorQuota, ...]


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    name: str
    groups: tuple[ResourceGroup, ...]
    strict_fifo: bool = False


@dataclass(frozen=True, slots=True)
class QueuedWorkload:
    """A Workload waiting for quota. ``key`` is ``namespace/name``."""

    key: str
    cluster_queue: str
    priority: int
    created: str
    requests: Requests


@dataclass(frozen=True, slots=True)
class Usage:
    """Quota in use: (cluster queue, flavor, resource) -> amount."""

    amounts: Mapping[tuple[str, str, str], Decimal] = field(default_factory=dict)

    def of(self, queue: str, flavor: str, resource: str) -> Decimal:
        return self.amounts.get((queue, flavor, resource), Decimal(0))

    def plus(self, queue: str, assignment: Mapping[str, str], requests: Requests) -> Usage:
        amounts = dict(self.amounts)
        for resource, flavor in assignment.items():
            key = (queue, flavor, resource)
            amounts[key] = amounts.get(key, Decimal(0)) + requests.get(resource, Decimal(0))
        return Usage(amounts)


@dataclass(frozen=True, slots=True)
class Admission:
    """Quota reserved: each requested resource's flavor."""

    key: str
    cluster_queue: str
    flavors: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Waiting:
    """Not admitted this round, and why (Kueue's QuotaReserved=False message)."""

    key: str
    message: str


def queue_order(workloads: Sequence[QueuedWorkload]) -> list[QueuedWorkload]:
    """Higher priority first, then first come, then by name."""
    return sorted(workloads, key=lambda w: (-w.priority, w.created, w.key))


def assign_flavors(
    queue: ClusterQueue, requests: Requests, usage: Usage
) -> tuple[dict[str, str] | None, str]:
    """Each requested resource's flavor, or None and the reason nothing fits."""
    wanted = {name: amount for name, amount in requests.items() if amount > 0}
    uncovered = sorted(set(wanted) - {r for g in queue.groups for r in g.covered})
    if uncovered:
        return None, (
            f"resource {uncovered[0]} unavailable in ClusterQueue {queue.name} "
            "(no resource group covers it)"
        )
    assignment: dict[str, str] = {}
    for group in queue.groups:
        asked = {name: amount for name, amount in wanted.items() if name in group.covered}
        if not asked:
            continue
        flavor, shortfall = _first_fitting(queue.name, group, asked, usage)
        if flavor is None:
            return None, shortfall
        assignment.update(dict.fromkeys(asked, flavor))
    return assignment, ""


def _first_fitting(
    queue: str, group: ResourceGroup, asked: Requests, usage: Usage
) -> tuple[str | None, str]:
    """The first flavor where everything asked fits, or None and Kueue's reasons for every
    flavor (sorted and joined, as Kueue writes them)."""
    reasons: list[str] = []
    for flavor in group.flavors:
        misfits = _misfits(queue, flavor, asked, usage)
        if not misfits:
            return flavor.name, ""
        reasons += misfits
    if not reasons:
        return None, f"no flavor in ClusterQueue {queue} covers the request"
    return None, ", ".join(sorted(reasons))


def _misfits(queue: str, flavor: FlavorQuota, asked: Requests, usage: Usage) -> list[str]:
    """Why ``asked`` does not fit ``flavor``, in Kueue's words: more than the flavor's quota
    at all (no waiting helps; the flavor's other resources are not looked at), or more than
    what is left of it now."""
    reasons = []
    for name, amount in sorted(asked.items()):
        nominal = Decimal(flavor.nominal.get(name, 0))
        if amount > nominal:
            reasons.append(
                f"insufficient quota for {name} in flavor {flavor.name}, previously considered "
                f"podsets requests (0) + current podset request ({_plain(amount)}) > maximum "
                f"capacity ({_plain(nominal)})"
            )
            break
        more = usage.of(queue, flavor.name, name) + amount - nominal
        if more > 0:
            reasons.append(
                f"insufficient unused quota for {name} in flavor {flavor.name}, "
                f"{_plain(more)} more needed"
            )
    return reasons


def _plain(amount: Decimal) -> str:
    return format(amount.normalize(), "f")


def admit(
    *,
    queues: Mapping[str, ClusterQueue],
    pending: Sequence[QueuedWorkload],
    usage: Usage,
) -> tuple[list[Admission], list[Waiting]]:
    """One admission round over every ClusterQueue: who gets quota now, who waits and why."""
    admitted: list[Admission] = []
    waiting: list[Waiting] = []
    blocked: set[str] = set()
    for workload in queue_order(pending):
        queue = queues.get(workload.cluster_queue)
        if queue is None:
            waiting.append(
                Waiting(workload.key, f"ClusterQueue {workload.cluster_queue} doesn't exist")
            )
            continue
        if queue.name in blocked:
            waiting.append(
                Waiting(workload.key, f"waiting behind earlier workloads in {queue.name}")
            )
            continue
        assignment, reason = assign_flavors(queue, workload.requests, usage)
        if assignment is None:
            waiting.append(
                Waiting(workload.key, f"couldn't assign flavors to pod set main: {reason}")
            )
            if queue.strict_fifo:
                blocked.add(queue.name)
            continue
        usage = usage.plus(queue.name, assignment, workload.requests)
        admitted.append(Admission(workload.key, queue.name, assignment))
    return admitted, waiting
