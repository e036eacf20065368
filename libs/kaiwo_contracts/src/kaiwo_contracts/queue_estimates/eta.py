"""When will a pending workload start: its position, and an estimated start from what the
queue recorded (decision 0050).

Kueue's visibility API gives a position but keeps no history to turn it into a time; the
event store keeps every admission and every run. The estimate replays the queue forward:

* the queue holds ``capacity_gpus`` (its nominal quota); the running workloads hold theirs
  until they end, the pending ones start in admission order, each as soon as enough GPUs are
  free (one that can never fit is skipped, as Kueue's BestEffortFIFO does);
* how long a workload runs is drawn from the queue's recorded run times (the most recent
  ``recent_runs``) and the running workloads' times so far (censored: continued by a longer
  recorded run, or doubled, so that long runs not yet finished count); a running one's
  remaining time is drawn from the recorded runs that lasted longer than it has run so far
  (a heavy tail makes a long-running job likely to run long still), and where none did, it
  is taken to run as long again;
* a declared ``duration`` bounds a run: past it (and ``preemption_grace_seconds``, Kaiwo's
  ``pendingThresholdForPreemption``) a workload using GPUs that others wait for is preempted.

The replay is repeated ``samples`` times with run times drawn at random (a seeded
:class:`random.Random`, so the answer is a function of its inputs): the estimate is the median
start, the uncertainty the ``low_quantile`` and ``high_quantile`` starts. The median is what
minimises the absolute error, which is what bench/eta.py measures.

Without any recorded run the estimate falls back to the declared durations when every
workload involved declared one, else to the admission rate (position x mean admission
interval, its spread from exponential intervals), else to no estimate. :class:`Basis` says
which, on how many runs and admissions.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class QueueHistory:
    """What the queue recorded: when workloads were admitted, how long finished ones ran."""

    admissions: tuple[datetime, ...] = ()
    """Admission times (any order)."""
    run_seconds: tuple[float, ...] = ()
    """Run times of finished workloads, in the order they finished (oldest first)."""


@dataclass(frozen=True, slots=True)
class Running:
    admitted_at: datetime
    gpus: int
    duration_seconds: float | None = None
    """The declared ``duration``, if any."""


@dataclass(frozen=True, slots=True)
class Waiting:
    name: str
    gpus: int
    duration_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class QueueNow:
    capacity_gpus: int
    running: tuple[Running, ...] = ()
    pending: tuple[Waiting, ...] = ()
    """In admission order: the first is the next to start."""


@dataclass(frozen=True, slots=True)
class EtaSettings:
    samples: int = 64
    seed: int = 0
    preemption_grace_seconds: float = 300.0
    recent_runs: int = 500
    rate_window_seconds: float = 24 * HOUR
    low_quantile: float = 0.1
    high_quantile: float = 0.9


class Method(StrEnum):
    RUN_TIMES = "recorded run times"
    DECLARED = "declared durations"
    ADMISSION_RATE = "admission rate"
    NO_HISTORY = "no history"
    NEVER_FITS = "larger than the queue"


@dataclass(frozen=True, slots=True)
class Basis:
    method: Method
    recorded_runs: int
    """Recorded run times drawn from."""
    declared: int
    """Workloads ahead (running or pending) and this one whose declared duration counted."""
    admissions_per_hour: float | None
    capacity_gpus: int


@dataclass(frozen=True, slots=True)
class Eta:
    name: str
    position: int
    """1 for the next to start."""
    start: datetime | None
    earliest: datetime | None
    latest: datetime | None
    basis: Basis

    def wait_seconds(self, now: datetime) -> float | None:
        return None if self.start is None else max((self.start - now).total_seconds(), 0.0)


def estimate_starts(
    history: QueueHistory,
    queue: QueueNow,
    *,
    now: datetime,
    settings: EtaSettings | None = None,
) -> tuple[Eta, ...]:
    """The position and estimated start of every pending workload of ``queue``, in order."""
    settings = settings or EtaSettings()
    runs = history.run_seconds[-settings.recent_runs :] if settings.recent_runs else ()
    rate = admissions_per_hour(history.admissions, now=now, window=settings.rate_window_seconds)
    if runs:
        return _replayed(queue, sorted(runs), now, settings, rate)
    if _all_declared(queue):
        return _replayed(queue, [], now, settings, rate)
    return _by_admission_rate(queue, now, settings, rate)


def admissions_per_hour(
    admissions: Sequence[datetime], *, now: datetime, window: float
) -> float | None:
    """Admissions per hour over the ``window`` seconds before ``now`` (over all of them when
    the window holds fewer than two), from the first to the last; None below two."""
    recent = sorted(t for t in admissions if t <= now)
    windowed = [t for t in recent if (now - t).total_seconds() <= window]
    chosen = windowed if len(windowed) >= 2 else recent
    if len(chosen) < 2:
        return None
    span = (chosen[-1] - chosen[0]).total_seconds()
    return None if span <= 0 else (len(chosen) - 1) * HOUR / span


def naive_start(position: int, *, rate_per_hour: float | None, now: datetime) -> datetime | None:
    """Position x mean admission interval: what an estimate without run times can say."""
    if rate_per_hour is None or rate_per_hour <= 0:
        return None
    return now + timedelta(seconds=position * HOUR / rate_per_hour)


def _all_declared(queue: QueueNow) -> bool:
    return all(r.duration_seconds is not None for r in queue.running) and all(
        w.duration_seconds is not None for w in queue.pending
    )


Draw = Callable[[random.Random], float]


def _replayed(
    queue: QueueNow,
    runs: list[float],
    now: datetime,
    settings: EtaSettings,
    rate: float | None,
) -> tuple[Eta, ...]:
    grace = settings.preemption_grace_seconds
    held = [(_remaining_draw(r, runs, now, grace), r.gpus) for r in queue.running]
    censored = (
        sorted(max((now - r.admitted_at).total_seconds(), 0.0) for r in queue.running)
        if runs
        else []
    )
    waiting = [
        (w.gpus, _run_draw(w.duration_seconds, runs, grace, censored)) for w in queue.pending
    ]
    samples = settings.samples if runs else 1
    rng = random.Random(settings.seed)  # noqa: S311 - sampling run times, not secrets
    starts: list[list[float]] = [[] for _ in queue.pending]
    for _ in range(samples):
        releases = [(draw(rng), gpus) for draw, gpus in held]
        pass_starts = _one_pass(
            releases, [(gpus, draw(rng)) for gpus, draw in waiting], queue.capacity_gpus
        )
        for index, start in enumerate(pass_starts):
            if start is not None:
                starts[index].append(start)
    method = Method.RUN_TIMES if runs else Method.DECLARED
    declared_running = sum(r.duration_seconds is not None for r in queue.running)
    estimates = []
    declared = declared_running
    for index, waiting_one in enumerate(queue.pending):
        declared += waiting_one.duration_seconds is not None
        basis = Basis(
            method=method if starts[index] else Method.NEVER_FITS,
            recorded_runs=len(runs),
            declared=declared,
            admissions_per_hour=rate,
            capacity_gpus=queue.capacity_gpus,
        )
        estimates.append(_eta(waiting_one.name, index + 1, starts[index], now, settings, basis))
    return tuple(estimates)


def _by_admission_rate(
    queue: QueueNow, now: datetime, settings: EtaSettings, rate: float | None
) -> tuple[Eta, ...]:
    method = Method.NO_HISTORY if rate is None else Method.ADMISSION_RATE
    basis = Basis(
        method=method,
        recorded_runs=0,
        declared=0,
        admissions_per_hour=rate,
        capacity_gpus=queue.capacity_gpus,
    )
    if rate is None:
        return tuple(
            Eta(w.name, index + 1, None, None, None, basis) for index, w in enumerate(queue.pending)
        )
    interval = HOUR / rate
    rng = random.Random(settings.seed)  # noqa: S311 - sampling run times, not secrets
    # Admissions as a Poisson process: the wait for the k-th is a sum of k exponential gaps.
    gaps = [[rng.expovariate(1 / interval) for _ in queue.pending] for _ in range(settings.samples)]
    estimates = []
    for index, waiting_one in enumerate(queue.pending):
        position = index + 1
        spread = sorted(sum(sample[:position]) for sample in gaps)
        start = now + timedelta(seconds=position * interval)
        estimates.append(
            Eta(
                waiting_one.name,
                position,
                start,
                now + timedelta(seconds=_quantile(spread, settings.low_quantile)),
                now + timedelta(seconds=_quantile(spread, settings.high_quantile)),
                basis,
            )
        )
    return tuple(estimates)


def _eta(
    name: str,
    position: int,
    offsets: list[float],
    now: datetime,
    settings: EtaSettings,
    basis: Basis,
) -> Eta:
    if not offsets:
        return Eta(name, position, None, None, None, basis)
    offsets.sort()

    def at(q: float) -> datetime:
        return now + timedelta(seconds=_quantile(offsets, q))

    return Eta(
        name, position, at(0.5), at(settings.low_quantile), at(settings.high_quantile), basis
    )


def _quantile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted values, interpolated between neighbours."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _bound(seconds: float, duration: float | None, grace: float) -> float:
    return seconds if duration is None else min(seconds, duration + grace)


def _run_draw(
    duration: float | None, runs: list[float], grace: float, censored: list[float]
) -> Draw:
    """How long a workload that has not started will run: a recorded run, or one of the
    running workloads' times so far (the record alone is biased short: long runs have not
    finished yet), then drawn on among the recorded runs longer than that, or taken to run
    as long again (redistributing a censored time to the right, as Kaplan-Meier does)."""
    if not runs:
        declared = duration or 0.0
        return lambda _rng: declared
    pool = len(runs) + len(censored)

    def draw(rng: random.Random) -> float:
        pick = rng.randrange(pool)
        if pick < len(runs):
            return _bound(runs[pick], duration, grace)
        elapsed = censored[pick - len(runs)]
        longer = bisect.bisect_right(runs, elapsed)
        run = runs[rng.randrange(longer, len(runs))] if longer < len(runs) else 2 * elapsed
        return _bound(run, duration, grace)

    return draw


def _remaining_draw(running: Running, runs: list[float], now: datetime, grace: float) -> Draw:
    """How much longer a running workload will hold its GPUs."""
    elapsed = max((now - running.admitted_at).total_seconds(), 0.0)
    declared = running.duration_seconds
    if declared is not None and not runs:
        left = max(declared - elapsed, 0.0)
        return lambda _rng: left
    limit = math.inf if declared is None else max(declared + grace - elapsed, 0.0)
    longer = bisect.bisect_right(runs, elapsed)
    if longer >= len(runs):
        as_long_again = min(elapsed, limit)
        return lambda _rng: as_long_again
    return lambda rng: min(runs[rng.randrange(longer, len(runs))] - elapsed, limit)


def _one_pass(
    releases: list[tuple[float, int]], waiting: list[tuple[int, float]], capacity: int
) -> list[float | None]:
    """Start offsets (seconds from now) of ``waiting`` (gpus, run seconds) in order, given
    the running workloads' (release offset, gpus); None for one that never fits."""
    heapq.heapify(releases)
    free = capacity - sum(gpus for _, gpus in releases)
    clock = 0.0
    starts: list[float | None] = []
    for need, run in waiting:
        if need > capacity:
            starts.append(None)
            continue
        while free < need:
            released_at, gpus = heapq.heappop(releases)
            clock = max(clock, released_at)
            free += gpus
        starts.append(clock)
        heapq.heappush(releases, (clock + run, need))
        free -= need
    return starts
