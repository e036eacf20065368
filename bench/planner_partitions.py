"""Active-active planners (decision 0030): CPU per workload of each planner replica.

For each replica count R: ``kaiwo up --fake`` (watcher, R planners, one executor, recorder as
processes; one partition and one planner for R = 1, else ``PARTITIONS``), ``WORKLOADS``
KaiwoJobs created at ``RATE``/s, and the run ends when every one has its batch Job and the
bus is idle. Reported per planner replica: user + system CPU (``/proc``) over the run,
divided by the workloads; and the sum over the replicas. One replica plans every owner and
takes in every observation; with R each still takes in every observation but plans 1/R of
the owners, so the sum shows what reading everything costs R times over.

Run: ``uv run python bench/planner_partitions.py [--workloads N] [--replicas 1,3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from kaiwo_cli.stack.local import StackOptions
from kaiwo_contracts.events.streams import OBSERVED_STREAM
from nats.js import JetStreamContext
from pipeline import (
    SERVICE_ENV,
    bench_stack,
    cpu_seconds,
    create_at_rate,
)

WORKLOADS = 300
RATE = 20
PARTITIONS = 6


async def quiet(js: JetStreamContext, *, within: float) -> bool:
    """No new observation for two seconds (the planners and the executor have caught up)."""
    deadline = time.monotonic() + within
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        seq = (await js.stream_info(OBSERVED_STREAM)).state.last_seq
        if seq != last:
            last, since = seq, time.monotonic()
        elif time.monotonic() - since >= 2.0:
            return True
        await asyncio.sleep(0.25)
    return False


async def measure(replicas: int, workloads: int, scratch: Path) -> dict[str, float]:
    options = StackOptions(
        state_dir=scratch / f"r{replicas}",
        fake_cluster=True,
        seed_fake_cluster=False,
        service_env=SERVICE_ENV,
        partitions=PARTITIONS if replicas > 1 else 1,
        replicas={"planner": replicas},
    )
    async with bench_stack(options) as running:
        stack, kube, js, clock = running.stack, running.kube, running.js, running.clock
        await quiet(js, within=60)
        planners = {
            name: service.pid
            for name, service in stack.services.items()
            if name.startswith("planner") and service.pid is not None
        }
        before = cpu_seconds(planners)
        step = await create_at_rate(
            kube, clock, prefix="bench", rate=RATE, seconds=workloads / RATE
        )
        if step.missing:
            print(f"  {step.missing} workloads got no Job", file=sys.stderr)
        await quiet(js, within=120)
        after = cpu_seconds(planners)
    return {name: (after[name] - before[name]) * 1000 / workloads for name in planners}


async def run(workloads: int, replica_counts: list[int]) -> None:
    with tempfile.TemporaryDirectory(prefix="kaiwo-bench-") as scratch:
        for replicas in replica_counts:
            figures = await measure(replicas, workloads, Path(scratch))
            each = ", ".join(f"{name} {ms:.1f}" for name, ms in sorted(figures.items()))
            print(
                f"{replicas} planner(s): ms of CPU per workload: {each}; "
                f"all planners {sum(figures.values()):.1f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, default=WORKLOADS)
    parser.add_argument("--replicas", default="1,3", help="planner replica counts")
    args = parser.parse_args()
    asyncio.run(run(args.workloads, [int(r) for r in args.replicas.split(",")]))


if __name__ == "__main__":
    main()
