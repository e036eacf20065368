"""Which live replica of a role should hold which partition: a pure function of the members.

Every replica computes the same answer from the same member list, so they agree on who
claims what without talking to each other (the leases then make the claims exclusive while
two replicas briefly disagree about the members; see :mod:`kaiwo_runtime.partition_leases`).

The assignment is *bounded-load rendezvous hashing*: each partition ranks the members by
``fnv1a_32("<partition>/<member>")``, highest first, and goes to the best-ranked member that
holds fewer than ``ceil(partitions / members)`` partitions, partitions taken in ascending
order. Rendezvous ranking keeps most partitions where they were when a member comes or goes
(a replica's restart moves only its own share); the bound keeps the shares within one of each
other, so no replica carries twice the work of another.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from math import ceil

from kaiwo_contracts.events.partitions import fnv1a_32

MEMBER_SEGMENT = "member"
"""The key segment of membership entries: ``<role>.member.<member>``."""


def partition_lease(role: str, partition: int) -> str:
    """The lease of one partition of ``role``: ``planner.p3``."""
    return f"{role}.p{partition}"


def member_lease(role: str, member: str) -> str:
    """The membership entry of one replica of ``role``: ``planner.member.<member>``."""
    return f"{role}.{MEMBER_SEGMENT}.{member}"


def member_prefix(role: str) -> str:
    """What every membership entry of ``role`` starts with."""
    return f"{role}.{MEMBER_SEGMENT}."


def assign_partitions(*, partitions: int, members: Iterable[str]) -> Mapping[str, frozenset[int]]:
    """Each member's partitions; every partition goes to exactly one member (module doc).

    No members: an empty mapping (nobody to give them to).
    """
    if partitions < 1:
        raise ValueError("partitions must be >= 1")
    names = sorted(set(members))
    if not names:
        return {}
    bound = ceil(partitions / len(names))
    shares: dict[str, set[int]] = {name: set() for name in names}
    for partition in range(partitions):
        # Ties (equal hashes) break on the name, so every replica ranks alike.
        ranked = sorted(names, key=lambda name: (-_weight(partition, name), name))
        chosen = next(name for name in ranked if len(shares[name]) < bound)
        shares[chosen].add(partition)
    return {name: frozenset(share) for name, share in shares.items()}


def _weight(partition: int, member: str) -> int:
    return fnv1a_32(f"{partition}/{member}".encode())
