"""Where the planner's memory goes, per tracked workload.

A ``PlannerService`` in this process (an in-memory bus whose published plans are dropped,
so only the service's own state grows) is handed the observations of
``bench/planner_service.py``, three per KaiwoJob: the KaiwoJob as created, its batch Job,
the KaiwoJob with the status its plan wrote. After ``--warm`` workloads (code, schemas and
per-cluster values loaded) it takes ``--workloads`` more, and reports the growth per
workload:

* ``rss``: the process's resident memory (``/proc/self/statm``), what the pipeline
  benchmark reports; it includes what ``tracemalloc`` cannot see (the Rust hash tries of
  the projection's index);
* ``traced`` (with ``--traced``, a second run: tracing inflates the RSS): Python
  allocations still alive (``tracemalloc``, on from the start, so values that replace
  others in a bounded store count as the replacement they are), split by the module that
  made them: the stored objects (the projection's interned copies), the index entries, the
  service's owner records, the planning context, the rest.

Run: ``uv run python bench/planner_memory.py [--warm N] [--workloads N]``; the same script
runs against older code (``<other tree>/.venv/bin/python bench/planner_memory.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import sys
import tracemalloc
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog
from kaiwo_contracts.events import Envelope
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_planner.metrics import PlannerMetrics
from kaiwo_planner.service import PlannerService
from kaiwo_planner.settings import PlannerSettings
from kaiwo_runtime.bus import Delivery, PublishAck
from kaiwo_runtime.kv import MemoryKeyValue
from kaiwo_runtime.memory_bus import MemoryBus
from kaiwo_runtime.memory_jetstream import MemoryJetStream

sys.path.insert(0, str(Path(__file__).resolve().parent))
from planner_service import Observed, observations

PAGE_KB = os.sysconf("SC_PAGE_SIZE") / 1024
GROUPS = (
    ("stored objects", ("domain/state/projection.py",)),
    ("index", ("domain/state/object_index.py", "domain/state/nodes.py")),
    ("planning context", ("domain/state/planning_context.py", "domain/scheduling/")),
    ("owner records", ("kaiwo_planner/service.py", "kaiwo_planner/owner_records.py")),
    ("planning (models, children)", ("kaiwo_planner/domain/", "pydantic")),
)


class DroppingBus(MemoryBus):
    """Publishes nothing: the plans the service sends are not kept in this process."""

    async def publish(self, envelope: Envelope[Any], subject: str) -> PublishAck:  # noqa: ARG002
        return PublishAck(stream="dropped", sequence=0, duplicate=False)


def rss_kb() -> float:
    fields = Path("/proc/self/statm").read_text().split()
    return int(fields[1]) * PAGE_KB


def deliveries(items: Iterator[Observed], *, first: int) -> Iterator[Delivery]:
    for sequence, item in enumerate(items, start=first):
        headers, body = item.envelope.to_nats()
        yield Delivery(
            stream="KAIWO_OBS",
            consumer="planner-obs",
            stream_sequence=sequence,
            attempt=1,
            subject=item.subject,
            headers=headers,
            body=body,
        )


def group_of(filename: str) -> str:
    for label, parts in GROUPS:
        if any(part in filename for part in parts):
            return label
    return "other"


async def run(warm: int, workloads: int, *, traced: bool, verbose: bool) -> None:
    topology = bus_topology()
    server = MemoryJetStream()
    bus = DroppingBus(server=server, topology=topology)
    service = PlannerService(
        bus,
        MemoryKeyValue(),
        clock=lambda: datetime.now(UTC),
        settings=PlannerSettings(resync_on_start=False, resync_every_seconds=0),
        metrics=PlannerMetrics(),
    )
    items = list(observations(warm + workloads))
    cluster_objects = len(items) - 3 * (warm + workloads)
    steps = list(deliveries(iter(items), first=1))
    if traced:
        tracemalloc.start(1)
    warm_until = cluster_objects + 3 * warm
    for delivery in steps[:warm_until]:
        await service.handle(delivery)
    gc.collect()
    before_rss = rss_kb()
    before = tracemalloc.take_snapshot() if traced else None
    for delivery in steps[warm_until:]:
        await service.handle(delivery)
    gc.collect()
    # The observations stay held until measured: freed, their memory would be reused.
    after_rss = rss_kb()
    del steps, items
    print(f"{workloads} workloads after {warm} warm-up, {len(service.projection)} objects held")
    print(f"rss      {(after_rss - before_rss) / workloads:6.2f} KB per workload")
    if before is None:
        return
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown: dict[str, float] = defaultdict(float)
    lines: dict[str, float] = defaultdict(float)
    for stat in after.compare_to(before, "lineno"):
        frame = stat.traceback[0]
        grown[group_of(frame.filename)] += stat.size_diff
        lines[f"{frame.filename.rpartition('/src/')[2]}:{frame.lineno}"] += stat.size_diff
    print(f"traced   {sum(grown.values()) / workloads / 1024:6.2f} KB per workload, of which")
    for label, size in sorted(grown.items(), key=lambda item: -item[1]):
        print(f"  {label:<30}{size / workloads / 1024:6.2f} KB")
    if verbose:
        print("largest allocation sites:")
        for line, size in sorted(lines.items(), key=lambda item: -item[1])[:15]:
            print(f"  {size / workloads / 1024:6.2f} KB  {line}")


def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", type=int, default=500)
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--traced", action="store_true", help="trace Python allocations")
    parser.add_argument("--sites", action="store_true", help="list the largest allocation sites")
    args = parser.parse_args()
    asyncio.run(run(args.warm, args.workloads, traced=args.traced, verbose=args.sites))


if __name__ == "__main__":
    main()
