"""Replay in several processes: the store split into consecutive spans of positions, each
starting at a recorded plan (:func:`~kaiwo_cli.replay.recorded.span_shares`), one process per
span, the verdicts given back in publishing order.

Why processes. Replay is CPU-bound Python: one process uses one core. A process judges the
plans recorded in its span, against the whole cluster as recorded at each: it takes in every
observation up to its last plan, those before its span each object's once
(:meth:`~kaiwo_planner.domain.state.projection.Projection.fast_forward`), and reads no plan
outside its span. So nearly all of a replay splits: what does not is the reading and
validating of the observations before a span, and the filing of each object there once. The
later spans hold fewer plans by that much, so that the processes end together. Each process holds
a projection of the whole cluster: peak memory is that of a one-process replay times the
processes, and still does not grow with the store.

What a process sees. A process judges its plans exactly as a one-process replay does, with
one difference where the store was written out of order (which one recorder does not do):
a plan recorded after the replay passed its ``obsSequence`` is skipped only if a plan of the
same process moved the replay past it.

Order. Each process gives its verdicts in publishing order; the parent merges them by
:attr:`~kaiwo_cli.replay.comparison.PlanReplay.order`. A later span's process runs ahead of
the earlier ones from the start: the parent holds its verdicts until theirs are given, up to
:data:`HELD_IN_MEMORY` of each process in memory and the rest in a temporary file, so neither
the processes wait nor the parent's memory grows with the store.
"""

from __future__ import annotations

import asyncio
import gc
import heapq
import multiprocessing
import os
import pickle
import sys
import tempfile
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import IO, Final

from kaiwo_eventstore import open_event_store
from kaiwo_runtime.redaction import redact_secrets

from kaiwo_cli.replay.comparison import (
    Outcome,
    PlanReplay,
    ReplayReport,
    VerdictSink,
    no_verdicts,
)
from kaiwo_cli.replay.recorded import PLAN_TYPE, Span, span_shares, spans_from
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
    judging one :class:`Span`. ``on_verdict`` sees every verdict, in publishing order; the
    report keeps none and counts every one. Raises :class:`ReplayProcessError` when a
    process fails (the others are stopped)."""
    try:
        starts = asyncio.run(_span_starts(url, span_shares(processes)[1:]))
    except Exception as error:
        reason = redact_secrets(f"{type(error).__name__}: {error}")
        msg = f"replay processes not started, the store not read: {reason}"
        raise ReplayProcessError(msg) from None
    parts = spans_from(starts)
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
        for index, span in enumerate(parts):
            receiving, sending = context.Pipe(duplex=False)
            worker = context.Process(
                target=_replay_span,
                args=(url, span, fresh_contexts, sending),
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


HELD_IN_MEMORY: Final = 8 * VERDICTS_PER_MESSAGE
"""Verdicts of one process the parent holds in memory; those past them wait in a file."""


class _Held:
    """One process's verdicts received and not given yet, in order: the first
    ``in_memory`` in memory, the rest in a temporary file, read back as the first are given."""

    def __init__(self, *, in_memory: int) -> None:
        self._first: deque[PlanReplay] = deque()
        self._in_memory = in_memory
        self._file: IO[bytes] | None = None
        self._batches_in_file = 0
        self._read_at = 0

    def add(self, verdicts: list[PlanReplay]) -> None:
        if not self._batches_in_file and len(self._first) < self._in_memory:
            self._first.extend(verdicts)
            return
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="kaiwo-replay-")  # noqa: SIM115
        self._file.seek(0, os.SEEK_END)
        pickle.dump(verdicts, self._file, protocol=pickle.HIGHEST_PROTOCOL)
        self._batches_in_file += 1

    def __bool__(self) -> bool:
        return bool(self._first) or self._batches_in_file > 0

    def first(self) -> PlanReplay:
        if not self._first:
            self._read_back()
        return self._first[0]

    def take(self) -> PlanReplay:
        verdict = self.first()
        self._first.popleft()
        return verdict

    def _read_back(self) -> None:
        assert self._file is not None and self._batches_in_file > 0
        self._file.seek(self._read_at)
        self._first.extend(pickle.load(self._file))  # noqa: S301 - written by this process
        self._read_at = self._file.tell()
        self._batches_in_file -= 1

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def _merged(
    channels: list[Connection], on_verdict: VerdictSink, *, in_memory: int = HELD_IN_MEMORY
) -> list[_Done]:
    """Every process's verdicts to ``on_verdict`` in publishing order; their last messages."""
    held = [_Held(in_memory=in_memory) for _ in channels]
    done: list[_Done | None] = [None] * len(channels)
    open_channels = {channel: index for index, channel in enumerate(channels)}
    try:
        while open_channels:
            for ready in wait(list(open_channels)):
                assert isinstance(ready, Connection)
                index = open_channels[ready]
                message = _received(ready, index)
                if isinstance(message, _Done):
                    done[index] = message
                    del open_channels[ready]
                else:
                    held[index].add(message)
            _give_in_order(held, lambda index: done[index] is not None, on_verdict)
    finally:
        for verdicts in held:
            verdicts.close()
    return [message for message in done if message is not None]


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
    held: list[_Held],
    finished: Callable[[int], bool],
    on_verdict: VerdictSink,
) -> None:
    """Give the earliest held verdict while every process still running has one held: a
    process with none may yet send an earlier one."""
    heads = [(verdicts.first().order, index) for index, verdicts in enumerate(held) if verdicts]
    heapq.heapify(heads)
    while heads and all(held[index] or finished(index) for index in range(len(held))):
        _, index = heapq.heappop(heads)
        on_verdict(held[index].take())
        if held[index]:
            heapq.heappush(heads, (held[index].first().order, index))


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


async def _span_starts(url: str, shares: list[float]) -> list[int]:
    """The positions of the plans at ``shares`` of the store's plans (none are read)."""
    store = await open_event_store(url, migrate=False)
    try:
        return await store.positions_of_type(PLAN_TYPE, shares)
    finally:
        await store.close()


def _replay_span(url: str, span: Span, fresh_contexts: bool, channel: Connection) -> None:
    """A replay process: its span's verdicts to ``channel`` in batches, then its figures."""
    # Replay pauses the cyclic collector throughout; left paused, it does not walk the whole
    # projection once more at the end of a process that is about to exit.
    gc.disable()
    try:
        report = asyncio.run(_replayed(url, span, fresh_contexts, channel))
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
    url: str, span: Span, fresh_contexts: bool, channel: Connection
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
            span=span,
        )
    finally:
        await store.close()
    if batch:
        channel.send(batch)
    return report
