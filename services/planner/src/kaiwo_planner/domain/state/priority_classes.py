"""What a workload's ``spec.priorityClass`` becomes (decision 0045).

The API reference says the field names the Kubernetes PriorityClass given to the workload's
pods; upstream Kaiwo only writes it as Kueue's ``kueue.x-k8s.io/priority-class`` label, which
names a Kueue WorkloadPriorityClass. Where the two disagree the reference wins, and a user who
followed upstream (naming a WorkloadPriorityClass of the KaiwoQueueConfig) must not be broken:

* a Kubernetes PriorityClass of that name exists: the pods get ``priorityClassName`` (Kueue
  then takes the workload's priority from it, unless the label below names another source);
* a WorkloadPriorityClass of that name exists: the children get Kueue's label;
* both: both (the pods' scheduling priority and Kueue's queueing priority);
* neither: the workload cannot run as written (the API server refuses pods naming a missing
  PriorityClass, Kueue a missing WorkloadPriorityClass), so it waits in ERROR with a reason
  naming the field, and runs as soon as one appears.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass

REASON_NOT_FOUND = "PriorityClassNotFound"


@dataclass(frozen=True, slots=True)
class KnownPriorityClasses:
    """The names a ``priorityClass`` may resolve to."""

    kubernetes: Set[str] = frozenset()
    """Kubernetes PriorityClasses (``scheduling.k8s.io``) observed in the cluster."""
    kueue: Set[str] = frozenset()
    """Kueue WorkloadPriorityClasses: the KaiwoQueueConfig's and those observed."""


@dataclass(frozen=True, slots=True)
class PriorityChoice:
    """Where the priority goes: the pods' ``priorityClassName`` and Kueue's label ("": none)."""

    pod_priority_class: str = ""
    kueue_priority_class: str = ""


NO_PRIORITY = PriorityChoice()


def choose_priority(name: str, known: KnownPriorityClasses) -> PriorityChoice | None:
    """The choice for ``spec.priorityClass`` = ``name``; None when nothing of that name exists
    (an empty name asks for nothing and is always satisfied)."""
    if not name:
        return NO_PRIORITY
    choice = PriorityChoice(
        pod_priority_class=name if name in known.kubernetes else "",
        kueue_priority_class=name if name in known.kueue else "",
    )
    return None if choice == NO_PRIORITY else choice


def not_found_message(name: str) -> str:
    return (
        f"spec.priorityClass '{name}' names neither a Kubernetes PriorityClass nor a Kueue "
        "WorkloadPriorityClass (KaiwoQueueConfig spec.workloadPriorityClasses); the workload "
        "waits until one of that name exists"
    )
