"""The monitor's findings and the autoscaler's decisions as any plan's planner had them.

Every planner replica reads ``KAIWO_MON`` and ``KAIWO_GATEWAY`` on its own, by stream
sequence (decision 0030), so of two replicas' plans the one with the lower ``obsSequence``
may have the higher ``monSequence``: replay, which judges plans in ``obsSequence`` order,
must be able to go back to findings it has already gone past (decision 0220).

:class:`ReadingsAsOf` takes the readings in forward, in stream order, through the planner's
own :class:`~kaiwo_planner.domain.state.latest_readings.LatestReadings` (so the same ones
are kept, replaced and forgotten), and keeps an undo record of each change: what the uid
held before, or that it held nothing. The readings as of sequence ``k`` are the latest ones
with every change after ``k`` undone. The records of the last :data:`CHANGES_KEPT` changes
(up to twice as many) are kept, so memory does not grow with the store; a plan whose planner
was further behind than that cannot be judged, and says so (:meth:`ReadingsAsOf.as_of`
answers None).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Generic, TypeVar

from kaiwo_planner.domain.state.latest_readings import LatestReadings, Reading

R = TypeVar("R", bound=Reading)

CHANGES_KEPT: Final = 16_384
"""Changes of one input (a reading taken, one forgotten) that can be undone, at least; at
most twice as many are held (about 100 bytes each: 3 MB). Two replicas read each stream
within a few rounds of each other (64 messages a round, decision 0030): one that many
changes behind another has read nothing of it for minutes on a busy cluster."""


AS_OF_CACHED: Final = 8
"""Readings as of earlier sequences held once made (each a copy of every reading): the
plans of a store ask for a few sequences over and over, each replica's latest."""


class ReadingsAsOf(Generic[R]):
    """The readings of one stream as of any sequence back to :attr:`floor`: those of
    ``latest``, each reading it takes noted with :meth:`took`."""

    __slots__ = ("_cache", "_dropped", "_kept", "_latest", "_sequences", "_undo", "floor")

    def __init__(self, latest: LatestReadings[R], *, kept: int = CHANGES_KEPT) -> None:
        if kept < 1:
            raise ValueError("kept must be >= 1")
        self._latest = latest
        self._kept = kept
        self._sequences: list[int] = []
        """The sequence of each undo record, in the order taken (never decreasing)."""
        self._undo: list[tuple[str, R | None]] = []
        """What each change's uid held before it (None: nothing)."""
        self._dropped = 0
        """Records dropped from the front so far: record ``i`` is at ``i - _dropped``."""
        self._cache: OrderedDict[int, Mapping[str, R]] = OrderedDict()
        self.floor = 0
        """The earliest sequence the readings can be told as of: the last one whose changes
        were let go (0: none were)."""

    @property
    def latest(self) -> Mapping[str, R]:
        return self._latest.view

    def took(self, sequence: int, uid: str, before: Mapping[str, R]) -> None:
        """Note what taking the reading of ``sequence`` (of ``uid``) changed: ``before`` is
        :attr:`latest` as it was just before (each view is a copy of its own)."""
        after = self._latest.view
        if after is before:  # not taken: an old sequence, or older than the one held
            return
        held = before.get(uid)
        if after.get(uid) is not held:
            self._sequences.append(sequence)
            self._undo.append((uid, held))
        if len(after) != len(before) + (uid not in before):  # readings forgotten
            for gone, reading in before.items():
                if gone not in after:
                    self._sequences.append(sequence)
                    self._undo.append((gone, reading))
        if len(self._undo) > 2 * self._kept:
            self._let_go(len(self._undo) - self._kept)

    def _let_go(self, count: int) -> None:
        """Drop the oldest ``count`` records, and those of the same sequence as the last."""
        last = self._sequences[count - 1]
        count = bisect_right(self._sequences, last)
        del self._sequences[:count], self._undo[:count]
        self._dropped += count
        self.floor = last
        for key in [key for key in self._cache if key < self._dropped]:
            del self._cache[key]

    def as_of(self, sequence: int) -> Mapping[str, R] | None:
        """The readings after every reading up to ``sequence`` was taken, and none later;
        None when changes after ``sequence`` were let go (it is before :attr:`floor`).
        :attr:`latest` itself when nothing later was taken, and the same mapping for every
        ``sequence`` between the same two changes."""
        if sequence < self.floor:
            return None
        sequences = self._sequences
        if not sequences or sequence >= sequences[-1]:  # one planner's plans: always
            return self._latest.view
        undo_from = bisect_right(sequences, sequence)
        key = self._dropped + undo_from  # the changes kept: the same for the same readings
        found = self._cache.get(key)
        if found is not None:
            self._cache.move_to_end(key)
            return found
        readings = dict(self._latest.view)
        for uid, held in reversed(self._undo[undo_from:]):
            if held is None:
                readings.pop(uid, None)
            else:
                readings[uid] = held
        found = self._cache[key] = MappingProxyType(readings)
        if len(self._cache) > AS_OF_CACHED:
            self._cache.popitem(last=False)
        return found
