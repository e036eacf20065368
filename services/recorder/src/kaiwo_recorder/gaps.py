"""Which stream sequences a recorder consumer never received (pure).

A recorder consumer reads every message of its stream, so the stream sequences of its first
deliveries are consecutive, unless JetStream discarded messages before they were delivered
(the stream reached ``max_bytes`` or ``max_age`` while the recorder was behind or stopped).
Those messages are gone from the bus and were never stored: a gap in the record.

Two ways to see one, both through :class:`SequenceTracker`:

* a first delivery whose sequence is past the next one expected (the server skipped what it
  no longer has);
* the stream's first sequence past the next one expected (found by asking the server; the
  only way to notice while nothing new arrives).

Redeliveries come after their sequence was first seen and never move the position.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Gap:
    """Stream sequences ``first`` to ``last`` (inclusive) that were never delivered."""

    first: int
    last: int

    @property
    def messages(self) -> int:
        return self.last - self.first + 1


class SequenceTracker:
    """The next stream sequence one consumer should be delivered, and the gaps before it."""

    def __init__(self) -> None:
        self._expected: int | None = None

    @property
    def expected(self) -> int | None:
        return self._expected

    def start(self, *, delivered: int) -> None:
        """Begin after ``delivered``, the last sequence the server says it delivered (0 for a
        new consumer); ignored once the position is known."""
        if self._expected is None:
            self._expected = delivered + 1

    def delivered(self, sequence: int, *, attempt: int) -> Gap | None:
        """Note a delivery; the gap it reveals, if any."""
        if attempt > 1:
            return None
        if self._expected is None:
            self._expected = sequence + 1
            return None
        if sequence < self._expected:
            return None
        gap = Gap(self._expected, sequence - 1) if sequence > self._expected else None
        self._expected = sequence + 1
        return gap

    def stream_starts_at(self, first: int) -> Gap | None:
        """Note the stream's first sequence; the gap if it moved past the next expected."""
        if self._expected is None or first <= self._expected:
            return None
        gap = Gap(self._expected, first - 1)
        self._expected = first
        return gap
