"""The operator and its kopf peer on a real API server, same run, same load
(``bench/pipeline.py``'s default when the envtest archives are found).

One throw-away control plane (etcd, kube-apiserver, kube-controller-manager from
``libs/kaiwo_envtest``, as the tests' ``real_cluster`` starts it) serves both, one after the
other:

1. the operator as ``kaiwo up`` runs it (watcher, planner, executor, recorder and nats-server
   as processes, SQLite event store), on namespace ``ml-team``;
2. then, stopped, the operator as ``kaiwo up --one-process`` runs it (the four services in
   one process, and nats-server), watching namespace ``ml-solo`` only;
3. then, the operator stopped, ``bench/peer_kopf.py`` (one process), on namespace
   ``kopf-team``;
4. with ``floor`` among the sides, last, ``bench/bus_floor.py``: the operator's messages per
   workload sent alone with bare nats-py, and the least an event-sourced operator can send,
   each printed beside the peer's whole CPU (decision 0104).

Each gets a warm-up, then KaiwoJobs created at each rate of ``RATES`` for ``STEP_SECONDS``;
the child Job latency is taken from a watch of Jobs (create sent -> Job ADDED). CPU is user +
system time from ``/proc/<pid>/stat`` of each process, from the start of a step until the
side is idle again (the operator: every consumer drained; kopf: every KaiwoJob carries its
progress annotation), divided by the step's workloads. The control plane's processes are
reported apart: they serve both sides, and so are the API requests per workload (the API
server's own ``apiserver_request_total``, by verb and resource, watches left out). The
operator's planner also gives its RSS growth per tracked workload (``MEMORY_WORKLOADS``
more at 50/s) and its plan-time histogram.
``--profile DIR`` records py-spy flame graphs (collapsed stacks) of every Python process
during the last step.

Both sides then get the same ``MEMORY_WORKLOADS`` more (``--memory-workloads``), and their
RSS is read after the run: the sum over the operator's processes (services and nats-server)
against the peer's one process (and, for each process, once it has started, before the
first workload). The backlog of each step is the time from its last create to
its last child Job seen (the issue's 50/s target: cleared within 30 s, nothing lost). The
operator's event store (SQLite, what its recorder wrote) is measured in bytes per workload
created, indexes included. The load average is printed at the start and the end: the
machine is shared, and ratios between the two sides of one run are the figures to compare.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from kaiwo_cli.stack.local import TOGETHER, StackOptions
from kaiwo_cli.stack.third_party import driven_kind_crds
from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_envtest import ControlPlane, ControlPlaneOptions, find_binaries
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from pipeline import (
    CHILD_GRACE_SECONDS,
    ChildClock,
    Step,
    bench_stack,
    cpu_seconds,
    create_at_rate,
    gpu_nodes,
    idle,
    percentile,
    rss_kb,
)

REPO = Path(__file__).resolve().parent.parent
PEER = Path(__file__).resolve().parent / "peer_kopf.py"
BUS_FLOOR = Path(__file__).resolve().parent / "bus_floor.py"
OPERATOR_NAMESPACE = "ml-team"
ONE_PROCESS_NAMESPACE = "ml-solo"
"""The operator in one process (``kaiwo up --one-process``), third: it watches only this
namespace, so the first side's workloads, still in the cluster, are not its load."""
PEER_NAMESPACE = "kopf-team"
RATES = (20, 50)
STEP_SECONDS = 5.0
STEPPED_WORKLOADS = int(sum(RATES) * STEP_SECONDS)
"""KaiwoJobs created by the measured steps (every rate of ``RATES`` for ``STEP_SECONDS``)."""
WARM_UP = (20, 1.0)
MEMORY_WORKLOADS = 1_000
MEMORY_RATE = 50
QUIET_SECONDS = 1.0
"""After a side is idle: the last watch events of its own writes come back and are handled."""
SERVICE_ENV = {"KAIWO_LOG_LEVEL": "WARNING", "KAIWO_SNAPSHOT_EVERY_SECONDS": "30"}
PROGRESS_ANNOTATION = "kopf.zalando.org/last-handled-configuration"
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager")
STEP_GRACE_SECONDS = max(CHILD_GRACE_SECONDS, 60.0)
"""How long a step waits for its children after its last create (longer than the backlog
target, so a slow clearance is measured rather than counted as missing)."""
TARGETS = {
    "cpu ratio": 2.5,
    "p50 at 20/s": 0.100,
    "p99 at 20/s": 1.0,
    "rss ratio": 2.5,
    "cleared at 50/s": 30.0,
    "store KB": 12.0,
    "planner KB": 5.0,
    "plan p99": 0.000200,
}
"""Issue 28's targets (CPU, latency at 20/s, RSS, the 50/s backlog, the store), then the
planner's own."""


def assets_present() -> bool:
    try:
        find_binaries()
    except Exception:
        return False
    return True


# --------------------------------------------------------------------------- figures


@dataclass
class StepFigures:
    rate: int
    reached: float
    p50: float
    p99: float
    missing: int
    workloads: int
    cpu_ms: dict[str, float]
    """CPU per workload of each process over the step, by process name."""
    cleared: float = float("nan")
    """Seconds from the step's last create to its last child seen."""
    api_calls: dict[str, float] = field(default_factory=dict)
    """API requests per workload over the step, by verb and resource (every client's)."""

    @property
    def api_total(self) -> float:
        return sum(self.api_calls.values())

    def side_ms(self, names: tuple[str, ...]) -> float:
        return sum(ms for name, ms in self.cpu_ms.items() if name in names)


@dataclass
class Side:
    name: str
    processes: tuple[str, ...] = ()
    steps: list[StepFigures] = field(default_factory=list)
    planner_kb: float = float("nan")
    plan_p99: float = float("nan")
    plan_p50: float = float("nan")
    rss_kb: dict[str, float] = field(default_factory=dict)
    """RSS of each of the side's processes after the run."""
    idle_rss_kb: dict[str, float] = field(default_factory=dict)
    """RSS of each of the side's processes once started, before the first workload."""
    workloads: int = 0
    """KaiwoJobs created on this side (warm-up, steps and the memory load)."""
    store_bytes: float = float("nan")
    store_events: int = 0

    @property
    def rss_total_kb(self) -> float:
        return sum(self.rss_kb.values()) if self.rss_kb else float("nan")

    @property
    def idle_rss_total_kb(self) -> float:
        return sum(self.idle_rss_kb.values()) if self.idle_rss_kb else float("nan")


# --------------------------------------------------------------------------- measuring


def system_seconds(pids: Mapping[str, int]) -> dict[str, float]:
    """System (kernel) CPU seconds used so far by each process."""
    tick = os.sysconf("SC_CLK_TCK")
    used = {}
    for name, pid in pids.items():
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            used[name] = int(fields[12]) / tick
    return used


class CpuWindow:
    """CPU seconds of named processes between two moments."""

    def __init__(self, pids: Callable[[], Mapping[str, int]]) -> None:
        self._pids = pids
        self._before: dict[str, float] = {}
        self._system_before: dict[str, float] = {}

    def start(self) -> None:
        self._before = cpu_seconds(self._pids())
        self._system_before = system_seconds(self._pids())

    def system_shares(self) -> dict[str, float]:
        """Of each process's CPU since :meth:`start`, the kernel's share."""
        total, system = cpu_seconds(self._pids()), system_seconds(self._pids())
        return {
            name: (system[name] - used) / max(total[name] - self._before[name], 1e-9)
            for name, used in self._system_before.items()
            if name in system and name in total
        }

    def per_workload_ms(self, workloads: int) -> dict[str, float]:
        after = cpu_seconds(self._pids())
        return {
            name: (after[name] - used) * 1000 / workloads
            for name, used in self._before.items()
            if name in after
        }


async def api_requests(kube: KubernetesAsyncioAdapter) -> dict[str, float]:
    """The API server's ``apiserver_request_total`` so far, by verb and resource (watches
    left out: one per informer, not per workload)."""
    response = await kube.transport.open("GET", "/metrics", accept="text/plain")
    try:
        text = (await response.read()).decode()
    finally:
        response.release()
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_text, value = line.rsplit(" ", 1)
        labels = dict(
            pair.split("=", 1) for pair in labels_text.split("{", 1)[1].rstrip("}").split(",")
        )
        verb = labels.get("verb", "").strip('"')
        if verb == "WATCH":
            continue
        resource = labels.get("resource", "").strip('"') or "-"
        if labels.get("subresource", '""').strip('"'):
            resource += "/" + labels["subresource"].strip('"')
        key = f"{verb} {resource}"
        counts[key] = counts.get(key, 0.0) + float(value)
    return counts


def grown_per_workload(
    before: Mapping[str, float], after: Mapping[str, float], workloads: int
) -> dict[str, float]:
    return {
        key: (value - before.get(key, 0.0)) / workloads
        for key, value in after.items()
        if value - before.get(key, 0.0) > 0
    }


async def measured_step(
    kube: KubernetesAsyncioAdapter,
    clock: ChildClock,
    *,
    namespace: str,
    rate: int,
    window: CpuWindow,
    settle: Callable[[], Any],
) -> StepFigures:
    window.start()
    requests_before = await api_requests(kube)
    step: Step = await create_at_rate(
        kube,
        clock,
        prefix=f"r{rate}",
        rate=rate,
        seconds=STEP_SECONDS,
        namespace=namespace,
        grace=STEP_GRACE_SECONDS,
    )
    await settle()
    await asyncio.sleep(QUIET_SECONDS)
    workloads = int(rate * STEP_SECONDS)
    shares = window.system_shares()
    api_calls = grown_per_workload(requests_before, await api_requests(kube), workloads)
    figures = StepFigures(
        rate=rate,
        reached=step.reached,
        p50=step.percentile(0.5),
        p99=step.percentile(0.99),
        missing=step.missing,
        workloads=workloads,
        cpu_ms=window.per_workload_ms(workloads),
        cleared=step.cleared,
        api_calls=api_calls,
    )
    print(
        f"  {rate}/s (reached {step.reached:.0f}/s): p50 {figures.p50 * 1000:.0f} ms, "
        f"p99 {figures.p99 * 1000:.0f} ms, missing {step.missing}, backlog cleared "
        f"{step.cleared:.1f} s after the last create; CPU ms/workload "
        + ", ".join(f"{n} {ms:.1f}" for n, ms in sorted(figures.cpu_ms.items()))
        + "; kernel share "
        + ", ".join(f"{n} {share:.0%}" for n, share in sorted(shares.items()))
    )
    print(
        f"    API requests per workload {figures.api_total:.2f} (every client's, the bench's "
        "create included): "
        + ", ".join(
            f"{key} {count:.2f}"
            for key, count in sorted(api_calls.items(), key=lambda item: -item[1])
            if count >= 0.01
        )
    )
    return figures


def histogram_buckets(text: str, metric: str) -> dict[float, float]:
    """Cumulative counts by upper bound of a Prometheus histogram, summed over its labels."""
    counts: dict[float, float] = {}
    prefix = f"{metric}_bucket{{"
    for line in text.splitlines():
        if line.startswith(prefix):
            labels, value = line.rsplit(" ", 1)
            bound = labels.split('le="', 1)[1].split('"', 1)[0]
            key = math.inf if bound == "+Inf" else float(bound)
            counts[key] = counts.get(key, 0.0) + float(value)
    return counts


def quantile_bound(before: Mapping[float, float], after: Mapping[float, float], q: float) -> float:
    """The upper bound of the bucket holding quantile ``q`` of what was observed between
    two scrapes (an upper bound of the quantile, as exact as the buckets)."""
    grown = {bound: after[bound] - before.get(bound, 0.0) for bound in sorted(after)}
    total = grown.get(math.inf, 0.0)
    if total <= 0:
        return float("nan")
    for bound, count in grown.items():
        if count >= q * total:
            return bound
    return math.inf


def counter_values(text: str, metric: str) -> dict[str, float]:
    """A Prometheus counter's values by their labels as written (``{kind="..",...}``)."""
    prefix = f"{metric}_total{{"
    return {
        labels: float(value)
        for labels, _, value in (line.rpartition(" ") for line in text.splitlines())
        if labels.startswith(prefix)
    }


def plans_per_workload(
    before: Mapping[str, float], after: Mapping[str, float], *, workloads: int
) -> str:
    """Owners planned per workload created between two scrapes, by kind and outcome."""
    grown = {
        labels.split("{", 1)[1].rstrip("}"): after[labels] - before.get(labels, 0.0)
        for labels in sorted(after)
    }
    return ", ".join(
        f"{labels} {count / workloads:.2f}" for labels, count in grown.items() if count
    )


async def scrape(port: int) -> str:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        return await response.text()


@contextlib.contextmanager
def profiling(pids: Mapping[str, int], directory: Path | None) -> Iterator[None]:
    """py-spy records each process (non-blocking sampling) while the block runs."""
    if directory is None:
        yield
        return
    directory.mkdir(parents=True, exist_ok=True)
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    recorders = [
        subprocess.Popen(
            [
                spy,
                "record",
                "--nonblocking",
                "--format",
                "raw",
                "--rate",
                "200",
                "-p",
                str(pid),
                "-o",
                str(directory / f"{name}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name, pid in pids.items()
    ]
    try:
        yield
    finally:
        for recorder in recorders:
            recorder.send_signal(signal.SIGINT)
        for recorder in recorders:
            try:
                recorder.wait(30)
            except subprocess.TimeoutExpired:
                recorder.kill()


# --------------------------------------------------------------------------- the two sides


async def prepare_cluster(kube: KubernetesAsyncioAdapter) -> None:
    crds = [*custom_resource_definitions(SERVED_KINDS), *driven_kind_crds()]
    await kube.ensure_crds(crds, field_manager="kaiwo-bench", within=120)
    for name in (OPERATOR_NAMESPACE, ONE_PROCESS_NAMESPACE, PEER_NAMESPACE):
        await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


async def operator_side(
    plane: ControlPlane,
    kube: KubernetesAsyncioAdapter,
    scratch: Path,
    profile: Path | None,
    *,
    memory_workloads: int = MEMORY_WORKLOADS,
    one_process: bool = False,
) -> Side:
    if one_process:
        print("operator in one process (kaiwo up --one-process; and nats-server):")
        namespace, name = ONE_PROCESS_NAMESPACE, "one-process"
        env = {**SERVICE_ENV, "KAIWO_WATCH_NAMESPACES": namespace}
    else:
        print("operator (watcher, planner, executor, recorder, nats-server):")
        namespace, name, env = OPERATOR_NAMESPACE, "operator", SERVICE_ENV
    options = StackOptions(
        state_dir=scratch / name,
        kubeconfig=plane.kubeconfig,
        service_env=env,
        one_process=one_process,
    )
    side = Side(name=name)
    async with bench_stack(options, kube=kube, namespace=namespace) as running:
        stack, js, clock = running.stack, running.js, running.clock
        side.processes = tuple(stack.process_ids())
        side.idle_rss_kb = {name: rss_kb(pid) for name, pid in stack.process_ids().items()}

        async def settle() -> None:
            if not await idle(js, within=60):
                print("  (the operator was not idle within 60 s)")

        rate, seconds = WARM_UP
        await create_at_rate(
            kube, clock, prefix="warm", rate=rate, seconds=seconds, namespace=namespace
        )
        await settle()
        window = CpuWindow(lambda: {**stack.process_ids(), **control_plane_pids(plane)})
        planner_port = stack.health_ports["planner"]
        scraped = await scrape(planner_port)
        plans_before = histogram_buckets(scraped, "kaiwo_planner_plan_duration_seconds")
        planned_before = counter_values(scraped, "kaiwo_planner_plans")
        for rate in RATES:
            last = rate == RATES[-1]
            python_pids = {n: p for n, p in stack.process_ids().items() if n != "nats-server"}
            with profiling(python_pids, profile / "operator" if profile and last else None):
                side.steps.append(
                    await measured_step(
                        kube,
                        clock,
                        namespace=namespace,
                        rate=rate,
                        window=window,
                        settle=settle,
                    )
                )
        scraped = await scrape(planner_port)
        plans_after = histogram_buckets(scraped, "kaiwo_planner_plan_duration_seconds")
        planned = plans_per_workload(
            planned_before,
            counter_values(scraped, "kaiwo_planner_plans"),
            workloads=STEPPED_WORKLOADS,
        )
        print(f"  owners planned per workload created (kind, outcome): {planned}")
        side.plan_p50 = quantile_bound(plans_before, plans_after, 0.50)
        side.plan_p99 = quantile_bound(plans_before, plans_after, 0.99)
        # In one process, the planner's growth is the whole process's.
        planner_pid = stack.services[TOGETHER if one_process else "planner"].pid
        assert planner_pid is not None
        baseline = rss_kb(planner_pid)
        await create_at_rate(
            kube,
            clock,
            prefix="memory",
            rate=MEMORY_RATE,
            seconds=memory_workloads / MEMORY_RATE,
            namespace=namespace,
            grace=STEP_GRACE_SECONDS,
        )
        await settle()
        side.planner_kb = (rss_kb(planner_pid) - baseline) / memory_workloads
        side.rss_kb = {name: rss_kb(pid) for name, pid in stack.process_ids().items()}
        side.workloads = side_workloads(memory_workloads)
        await print_stream_messages(js, workloads=STEPPED_WORKLOADS + memory_workloads)
        print(
            f"  planner: plan p50 <= {side.plan_p50 * 1e6:.0f} us, p99 <= "
            f"{side.plan_p99 * 1e6:.0f} us; RSS {side.planner_kb:.1f} KB per tracked workload"
        )
        print_rss(side)
    side.store_bytes, side.store_events = store_size(options.event_store_url)
    print(
        f"  event store: {side.store_bytes / 1024:,.0f} KB for {side.workloads} workloads, "
        f"{side.store_events} events: {side.store_bytes / side.workloads / 1024:.1f} KB per "
        f"workload, {side.store_events / side.workloads:.2f} events per workload"
    )
    for rate in RATES:
        print(f"  {rate}/s stages, {await stages(options.event_store_url, prefix=f'r{rate}-')}")
    return side


async def stages(url: str, *, prefix: str) -> str:
    """Where the latency of the KaiwoJobs named ``prefix``... went, from the times of the
    events the recorder kept (each service stamps its own): the KaiwoJob's first observation
    to its first plan (watcher publish, planner), and that plan to the first observation of
    its Job (executor, API server, watcher). p50 / p99 in ms."""
    from kaiwo_cli.replay.recorded import OBSERVED_TYPE, PLAN_TYPE
    from kaiwo_eventstore import open_event_store

    store = await open_event_store(url, migrate=False)
    try:
        events = await store.read_by_type([OBSERVED_TYPE, PLAN_TYPE])
    finally:
        await store.close()
    firsts: dict[str, dict[str, float]] = {}
    for event in events:  # in the order recorded
        stage = _stage(event.type == PLAN_TYPE, event.data, prefix)
        if stage is not None:
            firsts.setdefault(event.correlation_id, {}).setdefault(stage, event.time.timestamp())
    ours = [f for f in firsts.values() if {"owner", "plan", "child"} <= f.keys()]
    planned = [f["plan"] - f["owner"] for f in ours]
    applied = [f["child"] - f["plan"] for f in ours]
    return (
        f"{len(planned)} workloads: observation -> plan {_p50_p99(planned)}, "
        f"plan -> Job observed {_p50_p99(applied)}"
    )


def _stage(is_plan: bool, data: Mapping[str, Any], prefix: str) -> str | None:
    if is_plan:
        return "plan"
    observed = data.get("object") or {}
    if observed.get("kind") == "Job":
        return "child"
    name = str((observed.get("metadata") or {}).get("name") or "")
    return "owner" if observed.get("kind") == "KaiwoJob" and name.startswith(prefix) else None


def _p50_p99(seconds: list[float]) -> str:
    if not seconds:
        return "-"
    return f"{percentile(seconds, 0.50) * 1000:.0f} / {percentile(seconds, 0.99) * 1000:.0f} ms"


def side_workloads(memory_workloads: int) -> int:
    """KaiwoJobs a side creates: warm-up, the steps, the memory load."""
    rate, seconds = WARM_UP
    return int(rate * seconds) + STEPPED_WORKLOADS + memory_workloads


def print_rss(side: Side) -> None:
    for when, total, each in (
        ("idle, before the first workload", side.idle_rss_total_kb, side.idle_rss_kb),
        ("after the run", side.rss_total_kb, side.rss_kb),
    ):
        print(
            f"  RSS {when} {total / 1024:.0f} MB: "
            + ", ".join(f"{name} {kb / 1024:.0f}" for name, kb in sorted(each.items()))
        )


def store_size(url: str) -> tuple[float, int]:
    """(bytes, events) of a SQLite event store: the database file and its journal, read
    after the stack stopped (its write-ahead log checkpointed)."""
    path = Path(url.removeprefix("sqlite:///"))
    size = sum(
        candidate.stat().st_size
        for candidate in (path, path.with_name(path.name + "-wal"))
        if candidate.exists()
    )
    with contextlib.closing(sqlite3.connect(path)) as database:
        (events,) = database.execute("SELECT count(*) FROM events").fetchone()
    return float(size), int(events)


async def print_stream_messages(js: Any, *, workloads: int) -> None:
    """Messages each stream (key-value buckets included) took in, per workload created."""
    counts = {}
    async for name in stream_names(js):
        counts[name] = (await js.stream_info(name)).state.last_seq
    print(
        f"  messages per workload (of {workloads}): "
        + ", ".join(f"{name} {count / workloads:.2f}" for name, count in sorted(counts.items()))
    )


async def stream_names(js: Any) -> Any:
    for info in await js.streams_info():
        yield info.config.name


async def peer_side(
    plane: ControlPlane,
    kube: KubernetesAsyncioAdapter,
    scratch: Path,
    profile: Path | None,
    *,
    memory_workloads: int = MEMORY_WORKLOADS,
) -> Side:
    print("kopf peer (one process):")
    side = Side(name="kopf", processes=("kopf",))
    log = (scratch / "kopf.log").open("wb")
    peer = subprocess.Popen(  # noqa: ASYNC220 - started once, before the load
        [
            sys.executable,
            str(PEER),
            "--kubeconfig",
            str(plane.kubeconfig),
            "--namespace",
            PEER_NAMESPACE,
        ],
        stdout=subprocess.PIPE,
        stderr=log,
        start_new_session=True,
    )
    try:
        assert peer.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(peer.stdout.readline), 60)
        if line.strip() != b"ready":
            raise RuntimeError(f"the kopf peer did not start (see {scratch / 'kopf.log'})")
        side.idle_rss_kb = {"kopf": rss_kb(peer.pid)}
        clock = ChildClock(kube, PEER_NAMESPACE)
        await clock.start()
        try:

            async def settle() -> None:
                await all_handled(kube, within=60)

            rate, seconds = WARM_UP
            await create_at_rate(
                kube, clock, prefix="warm", rate=rate, seconds=seconds, namespace=PEER_NAMESPACE
            )
            await settle()
            window = CpuWindow(lambda: {"kopf": peer.pid, **control_plane_pids(plane)})
            for rate in RATES:
                last = rate == RATES[-1]
                with profiling({"kopf": peer.pid}, profile / "kopf" if profile and last else None):
                    side.steps.append(
                        await measured_step(
                            kube,
                            clock,
                            namespace=PEER_NAMESPACE,
                            rate=rate,
                            window=window,
                            settle=settle,
                        )
                    )
            # The same load as the operator's after its steps, for the RSS after the run.
            await create_at_rate(
                kube,
                clock,
                prefix="memory",
                rate=MEMORY_RATE,
                seconds=memory_workloads / MEMORY_RATE,
                namespace=PEER_NAMESPACE,
                grace=STEP_GRACE_SECONDS,
            )
            await settle()
            side.rss_kb = {"kopf": rss_kb(peer.pid)}
            side.workloads = side_workloads(memory_workloads)
            print_rss(side)
        finally:
            await clock.stop()
    finally:
        peer.send_signal(signal.SIGTERM)
        try:
            peer.wait(30)
        except subprocess.TimeoutExpired:
            peer.kill()
            peer.wait()
        log.close()
    return side


async def all_handled(kube: KubernetesAsyncioAdapter, *, within: float) -> None:
    """Every KaiwoJob of the peer's namespace carries kopf's progress annotation."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        listed = await kube.list(resources.KAIWO_JOB, namespace=PEER_NAMESPACE)
        if all(
            PROGRESS_ANNOTATION in ((item.get("metadata") or {}).get("annotations") or {})
            for item in listed.items
        ):
            return
        await asyncio.sleep(0.2)
    print(f"  (the kopf peer had not handled every KaiwoJob within {within:.0f} s)")


def bus_floors() -> dict[str, dict[str, float]]:
    """What the operator's bus traffic alone costs per workload, and the least a watcher,
    planner, executor and store could send (``bench/bus_floor.py``, its own process)."""
    floors = {}
    for shape in ("operator", "minimal"):
        print(f"bus traffic alone, the {shape} shape (bench/bus_floor.py) ...", flush=True)
        done = subprocess.run(
            [sys.executable, str(BUS_FLOOR), "--shape", shape, "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        floors[shape] = json.loads(done.stdout.strip().splitlines()[-1])
    return floors


def print_floors(floors: Mapping[str, Mapping[str, float]], peer: Side | None) -> None:
    """Each shape's bus traffic alone, and beside the peer's whole CPU at 20/s when it ran."""
    for shape, floor in floors.items():
        beside = (
            f", {floor['total_ms'] / peer.steps[0].side_ms(peer.processes):.2f}x the kopf "
            "peer's whole CPU at 20/s"
            if peer is not None
            else ""
        )
        print(
            f"bus traffic alone, the {shape} shape (bench/bus_floor.py): {floor['total_ms']:.1f} "
            f"ms/workload ({floor['services_ms']:.1f} bare nats-py, {floor['nats_server_ms']:.1f} "
            f"nats-server){beside}"
        )


def load_average() -> str:
    return " / ".join(f"{load:.1f}" for load in os.getloadavg()) + " (1 / 5 / 15 min)"


def control_plane_pids(plane: ControlPlane) -> dict[str, int]:
    return {c.name: c.process.pid for c in plane.components if c.process.poll() is None}


# --------------------------------------------------------------------------- report


def comparison_table(operator: Side, peer: Side) -> str:
    rows = [("figure", "operator", "kopf peer", "operator/kopf")]

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}" if b else "-"

    for mine, theirs in zip(operator.steps, peer.steps, strict=True):
        rate = mine.rate
        rows.append(
            (
                f"{rate}/s latency p50",
                f"{mine.p50 * 1000:.0f} ms",
                f"{theirs.p50 * 1000:.0f} ms",
                ratio(mine.p50, theirs.p50),
            )
        )
        rows.append(
            (
                f"{rate}/s latency p99",
                f"{mine.p99 * 1000:.0f} ms",
                f"{theirs.p99 * 1000:.0f} ms",
                ratio(mine.p99, theirs.p99),
            )
        )
        rows.append((f"{rate}/s missing", str(mine.missing), str(theirs.missing), ""))
        rows.append(
            (
                f"{rate}/s backlog cleared after the load",
                f"{mine.cleared:.1f} s",
                f"{theirs.cleared:.1f} s",
                "",
            )
        )
        own, peers = mine.side_ms(operator.processes), theirs.side_ms(peer.processes)
        rows.append(
            (f"{rate}/s operator CPU ms/workload", f"{own:.1f}", f"{peers:.1f}", ratio(own, peers))
        )
        rows.extend(
            (f"  {name}", f"{mine.cpu_ms.get(name, float('nan')):.1f}", "", "")
            for name in operator.processes
        )
        for name in CONTROL_PLANE:
            a, b = mine.cpu_ms.get(name, float("nan")), theirs.cpu_ms.get(name, float("nan"))
            rows.append((f"  {name} (shared)", f"{a:.1f}", f"{b:.1f}", ratio(a, b)))
        rows.append(
            (
                f"{rate}/s API requests/workload (all clients)",
                f"{mine.api_total:.2f}",
                f"{theirs.api_total:.2f}",
                ratio(mine.api_total, theirs.api_total),
            )
        )
    rows.append(
        (
            "RSS idle, before the first workload",
            f"{operator.idle_rss_total_kb / 1024:.0f} MB",
            f"{peer.idle_rss_total_kb / 1024:.0f} MB",
            ratio(operator.idle_rss_total_kb, peer.idle_rss_total_kb),
        )
    )
    rows.append(
        (
            "RSS after the run (all processes)",
            f"{operator.rss_total_kb / 1024:.0f} MB",
            f"{peer.rss_total_kb / 1024:.0f} MB",
            ratio(operator.rss_total_kb, peer.rss_total_kb),
        )
    )
    rows.append(
        (
            "event store per workload",
            f"{operator.store_bytes / max(operator.workloads, 1) / 1024:.1f} KB",
            "",
            "",
        )
    )
    memory_label = (
        "planner RSS per tracked workload"
        if operator.name == "operator"
        else "RSS per tracked workload (one process)"
    )
    rows.append((memory_label, f"{operator.planner_kb:.1f} KB", "", ""))
    rows.append(
        (
            "planner plan p50 / p99 (bucket bound)",
            f"{operator.plan_p50 * 1e6:.0f} / {operator.plan_p99 * 1e6:.0f} us",
            "",
            "",
        )
    )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def step_at(side: Side, rate: int) -> StepFigures | None:
    return next((step for step in side.steps if step.rate == rate), None)


def targets(operator: Side, peer: Side) -> str:
    """Each target against what this run measured (a rate not run: not met)."""
    nan = StepFigures(
        rate=0, reached=0, p50=math.nan, p99=math.nan, missing=-1, workloads=0, cpu_ms={}
    )
    at20_mine, at20_peer = step_at(operator, 20) or nan, step_at(peer, 20) or nan
    at50 = step_at(operator, 50) or nan
    cpu_ratio = at20_mine.side_ms(operator.processes) / max(at20_peer.side_ms(peer.processes), 1e-9)
    rss_ratio = operator.rss_total_kb / peer.rss_total_kb
    store_kb = operator.store_bytes / max(operator.workloads, 1) / 1024
    checks = (
        (
            f"operator CPU/workload <= {TARGETS['cpu ratio']}x kopf's at 20/s",
            f"{cpu_ratio:.2f}x",
            cpu_ratio <= TARGETS["cpu ratio"],
        ),
        (
            "20/s: p50 <= 100 ms, p99 <= 1 s",
            f"p50 {at20_mine.p50 * 1000:.0f} ms, p99 {at20_mine.p99 * 1000:.0f} ms",
            at20_mine.p50 <= TARGETS["p50 at 20/s"] and at20_mine.p99 <= TARGETS["p99 at 20/s"],
        ),
        (
            f"RSS after the run <= {TARGETS['rss ratio']}x kopf's",
            f"{rss_ratio:.2f}x",
            rss_ratio <= TARGETS["rss ratio"],
        ),
        (
            "50/s: nothing lost, backlog cleared within 30 s of the load's end",
            f"missing {at50.missing}, cleared in {at50.cleared:.1f} s",
            at50.missing == 0 and at50.cleared <= TARGETS["cleared at 50/s"],
        ),
        (
            "event store <= 12 KB per workload",
            f"{store_kb:.1f} KB",
            store_kb <= TARGETS["store KB"],
        ),
    )
    lines = [f"  {label}: {value} -> {'met' if ok else 'NOT met'}" for label, value, ok in checks]
    return "\n".join([*lines, *_planner_targets(operator)])


def _planner_targets(operator: Side) -> list[str]:
    """Issue 18's two targets for the planner itself, as far as this run can tell them.

    The plan-time histogram has a bucket at the target (200 us), so the bound of the bucket
    holding the p99 says met or not. In one process the RSS grows with every service's state,
    not the planner's alone: ``bench/planner_memory.py`` measures the planner by itself.
    """
    p99_met = operator.plan_p99 <= TARGETS["plan p99"]
    memory = f"{operator.planner_kb:.1f} KB"
    if operator.name != "operator":
        memory_verdict = (
            "not the planner's alone (every service in one process; bench/planner_memory.py)"
        )
    elif operator.planner_kb <= TARGETS["planner KB"]:
        memory_verdict = "met"
    else:
        memory_verdict = "NOT met"
    return [
        f"  planner memory <= {TARGETS['planner KB']:g} KB per tracked workload: {memory} -> "
        f"{memory_verdict}",
        f"  planner plan p99 <= {TARGETS['plan p99'] * 1e6:.0f} us: "
        f"<= {operator.plan_p99 * 1e6:.0f} us -> {'met' if p99_met else 'NOT met'}",
    ]


async def compare(
    plane: ControlPlane,
    scratch: Path,
    profile: Path | None,
    *,
    sides: tuple[str, ...],
    memory_workloads: int = MEMORY_WORKLOADS,
) -> tuple[Side | None, Side | None, Side | None]:
    operator = solo = peer = None
    async with (
        await KubernetesAsyncioAdapter.from_kubeconfig(plane.kubeconfig) as kube,
        gpu_nodes(kube),
    ):
        await prepare_cluster(kube)
        if "operator" in sides:
            operator = await operator_side(
                plane, kube, scratch, profile, memory_workloads=memory_workloads
            )
        if "one-process" in sides:
            solo = await operator_side(
                plane,
                kube,
                scratch,
                profile,
                memory_workloads=memory_workloads,
                one_process=True,
            )
        if "kopf" in sides:
            peer = await peer_side(plane, kube, scratch, profile, memory_workloads=memory_workloads)
    return operator, solo, peer


def run(
    *,
    keep: bool,
    profile: Path | None,
    sides: tuple[str, ...] = ("operator", "one-process", "kopf"),
    memory_workloads: int = MEMORY_WORKLOADS,
) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="kaiwo-bench-"))
    if keep:
        print(f"  scratch (event store, logs): {scratch}")
    started = time.perf_counter()
    binaries = find_binaries()
    try:
        with ControlPlane(ControlPlaneOptions(binaries=binaries, controller_manager=True)) as plane:
            print(
                f"envtest API server {plane.server} ({os.cpu_count()} cores, shared by all); "
                f"load average {load_average()}"
            )
            operator, solo, peer = asyncio.run(
                compare(plane, scratch, profile, sides=sides, memory_workloads=memory_workloads)
            )
            floors = bus_floors() if "floor" in sides else {}
            print(f"load average at the end {load_average()}")
    finally:
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)
    if peer is None or (operator is None and solo is None):
        print_floors(floors, peer)
        print(f"(one side only; total {time.perf_counter() - started:.0f} s)")
        return
    for mine, heading in ((operator, "processes"), (solo, "one process")):
        if mine is not None:
            print(f"\nthe operator as {heading}, beside the peer:")
            print(comparison_table(mine, peer))
            print()
            print(targets(mine, peer))
    print_floors(floors, peer)
    print(f"(total {time.perf_counter() - started:.0f} s)")
