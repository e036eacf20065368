"""When to plan an owner again: one pending time per owner, earliest first.

A planning result may ask to be planned again at ``replan_at`` (a duration runs out, a
wait becomes long enough to preempt for). :class:`ReplanTimers` keeps one pending time per
owner uid; setting a new time replaces the old one (the heap keeps stale entries, dropped
when they reach its top).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from datetime import datetime


class ReplanTimers:
    """Pending re-plan times by owner uid."""

    __slots__ = ("_due", "_heap")

    def __init__(self, due: Mapping[str, datetime] | None = None) -> None:
        self._due: dict[str, datetime] = dict(due or {})
        self._heap = [(when, uid) for uid, when in self._due.items()]
        heapq.heapify(self._heap)

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, uid: object) -> bool:
        return uid in self._due

    @property
    def next_due(self) -> datetime | None:
        self._drop_cancelled()
        return self._heap[0][0] if self._heap else None

    def arm(self, uid: str, due: datetime) -> None:
        """Plan ``uid`` again at ``due`` (instead of any earlier time set for it)."""
        if self._due.get(uid) == due:
            return
        self._due[uid] = due
        heapq.heappush(self._heap, (due, uid))

    def due(self, uid: str) -> datetime | None:
        """When ``uid`` is to be planned again (None: no time set)."""
        return self._due.get(uid)

    def uids(self) -> tuple[str, ...]:
        """The owners with a pending time."""
        return tuple(self._due)

    def cancel(self, uid: str) -> None:
        self._due.pop(uid, None)

    def pop_due(self, now: datetime) -> tuple[datetime, str] | None:
        """The earliest (time, uid) due at ``now``, taken out; None when none is due."""
        self._drop_cancelled()
        if not self._heap or self._heap[0][0] > now:
            return None
        due, uid = heapq.heappop(self._heap)
        del self._due[uid]
        return due, uid

    def to_document(self) -> dict[str, str]:
        return {uid: due.isoformat() for uid, due in sorted(self._due.items())}

    @classmethod
    def from_document(cls, document: Mapping[str, str]) -> ReplanTimers:
        """Raises TypeError or ValueError for a malformed document."""
        return cls({str(uid): datetime.fromisoformat(due) for uid, due in document.items()})

    def _drop_cancelled(self) -> None:
        heap = self._heap
        while heap and self._due.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
