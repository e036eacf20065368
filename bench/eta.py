"""How close the console's estimated start (decision 0050) comes to when workloads then started,
beside the naive estimate (position x mean admission interval).

A synthetic week: 5,000 jobs over three queues of 16, 32 and 64 GPUs, arriving as a Poisson
process whose rate follows the day (busy afternoons, quiet nights) so queues build up and
drain. Each job asks for 1, 2, 4 or 8 GPUs (mostly few) and runs for a heavy-tailed time
(log-normal, median 30 minutes, sigma 1.4: most runs are short, a few last a day). About
40% declare a ``duration``: their own guess of the run time (off by a log-normal factor),
which preempts the job past it and ``pendingThresholdForPreemption`` (5 min) while others
wait. Each queue admits in strict FIFO order as its GPUs free.

Every 30 minutes of the week, each queue's pending jobs are estimated from what that queue
had recorded until then (admissions, the run times of finished jobs), exactly the inputs the
console passes, and each estimate is compared with when the job then started. Reported: the
median absolute error in minutes (overall and per queue, and by position), and how often the
real start fell between the estimate's 10% and 90% quantiles.

Run: ``uv run python bench/eta.py [--jobs N] [--seed S]``. Exits 1 when the estimate does not
beat the naive one.
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from kaiwo_contracts.queue_estimates.eta import (
    EtaSettings,
    QueueHistory,
    QueueNow,
    Running,
    Waiting,
    admissions_per_hour,
    estimate_starts,
    naive_start,
)

WEEK = 7 * 24 * 3600.0
GRACE = 300.0
QUEUES = {"small": 16, "medium": 32, "large": 64}
SNAPSHOT_SECONDS = 1800.0
START = datetime(2026, 11, 2, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    queue: str
    gpus: int
    submitted: float
    run: float
    """Seconds it actually held its GPUs (its true length, cut by a declared duration)."""
    duration: float | None
    started: float = 0.0

    @property
    def ended(self) -> float:
        return self.started + self.run


def synthetic_week(jobs: int, seed: int) -> list[Job]:
    rng = random.Random(seed)
    # Mean load per queue slightly under its capacity: queues form in the afternoons.
    shares = {queue: capacity / sum(QUEUES.values()) for queue, capacity in QUEUES.items()}
    made: list[Job] = []
    for queue, share in shares.items():
        count = round(jobs * share)
        for index, at in enumerate(_daily_arrivals(rng, count)):
            true_run = rng.lognormvariate(math.log(30 * 60), 1.4)
            duration = None
            if rng.random() < 0.4:
                guess = true_run * rng.lognormvariate(math.log(1.3), 0.6)
                duration = math.ceil(guess / 900) * 900.0
            run = true_run if duration is None else min(true_run, duration + GRACE)
            made.append(
                Job(
                    name=f"{queue}-{index}",
                    queue=queue,
                    gpus=rng.choice((1, 1, 1, 2, 2, 4, 8)),
                    submitted=at,
                    run=run,
                    duration=duration,
                )
            )
    return made


def _daily_arrivals(rng: random.Random, count: int) -> list[float]:
    """``count`` arrival times over the week, denser in the day (a thinned Poisson process)."""
    times: list[float] = []
    while len(times) < count:
        at = rng.uniform(0, WEEK)
        hour = (at % 86400) / 3600
        if rng.random() < 0.35 + 0.65 * math.exp(-(((hour - 14) / 4) ** 2)):
            times.append(at)
    return sorted(times)


def run_fifo(jobs: list[Job], capacity: int) -> list[Job]:
    """When each job of one queue started: strict FIFO, as soon as its GPUs are free."""
    releases: list[tuple[float, int]] = []
    free = capacity
    clock = 0.0
    started = []
    for job in sorted(jobs, key=lambda j: j.submitted):
        clock = max(clock, job.submitted)
        while releases and releases[0][0] <= clock:
            free += heapq.heappop(releases)[1]
        while free < job.gpus:
            ended, gpus = heapq.heappop(releases)
            clock = max(clock, ended)
            free += gpus
        done = dataclasses.replace(job, started=clock)
        heapq.heappush(releases, (done.ended, job.gpus))
        free -= job.gpus
        started.append(done)
    return started


@dataclass
class Errors:
    eta: list[float]
    naive: list[float]
    covered: int = 0

    def add(self, eta: float, naive: float, *, covered: bool) -> None:
        self.eta.append(eta)
        self.naive.append(naive)
        self.covered += covered


def evaluate(jobs: list[Job], capacity: int, errors: dict[str, Errors], queue: str) -> None:
    settings = EtaSettings(preemption_grace_seconds=GRACE)
    by_end = sorted(jobs, key=lambda j: j.ended)
    t = SNAPSHOT_SECONDS
    while t < WEEK:
        now = START + timedelta(seconds=t)
        history = QueueHistory(
            admissions=tuple(START + timedelta(seconds=j.started) for j in jobs if j.started <= t),
            run_seconds=tuple(j.run for j in by_end if j.ended <= t),
        )
        running = tuple(
            Running(START + timedelta(seconds=j.started), j.gpus, j.duration)
            for j in jobs
            if j.started <= t < j.ended
        )
        waiting = [j for j in jobs if j.submitted <= t < j.started]
        state = QueueNow(
            capacity,
            running,
            tuple(Waiting(j.name, j.gpus, j.duration) for j in waiting),
        )
        rate = admissions_per_hour(history.admissions, now=now, window=settings.rate_window_seconds)
        etas = estimate_starts(history, state, now=now, settings=settings)
        for job, eta in zip(waiting, etas, strict=True):
            naive = naive_start(eta.position, rate_per_hour=rate, now=now)
            if eta.start is None or naive is None:
                continue
            actual = START + timedelta(seconds=job.started)
            covered = eta.earliest is not None and eta.latest is not None
            covered = covered and eta.earliest <= actual <= eta.latest  # type: ignore[operator]
            for key in ("all", queue, _position_band(eta.position)):
                errors.setdefault(key, Errors([], [])).add(
                    _minutes(eta.start, actual), _minutes(naive, actual), covered=covered
                )
        t += SNAPSHOT_SECONDS


def _position_band(position: int) -> str:
    if position == 1:
        return "position 1"
    if position <= 5:
        return "position 2-5"
    return "position 6+"


def _minutes(estimate: datetime, actual: datetime) -> float:
    return abs((estimate - actual).total_seconds()) / 60


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=27)
    args = parser.parse_args()
    began = time.perf_counter()
    jobs = synthetic_week(args.jobs, args.seed)
    errors: dict[str, Errors] = {}
    waits: list[float] = []
    for queue, capacity in QUEUES.items():
        ran = run_fifo([j for j in jobs if j.queue == queue], capacity)
        waits.extend(j.started - j.submitted for j in ran)
        evaluate(ran, capacity, errors, queue)
    print(
        f"{len(jobs)} jobs over a week in {len(QUEUES)} queues "
        f"({', '.join(f'{q} {c} GPUs' for q, c in QUEUES.items())}); "
        f"median wait {statistics.median(waits) / 60:.0f} min, "
        f"p90 {statistics.quantiles(waits, n=10)[-1] / 60:.0f} min"
    )
    print(f"{'estimates of':<14} {'n':>6} {'ETA MAE':>9} {'naive MAE':>10} {'p10-p90 held':>13}")
    for key in ("all", *QUEUES, "position 1", "position 2-5", "position 6+"):
        found = errors.get(key)
        if found is None:
            continue
        print(
            f"{key:<14} {len(found.eta):>6} {statistics.median(found.eta):>8.1f}m "
            f"{statistics.median(found.naive):>9.1f}m {found.covered / len(found.eta):>12.0%}"
        )
    print(f"(median absolute error in minutes; {time.perf_counter() - began:.0f} s)")
    overall = errors["all"]
    better = statistics.median(overall.eta) < statistics.median(overall.naive)
    print("verdict:", "the estimate beats the naive one" if better else "NOT better than naive")
    return 0 if better else 1


if __name__ == "__main__":
    sys.exit(main())
