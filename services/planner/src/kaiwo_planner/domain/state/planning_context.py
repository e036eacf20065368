"""What planning reads: one cluster state and the values worked out from it.

Planning parses and sums the same things for plan after plan: the KaiwoConfig, the
KaiwoQueueConfig, the AIMNamespaceConfigs, node pools and GPU totals, a workload's own spec
and the children it needs. A :class:`PlanningContext` holds those values for one
:class:`~kaiwo_planner.domain.state.cluster.ClusterState`, so every plan made from that state
shares them, and it is passed explicitly: ``plan_object(owner=..., context=..., now=...)``.

Every value is declared with the kinds of object it reads (``reads``: (API group, kind)
pairs). When the cluster moves on, :meth:`PlanningContext.moved_to` makes the context of the
new state, told which kinds changed: values that read none of them carry over; the others
are worked out again when next asked. Findings count as the kind :data:`FINDINGS`.

Two refinements keep a change cheap where only some of a value's inputs moved:

* ``inputs``: a value whose kinds changed is kept anyway when the objects it was worked out
  from (``inputs()``) are the very same objects as before. Observed objects are never edited
  in place (the projection replaces an object when it changes), so the same object means
  the same value.
* :meth:`PlanningContext.owner_value`: values of one owner (its parsed spec, its children
  for one spec version) are keyed by what names their inputs exactly and held, with those
  inputs, in an :class:`OwnerValues` store that the contexts of one planner share. It keeps
  the values of the most recently planned owners (:data:`OWNER_VALUES_LIMIT`).

So an answer never depends on the history of the context: a fresh one
(:meth:`PlanningContext.of`) and one carried along give the same plans, byte for byte
(``tests/unit/planner/test_planning_context_properties.py``); replay plans with fresh ones.

Nothing here is global: the planner service keeps one context, replay and ``kaiwo plan``
make their own. The planner is single-threaded (one asyncio loop), so no lock is needed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.index_entry import Kind

_T = TypeVar("_T")

FINDINGS: Final[Kind] = ("monitor.kaiwo.silogen.ai", "Finding")
"""The pseudo-kind of the monitor's findings (``ClusterState.findings``)."""
SCALE_REQUESTS: Final[Kind] = ("gateway.kaiwo.silogen.ai", "ScaleDecision")
"""The pseudo-kind of the autoscaler's decisions (``ClusterState.scale_requests``)."""

EVERY_KIND: Final = None
"""``reads`` of a value that any change invalidates (a decision over the whole state)."""

OWNER_VALUES_LIMIT: Final = 2048
"""Owner values kept at most: about four per recently planned owner (its parsed object and
spec, its children and its plan source), so some 500 active owners."""

Reads = tuple[Kind, ...] | None


@dataclass(frozen=True, slots=True)
class _Derived:
    value: Any
    reads: Reads
    inputs: tuple[object, ...] | None
    carried: bool = False
    """Held aside when invalidated, for :meth:`PlanningContext.earlier`."""


def _same_objects(held: tuple[object, ...], given: tuple[object, ...]) -> bool:
    if len(held) != len(given):
        return False
    # A loop, not all() over a generator: asked for every held value of every plan.
    for a, b in zip(held, given, strict=True):  # noqa: SIM110
        if a is not b:
            return False
    return True


class OwnerValues:
    """Values of one owner each, held with their inputs and compared by identity.

    Bounded: the least recently used go first once :data:`OWNER_VALUES_LIMIT` are held.
    The inputs are held too, so their ids cannot be taken by other objects meanwhile.
    """

    __slots__ = ("_held", "_limit")

    def __init__(self, *, limit: int = OWNER_VALUES_LIMIT) -> None:
        self._held: OrderedDict[Hashable, tuple[tuple[object, ...], Any]] = OrderedDict()
        self._limit = limit

    def get(self, key: Hashable, inputs: tuple[object, ...], compute: Callable[[], _T]) -> _T:
        found = self._held.get(key)
        if found is not None and _same_objects(found[0], inputs):
            self._held.move_to_end(key)
            return found[1]  # type: ignore[no-any-return]
        value = compute()
        self._held[key] = (inputs, value)
        self._held.move_to_end(key)
        if len(self._held) > self._limit:
            self._held.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._held)


class PlanningContext:
    """One cluster state and the values derived from it (see the module docstring).

    Values are worked out on first use; a caller must not modify one it is given.
    """

    __slots__ = ("_cluster", "_earlier", "_owner_values", "_preempting", "_values")

    def __init__(
        self,
        cluster: ClusterState,
        *,
        owner_values: OwnerValues | None = None,
        earlier: dict[Hashable, _Derived] | None = None,
        values: dict[Hashable, _Derived] | None = None,
        preempting: frozenset[str] = frozenset(),
    ) -> None:
        self._cluster = cluster
        self._owner_values = owner_values if owner_values is not None else OwnerValues()
        self._earlier: dict[Hashable, _Derived] = earlier if earlier is not None else {}
        self._values: dict[Hashable, _Derived] = values if values is not None else {}
        self._preempting = preempting

    @classmethod
    def of(cls, cluster: ClusterState) -> PlanningContext:
        """A fresh context: every value is worked out from ``cluster`` when first asked."""
        return cls(cluster)

    @property
    def cluster(self) -> ClusterState:
        return self._cluster

    @property
    def preempting(self) -> frozenset[str]:
        """The uids of the owners whose preemption for idleness (or termination for duration
        preemption, decision 0148) the planner decided and has not observed yet
        (``PlanDecidedV1.preempting``): the one input that is not in the
        cluster state. A value that reads it names it in its key."""
        return self._preempting

    def with_preempting(self, uids: frozenset[str]) -> PlanningContext:
        """This context, with ``uids`` preempting; it shares the values worked out (those
        that read :attr:`preempting` are keyed by it)."""
        if uids == self._preempting:
            return self
        return PlanningContext(
            self._cluster,
            owner_values=self._owner_values,
            earlier=self._earlier,
            values=self._values,
            preempting=uids,
        )

    def moved_to(self, cluster: ClusterState, *, changed: Iterable[Kind]) -> PlanningContext:
        """The context of ``cluster``, a later state than this one's in which only objects
        of the ``changed`` kinds (and :data:`FINDINGS`) differ.

        Values that read none of them carry over; the others go (those with ``inputs`` are
        held aside, to be kept if their inputs turn out to be unchanged).
        """
        moved = frozenset(changed)
        kept: dict[Hashable, _Derived] = {}
        earlier = dict(self._earlier)
        for key, derived in self._values.items():
            if derived.reads is not None and moved.isdisjoint(derived.reads):
                kept[key] = derived
            elif derived.inputs is not None or derived.carried:
                earlier[key] = derived
        return PlanningContext(
            cluster,
            owner_values=self._owner_values,
            earlier=earlier,
            values=kept,
            preempting=self._preempting,
        )

    def derived(
        self,
        key: Hashable,
        *,
        reads: Reads,
        compute: Callable[[], _T],
        inputs: Callable[[], tuple[object, ...]] | None = None,
        carried: bool = False,
    ) -> _T:
        """``compute()``, worked out once for this state and ``key``.

        ``reads``: the kinds the value is read from (:data:`EVERY_KIND`: the whole state;
        then ``key`` should name everything else it depends on, e.g. ``now``). ``inputs``:
        the objects it is worked out from, when they are fewer than every object of those
        kinds (see the module docstring). ``carried``: ``compute`` reads :meth:`earlier`.
        """
        found = self._values.get(key)
        if found is not None:
            return found.value  # type: ignore[no-any-return]
        given = inputs() if inputs is not None else None
        held = self._earlier.get(key) if given is not None else None
        if held is not None and given is not None and _same_objects(held.inputs or (), given):
            value = held.value
        else:
            value = compute()
        self._values[key] = _Derived(value=value, reads=reads, inputs=given, carried=carried)
        return value  # type: ignore[no-any-return]

    def earlier(self, key: Hashable) -> Any:
        """The value last worked out for ``key`` in an earlier state of this context's line,
        or None: for values that are cheaper to update than to work out afresh (the caller
        checks what it reuses, by identity)."""
        found = self._earlier.get(key)
        return found.value if found is not None else None

    def owner_value(
        self, key: Hashable, inputs: tuple[object, ...], compute: Callable[[], _T]
    ) -> _T:
        """``compute()``, reused while ``inputs`` are the very same objects as last time.

        For a value of one owner worked out from ``inputs`` alone and from the (hashable,
        compared by equality) constants in ``key``.
        """
        return self._owner_values.get(key, inputs, compute)
