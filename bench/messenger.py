"""The messenger's throughput and added latency against HTTP through the gateway, in one run.

Run: ``uv run python bench/messenger.py [--requests N] [--messages M] [--concurrency C]``.

Processes on loopback: a nats-server with the deployment's permissions, a stand-in model
server (``tests/integration/gateway/standin_openai.py``, what vLLM answers to
``/v1/completions``, at once), the whole gateway (``python -m kaiwo_gateway``'s ``serve``:
observations read from NATS, HTTP open to loopback callers, the messenger on), and this
client, which holds the tenant key ``tenant-bench``. It measures

* latency, one request at a time: ``N`` completions over HTTP through the gateway and ``N``
  through the messenger (published with JetStream, its answer awaited live on the responses
  subject), interleaved in blocks so both see the same machine; the messenger's added latency
  is the difference of the percentiles;
* throughput: ``C`` HTTP clients for as long as the messenger takes; and ``M`` requests
  published ``C`` at a time, from the first publish to the last answer.

The stand-in answers at once, so every figure is the two paths' own cost: for the messenger,
two JetStream writes (request, answer) with file storage, the consumer's fetch and ack.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import nats
from gateway import percentile, start  # the other bench's (a process is up once it says "ready")
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.messenger import (
    messenger_topology,
    request_subject,
    response_subject,
    tenant_key_name,
)
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.permissions import (
    ADMIN,
    WATCHER,
    inbox_prefix,
    operator_identities,
    tenant_identity,
)
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_contracts.events.subjects import observed_subject
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_connection import NatsConnection
from kaiwo_runtime.nats_credentials import CredentialsDirectory, write_credentials
from kaiwo_runtime.nats_server import NatsServer, free_port
from nats.aio.msg import Msg

STANDIN = Path(__file__).parent.parent / "tests/integration/gateway/standin_openai.py"
NAMESPACE = "bench"
BODY = {"model": "bench", "prompt": "Say something short."}
BLOCK = 25
WHEN = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def model_and_pod(backend_port: int) -> list[dict[str, Any]]:
    model = {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {"name": "bench", "namespace": NAMESPACE, "uid": "m", "resourceVersion": "1"},
        "spec": {"url": "hf://org/model", "engine": "VLLM", "features": ["TextGeneration"]},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "server-0",
            "namespace": NAMESPACE,
            "uid": "p",
            "resourceVersion": "1",
            "labels": {"model": "bench", "kaiwo.silogen.ai/owner-uid": "m"},
            "annotations": {"model-pod-port": str(backend_port)},
        },
        "status": {"podIP": "127.0.0.1", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    return [model, pod]


async def bus(server: NatsServer, credentials: CredentialsDirectory, name: str) -> NatsBus:
    connection = NatsConnection(
        url=server.url,
        credentials_file=credentials.seed(name),
        inbox_prefix=inbox_prefix(name),
        name=f"bench-{name}",
    )
    return await NatsBus.connect(connection, topology=bus_topology())


async def observe(watcher: NatsBus, obj: dict[str, Any]) -> None:
    metadata = obj["metadata"]
    payload = ObservedObjectV1(
        kind=obj["kind"],
        api_version=obj["apiVersion"],
        namespace=metadata["namespace"],
        name=metadata["name"],
        uid=metadata["uid"],
        resource_version="1",
        event_type="ADDED",
        object=obj,
    )
    envelope = Envelope.new(
        data=payload,
        source="/kaiwo/watcher",
        time=WHEN,
        id=f"{metadata['uid']}:1",
        correlationid=metadata["uid"],
    )
    subject = observed_subject(kind=obj["kind"], namespace=NAMESPACE, uid=metadata["uid"])
    await watcher.publish(envelope, subject)


async def serve_gateway(url: str, seed: str, port: int, health_port: int) -> None:
    from kaiwo_gateway.__main__ import serve
    from kaiwo_gateway.settings import GatewaySettings

    settings = GatewaySettings(
        nats_url=url,
        nats_credentials_file=Path(seed),
        gateway_host="127.0.0.1",
        gateway_port=port,
        health_host="127.0.0.1",
        health_port=health_port,
        gateway_anonymous="loopback",
        autoscaler_enabled=False,
        messenger_enabled=True,
        log_level="WARNING",
    )
    await serve(settings, asyncio.Event())


class Tenant:
    """The tenant's client: publishes requests and awaits their answers, live."""

    def __init__(self, client: nats.NATS) -> None:
        self.client = client
        self.js = client.jetstream(timeout=30)
        self.waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.number = 0

    async def listen(self) -> None:
        await self.client.subscribe(response_subject(NAMESPACE), cb=self._answered)

    async def _answered(self, message: Msg) -> None:
        identifier = (message.headers or {}).get("Kaiwo-Request-Id", "")
        waiter = self.waiting.pop(identifier, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(json.loads(message.data))

    async def one(self) -> float:
        self.number += 1
        identifier = f"r{self.number}"
        waiter = asyncio.get_running_loop().create_future()
        self.waiting[identifier] = waiter
        started = time.perf_counter()
        request = {"metadata": {"n": self.number}, "body": BODY}
        await self.js.publish(
            request_subject(NAMESPACE),
            json.dumps(request).encode(),
            headers={"Nats-Msg-Id": identifier},
        )
        answer = await asyncio.wait_for(waiter, 60)
        if answer["status_code"] != 200:
            raise RuntimeError(f"the messenger answered {answer}")
        return time.perf_counter() - started


async def http_one(session: aiohttp.ClientSession, url: str) -> float:
    started = time.perf_counter()
    async with session.post(url, json=BODY) as response:
        await response.read()
        if response.status != 200:
            raise RuntimeError(f"{url} answered {response.status}")
    return time.perf_counter() - started


def milliseconds(value: float) -> str:
    return f"{value * 1000:.2f} ms"


async def until_served(session: aiohttp.ClientSession, url: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            await http_one(session, url)
            return
        except (aiohttp.ClientError, RuntimeError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def latencies(
    session: aiohttp.ClientSession, url: str, tenant: Tenant, requests: int
) -> tuple[list[float], list[float]]:
    for _ in range(50):  # warm up both paths
        await http_one(session, url)
        await tenant.one()
    http: list[float] = []
    messages: list[float] = []
    while len(http) < requests:
        http.extend([await http_one(session, url) for _ in range(BLOCK)])
        messages.extend([await tenant.one() for _ in range(BLOCK)])
    return http, messages


async def http_throughput(url: str, *, seconds: float, concurrency: int) -> tuple[float, int]:
    """Answers per second, and how many requests failed (a reset connection is counted and
    the client goes on: on a loaded loopback the kernel drops one now and then)."""
    done = failed = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        deadline = time.perf_counter() + seconds

        async def client() -> None:
            nonlocal done, failed
            while time.perf_counter() < deadline:
                try:
                    await http_one(session, url)
                except (aiohttp.ClientError, RuntimeError):
                    failed += 1
                    continue
                done += 1

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        return done / (time.perf_counter() - started), failed


async def message_throughput(tenant: Tenant, *, messages: int, concurrency: int) -> float:
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            await tenant.one()

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(messages)))
    return messages / (time.perf_counter() - started)


async def main(arguments: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as directory:
        identities = (*operator_identities(bus_topology()), tenant_identity(NAMESPACE))
        credentials = write_credentials(Path(directory) / "credentials", identities)
        async with NatsServer(config=credentials.server_config.read_text()) as server:
            await run(arguments, server, credentials)


async def run(
    arguments: argparse.Namespace, server: NatsServer, credentials: CredentialsDirectory
) -> None:
    admin = await bus(server, credentials, ADMIN)
    watcher = await bus(server, credentials, WATCHER)
    try:
        await measure(arguments, server, credentials, admin, watcher)
    finally:
        await watcher.close()
        await admin.close()


async def measure(
    arguments: argparse.Namespace,
    server: NatsServer,
    credentials: CredentialsDirectory,
    admin: NatsBus,
    watcher: NatsBus,
) -> None:
    await admin.ensure_streams()
    await admin.declare(messenger_topology())
    backend_port, gateway_port, health_port = free_port(), free_port(), free_port()
    backend = await start(str(STANDIN), "bench-server", str(backend_port))
    for obj in model_and_pod(backend_port):
        await observe(watcher, obj)
    gateway = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--serve",
        server.url,
        str(credentials.seed("gateway")),
        str(gateway_port),
        str(health_port),
    )
    key = tenant_key_name(NAMESPACE)
    client = await nats.connect(
        server.url, nkeys_seed=str(credentials.seed(key)), inbox_prefix=inbox_prefix(key)
    )
    tenant = Tenant(client)
    await tenant.listen()
    url = f"http://127.0.0.1:{gateway_port}/openai/v1/completions"
    try:
        async with aiohttp.ClientSession() as session:
            await until_served(session, url)
            http, messages = await latencies(session, url, tenant, arguments.requests)
        started = time.perf_counter()
        message_rate = await message_throughput(
            tenant, messages=arguments.messages, concurrency=arguments.concurrency
        )
        seconds = time.perf_counter() - started
        http_rate, http_failed = await http_throughput(
            url, seconds=seconds, concurrency=arguments.concurrency
        )
    finally:
        await client.close()
        for process in (gateway, backend):
            if process.returncode is None:
                process.terminate()
            await process.wait()
    if gateway.returncode not in (0, -15):
        raise RuntimeError(f"the gateway ended with {gateway.returncode}")
    print(f"latency, one at a time, {len(http)} requests each (p50 / p99 / mean):")
    for name, values in (("HTTP through the gateway", http), ("through the messenger", messages)):
        print(
            f"  {name:26} {milliseconds(percentile(values, 0.5))} / "
            f"{milliseconds(percentile(values, 0.99))} / {milliseconds(statistics.fmean(values))}"
        )
    print(
        f"  added by the messenger     "
        f"{milliseconds(percentile(messages, 0.5) - percentile(http, 0.5))} (p50) / "
        f"{milliseconds(percentile(messages, 0.99) - percentile(http, 0.99))} (p99)"
    )
    print(f"throughput, {arguments.concurrency} in flight:")
    print(f"  HTTP through the gateway   {http_rate:8.0f} requests/s ({http_failed} failed)")
    print(
        f"  through the messenger      {message_rate:8.0f} requests/s "
        f"({arguments.messages} requests, publish to answer)"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        url, seed, port, health = sys.argv[2:6]
        asyncio.run(serve_gateway(url, seed, int(port), int(health)))
        sys.exit(0)
    parser = argparse.ArgumentParser(description="The messenger against HTTP.")
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=64)
    asyncio.run(main(parser.parse_args()))
