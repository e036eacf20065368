"""How long the console takes to show each page with 1,000 workloads and 100 GPU nodes
(the issue's bound for a first paint: 1 s).

1,000 KaiwoJobs over 10 namespaces and 3 ClusterQueues of 64 GPUs: 300 wait (each with its
Kueue Workload), 700 run on 100 nodes of 8 GPUs (one Pod each); each queue has 500 recorded
runs, and the history folds every Workload (700 admissions over the last 10 h, each after a
wait of up to 2 h; what the queues page's admissions, depth and wait charts draw); the GPU
nodes' day folds a reading of every running workload every 5 minutes (what the nodes page's
utilization charts and "busy now" draw, a tenth of the workloads idle). Two measures:

* server: the pure work of a request (rows, estimates, HTML), the median of 5;
* browser: the console's HTTP application serving that state on 127.0.0.1, loaded in headless
  Chromium (Debian's ``chromium``, driven over the DevTools protocol as the browser tests do):
  the ``first-contentful-paint`` of the page's Paint Timing, from the start of navigation
  (request, server, transfer, parse, layout, paint), the median of 3 loads after one warm-up.

Run: ``uv run python bench/console_pages.py`` (``--server-only`` skips the browser).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kaiwo_console.domain.cluster import ClusterState, everything
from kaiwo_console.domain.history import QueueRecords
from kaiwo_console.domain.model_rows import model_rows
from kaiwo_console.domain.nodes import NodeRecords, Reading, node_views
from kaiwo_console.domain.pages.models import models_body
from kaiwo_console.domain.pages.nodes import nodes_body
from kaiwo_console.domain.pages.queues import queues_body
from kaiwo_console.domain.pages.workloads import workloads_body
from kaiwo_console.domain.queues import pending_estimates, queue_views
from kaiwo_console.domain.workload_rows import WorkloadFilter, workload_rows

from tests.unit.console.objects import (
    cluster_queue,
    gpu_node,
    gpu_pod,
    kaiwojob,
    kueue_workload,
    local_queue,
)

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
QUEUES = ("q0", "q1", "q2")
EVERY_MINUTES = 5
"""How often the bench's monitor reads each workload."""


def cluster() -> tuple[ClusterState, QueueRecords]:
    rng = random.Random(27)
    state = ClusterState()
    objects = [cluster_queue(q, amd=64) for q in QUEUES]
    objects += [local_queue(f"ns-{n}", q, q) for n in range(10) for q in QUEUES]
    objects += [gpu_node(f"node-{n:03d}") for n in range(100)]
    for index in range(1000):
        namespace, queue = f"ns-{index % 10}", QUEUES[index % 3]
        name = f"job-{index:04d}"
        running = index >= 300
        gpus = rng.choice((1, 2, 4, 8))
        objects.append(
            kaiwojob(
                name, namespace, phase="RUNNING" if running else "PENDING", queue=queue, gpus=gpus
            )
        )
        admitted = NOW - timedelta(minutes=rng.uniform(1, 600)) if running else None
        waited = timedelta(minutes=rng.uniform(1, 120))
        objects.append(
            kueue_workload(
                name,
                namespace,
                gpus=gpus,
                local_queue=queue,
                admitted_to=queue if running else None,
                admitted_at=admitted,
                created=admitted - waited if admitted else NOW - timedelta(minutes=300) + waited,
            )
        )
        if running:
            node = f"node-{index % 100:03d}"
            objects.append(gpu_pod(f"{name}-0", namespace, node, gpus=gpus, workload=name))
    for obj in objects:
        state.apply(kind=obj["kind"], event="ADDED", obj=obj)
    records = QueueRecords()
    for obj in objects:  # the recorded history: each admission, and each wait for it
        if obj["kind"] == "Workload":
            records.apply(event="ADDED", obj=obj, recorded=NOW)
    for queue in QUEUES:
        records.runs[(queue, "amd.com/gpu")] = [rng.lognormvariate(7.5, 1.4) for _ in range(500)]
    return state, records


def node_history(state: ClusterState) -> tuple[NodeRecords, float]:
    """The GPU nodes' day as the console folds it from the store: every running Pod placed
    a day ago, then the monitor's reading of each running workload every 5 minutes (700 x
    288 readings: the page draws a point per three pixels, 80 a day, so finer readings
    change its cost little); a tenth of them idle (2%) for the last hour. Returns the record
    and the seconds the fold took (the console's catch-up at its start)."""
    rng = random.Random(28)
    records = NodeRecords()
    began = time.perf_counter()
    pods = state.of("Pod")
    for pod in pods:
        records.pod(event="ADDED", obj=pod, recorded=NOW - timedelta(hours=24))
    uids = [pod["metadata"]["labels"]["kaiwo.silogen.ai/run-id"] for pod in pods]
    levels = {uid: rng.uniform(0.3, 1.0) for uid in uids}
    for minute in range(1440 - EVERY_MINUTES + 1, 0, -EVERY_MINUTES):  # the last 1 min ago
        at = NOW - timedelta(minutes=minute)
        for index, uid in enumerate(uids):
            idle = index % 10 == 0 and minute <= 60
            ratio = 0.02 if idle else min(levels[uid] + rng.uniform(-0.2, 0.2), 1.0)
            since = NOW - timedelta(minutes=60) if idle else None
            records.reading(uid, Reading(at, max(ratio, 0.0), below_since=since))
    return records, time.perf_counter() - began


def timed(render: Callable[[], str], rounds: int = 5) -> tuple[float, int]:
    times = []
    size = 0
    for _ in range(rounds):
        began = time.perf_counter()
        size = len(render())
        times.append(time.perf_counter() - began)
    return statistics.median(times), size


FIRST_PAINT = """new Promise(done => {
  const seen = () => {
    const paint = performance.getEntriesByName('first-contentful-paint')[0];
    if (paint) done(paint.startTime); else setTimeout(seen, 20);
  };
  seen();
})"""
"""The page's first contentful paint, ms from the start of navigation (waits for it)."""


async def first_paints(
    state: ClusterState,
    records: QueueRecords,
    nodes: NodeRecords,
    paths: list[str],
    *,
    loads: int = 5,
) -> dict[str, tuple[float, float]]:
    """Each page's first contentful paint in headless Chromium, in seconds (medians): with
    the estimates computed for the request (what the first reader after a change waits for)
    and taken from the console's cache (every other reader until the next change). Two
    servers of the same state, loaded in turn, so that the machine's other work weighs on
    both alike."""
    from aiohttp import web
    from kaiwo_console.domain.pages.workloads import WorkloadHistory
    from kaiwo_console.http_api import Console
    from kaiwo_console.metrics import ConsoleMetrics
    from kaiwo_runtime.kubernetes_access import LOOPBACK_ONLY
    from kaiwo_runtime.nats_server import free_port

    from tests.chromium import Chromium

    async def no_history(_uid: str) -> WorkloadHistory:
        return WorkloadHistory()

    runners, ports = [], []
    for max_age in (0.0, 30.0):
        console = Console(
            state=state,
            records=records,
            nodes=nodes,
            workloads_access=LOOPBACK_ONLY,
            nodes_access=LOOPBACK_ONLY,
            metrics=ConsoleMetrics(),
            clock=lambda: NOW,
            timeline=no_history,
            anonymous="loopback",
            estimates_max_age_seconds=max_age,
        )
        runner = web.AppRunner(console.application(), access_log=None)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        runners.append(runner)
        ports.append(port)
    paints: dict[str, tuple[float, float]] = {}
    try:
        with tempfile.TemporaryDirectory() as profile:
            async with Chromium.start(Path(profile)) as browser, browser.new_page() as page:
                for path in paths:
                    times: tuple[list[float], list[float]] = ([], [])
                    for attempt in range(loads + 1):
                        for which, port in enumerate(ports):
                            await page.goto(f"http://127.0.0.1:{port}{path}")
                            answer = await page.call(
                                "Runtime.evaluate",
                                expression=FIRST_PAINT,
                                awaitPromise=True,
                                returnByValue=True,
                            )
                            if attempt:  # the first load warms the browser and the server up
                                times[which].append(float(answer["result"]["value"]) / 1000)
                    paints[path] = (statistics.median(times[0]), statistics.median(times[1]))
    finally:
        for runner in runners:
            await runner.cleanup()
    return paints


def main() -> int:
    state, records = cluster()
    nodes, folded = node_history(state)
    readings = len(state.of("Pod")) * 1440 // EVERY_MINUTES
    print(f"the GPU nodes' day ({readings:,} readings) folded in {folded:.1f} s")
    pages: dict[str, Callable[[], str]] = {
        "workloads": lambda: workloads_body(
            workload_rows(state, everything, WorkloadFilter()),
            WorkloadFilter(),
            now=NOW,
            estimates=pending_estimates(state, records, now=NOW),
        ),
        "queues": lambda: queues_body(
            queue_views(state, records, now=NOW, visible=everything, plots=True), now=NOW
        ),
        "nodes": lambda: nodes_body(node_views(state, nodes, visible=everything, now=NOW)),
        "models": lambda: models_body(model_rows(state, everything), loads={}),
    }
    print("1,000 workloads (300 pending), 100 GPU nodes, 3 queues with 500 recorded runs each")
    worst = 0.0
    for name, render in pages.items():
        seconds, size = timed(render)
        worst = max(worst, seconds)
        print(f"{name:<10} {seconds * 1000:8.0f} ms  {size / 1024:6.0f} KiB")
    if "--server-only" not in sys.argv:
        paths = ["/workloads", "/queues", "/nodes", "/models", "/workloads/ns-0/job-0000"]
        print("first contentful paint in headless Chromium (estimates computed / cached):")
        for path, (cold, warm) in asyncio.run(first_paints(state, records, nodes, paths)).items():
            worst = max(worst, cold, warm)
            print(f"{path:<26} {cold * 1000:8.0f} ms {warm * 1000:8.0f} ms")
    print("verdict:", "every page under 1 s" if worst < 1 else "a page takes 1 s or more")
    return 0 if worst < 1 else 1


if __name__ == "__main__":
    sys.exit(main())
