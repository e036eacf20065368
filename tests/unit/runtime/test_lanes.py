"""Lanes: work of one key in order, of different keys at once, at most ``limit`` in flight."""

from __future__ import annotations

import asyncio

import pytest
from kaiwo_runtime.lanes import Lanes


def recorder(log: list[str], name: str, gate: asyncio.Event | None = None):  # type: ignore[no-untyped-def]
    async def work() -> None:
        log.append(f"{name} starts")
        if gate is not None:
            await gate.wait()
        log.append(f"{name} ends")

    return work


async def test_work_of_one_key_runs_in_order_and_other_keys_do_not_wait_for_it() -> None:
    lanes = Lanes(4)
    log: list[str] = []
    gate = asyncio.Event()
    lanes.start("a", recorder(log, "a1", gate))
    lanes.start("a", recorder(log, "a2"))
    lanes.start("b", recorder(log, "b1"))
    await asyncio.sleep(0.01)
    assert log == ["a1 starts", "b1 starts", "b1 ends"]  # a2 waits for a1; b1 does not

    gate.set()
    await lanes.drain()
    assert log[3:] == ["a1 ends", "a2 starts", "a2 ends"]
    assert lanes.in_flight == 0


async def test_free_slots_waits_while_the_bound_is_reached() -> None:
    lanes = Lanes(2)
    gate = asyncio.Event()
    log: list[str] = []
    lanes.start("a", recorder(log, "a", gate))
    lanes.start("b", recorder(log, "b", gate))
    with pytest.raises(RuntimeError):
        lanes.start("c", recorder(log, "c"))
    waiting = asyncio.create_task(lanes.free_slots())
    await asyncio.sleep(0.01)
    assert not waiting.done()

    gate.set()
    assert await asyncio.wait_for(waiting, 5) >= 1


async def test_an_error_is_raised_once_by_the_next_call_and_a_later_lane_still_runs() -> None:
    lanes = Lanes(4)
    log: list[str] = []

    async def fails() -> None:
        raise ValueError("ack failed")

    lanes.start("a", fails)
    lanes.start("a", recorder(log, "a2"))
    await asyncio.sleep(0.01)
    with pytest.raises(ValueError, match="ack failed"):
        await lanes.free_slots()
    assert await lanes.free_slots() == 4  # raised once
    assert log == ["a2 starts", "a2 ends"]  # the lane went on after the failure


async def test_abandon_cancels_the_work_in_flight() -> None:
    lanes = Lanes(4)
    log: list[str] = []
    lanes.start("a", recorder(log, "a", asyncio.Event()))
    lanes.start("a", recorder(log, "a2"))
    await asyncio.sleep(0.01)

    await asyncio.wait_for(lanes.abandon(), 5)
    assert lanes.in_flight == 0
    assert log == ["a starts"]
