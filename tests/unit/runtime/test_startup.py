"""The start-up rules every service process shares."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest
from kaiwo_runtime.bus import BusError
from kaiwo_runtime.startup import (
    StartupError,
    collect_young_objects_every,
    freeze_startup_objects,
    run_service,
    run_until_signalled,
    start_when_the_bus_answers,
    within,
)


@pytest.fixture
def restored_gc_thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


@pytest.mark.usefixtures("restored_gc_thresholds")
def test_young_objects_are_collected_less_often_the_older_generations_keep_their_ratios() -> None:
    gc.set_threshold(700, 10, 10)
    collect_young_objects_every(10_000)
    assert gc.get_threshold() == (10_000, 10, 10)


@pytest.mark.usefixtures("restored_gc_thresholds")
def test_the_young_generation_threshold_must_be_positive() -> None:
    gc.set_threshold(700, 10, 10)
    with pytest.raises(ValueError, match="allocations"):
        collect_young_objects_every(0)
    assert gc.get_threshold() == (700, 10, 10)


async def test_within_returns_the_step_result() -> None:
    async def answer() -> int:
        return 42

    assert await within(1, "the answer", answer()) == 42


async def test_within_names_what_did_not_answer_in_time() -> None:
    with pytest.raises(StartupError, match=r"^NATS at nats://x:1: no answer within 0.01 s$"):
        await within(0.01, "NATS at nats://x:1", asyncio.sleep(5))


async def test_within_folds_an_error_into_one_line() -> None:
    async def broken() -> None:
        raise OSError("connection\n   refused")

    with pytest.raises(StartupError, match=r"^the API server: connection refused$"):
        await within(1, "the API server", broken())


async def test_a_startup_error_ends_with_status_1_and_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def serve(_stop: asyncio.Event) -> None:
        raise StartupError("NATS at nats://127.0.0.1:1 is unreachable: no answer within 1 s")

    assert await run_until_signalled("kaiwo-test", serve) == 1
    assert capsys.readouterr().err == (
        "kaiwo-test: NATS at nats://127.0.0.1:1 is unreachable: no answer within 1 s\n"
    )


async def test_a_clean_stop_ends_with_status_0() -> None:
    async def serve(stop: asyncio.Event) -> None:
        stop.set()
        await stop.wait()

    assert await run_until_signalled("kaiwo-test", serve) == 0


def test_start_up_objects_are_frozen_out_of_full_collections() -> None:
    gc.unfreeze()
    try:
        freeze_startup_objects()

        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_a_service_runs_on_uvloop_and_gets_its_main_coroutines_result() -> None:
    import uvloop

    async def main() -> type[asyncio.AbstractEventLoop]:
        await asyncio.sleep(0)
        return type(asyncio.get_running_loop())

    assert run_service(main()) is uvloop.Loop


async def test_a_start_the_bus_interrupts_begins_again_until_it_completes() -> None:
    attempts: list[int] = []

    async def start() -> None:
        attempts.append(len(attempts) + 1)
        if len(attempts) < 3:
            raise BusError("nats: timeout")

    stop = asyncio.Event()
    assert await start_when_the_bus_answers(start, stop, what="the test", pause_seconds=0)
    assert attempts == [1, 2, 3]


async def test_a_start_stopped_while_the_bus_is_out_of_reach_reports_it_never_completed() -> None:
    stop = asyncio.Event()
    attempts = 0

    async def start() -> None:
        nonlocal attempts
        attempts += 1
        if attempts == 2:
            stop.set()  # SIGTERM while the second attempt waits for NATS
        raise BusError("nats: timeout")

    assert not await start_when_the_bus_answers(start, stop, what="the test", pause_seconds=0)
    assert attempts == 2


async def test_a_start_that_fails_for_anything_but_the_bus_is_not_begun_again() -> None:
    attempts = 0

    async def start() -> None:
        nonlocal attempts
        attempts += 1
        raise ValueError("a snapshot of another cluster")

    with pytest.raises(ValueError, match="another cluster"):
        await start_when_the_bus_answers(start, asyncio.Event(), what="the test", pause_seconds=0)
    assert attempts == 1
