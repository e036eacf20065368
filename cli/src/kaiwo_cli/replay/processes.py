"""Replay in several processes: the recorded plans split by workload (:class:`Shard`), one
process per part, the verdicts given back in publishing order.

Why processes. Replay is CPU-bound Python: one process uses one core. The planner's work per
plan, about two thirds of a replay, splits over the processes; what does not split is the
reading of the observations and their application to the projection, which every process
does whole, since a plan may depend on any object of the cluster (another workload's queue
use, a node, the configuration). So each process holds a projection of the whole cluster:
peak memory is that of a one-process replay times the processes, and still does not grow
with the store.

What a process sees. A process judges its plans exactly as a one-process replay does, with
one difference where the store was written out of order (which one recorder does not do):
a plan recorded after the replay passed its ``obsSequence`` is skipped only if a plan of the
same process moved the replay past it.

Order. Each process gives its verdicts in publishing order; the parent merges them by
:attr:`~kaiwo_cli.replay.comparison.PlanReplay.order`, holding those of a process that runs
ahead until the others catch up, up to :data:`HELD_PER_PROCESS`; past that it stops reading
from that process, which then waits.
"""

from __future__ import annotations

import asyncio
import gc
import heapq
import multiprocessing
import os
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Final

from kaiwo_eventstore import open_event_store
from kaiwo_runtime.redaction import redact_secrets

from kaiwo_cli.replay.comparison import (
    Outcome,
    PlanReplay,
    ReplayReport,
    VerdictSink,
    no_verdicts,
)
from kaiwo_cli.replay.recorded import Shard
from kaiwo_cli.replay.store import replay_from_store

VERDICTS_PER_MESSAGE: Final = 256
"""Verdicts a process sends to the parent at once: pickling and a pipe write per verdict
would cost more than the verdict."""


MOST_DEFAULT_PROCESSES: Final = 4
"""Processes a replay uses by default at most, however many cores: each holds a projection
of the whole cluster."""


class ReplayProcessError(RuntimeError):
    """A replay process stopped with an error (its message says which and why)."""


CGROUP_CPU_MAX: Final = Path("/sys/fs/cgroup/cpu.max")
"""Where cgroup v2 says how much CPU time this process's group may use (``quota period``,
or ``max period`` for no limit): a container's CPU limit."""


def default_processes(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """One replay process per core this process may use, at most
    :data:`MOST_DEFAULT_PROCESSES`: the cores it may run on, fewer under a CPU limit (in a
    pod limited to one CPU, a second process would only repeat the reading of the
    observations)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    limit = _cpu_limit(cpu_max)
    if limit is not None:
        cores = min(cores, limit)
    return max(1, min(cores, MOST_DEFAULT_PROCESSES))


def _cpu_limit(cpu_max: Path) -> int | None:
    """Whole CPUs the cgroup's quota allows (at least 1), or None without a quota."""
    try:
        quota, period = cpu_max.read_text().split()[:2]
        return max(1, int(quota) // int(period))
    except (OSError, ValueError):  # no cgroup v2 file, "max", or a form not known here
        return None


@dataclass(frozen=True, slots=True)
class _Done:
    """A process's last message: its tally and the figures of its report."""

    tally: dict[Outcome, int]
    observations: int
    late_observations: int


@dataclass(frozen=True, slots=True)
class _Failed:
    reason: str


def replay_in_processes(
    url: str,
    *,
    processes: int,
    on_verdict: VerdictSink,
    fresh_contexts: bool = False,
) -> ReplayReport:
    """Replay every recorded plan of the store at ``url`` in ``processes`` processes, each
    judging one :class:`Shard`. ``on_verdict`` sees every verdict, in publishing order; the
    report keeps none and counts every one. Raises :class:`ReplayProcessError` when a
    process fails (the others are stopped)."""
    # Forked on Linux: a process starts at once, with the modules already imported (spawning
    # imports them again, a second each). Elsewhere fork is unsafe (macOS) or missing.
    context = (
        multiprocessing.get_context("fork")
        if sys.platform == "linux"
        else multiprocessing.get_context("spawn")
    )
    channels: list[Connection] = []
    workers: list[multiprocessing.process.BaseProcess] = []
    try:
        for index in range(processes):
            receiving, sending = context.Pipe(duplex=False)
            worker = context.Process(
                target=_replay_shard,
                args=(url, Shard(index, processes), fresh_contexts, sending),
                name=f"kaiwo-replay-{index}",
                daemon=True,
            )
            worker.start()
            sending.close()  # the parent's copy: so that a process's end is seen as EOF
            channels.append(receiving)
            workers.append(worker)
        done = _merged(channels, on_verdict)
    finally:
        for started in workers:
            if started.is_alive():
                started.terminate()
            started.join()
        for channel in channels:
            channel.close()
    return _combined(done)


HELD_PER_PROCESS: Final = 8 * VERDICTS_PER_MESSAGE
"""Verdicts the parent holds for a process that runs ahead before it stops reading from it
(the process then waits on its full pipe): the parent's memory stays bounded."""


def _merged(
    channels: list[Connection], on_verdict: VerdictSink, *, hold: int = HELD_PER_PROCESS
) -> list[_Done]:
    """Every process's verdicts to ``on_verdict`` in publishing order; their last messages."""
    pending: list[deque[PlanReplay]] = [deque() for _ in channels]
    done: list[_Done | None] = [None] * len(channels)
    open_channels = {channel: index for index, channel in enumerate(channels)}
    while open_channels:
        for ready in wait(_readable(open_channels, pending, hold)):
            assert isinstance(ready, Connection)
            index = open_channels[ready]
            message = _received(ready, index)
            if isinstance(message, _Done):
                done[index] = message
                del open_channels[ready]
            else:
                pending[index].extend(message)
        _give_in_order(pending, lambda index: done[index] is not None, on_verdict)
    return [message for message in done if message is not None]


def _readable(
    open_channels: dict[Connection, int], pending: list[deque[PlanReplay]], hold: int
) -> list[Connection]:
    """The channels to read from: those of processes with fewer than ``hold`` verdicts held.
    Never none: after verdicts are given in order, some running process has none held."""
    return [channel for channel, index in open_channels.items() if len(pending[index]) < hold]


def _received(channel: Connection, index: int) -> _Done | list[PlanReplay]:
    try:
        message = channel.recv()
    except EOFError:
        msg = f"replay process {index} ended without a report (killed, or out of memory?)"
        raise ReplayProcessError(msg) from None
    if isinstance(message, _Failed):
        raise ReplayProcessError(f"replay process {index}: {message.reason}")
    assert isinstance(message, _Done | list)
    return message


def _give_in_order(
    pending: list[deque[PlanReplay]],
    finished: Callable[[int], bool],
    on_verdict: VerdictSink,
) -> None:
    """Give the earliest pending verdict while every process still running has one pending:
    a process with none may yet send an earlier one."""
    heads = [(queue[0].order, index) for index, queue in enumerate(pending) if queue]
    heapq.heapify(heads)
    while heads and all(pending[index] or finished(index) for index in range(len(pending))):
        _, index = heapq.heappop(heads)
        on_verdict(pending[index].popleft())
        if pending[index]:
            heapq.heappush(heads, (pending[index][0].order, index))


def _combined(done: list[_Done]) -> ReplayReport:
    tally = no_verdicts()
    for part in done:
        for outcome, count in part.tally.items():
            tally[outcome] += count
    return ReplayReport(
        plans=(),
        # Every process applies every observation it needs: the one that went furthest
        # applied the most, and each saw every observation recorded late.
        observations=max((part.observations for part in done), default=0),
        tally=tally,
        late_observations=max((part.late_observations for part in done), default=0),
    )


def _replay_shard(url: str, shard: Shard, fresh_contexts: bool, channel: Connection) -> None:
    """A replay process: its shard's verdicts to ``channel`` in batches, then its figures."""
    # Replay pauses the cyclic collector throughout; left paused, it does not walk the whole
    # projection once more at the end of a process that is about to exit.
    gc.disable()
    try:
        report = asyncio.run(_replayed(url, shard, fresh_contexts, channel))
        channel.send(
            _Done(
                tally=dict(report.tally or {}),
                observations=report.observations,
                late_observations=report.late_observations,
            )
        )
    except BaseException as error:  # an interrupt too: the parent then says why this stopped
        channel.send(_Failed(redact_secrets(f"{type(error).__name__}: {error}")))
    finally:
        channel.close()


async def _replayed(
    url: str, shard: Shard, fresh_contexts: bool, channel: Connection
) -> ReplayReport:
    batch: list[PlanReplay] = []

    def send(verdict: PlanReplay) -> None:
        batch.append(verdict)
        if len(batch) >= VERDICTS_PER_MESSAGE:
            channel.send(batch.copy())
            batch.clear()

    store = await open_event_store(url, migrate=False)
    try:
        report = await replay_from_store(
            store,
            on_verdict=send,
            keep=lambda _verdict: False,
            fresh_contexts=fresh_contexts,
            shard=shard,
        )
    finally:
        await store.close()
    if batch:
        channel.send(batch)
    return report
