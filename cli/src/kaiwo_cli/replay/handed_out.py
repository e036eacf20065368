"""Which recent stream sequences one replay input handed out, in memory that does not grow
with the store.

Replay tells a late event (recorded after the replay passed its sequence, which a
redelivery to the recorder can do) from a second event at a sequence (another lifetime of
the stream, decision 0231) by whether an event at that sequence was handed out already.
Sequences are handed out in rising order, so the last :data:`SEQUENCES_REMEMBERED` of them
fit a ring of one byte each: 1 MiB per input, whatever the store holds. An event at a
sequence older than that can only be another lifetime's: the recorder holds at most 256
messages of a stream unacknowledged (its consumers' ``max_ack_pending``), so a redelivered
one is recorded a few hundred sequences late, not a million.
"""

from __future__ import annotations

from typing import Final

SEQUENCES_REMEMBERED: Final = 1 << 20


class HandedOut:
    """The sequences handed out among the last ``remembered`` up to the highest one."""

    __slots__ = ("_ring", "_size", "highest")

    def __init__(self, remembered: int = SEQUENCES_REMEMBERED) -> None:
        self._size = remembered
        self._ring = bytearray(remembered)
        self.highest = 0

    def hand_out(self, sequence: int) -> None:
        """Note ``sequence`` (above :attr:`highest`) handed out, and those between not."""
        if sequence <= self.highest:
            raise ValueError(f"sequence {sequence} is not above {self.highest}")
        self._clear(self.highest + 1, sequence)
        self._ring[sequence % self._size] = 1
        self.highest = sequence

    def was_handed_out(self, sequence: int) -> bool:
        """Whether an event at ``sequence`` was handed out; one older than the ring
        remembers counts as handed out (see the module's docstring)."""
        if sequence > self.highest:
            return False
        if sequence <= self.highest - self._size:
            return True
        return self._ring[sequence % self._size] == 1

    def _clear(self, start: int, stop: int) -> None:
        """Mark the sequences ``start`` to ``stop - 1`` not handed out (at most the ring)."""
        start = max(start, stop - self._size)
        if start >= stop:
            return
        first, last = start % self._size, (stop - 1) % self._size
        if first <= last:
            self._ring[first : last + 1] = bytes(last + 1 - first)
        else:
            self._ring[first:] = bytes(self._size - first)
            self._ring[: last + 1] = bytes(last + 1)
