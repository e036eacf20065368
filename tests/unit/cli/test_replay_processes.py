"""Replay in several processes: how plans are split among them, and how their verdicts come
back in publishing order (the processes played by hand over real pipes)."""

from __future__ import annotations

import multiprocessing
import os
from multiprocessing.connection import Connection
from pathlib import Path

import pytest
from kaiwo_cli.replay.comparison import PlanReplay
from kaiwo_cli.replay.processes import (
    MOST_DEFAULT_PROCESSES,
    ReplayProcessError,
    _Done,
    _Held,
    _merged,
    default_processes,
)
from kaiwo_cli.replay.recorded import Span, span_shares, spans_from


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


def test_the_spans_cost_alike_the_later_ones_with_fewer_plans() -> None:
    for count in (1, 2, 3, 4):
        starts = span_shares(count, before_share=0.15)
        assert starts[0] == 0.0 and starts == sorted(starts)
        lengths = [end - start for start, end in zip(starts, [*starts[1:], 1.0], strict=True)]
        # Each span's cost: its plans, and 0.15 of each plan before it: the same for all.
        costs = [length + 0.15 * start for length, start in zip(lengths, starts, strict=True)]
        assert max(costs) - min(costs) < 1e-9, costs
        assert lengths == sorted(lengths, reverse=True)

    assert span_shares(2, before_share=0) == [0.0, 0.5]
    # 1 - 0.85 = 0.15 of 1 - 0.85² = 0.2775: the second span starts at 54% of the plans.
    assert span_shares(2) == pytest.approx([0.0, 0.15 / 0.2775])


def test_spans_start_at_the_plans_given_the_first_at_position_1() -> None:
    assert spans_from([40, 75]) == [Span(1, 40), Span(40, 75), Span(75)]
    # Two shares that fall on one plan (few plans), or a first plan at position 1: no empty span.
    assert spans_from([40, 40]) == [Span(1, 40), Span(40)]
    assert spans_from([1, 40]) == [Span(1, 40), Span(40)]
    assert spans_from([]) == [Span(1)]


@pytest.mark.parametrize(("start", "end"), [(0, None), (5, 5), (5, 3)])
def test_a_span_that_is_not_one_is_refused(start: int, end: int | None) -> None:
    with pytest.raises(ValueError, match="positions start at 1 and end after the start"):
        Span(start, end)


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


def test_the_verdicts_of_a_process_far_ahead_wait_in_a_file_not_in_memory() -> None:
    receiving, sending = pipes(2)
    # Process 1 (a later span) has judged everything before process 0 sends anything.
    sending[1].send([verdict(n, n) for n in (7, 8)])
    sending[1].send([verdict(n, n) for n in (9, 10)])
    sending[1].send([verdict(11, 11)])
    sending[1].send(done(5))
    sending[0].send([verdict(n, n) for n in (1, 2, 3)])
    sending[0].send([verdict(n, n) for n in (4, 5, 6)])
    sending[0].send(done(6))
    given: list[int] = []

    reports = _merged(receiving, lambda v: given.append(v.position), in_memory=2)

    assert given == list(range(1, 12))
    assert sorted(report.tally["reproduced"] for report in reports) == [5, 6]


def test_held_verdicts_past_the_memory_bound_come_back_from_the_file_in_order() -> None:
    held = _Held(in_memory=2)
    held.add([verdict(1, 1), verdict(2, 2)])
    held.add([verdict(3, 3)])
    held.add([verdict(4, 4), verdict(5, 5)])

    assert len(held._first) == 2 and held._batches_in_file == 2
    taken = [held.take().position]
    held.add([verdict(6, 6)])  # after some are given: still behind those in the file
    while held:
        taken.append(held.take().position)
    held.close()

    assert taken == [1, 2, 3, 4, 5, 6]


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
