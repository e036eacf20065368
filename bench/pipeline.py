"""The whole pipeline under load: KaiwoJobs created at a fixed rate.

By default, when the stack is built (``make stack``, or ``KAIWO_ENVTEST_ASSETS``), against a
real kube-apiserver with etcd and the kube-controller-manager, the operator and then the kopf
peer (``bench/peer_kopf.py``) with the same load, printed side by side: see
``bench/pipeline_envtest.py``.

``--cluster fake``: against ``kaiwo up --fake`` (watcher, planner, executor, recorder as
processes, a real nats-server, the fake API server), on SQLite and on
PostgreSQL (one of our own, :func:`kaiwo_eventstore.scratch.scratch_server`; ``--stores
sqlite`` to skip it). Figures:

* **child latency**: from sending the KaiwoJob's create to seeing its batch Job in a watch of
  the API server, at 50 workloads/s for a few seconds (p50, p99);
* **sustained rate**: a ramp of creation rates, each for a short window; a step passes when
  every workload got its Job and the p99 latency of the step stayed under a second (a pipeline
  slower than the input builds a queue, and its latency grows through the window). The
  highest passing step is reported, with the creation rate the client actually reached. After
  the ramp the event store is compared with the streams: every message exactly once;
* **append rate**: 20,000 copies of a result event (new ids) are published as fast as the
  client can, and the recorder's ``events_appended_total`` is followed until all are in
  (only the recorder consumes ``KAIWO_RES``);
* **replay rate**: ``kaiwo_cli.replay.replanning.replay_recorded`` over every recorded
  observation and plan (pure, in memory), and the same including reading them from the store;
* **CPU per workload**: user + system time of every process (services, nats-server, the
  fake API server, this client) over the latency step, divided by its workloads: the sum
  bounds the rate two cores can carry;
* **memory per workload**: after the ramp (caches, buffers and lazily loaded code warm),
  1,000 more workloads at 50/s; the growth of each service's RSS (``/proc/<pid>/status``)
  divided by 1,000: what one more tracked workload costs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from kaiwo_cli.replay.recorded import OBSERVED_TYPE, PLAN_TYPE
from kaiwo_cli.replay.replanning import replay_recorded
from kaiwo_cli.stack.local import LocalStack, StackOptions
from kaiwo_contracts.events.permissions import ADMIN
from kaiwo_contracts.events.streams import OBSERVED_STREAM, PLAN_STREAM, RESULT_STREAM
from kaiwo_eventstore import EventStore, open_event_store
from kaiwo_eventstore.scratch import scratch_database, scratch_server, why_no_server
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_runtime.nats_connection import connect_client
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.integration.pipeline.cluster_actors import GpuNode, node_heartbeat, register_node

NAMESPACE = "ml-team"
LATENCY_RATE = 50
LATENCY_SECONDS = 3.0
RAMP = (50, 100, 150, 200, 300, 400)
STEP_SECONDS = 2.0
KEEPS_UP_P99 = 1.0
CHILD_GRACE_SECONDS = 20.0
APPEND_EVENTS = 20_000
MEMORY_WORKLOADS = 1_000
MEMORY_RATE = 50
SERVICE_ENV = {"KAIWO_LOG_LEVEL": "WARNING", "KAIWO_SNAPSHOT_EVERY_SECONDS": "30"}
TARGETS = {
    "p99": 0.100,
    "sustained": 300.0,
    "append": 5_000.0,
    "replay": 100_000.0,
    "memory": 5.0,
}


@dataclass
class Figures:
    store: str
    p50: float = float("nan")
    p99: float = float("nan")
    steps: list[tuple[int, float, float, float, bool]] = field(default_factory=list)
    """(rate asked, rate reached, p50, p99, passed)."""
    sustained: int = 0
    lossless: bool = False
    append: float = float("nan")
    replay_pure: float = float("nan")
    replay_with_reads: float = float("nan")
    replayed: int = 0
    memory_kb: dict[str, float] = field(default_factory=dict)
    workloads: int = 0
    hops: dict[str, float] = field(default_factory=dict)
    cpu_ms: dict[str, float] = field(default_factory=dict)
    """CPU time per workload of each process during the latency step (what bounds the rate)."""


# --------------------------------------------------------------------------- the cluster

GPU_NODES = (GpuNode("bench-mi300x-a"), GpuNode("bench-mi300x-b"))
"""A KaiwoJob asking for GPUs waits (NoGPUs) on a cluster without any."""


@contextlib.asynccontextmanager
async def gpu_nodes(kube: KubernetesAsyncioAdapter) -> AsyncIterator[None]:
    """``GPU_NODES`` registered as their kubelets would, their Leases renewed meanwhile (the
    node lifecycle controller of a real control plane taints a silent node)."""
    for node in GPU_NODES:
        await register_node(kube, node, not_ready_taint=False)
    async with node_heartbeat(kube):
        yield


def queue_config(namespace: str = NAMESPACE) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {"clusterQueues": [{"name": "kaiwo", "namespaces": [namespace], "spec": {}}]},
    }


@dataclass(frozen=True)
class BenchStack:
    """A started stack and what a benchmark drives it through."""

    stack: LocalStack
    kube: KubernetesAsyncioAdapter
    js: JetStreamContext
    clock: ChildClock


@contextlib.asynccontextmanager
async def bench_stack(
    options: StackOptions,
    *,
    kube: KubernetesAsyncioAdapter | None = None,
    namespace: str = NAMESPACE,
) -> AsyncIterator[BenchStack]:
    """The one set-up of the benchmarks: start the stack, connect to its NATS as admin, apply
    the bench's queue config over the operator's default and time the Jobs of ``namespace``.
    Without ``kube`` (the fake cluster) it also connects to the stack's API server, registers
    the GPU nodes and creates the namespace; with one (a control plane's) the caller did."""
    async with LocalStack(options) as stack, contextlib.AsyncExitStack() as exits:
        if kube is None:
            assert stack.kubeconfig is not None
            kube = await KubernetesAsyncioAdapter.from_kubeconfig(stack.kubeconfig)
            exits.push_async_callback(kube.close)
            await exits.enter_async_context(gpu_nodes(kube))
            await kube.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
        client = await connect_client(stack.nats_connection(ADMIN))
        exits.push_async_callback(client.close)
        await kube.apply(queue_config(namespace), field_manager="kaiwo-bench")
        clock = ChildClock(kube, namespace)
        await clock.start()
        exits.push_async_callback(clock.stop)
        yield BenchStack(stack, kube, client.jetstream(), clock)


def kaiwo_job(name: str, namespace: str = NAMESPACE) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "image": "ghcr.io/silogen/rocm-ray:6.4",
            "entrypoint": "python train.py",
            "gpus": 1,
            "gpuVendor": "amd",
        },
    }


class ChildClock:
    """Watches batch Jobs and notes when each one is first seen."""

    def __init__(self, kube: KubernetesAsyncioAdapter, namespace: str = NAMESPACE) -> None:
        self._kube = kube
        self._namespace = namespace
        self.seen: dict[str, float] = {}
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        listed = await self._kube.list(resources.JOB, namespace=self._namespace)
        self._task = asyncio.create_task(self._follow(listed.resource_version))

    async def _follow(self, version: str) -> None:
        while True:
            events = self._kube.watch(
                resources.JOB,
                resource_version=version,
                namespace=self._namespace,
                timeout_seconds=600,
                bookmarks=True,
            )
            async with contextlib.aclosing(events):
                async for event in events:
                    version = event.resource_version or version
                    if event.type == "ADDED":
                        name = event.object["metadata"]["name"]
                        self.seen.setdefault(name, time.perf_counter())
                        async with self._changed:
                            self._changed.notify_all()

    async def all_seen(self, names: Mapping[str, float]) -> None:
        """Return once every name has been seen."""
        async with self._changed:
            await self._changed.wait_for(lambda: all(name in self.seen for name in names))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


@dataclass
class Step:
    rate: int
    reached: float
    latencies: list[float]
    missing: int
    cleared: float = float("nan")
    """Seconds from the last create sent to the last child seen (nan: some never came)."""

    def percentile(self, fraction: float) -> float:
        return percentile(self.latencies, fraction)


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank ``fraction`` quantile of ``values`` (nan when there are none)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def create_at_rate(
    kube: KubernetesAsyncioAdapter,
    clock: ChildClock,
    *,
    prefix: str,
    rate: int,
    seconds: float,
    namespace: str = NAMESPACE,
    grace: float = CHILD_GRACE_SECONDS,
) -> Step:
    """Create ``rate * seconds`` KaiwoJobs at ``rate``/s; wait for their Jobs (at most
    ``grace`` seconds after the last create)."""
    count = int(rate * seconds)
    sent: dict[str, float] = {}
    failures = 0

    async def create(name: str) -> None:
        nonlocal failures
        sent[name] = time.perf_counter()
        try:
            await kube.create(kaiwo_job(name, namespace))
        except Exception:
            failures += 1

    started = time.perf_counter()
    tasks = []
    for index in range(count):
        delay = started + index / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(create(f"{prefix}-{index}")))
    await asyncio.gather(*tasks)
    ended = time.perf_counter()
    reached = count / (ended - started)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(clock.all_seen(sent), grace)
    latencies = [clock.seen[n] - t for n, t in sent.items() if n in clock.seen]
    missing = count - len(latencies) + failures
    cleared = float("nan")
    if sent and not missing:
        cleared = max(0.0, max(clock.seen[n] for n in sent) - ended)
    return Step(rate=rate, reached=reached, latencies=latencies, missing=missing, cleared=cleared)


# --------------------------------------------------------------------------- the log


async def stream_ids(js: JetStreamContext, stream: str, subject: str) -> list[str]:
    """The ``ce-id`` of every message in ``stream``, read by an ordered consumer."""
    expected = (await js.stream_info(stream)).state.messages
    ids: list[str] = []
    done = asyncio.Event()

    async def take(message: Any) -> None:
        headers = {k.lower(): v for k, v in (message.headers or {}).items()}
        ids.append(headers.get("ce-id", ""))
        if len(ids) >= expected:
            done.set()

    if expected == 0:
        return ids
    subscription = await js.subscribe(
        subject, stream=stream, cb=take, ordered_consumer=True, deliver_policy=DeliverPolicy.ALL
    )
    try:
        await asyncio.wait_for(done.wait(), 120)
    finally:
        await subscription.unsubscribe()
    return ids


async def idle(js: JetStreamContext, *, within: float) -> bool:
    """Every consumer of the running services has nothing pending or unacknowledged."""
    names = (
        (OBSERVED_STREAM, "planner-obs"),
        (PLAN_STREAM, "executor-plan"),
        (OBSERVED_STREAM, "recorder-obs"),
        (PLAN_STREAM, "recorder-plan"),
        (RESULT_STREAM, "recorder-res"),
    )
    deadline = time.perf_counter() + within
    while time.perf_counter() < deadline:
        infos = [await js.consumer_info(stream, name) for stream, name in names]
        if all(i.num_pending == 0 and i.num_ack_pending == 0 for i in infos):
            return True
        await asyncio.sleep(0.5)
    return False


async def lossless(js: JetStreamContext, store: EventStore) -> bool:
    """Every message of the three streams is in the store exactly once."""
    recorded: dict[str, list[str]] = {}
    async for batch in store.iter_all():
        for event in batch:
            recorded.setdefault(str(event.metadata.get("natsStream")), []).append(event.event_id)
    for stream, subject in (
        (OBSERVED_STREAM, "kaiwo.obs.>"),
        (PLAN_STREAM, "kaiwo.plan.>"),
        (RESULT_STREAM, "kaiwo.res.>"),
    ):
        in_stream = set(await stream_ids(js, stream, subject))
        in_store = recorded.get(stream, [])
        if in_stream != set(in_store) or len(in_store) != len(set(in_store)):
            print(
                f"  {stream}: {len(in_stream)} ids in the stream, {len(in_store)} rows "
                f"({len(in_stream - set(in_store))} missing)"
            )
            return False
    return True


async def recorder_appended(port: int) -> float:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        text = await response.text()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("kaiwo_recorder_events_appended_total{")
    )


async def append_rate(stack: LocalStack, js: JetStreamContext) -> float:
    """Recorder throughput over ``APPEND_EVENTS`` result events published at once (events/s)."""
    recorder = stack.services["recorder"]
    last = (await js.stream_info(RESULT_STREAM)).state.last_seq
    template = await js.get_msg(RESULT_STREAM, seq=last)
    assert template.subject is not None
    before = await recorder_appended(recorder.health_port)
    started = time.perf_counter()
    pending = []
    for _ in range(APPEND_EVENTS):
        headers = dict(template.headers or {})
        headers["ce-id"] = headers["Nats-Msg-Id"] = str(uuid.uuid4())
        pending.append(js.publish(template.subject, template.data or b"", headers=headers))
        if len(pending) >= 500:
            await asyncio.gather(*pending)
            pending.clear()
    await asyncio.gather(*pending)
    target = before + APPEND_EVENTS
    while (done := await recorder_appended(recorder.health_port)) < target:
        if time.perf_counter() - started > 120:
            break
        await asyncio.sleep(0.05)
    return (done - before) / (time.perf_counter() - started)


async def hop_delays(store_url: str) -> dict[str, float]:
    """Median delay of each hop, from the recorded envelope times (seconds): observation to
    the plan it caused, plan to its result."""
    store = await open_event_store(store_url, migrate=False)
    try:
        events = [e async for batch in store.iter_all() for e in batch]
    finally:
        await store.close()
    times = {e.event_id: e.time for e in events}
    delays: dict[str, list[float]] = {"observation -> plan": [], "plan -> result": []}
    for event in events:
        cause = times.get(event.causation_id or "")
        if cause is None:
            continue
        hop = "observation -> plan" if event.type == PLAN_TYPE else "plan -> result"
        delays[hop].append((event.time - cause).total_seconds())
    return {hop: statistics.median(values) for hop, values in delays.items() if values}


async def replay_rates(store_url: str) -> tuple[float, float, int]:
    """(pure events/s, events/s including reads, events replayed)."""
    store = await open_event_store(store_url, migrate=False)
    try:
        started = time.perf_counter()
        observations = await store.read_by_type([OBSERVED_TYPE])
        plans = await store.read_by_type([PLAN_TYPE])
        read = time.perf_counter() - started
    finally:
        await store.close()
    started = time.perf_counter()
    report = replay_recorded(observations=observations, plans=plans)
    pure = time.perf_counter() - started
    events = len(observations) + len(plans)
    if report.differ:
        print(f"  replay: {report.differ} of {len(report.plans)} plans differ")
    return events / pure, events / (pure + read), events


def cpu_seconds(pids: Mapping[str, int]) -> dict[str, float]:
    """User + system CPU seconds used so far by each process (and by this one, the client)."""
    tick = os.sysconf("SC_CLK_TCK")
    used = {}
    for name, pid in pids.items():
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            used[name] = (int(fields[11]) + int(fields[12])) / tick
    own = os.times()
    used["bench client"] = own.user + own.system
    return used


def rss_kb(pid: int | None) -> float:
    if pid is None:
        return float("nan")
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return float(line.split()[1])
    return float("nan")


# --------------------------------------------------------------------------- one store


async def latency_step(
    stack: LocalStack,
    kube: KubernetesAsyncioAdapter,
    clock: ChildClock,
    js: JetStreamContext,
    figures: Figures,
) -> int:
    """Child latency and CPU per workload at ``LATENCY_RATE``; how many workloads it made."""
    cpu_before = cpu_seconds(stack.process_ids())
    step = await create_at_rate(
        kube, clock, prefix="latency", rate=LATENCY_RATE, seconds=LATENCY_SECONDS
    )
    await idle(js, within=30)
    cpu_after = cpu_seconds(stack.process_ids())
    latency_workloads = int(LATENCY_RATE * LATENCY_SECONDS)
    figures.cpu_ms = {
        name: (cpu_after[name] - used) * 1000 / latency_workloads
        for name, used in cpu_before.items()
        if name in cpu_after
    }
    figures.p50, figures.p99 = step.percentile(0.5), step.percentile(0.99)
    print(
        f"  latency at {LATENCY_RATE}/s: p50 {figures.p50 * 1000:.0f} ms, "
        f"p99 {figures.p99 * 1000:.0f} ms, missing {step.missing}"
    )
    total = sum(figures.cpu_ms.values())
    print(
        f"  CPU per workload {total:.1f} ms (2 cores: at most {2000 / total:.0f}/s): "
        + ", ".join(f"{n} {ms:.1f}" for n, ms in sorted(figures.cpu_ms.items()))
    )
    return latency_workloads


async def measure(store_name: str, store_url: str | None, state_dir: Path) -> Figures:
    figures = Figures(store=store_name)
    options = StackOptions(
        state_dir=state_dir,
        fake_cluster=True,
        seed_fake_cluster=False,
        store_url=store_url,
        service_env=SERVICE_ENV,
    )
    async with bench_stack(options) as running:
        stack, kube, js, clock = running.stack, running.kube, running.js, running.clock
        await create_at_rate(kube, clock, prefix="warm-up", rate=20, seconds=1)
        await idle(js, within=30)
        created = 20
        created += await latency_step(stack, kube, clock, js, figures)
        for rate in RAMP:
            await idle(js, within=30)
            step = await create_at_rate(
                kube, clock, prefix=f"ramp-{rate}", rate=rate, seconds=STEP_SECONDS
            )
            created += int(rate * STEP_SECONDS)
            passed = step.missing == 0 and step.percentile(0.99) <= KEEPS_UP_P99
            figures.steps.append(
                (rate, step.reached, step.percentile(0.5), step.percentile(0.99), passed)
            )
            print(
                f"  ramp {rate}/s (reached {step.reached:.0f}/s): p50 "
                f"{step.percentile(0.5) * 1000:.0f} ms, p99 {step.percentile(0.99) * 1000:.0f} "
                f"ms, missing {step.missing} -> {'keeps up' if passed else 'falls behind'}"
            )
            if not passed:
                break
            figures.sustained = rate
        settled = await idle(js, within=40)
        figures.hops = await hop_delays(options.event_store_url)
        print(
            "  median hop delays: "
            + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in figures.hops.items())
        )
        # Memory: the slope over MEMORY_WORKLOADS more, once caches and buffers are warm.
        baseline = {name: rss_kb(s.pid) for name, s in stack.services.items()}
        await create_at_rate(
            kube, clock, prefix="memory", rate=MEMORY_RATE, seconds=MEMORY_WORKLOADS / MEMORY_RATE
        )
        settled = await idle(js, within=60) and settled
        created += MEMORY_WORKLOADS
        figures.workloads = created
        figures.memory_kb = {
            name: (rss_kb(s.pid) - baseline[name]) / MEMORY_WORKLOADS
            for name, s in stack.services.items()
        }
        store = await open_event_store(options.event_store_url, migrate=False)
        try:
            figures.lossless = settled and await lossless(js, store)
        finally:
            await store.close()
        figures.append = await append_rate(stack, js)
        await idle(js, within=30)
        figures.replay_pure, figures.replay_with_reads, figures.replayed = await replay_rates(
            options.event_store_url
        )
    return figures


# --------------------------------------------------------------------------- PostgreSQL


@contextlib.asynccontextmanager
async def postgres_database() -> AsyncIterator[str | None]:
    if why_no_server() is not None:
        yield None
        return
    with scratch_server() as server:
        async with scratch_database(server, prefix="kaiwo_bench") as url:
            yield url


# --------------------------------------------------------------------------- report


def table(results: list[Figures]) -> str:
    def reached(figures: Figures) -> Mapping[str, str]:
        memory = ", ".join(f"{n} {kb:.1f}" for n, kb in figures.memory_kb.items())
        worst = max(figures.memory_kb.values(), default=float("nan"))
        return {
            "p99": f"p50 {figures.p50 * 1000:.0f} ms, p99 {figures.p99 * 1000:.0f} ms",
            "sustained": f"{figures.sustained}/s, lossless={figures.lossless}",
            "append": f"{figures.append:,.0f} events/s",
            "replay": f"{figures.replay_pure:,.0f} events/s pure, "
            f"{figures.replay_with_reads:,.0f} with reads ({figures.replayed:,} events)",
            "memory": f"worst {worst:.1f} KB ({memory})",
        }

    def met(key: str, figures: Figures) -> bool:
        values = {
            "p99": figures.p99 <= TARGETS["p99"],
            "sustained": figures.sustained >= TARGETS["sustained"] and figures.lossless,
            "append": figures.append >= TARGETS["append"],
            "replay": figures.replay_pure >= TARGETS["replay"],
            "memory": max(figures.memory_kb.values(), default=float("inf")) <= TARGETS["memory"],
        }
        return values[key]

    labels = {
        "p99": ("child latency at 50/s", "p99 <= 100 ms"),
        "sustained": ("sustained rate, zero loss", ">= 300 workloads/s"),
        "append": ("event store appends", ">= 5,000 events/s"),
        "replay": ("replay", ">= 100,000 events/s"),
        "memory": ("memory per workload/service", "<= 5 KB"),
    }
    rows = [("store", "figure", "target", "reached", "met")]
    for figures in results:
        shown = reached(figures)
        for key, (label, target) in labels.items():
            rows.append(
                (figures.store, label, target, shown[key], "yes" if met(key, figures) else "NO")
            )
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


async def run(stores: list[str], *, keep: bool = False) -> list[Figures]:
    results = []
    for store in stores:
        scratch = Path(tempfile.mkdtemp(prefix="kaiwo-bench-"))
        if keep:
            print(f"  scratch (event store, logs): {scratch}")
        try:
            if store == "sqlite":
                print("sqlite:")
                results.append(await measure("sqlite", None, scratch / "kaiwo"))
                continue
            async with postgres_database() as url:
                if url is None:
                    print(f"postgresql skipped: {why_no_server()}")
                    continue
                print("postgresql:")
                results.append(await measure("postgresql", url, scratch / "kaiwo"))
        finally:
            if not keep:
                shutil.rmtree(scratch, ignore_errors=True)
    return results


def main() -> None:
    # Imported here: it imports this module's helpers.
    import pipeline_envtest

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cluster",
        choices=("envtest", "fake"),
        default="envtest" if pipeline_envtest.assets_present() else "fake",
        help="envtest: the operator and the kopf peer on a real API server (the default when "
        "the envtest archives are found); fake: the operator alone on the fake API server",
    )
    parser.add_argument("--stores", default="sqlite,postgresql", help="with --cluster fake")
    parser.add_argument(
        "--keep", action="store_true", help="keep each run's event store and logs to inspect"
    )
    parser.add_argument(
        "--profile", type=Path, help="with --cluster envtest: py-spy profiles into this directory"
    )
    parser.add_argument(
        "--sides",
        default="operator,one-process,kopf",
        help="with --cluster envtest: which sides to run (operator, one-process, kopf; floor: "
        "also the bus traffic alone, bench/bus_floor.py)",
    )
    parser.add_argument(
        "--memory-workloads",
        type=int,
        default=pipeline_envtest.MEMORY_WORKLOADS,
        help="with --cluster envtest: KaiwoJobs each side gets after its steps (memory, RSS)",
    )
    arguments = parser.parse_args()
    if arguments.cluster == "envtest":
        pipeline_envtest.run(
            keep=arguments.keep,
            profile=arguments.profile,
            sides=tuple(arguments.sides.split(",")),
            memory_workloads=arguments.memory_workloads,
        )
        return
    started = time.perf_counter()
    results = asyncio.run(run(arguments.stores.split(","), keep=arguments.keep))
    print()
    print(table(results))
    print(f"(total {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
