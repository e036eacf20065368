"""The latest reading per uid of a stream the planner reads beside the observations: the
monitor's findings (``KAIWO_MON``) and the autoscaler's decisions (``KAIWO_GATEWAY``).

A reading older than the one held for its uid is dropped; readings not renewed for
``retention`` (by the readings' own times, never the clock) are forgotten, so what went away
does not pile up and replay forgets the same ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Generic, Protocol, TypeVar


class Reading(Protocol):
    @property
    def uid(self) -> str: ...

    @property
    def at(self) -> datetime: ...

    def decides_differently_from(self, other: Any) -> bool: ...

    def to_document(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=Reading)


class LatestReadings(Generic[R]):
    """The latest reading per uid, and the highest stream sequence taken."""

    __slots__ = ("_last_sequence", "_prune_every", "_pruned_at", "_readings", "_retention", "_view")

    def __init__(self, *, retention: timedelta, prune_every: timedelta | None = None) -> None:
        """``prune_every``: look for forgotten readings at most this often (by the readings'
        times); None: on every reading taken."""
        self._retention = retention
        self._prune_every = prune_every
        self._readings: dict[str, R] = {}
        self._view: Mapping[str, R] = MappingProxyType({})
        self._pruned_at: datetime | None = None
        self._last_sequence = 0

    @property
    def last_sequence(self) -> int:
        """The highest stream sequence given to :meth:`take` (taken or not)."""
        return self._last_sequence

    @property
    def view(self) -> Mapping[str, R]:
        """Every reading held, by uid: a read-only copy made once per change."""
        return self._view

    @property
    def pruned_at(self) -> datetime | None:
        return self._pruned_at

    def get(self, uid: str) -> R | None:
        return self._readings.get(uid)

    def take(self, reading: R, *, sequence: int) -> bool | None:
        """Keep ``reading`` as its uid's latest; None: not taken (an old sequence, or older
        than the one held), else whether planning may come out differently."""
        if sequence <= self._last_sequence:
            return None
        self._last_sequence = sequence
        previous = self._readings.get(reading.uid)
        if previous is not None and previous.at > reading.at:
            return None
        self._readings[reading.uid] = reading
        pruned_at = self._pruned_at
        if self._prune_every is None or (
            pruned_at is None or reading.at - pruned_at >= self._prune_every
        ):
            horizon = reading.at - self._retention
            for uid in [u for u, held in self._readings.items() if held.at < horizon]:
                del self._readings[uid]
            if self._prune_every is not None:
                self._pruned_at = reading.at
        # The states show every reading taken in, whether or not it decides anything.
        self._view = MappingProxyType(dict(self._readings))
        return reading.decides_differently_from(previous)

    def documents(self) -> list[dict[str, Any]]:
        """The readings as JSON-ready data, by uid."""
        return [reading.to_document() for _, reading in sorted(self._readings.items())]

    def restore(
        self, readings: list[R], *, last_sequence: int, pruned_at: datetime | None = None
    ) -> None:
        """Hold exactly what a snapshot held (see :meth:`documents`)."""
        self._readings = {reading.uid: reading for reading in readings}
        self._view = MappingProxyType(dict(self._readings))
        self._last_sequence = last_sequence
        self._pruned_at = pruned_at
