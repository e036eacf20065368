"""Checkpoints and known objects in the key-value bucket."""

from __future__ import annotations

import random

import pytest
from kaiwo_kube import resources
from kaiwo_runtime.kv import MemoryKeyValue
from kaiwo_watcher.backoff import Backoff
from kaiwo_watcher.observation import KnownObject
from kaiwo_watcher.watch_list import WatchTarget
from kaiwo_watcher.watch_state import WatchState, WatchStream, is_newer

JOBS = WatchStream(target=WatchTarget(resource=resources.JOB), namespace="team-a")
NODES = WatchStream(target=WatchTarget(resource=resources.NODE))


@pytest.mark.parametrize(
    ("candidate", "current", "expected"),
    [
        ("10", None, True),
        ("10", "9", True),
        ("9", "10", False),  # numeric, not lexical
        ("10", "10", False),
        ("abc", "abd", True),  # opaque versions: any change counts
        ("abc", "abc", False),
    ],
)
def test_is_newer(candidate, current, expected):
    assert is_newer(candidate, current) is expected


async def test_the_checkpoint_only_moves_forward_across_replicas():
    kv = MemoryKeyValue()
    ahead, behind = WatchState(kv), WatchState(kv)
    await ahead.advance(NODES, "120")
    await behind.advance(NODES, "100")  # a lagging replica does not pull it back
    assert await WatchState(kv).checkpoint(NODES) == "120"
    await behind.advance(NODES, "130")
    assert await ahead.checkpoint(NODES) == "130"


async def test_checkpoints_within_the_interval_wait_for_the_next_write_or_a_flush():
    kv = MemoryKeyValue()
    now = [100.0]
    state = WatchState(kv, checkpoint_every=1.0, monotonic=lambda: now[0])
    await state.advance(JOBS, "10")  # the first one is written at once
    assert await state.checkpoint(JOBS) == "10"

    now[0] = 100.4
    await state.advance(JOBS, "11")
    await state.advance(JOBS, "12")
    await state.advance(JOBS, "11")  # never back, even while held
    assert await state.checkpoint(JOBS) == "10"

    now[0] = 101.1  # the interval has passed: the next event writes
    await state.advance(JOBS, "13")
    assert await state.checkpoint(JOBS) == "13"

    now[0] = 101.2
    await state.advance(JOBS, "14")
    await state.advance(NODES, "7")  # another stream keeps its own interval
    assert await state.checkpoint(NODES) == "7"
    assert await state.checkpoint(JOBS) == "13"
    await state.flush()
    assert await state.checkpoint(JOBS) == "14"


async def test_a_relist_sets_the_checkpoint_outright():
    kv = MemoryKeyValue()
    state = WatchState(kv)
    await state.advance(NODES, "500")
    await state.reset(NODES, "20")
    assert await state.checkpoint(NODES) == "20"
    assert await state.checkpoint(JOBS) is None


async def test_known_objects_survive_a_restart_per_stream():
    kv = MemoryKeyValue()
    state = WatchState(kv)
    await state.load()
    train = KnownObject(namespace="team-a", name="train", correlation="w-1")
    await state.remember(JOBS, "u-1", train)
    await state.remember(JOBS, "u-2", KnownObject(namespace="team-a", name="b", correlation="w"))
    await state.remember(NODES, "n-1", KnownObject(namespace=None, name="n.x", correlation="n-1"))
    await state.forget(JOBS, "u-2")
    await state.advance(JOBS, "7")

    restarted = WatchState(kv)
    await restarted.load()
    assert restarted.known(JOBS) == {"u-1": train}
    assert restarted.known(NODES) == {
        "n-1": KnownObject(namespace=None, name="n.x", correlation="n-1")
    }


async def test_remembering_an_unchanged_object_writes_nothing():
    class CountingKv(MemoryKeyValue):
        puts = 0

        async def put(self, key: str, value: bytes) -> None:
            CountingKv.puts += 1
            await super().put(key, value)

    kv = CountingKv()
    state = WatchState(kv)
    known = KnownObject(namespace="team-a", name="train", correlation="w-1")
    await state.remember(JOBS, "u-1", known)
    await state.remember(JOBS, "u-1", known)
    assert CountingKv.puts == 1


def test_backoff_grows_with_jitter_up_to_the_maximum_and_resets():
    backoff = Backoff(initial=1.0, maximum=8.0, rng=random.Random(7))
    delays = [backoff.next_delay() for _ in range(8)]
    ceilings = [1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0, 8.0]
    assert all(0.1 <= d <= c for d, c in zip(delays, ceilings, strict=True))
    assert len(set(delays)) == 8  # jittered, not a fixed schedule
    backoff.reset()
    assert backoff.next_delay() <= 1.0
