"""The stored-message reader of the gateway and the console, with NATS out of reach."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from kaiwo_runtime.bus import BusError
from kaiwo_runtime.stored_reads import StoredObservation, StoredReader

from tests.waiting import HANG_SECONDS, eventually

SUBJECT = "kaiwo.obs.model.>"


def stored(sequence: int) -> StoredObservation:
    return StoredObservation(sequence=sequence, subject="kaiwo.obs.model.a.u", headers={}, body=b"")


class Stream:
    """Stored messages by sequence. A read after a sequence in ``unanswered`` raises once,
    as while NATS restarts."""

    def __init__(self, count: int, *, unanswered: tuple[int, ...] = ()) -> None:
        self.messages = [stored(n) for n in range(1, count + 1)]
        self.unanswered = list(unanswered)

    async def next_stored(
        self, *, stream: str, subject: str, after: int
    ) -> StoredObservation | None:
        assert (stream, subject) == ("KAIWO_OBS", SUBJECT)
        if after in self.unanswered:
            self.unanswered.remove(after)
            raise BusError("nats: timeout")
        return next((m for m in self.messages if m.sequence > after), None)

    async def subscribe(self, subject: str, wake: Callable[[], None]) -> None:
        assert subject == SUBJECT


class Applied:
    """What the reader applied, and how many had been applied at each change it told."""

    def __init__(self) -> None:
        self.sequences: list[int] = []
        self.changes: list[int] = []

    def reader(self, stream: Stream) -> StoredReader:
        def apply(message: StoredObservation) -> bool:
            self.sequences.append(message.sequence)
            return True

        return StoredReader(
            source=stream,
            stream="KAIWO_OBS",
            filters=(SUBJECT,),
            apply=apply,
            on_change=lambda: self.changes.append(len(self.sequences)),
            resync_seconds=3600,
        )


async def test_a_start_with_the_stream_out_of_reach_reads_it_once_it_answers() -> None:
    applied = Applied()
    reader = applied.reader(Stream(3, unanswered=(0,)))

    await reader.start()  # no exception: the service starts, not ready yet
    assert not reader.caught_up
    assert applied.sequences == []

    stop = asyncio.Event()
    running = asyncio.create_task(reader.run(stop))
    # Not the hour's resync: until it has caught up once, it reads every second.
    await eventually(lambda: reader.caught_up, what="the reader caught up")
    stop.set()
    await asyncio.wait_for(running, HANG_SECONDS)
    assert applied.sequences == [1, 2, 3]
    assert applied.changes == [3]


async def test_a_read_cut_short_keeps_its_place_and_tells_what_it_changed() -> None:
    applied = Applied()
    stream = Stream(3)
    reader = applied.reader(stream)
    await reader.start()
    assert reader.caught_up

    stream.messages += [stored(4), stored(5)]
    stream.unanswered = [4]
    with pytest.raises(BusError):
        await reader.catch_up()
    assert applied.sequences == [1, 2, 3, 4]
    assert applied.changes == [3, 4]  # 4 changed something: told, though the read failed

    await reader.catch_up()
    assert applied.sequences == [1, 2, 3, 4, 5]
    assert applied.changes == [3, 4, 5]
