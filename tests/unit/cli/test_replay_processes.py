"""Replay in several processes: how plans are split among them, and how their verdicts come
back in publishing order (the processes played by hand over real pipes)."""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from multiprocessing.connection import Connection
from pathlib import Path

import pytest
from kaiwo_cli.replay.comparison import PlanReplay
from kaiwo_cli.replay.processes import (
    MOST_DEFAULT_PROCESSES,
    ReplayProcessError,
    _Done,
    _merged,
    _readable,
    default_processes,
)
from kaiwo_cli.replay.recorded import Shard


def verdict(obs_sequence: int, position: int) -> PlanReplay:
    return PlanReplay(
        event_id=f"plan-{position}",
        position=position,
        owner="KaiwoJob/team-a/train",
        trigger="observation",
        planned_at=None,
        obs_sequence=obs_sequence,
        outcome="reproduced",
        order=(obs_sequence, 0, 0, position),
    )


def done(reproduced: int) -> _Done:
    return _Done(
        tally={"reproduced": reproduced, "differs": 0, "skipped": 0},
        observations=9,
        late_observations=0,
    )


def pipes(count: int) -> tuple[list[Connection], list[Connection]]:
    pairs = [multiprocessing.Pipe(duplex=False) for _ in range(count)]
    return [receiving for receiving, _ in pairs], [sending for _, sending in pairs]


def test_every_correlation_belongs_to_exactly_one_shard() -> None:
    workloads = [f"uid-{n}" for n in range(200)]

    for count in (1, 2, 3, 4):
        shards = [Shard(index, count) for index in range(count)]
        owners = [[shard for shard in shards if shard.holds(uid)] for uid in workloads]
        assert all(len(owning) == 1 for owning in owners)
        if count > 1:  # and the split is not lopsided
            sizes = [sum(1 for owning in owners if owning == [shard]) for shard in shards]
            assert min(sizes) >= 200 // count // 2


@pytest.mark.parametrize(("index", "count"), [(-1, 2), (2, 2), (0, 0)])
def test_a_shard_outside_its_count_is_refused(index: int, count: int) -> None:
    with pytest.raises(ValueError, match="the index must be from 0 to count - 1"):
        Shard(index, count)


def test_verdicts_come_back_in_publishing_order_while_a_process_runs_ahead() -> None:
    receiving, sending = pipes(2)
    # Process 0 has judged all its plans before process 1 sends its first.
    sending[0].send([verdict(1, 10), verdict(4, 40), verdict(6, 60)])
    sending[0].send(done(3))
    sending[1].send([verdict(2, 20), verdict(3, 30)])
    sending[1].send([verdict(5, 50)])
    sending[1].send(done(3))
    given: list[int] = []

    reports = _merged(receiving, lambda v: given.append(v.position))

    assert given == [10, 20, 30, 40, 50, 60]
    assert [report.tally["reproduced"] for report in reports] == [3, 3]


def test_the_verdicts_held_for_a_process_that_runs_ahead_are_bounded() -> None:
    receiving, sending = pipes(2)
    sending[0].send([verdict(n, n) for n in (1, 3, 5)])
    sending[0].send([verdict(n, n) for n in (7, 9, 11)])
    sending[0].send(done(6))
    sending[1].send([verdict(2, 2)])
    sending[1].send([verdict(4, 4)])
    sending[1].send(done(2))
    given: list[int] = []

    reports = _merged(receiving, lambda v: given.append(v.position), hold=2)

    assert given == [1, 2, 3, 4, 5, 7, 9, 11]
    assert len(reports) == 2
    # Holding 2 or more of one process's verdicts, the parent reads only from the other.
    ahead = deque([verdict(1, 1), verdict(3, 3)])
    channels = {receiving[0]: 0, receiving[1]: 1}
    assert _readable(channels, [ahead, deque()], 2) == [receiving[1]]
    assert _readable(channels, [deque([verdict(1, 1)]), deque()], 2) == receiving


def test_a_process_that_ends_without_its_report_stops_the_replay() -> None:
    receiving, sending = pipes(2)
    sending[0].send([verdict(1, 10)])
    sending[0].close()  # killed before its report
    sending[1].send(done(0))

    with pytest.raises(ReplayProcessError, match="replay process 0 ended without a report"):
        _merged(receiving, lambda _v: None)


def test_by_default_one_process_per_core_it_may_use_at_most_four(tmp_path: Path) -> None:
    cores = len(os.sched_getaffinity(0))
    no_file = tmp_path / "absent"
    unlimited = tmp_path / "unlimited"
    unlimited.write_text("max 100000\n")
    one_cpu = tmp_path / "one"
    one_cpu.write_text("100000 100000\n")
    half_a_cpu = tmp_path / "half"
    half_a_cpu.write_text("50000 100000\n")
    three_cpus = tmp_path / "three"
    three_cpus.write_text("300000 100000\n")

    expected = min(cores, MOST_DEFAULT_PROCESSES)
    assert default_processes(no_file) == expected
    assert default_processes(unlimited) == expected
    assert default_processes(one_cpu) == 1
    assert default_processes(half_a_cpu) == 1
    assert default_processes(three_cpus) == min(cores, 3)
