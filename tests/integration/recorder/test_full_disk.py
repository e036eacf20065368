"""The event store's disk fills up during a burst: the recorder holds what it cannot write,
says so on ``/readyz`` and in its metrics, and records every held event once space is back.

A real SQLite file on a real (tmpfs) filesystem of a few MiB, a real nats-server: a read
still works on a full disk, so only the write's own error can tell "full" from "this row is
refused" -- the recorder used to take it as the latter and dead-letter everything.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kaiwo_contracts.events.streams import DEAD_LETTER_STREAM
from kaiwo_eventstore import StoreUnavailableError, open_event_store

from tests.integration.recorder.small_filesystem import fill, small_filesystem
from tests.integration.recorder.test_recorder_over_nats import publish, running_recorder
from tests.waiting import Pending, eventually

pytestmark = [pytest.mark.nats, pytest.mark.slow]

BURST = 300
FREE_WHEN_THE_BURST_STARTS = 96 * 1024
"""Room for some of the burst, not for all of it (one observation row is a few KiB)."""


async def test_a_full_disk_holds_the_events_and_records_them_all_when_space_is_back(
    nats_server: Any, tmp_path: Path, make_observation: Any
) -> None:
    sent = [make_observation(number) for number in range(BURST)]
    with small_filesystem(tmp_path / "small", size_mib=4) as disk:
        store = await open_event_store(f"sqlite:///{disk / 'events.db'}")
        try:
            async with running_recorder(nats_server.url, store) as service:
                fill(disk / "filler", leave_bytes=FREE_WHEN_THE_BURST_STARTS)
                await publish(nats_server.url, sent)

                async def holding() -> bool:
                    return service.metrics.held_messages._value.get() > 0

                await eventually(holding, what="the recorder holds a batch", within=60)
                await asyncio.sleep(2)  # several retries against the full disk
                stored_while_full = len(await store.read_all(limit=BURST + 100))
                with pytest.raises(Exception, match="held, not recorded"):
                    await service.store_ready()
                unavailable = service.metrics.store_unavailable._value.get()
                dead_lettered = service.metrics.dead_lettered.labels(
                    stream="KAIWO_OBS"
                )._value.get()

                (disk / "filler").unlink()

                async def all_recorded() -> bool:
                    return len(await store.read_all(limit=BURST + 100)) >= BURST

                async def ready_again() -> bool | Pending:
                    # The held batch's rows are readable once it commits; it is let go
                    # only after its acknowledgements, a moment later.
                    try:
                        return await service.store_ready()
                    except StoreUnavailableError as held:
                        return Pending(str(held))

                await eventually(all_recorded, within=60)
                await eventually(ready_again, what="the recorder ready again", within=10)
                letters = await service.bus.client.jetstream().stream_info(DEAD_LETTER_STREAM)
            events = await store.read_all(limit=BURST + 100)
        finally:
            await store.close()

    print(  # the figures of the note
        f"\nfull disk: {stored_while_full} of {BURST} events stored while full, "
        f"{len(events)} after recovery; {unavailable:.0f} held appends, "
        f"{dead_lettered:.0f} dead-lettered"
    )
    assert stored_while_full < BURST, "the disk never filled: make the filesystem smaller"
    assert unavailable >= 1
    assert dead_lettered == 0
    assert letters.state.messages == 0
    assert sorted(e.event_id for e in events) == sorted(envelope.id for envelope, _ in sent)
