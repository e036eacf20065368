"""Replay throughput and peak memory over a recorded store of 100,000+ realistic events.

Run: ``uv run python bench/replay.py [--workloads 3300] [--store sqlite:///PATH]``.

The history (:mod:`history`: the real planner plans, an executor's result per plan, the real
recorder stores every message; KaiwoJobs created, admitted, run, completed and deleted, in
waves) is written once into a SQLite store (kept when ``--store`` names an existing one).
Then each way of replaying runs in a process of its own, so its peak RSS is its own:

* ``before``: what ``kaiwo events replay`` did before decision 0052: read every
  observation, finding, scale decision and plan into lists (``read_by_type``), then
  :func:`~kaiwo_cli.replay.replanning.replay_recorded` with a fresh planning context for every plan;
* ``all-in-memory``: the same reads, planning contexts carried along (0052);
* ``streamed``: :func:`~kaiwo_cli.replay.store.replay_from_store` in one process, keeping no
  verdict (the command prints each as it comes): ``kaiwo events replay --processes 1``;
* ``processes``: what ``kaiwo events replay`` does by default,
  :func:`~kaiwo_cli.replay.processes.replay_in_processes`, one process per core (at most 4),
  each judging the plans of one span of the store; its peak RSS is that of the largest process,
  and there are as many as the line says.

Figures: events in the store per second of wall clock (and per CPU second, the steadier
figure on a shared machine), from the first read to the last verdict (the imports before
are timed apart: a fixed cost, about a second here, that a store of millions of events does
not feel), and peak RSS, also after a quarter, half and three quarters of the plans: a
streamed replay's should stop growing once the projection holds the cluster.
Every plan must be reproduced; the bench fails otherwise. Target: 20,000 events/s.

``--instructions`` also counts the instructions of a streamed replay under valgrind's
callgrind, less those of the same run that opens the store and replays nothing: per plan and
per event, a figure that neither the machine's speed nor its load moves (wall clock and CPU
time on a shared machine swing by half between runs), to compare two versions of the code.
About fifty times slower than the replay: use a small store (``--workloads 100``).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET = 20_000.0
DEFAULT_WORKLOADS = 3300


def peak_rss_mb() -> float:
    """This process's peak RSS. Linux's ``ru_maxrss`` keeps the peak of the process that
    forked it across the exec (the parent that recorded the history, 1.2 GB for the default
    store); the kernel's high-water mark of this process's own memory is ``VmHWM``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def count_events(url: str) -> tuple[int, int]:
    from kaiwo_cli.replay.recorded import PLAN_TYPE
    from kaiwo_eventstore import open_event_store

    store = await open_event_store(url, migrate=False)
    try:
        events = plans = 0
        async for batch in store.iter_all():
            events += len(batch)
            plans += sum(1 for event in batch if event.type == PLAN_TYPE)
        return events, plans
    finally:
        await store.close()


async def replay_all_in_memory(url: str, *, fresh_contexts: bool) -> dict[str, Any]:
    from kaiwo_cli.replay.recorded import FINDING_TYPE, OBSERVED_TYPE, PLAN_TYPE, SCALE_TYPE
    from kaiwo_cli.replay.replanning import replay_recorded
    from kaiwo_eventstore import open_event_store

    store = await open_event_store(url, migrate=False)
    try:
        observations = await store.read_by_type([OBSERVED_TYPE])
        findings = await store.read_by_type([FINDING_TYPE])
        decisions = await store.read_by_type([SCALE_TYPE])
        plans = await store.read_by_type([PLAN_TYPE])
    finally:
        await store.close()
    quarters: list[float] = []

    def progress(done: int, total: int | None) -> None:
        if total and done in {total // 4, total // 2, 3 * total // 4}:
            quarters.append(peak_rss_mb())

    report = replay_recorded(
        observations=observations,
        plans=plans,
        findings=findings,
        scale_decisions=decisions,
        progress=progress,
        fresh_contexts=fresh_contexts,
    )
    return {"reproduced": report.reproduced, "differ": report.differ, "skipped": report.skipped,
            "quarters": quarters}  # fmt: skip


async def replay_streamed(url: str, plans: int) -> dict[str, Any]:
    from kaiwo_cli.replay.store import replay_from_store
    from kaiwo_eventstore import open_event_store

    quarters: list[float] = []

    def progress(done: int, _total: int | None) -> None:
        if done in {plans // 4, plans // 2, 3 * plans // 4}:
            quarters.append(peak_rss_mb())

    store = await open_event_store(url, migrate=False)
    try:
        report = await replay_from_store(store, progress=progress, keep=lambda _verdict: False)
    finally:
        await store.close()
    return {"reproduced": report.reproduced, "differ": report.differ, "skipped": report.skipped,
            "quarters": quarters}  # fmt: skip


async def open_and_close(url: str) -> dict[str, Any]:
    from kaiwo_eventstore import open_event_store

    store = await open_event_store(url, migrate=False)
    await store.close()
    return {"reproduced": 0, "differ": 0, "skipped": 0, "quarters": []}


def import_replay_modules() -> None:
    """What a replay imports before it reads the first event (the SQL store, SQLAlchemy, the
    planner): timed apart, as a start-up cost that does not grow with the store. With
    ``PYTHONDONTWRITEBYTECODE`` set (as here) every one is compiled again in each run."""
    for module in ("kaiwo_cli.replay.store", "kaiwo_eventstore.sql.store"):
        importlib.import_module(module)


def replay_processes(url: str) -> dict[str, Any]:
    from kaiwo_cli.replay.processes import default_processes, replay_in_processes

    processes = default_processes()
    report = replay_in_processes(url, processes=processes, on_verdict=lambda _verdict: None)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the largest peak of the processes
    return {"reproduced": report.reproduced, "differ": report.differ, "skipped": report.skipped,
            "processes": processes, "process_peak_rss_mb": children.ru_maxrss / 1024,
            "children_cpu": children.ru_utime + children.ru_stime}  # fmt: skip


def measure(way: str, url: str, plans: int) -> None:
    """Run one way of replaying in this process and print its figures as JSON."""
    from kaiwo_runtime.logging import configure_logging

    configure_logging(level="WARNING")
    before_rss = peak_rss_mb()
    started = time.perf_counter()
    import_replay_modules()
    imports = time.perf_counter() - started
    wall, cpu = time.perf_counter(), time.process_time()
    if way == "nothing":  # the baseline of --instructions: everything but the replay
        outcome = asyncio.run(open_and_close(url))
    elif way == "streamed":
        outcome = asyncio.run(replay_streamed(url, plans))
    elif way == "processes":
        outcome = replay_processes(url)
    else:  # "before": fresh contexts, as replay planned before decision 0052
        outcome = asyncio.run(replay_all_in_memory(url, fresh_contexts=way == "before"))
    outcome |= {
        "wall": time.perf_counter() - wall,
        "cpu": time.process_time() - cpu + outcome.pop("children_cpu", 0.0),
        "peak_rss_mb": peak_rss_mb(),
        "rss_at_start_mb": before_rss,
        "imports": imports,
    }
    print(json.dumps(outcome))


def run_apart(way: str, url: str, plans: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--measure", way, "--store", url, "--plans", str(plans)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


COLLECTED = re.compile(r"Collected : (\d+)")


def instructions(way: str, url: str, plans: int) -> int:
    """Instructions run by ``--measure way``, counted by callgrind."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         __file__, "--measure", way, "--store", url, "--plans", str(plans)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    found = COLLECTED.search(done.stderr)
    if found is None:
        raise SystemExit(f"callgrind printed no count: {done.stderr[-500:]}")
    return int(found.group(1))


def print_instructions(url: str, events: int, plans: int) -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (Debian: apt-get install valgrind)")
    replay = instructions("streamed", url, plans) - instructions("nothing", url, plans)
    print(
        f"replay, streamed, instructions: {replay / plans:,.0f} per plan, "
        f"{replay / events:,.0f} per event (callgrind; {replay:,} in all)"
    )


def memory(figures: dict[str, Any]) -> str:
    if "processes" in figures:
        return (
            f"{figures['processes']} processes, peak RSS {figures['process_peak_rss_mb']:.0f} MB "
            f"the largest (and {figures['peak_rss_mb']:.0f} MB the parent)"
        )
    quarters = ", ".join(f"{mb:.0f}" for mb in figures["quarters"])
    return (
        f"peak RSS {figures['peak_rss_mb']:.0f} MB (at 1/4, 1/2, 3/4 of the plans: {quarters} MB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=DEFAULT_WORKLOADS)
    parser.add_argument("--store", help="sqlite:///PATH; recorded there unless it exists")
    parser.add_argument("--ways", default="before,all-in-memory,streamed,processes")
    parser.add_argument(
        "--instructions", action="store_true", help="also count a streamed replay's instructions"
    )
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--plans", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure, args.store, args.plans)
        return
    with tempfile.TemporaryDirectory() as scratch:
        url = args.store or f"sqlite:///{Path(scratch) / 'events.db'}"
        if not Path(url.removeprefix("sqlite:///")).exists():
            from history import record_history
            from kaiwo_runtime.logging import configure_logging

            configure_logging(level="ERROR")
            started = time.perf_counter()
            asyncio.run(record_history(url, workloads=args.workloads))
            print(f"recorded in {time.perf_counter() - started:.0f} s")
        events, plans = asyncio.run(count_events(url))
        print(f"store: {events:,} events, {plans:,} plans ({url})")
        for way in args.ways.split(","):
            figures = run_apart(way, url, plans)
            print(
                f"replay, {way:<14} {events / figures['wall']:>8,.0f} events/s "
                f"({events / figures['cpu']:>8,.0f} per CPU second; {figures['wall']:.1f} s), "
                f"{memory(figures)}; {figures['reproduced']:,} reproduced, {figures['differ']} "
                f"differ, {figures['skipped']} skipped; start-up (imports) "
                f"{figures['imports']:.1f} s more"
            )
            if figures["reproduced"] != plans:
                raise SystemExit(f"{way}: not every plan was reproduced")
        if args.instructions:
            print_instructions(url, events, plans)
    print(f"target: {TARGET:,.0f} events/s")


if __name__ == "__main__":
    main()
