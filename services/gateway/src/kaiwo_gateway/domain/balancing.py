"""Choosing the endpoint for a request: LeastLoad and PrefixHash (CHWBL).

**LeastLoad**: the endpoint with the fewest requests in flight; ties go to the one that has
been given the fewest requests so far (upstream leaves ties to map order), so sequential
requests that finish at once still take turns. An endpoint that joins (a scale up) counts as
given as many as the fewest of those already there: it takes its turn, not every turn until
it has served as many requests as they have since the gateway started.

**PrefixHash**: consistent hashing with bounded loads. Each endpoint is placed on a ring
``replication`` times (the hash of ``<key><i>``); a request's key is its adapter name plus the
prompt prefix, hashed the same way; the walk starts at the first point at or after it and
goes clockwise. An endpoint accepts when, with the request, it would carry at most
``ceil(meanLoadFactor / 100 * (in flight + 1) / endpoints)``: the mean load after the request
times the factor, rounded up. Some endpoint always accepts (their loads sum to the total, so
not all can be at the bound), so the bound holds for every choice. Upstream's test is
``load <= factor * (total + 1) / n`` on the load *before* the request, which lets one
endpoint go one above that bound; ours is the classic bound of the CHWBL paper.

The hash is BLAKE2b cut to 64 bits (upstream: xxHash64); only its spread matters. With an
adapter only endpoints that have it loaded are candidates, and loads are counted among them.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kaiwo_gateway.domain.catalog import Endpoint

LEAST_LOAD = "LeastLoad"
PREFIX_HASH = "PrefixHash"


def ring_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


@dataclass(frozen=True, slots=True)
class HashRing:
    """Points sorted by hash, each with the endpoint key it stands for."""

    points: tuple[int, ...]
    owners: tuple[str, ...]

    @classmethod
    def build(cls, keys: Iterable[str], *, replication: int) -> HashRing:
        placed = sorted(
            (ring_hash(f"{key}{index}"), key) for key in keys for index in range(replication)
        )
        return cls(points=tuple(p for p, _ in placed), owners=tuple(k for _, k in placed))

    def walk(self, key: str) -> Iterable[str]:
        """Endpoint keys clockwise from the point of ``key`` once round the ring."""
        if not self.points:
            return
        start = bisect.bisect_left(self.points, ring_hash(key)) % len(self.points)
        for step in range(len(self.points)):
            yield self.owners[(start + step) % len(self.points)]


def bounded_capacity(*, total: int, endpoints: int, mean_load_factor: int) -> int:
    """The most requests one endpoint may carry once a new one is added to ``total``."""
    return -(-(mean_load_factor * (total + 1)) // (100 * endpoints))


@dataclass(frozen=True, slots=True)
class Choice:
    endpoint: Endpoint
    first: str
    """The first endpoint the strategy looked at (PrefixHash: the ring point's owner)."""
    fallback: bool = False
    """PrefixHash found no endpoint under the bound and took the first candidate."""


def least_load(
    candidates: Sequence[Endpoint], *, in_flight: Mapping[str, int], given: Mapping[str, int]
) -> Choice | None:
    if not candidates:
        return None
    chosen = min(candidates, key=lambda e: (in_flight.get(e.key, 0), given.get(e.key, 0), e.key))
    return Choice(endpoint=chosen, first=chosen.key)


def prefix_hash(
    ring: HashRing,
    candidates: Sequence[Endpoint],
    *,
    key: str,
    in_flight: Mapping[str, int],
    mean_load_factor: int,
) -> Choice | None:
    by_key = {endpoint.key: endpoint for endpoint in candidates}
    if not by_key:
        return None
    total = sum(in_flight.get(k, 0) for k in by_key)
    capacity = bounded_capacity(
        total=total, endpoints=len(by_key), mean_load_factor=mean_load_factor
    )
    first: str | None = None
    for owner in ring.walk(key):
        if owner not in by_key:
            continue
        first = first or owner
        if in_flight.get(owner, 0) + 1 <= capacity:
            return Choice(endpoint=by_key[owner], first=first)
    if first is None:
        return None
    return Choice(endpoint=by_key[first], first=first, fallback=True)


@dataclass
class _Group:
    in_flight: dict[str, int] = field(default_factory=dict)
    given: dict[str, int] = field(default_factory=dict)
    keys: tuple[str, ...] = ()
    ring: HashRing | None = None
    ring_of: tuple[tuple[str, ...], int] | None = None


def _given_after_change(
    given: Mapping[str, int], *, before: Collection[str], now: Collection[str]
) -> dict[str, int]:
    """How often each of the endpoints ``now`` counts as chosen: those that went are
    forgotten; those that stayed keep their count; one that joins starts at the fewest count
    among those that stayed (0 when none did), so LeastLoad's ties take it in turn with them.
    Started at 0 it would win every tie until it had caught up with them."""
    stayed = [key for key in now if key in before]
    start = min((given.get(key, 0) for key in stayed), default=0)
    return {key: given.get(key, 0) if key in before else start for key in now}


@dataclass
class Balancer:
    """In-flight counts per Model and endpoint, and each Model's ring (rebuilt when its
    endpoints change). ``choose`` counts the request in; ``release`` counts it out."""

    _groups: dict[str, _Group] = field(default_factory=dict)

    def choose(
        self,
        *,
        group: str,
        endpoints: Sequence[Endpoint],
        strategy: str,
        adapter: str | None = None,
        prefix: str = "",
        replication: int = 1,
        mean_load_factor: int = 125,
        exclude: Collection[str] = (),
    ) -> Choice | None:
        state = self._groups.setdefault(group, _Group())
        keys = tuple(sorted(e.key for e in endpoints))
        if keys != state.keys:
            state.given = _given_after_change(state.given, before=state.keys, now=keys)
            state.keys = keys
        candidates = [
            e
            for e in endpoints
            if e.key not in exclude and (adapter is None or adapter in e.adapters)
        ]
        if strategy == PREFIX_HASH:
            choice = prefix_hash(
                self._ring(state, replication),
                candidates,
                key=f"{adapter or ''}{prefix}",
                in_flight=state.in_flight,
                mean_load_factor=mean_load_factor,
            )
        else:
            choice = least_load(candidates, in_flight=state.in_flight, given=state.given)
        if choice is not None:
            chosen = choice.endpoint.key
            state.in_flight[chosen] = state.in_flight.get(chosen, 0) + 1
            state.given[chosen] = state.given.get(chosen, 0) + 1
        return choice

    def release(self, *, group: str, endpoint: str) -> None:
        state = self._groups.get(group)
        if state is None or endpoint not in state.in_flight:
            return
        state.in_flight[endpoint] -= 1
        if state.in_flight[endpoint] <= 0:
            del state.in_flight[endpoint]

    def in_flight(self, group: str) -> Mapping[str, int]:
        state = self._groups.get(group)
        return dict(state.in_flight) if state else {}

    @staticmethod
    def _ring(state: _Group, replication: int) -> HashRing:
        if state.ring is None or state.ring_of != (state.keys, replication):
            state.ring = HashRing.build(state.keys, replication=replication)
            state.ring_of = (state.keys, replication)
        return state.ring
