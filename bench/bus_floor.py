"""What the bus traffic of one workload costs with nothing else done: the floor under issue 28.

The operator's services talk over JetStream (decision 0005): per KaiwoJob, the one-process
operator of ``bench/pipeline.py`` publishes about 3.9 observations, 1 plan, 1 result, 2 public
events, 2 writes of the executor's memo and 2.2 of the watcher's known objects, and its
planner, executor and recorder pull and acknowledge what they read. This bench sends exactly
that traffic with the bare nats-py client, in one process on uvloop with one connection per
service (as ``kaiwo up`` runs them), to a ``nats-server`` with one Go processor (as ``kaiwo up``
starts it), at the pipeline's rate, and nothing else: no decoding, no validation, no planning,
no API call, no database. Payloads are opaque bytes of the operator's sizes.

``--shape minimal`` sends the least a watcher, planner, executor and store can send per
workload: one observation (read by the planner and the recorder), one plan (the executor and
the recorder), one result (the recorder), each acknowledged.

It prints the CPU per workload of this process and of nats-server: what the operator pays
before it does any of its own work. Compare it with the kopf peer's whole CPU per workload
in ``bench/pipeline.py --sides kopf`` run beside it.

Run: ``uv run python bench/bus_floor.py [--shape operator|minimal] [--rate 20] [--workloads 600]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import nats
import uvloop
from kaiwo_runtime.nats_server import NatsServer
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import StreamConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pipeline import cpu_seconds


@dataclass(frozen=True)
class Shape:
    """Messages per workload; a fraction is sent for that share of the workloads."""

    observations: float
    plans: float
    results: float
    public_events: float
    memo_writes: float
    known_object_writes: float


SHAPES = {
    # bench/pipeline.py --sides one-process, "messages per workload" (decision 0092)
    "operator": Shape(3.88, 1.0, 1.0, 2.0, 2.0, 2.22),
    "minimal": Shape(1.0, 1.0, 1.0, 0.0, 0.0, 0.0),
}
SIZES = {"observation": 2600, "plan": 3000, "result": 1200, "public": 600, "kv": 300}


def share(count: float, index: int) -> int:
    """How many of a per-workload ``count`` workload ``index`` sends (fractions spread)."""
    return math.floor((index + 1) * count) - math.floor(index * count)


async def pull_until(
    stop: asyncio.Event,
    js: JetStreamContext,
    subject: str,
    durable: str,
    handle: Callable[[bytes], Awaitable[None]],
) -> None:
    """Pull, handle and acknowledge until ``stop`` is set (nats-py's fetch can swallow a
    cancellation, so the loop is told to end rather than cancelled)."""
    subscription = await js.pull_subscribe(subject, durable=durable)
    while not stop.is_set():
        try:
            messages = await subscription.fetch(64, timeout=1.0)
        except TimeoutError:
            continue
        for message in messages:
            await handle(message.data)
            await message.ack()


@dataclass(frozen=True)
class Floor:
    """CPU milliseconds per workload that the bus traffic alone cost."""

    services_ms: float
    nats_server_ms: float
    stored: int
    elapsed: float

    @property
    def total_ms(self) -> float:
        return self.services_ms + self.nats_server_ms


async def run(shape: Shape, rate: float, workloads: int) -> Floor:
    server = NatsServer(cpus=1)
    await server.start()
    try:
        return await measure(server, shape, rate, workloads)
    finally:
        await server.stop()


class Traffic:
    """One workload's messages, each service on its own connection; a message starts with
    its workload's index and, for observations, which of its observations it is."""

    def __init__(self, shape: Shape, connections: list[Client], workloads: int) -> None:
        # A generous reply timeout: a loaded machine must slow the bench down, never stop it.
        self.watcher, self.planner, self.executor, self.recorder = (
            c.jetstream(timeout=30) for c in connections
        )
        self.shape = shape
        self.payload = {kind: random.randbytes(size) for kind, size in SIZES.items()}
        self.stored = 0
        self.expected = sum(
            share(shape.observations, i) + share(shape.plans, i) + share(shape.results, i)
            for i in range(workloads)
        )
        self.done = asyncio.Event()
        self.stop = asyncio.Event()

    async def create_streams(self) -> None:
        for name in ("obs", "plan", "res", "public"):
            await self.watcher.add_stream(StreamConfig(name=name.upper(), subjects=[f"{name}.>"]))
        self.known = await self.watcher.create_key_value(bucket="known")
        self.memo = await self.executor.create_key_value(bucket="memo")

    def consumers(self) -> list[asyncio.Task[None]]:
        pulls: list[tuple[JetStreamContext, str, Callable[[bytes], Awaitable[None]]]] = [
            (self.planner, "obs", self.plan),
            (self.executor, "plan", self.execute),
        ]
        pulls += [(self.recorder, stream, self.record) for stream in ("obs", "plan", "res")]
        return [
            asyncio.create_task(pull_until(self.stop, js, f"{stream}.>", f"{stream}-{i}", handle))
            for i, (js, stream, handle) in enumerate(pulls)
        ]

    async def observe(self, index: int, seen: int) -> None:
        """The watcher: an observation, and an object it knows from now on."""
        await self.watcher.publish(
            f"obs.{index}",
            f"{index}/{seen}/".encode().ljust(16) + self.payload["observation"],
            headers={"Nats-Msg-Id": f"{index}:{seen}"},
        )
        if seen < share(self.shape.known_object_writes, index):
            await self.known.put(f"k{index}x{seen}", self.payload["kv"])

    async def plan(self, data: bytes) -> None:
        """The planner: the plan from the first observation, public events from the first."""
        index, seen = (int(part) for part in data[:16].split(b"/")[:2])
        for _ in range(share(self.shape.plans, index) if seen == 0 else 0):
            plan = str(index).encode().ljust(16) + self.payload["plan"]
            await self.planner.publish(f"plan.{index}", plan)
        if seen < share(self.shape.public_events, index):
            await self.planner.publish(f"public.{index}", self.payload["public"])

    async def execute(self, data: bytes) -> None:
        """The executor: its memo, the result; then the watcher sees what the plan did."""
        index = int(data[:16])
        for _ in range(share(self.shape.memo_writes, index)):
            await self.memo.put(f"m{index}", self.payload["kv"])
        for _ in range(share(self.shape.results, index)):
            await self.executor.publish(f"res.{index}", self.payload["result"])
        for seen in range(1, share(self.shape.observations, index)):
            await self.observe(index, seen)

    async def record(self, _data: bytes) -> None:
        self.stored += 1
        if self.stored >= self.expected:
            self.done.set()


async def measure(server: NatsServer, shape: Shape, rate: float, workloads: int) -> Floor:
    connections = [await nats.connect(server.url) for _ in range(4)]
    traffic = Traffic(shape, connections, workloads)
    await traffic.create_streams()
    consumers = traffic.consumers()
    await asyncio.sleep(1.0)
    pids = {"services": os.getpid(), "nats-server": server.pid or 0}
    before = cpu_seconds(pids)
    started = time.monotonic()
    for index in range(workloads):
        await asyncio.sleep(max(0.0, started + index / rate - time.monotonic()))
        await traffic.observe(index, 0)
    finished = asyncio.create_task(traffic.done.wait())
    await asyncio.wait([finished, *consumers], timeout=120, return_when=asyncio.FIRST_COMPLETED)
    for task in consumers:
        if task.done():
            raise SystemExit(f"a consumer stopped: {task.exception()!r}")
    if not finished.done():
        raise SystemExit(f"only {traffic.stored} of {traffic.expected} stored within 120 s")
    elapsed = time.monotonic() - started
    after = cpu_seconds(pids)
    services, server_cpu = ((after[name] - before[name]) * 1000 / workloads for name in pids)
    traffic.stop.set()
    await asyncio.gather(*consumers)
    for connection in connections:
        await connection.close()
    return Floor(services, server_cpu, traffic.stored, elapsed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="operator")
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--workloads", type=int, default=600)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    arguments = parser.parse_args()
    floor = uvloop.run(run(SHAPES[arguments.shape], arguments.rate, arguments.workloads))
    if arguments.json:
        print(json.dumps({**asdict(floor), "total_ms": floor.total_ms}))
        return
    print(
        f"{arguments.shape} shape, {arguments.workloads} workloads at {arguments.rate:g}/s in "
        f"{floor.elapsed:.1f} s, {floor.stored} messages stored; CPU ms per workload: "
        f"services (bare nats-py) {floor.services_ms:.1f}, nats-server "
        f"{floor.nats_server_ms:.1f}, together {floor.total_ms:.1f}"
    )


if __name__ == "__main__":
    main()
