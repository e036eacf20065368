"""The gateway's added latency and throughput on this machine.

Run: ``uv run python bench/gateway.py [--requests N] [--seconds S] [--concurrency C]``.

Three processes on loopback: a stand-in model server (``tests/integration/gateway/
standin_openai.py``, what vLLM answers to ``/v1/completions``), the gateway's HTTP
application with one Model whose one endpoint is that server (the catalog filled in
directly: NATS is not on the request path), and this client. It measures

* latency, one request at a time: ``N`` completions straight to the server, then ``N``
  through the gateway, interleaved in blocks so both see the same machine; the gateway's
  added latency is the difference of the percentiles;
* throughput: ``C`` clients sending completions for ``S`` seconds, through the gateway and
  straight to the server.

The stand-in answers at once, so every figure is the proxy's own cost plus loopback HTTP.
Every request carries a bearer token and goes through the real access path
(:class:`~kaiwo_gateway.kubernetes_access.KubernetesAccess`, the limits, the body checks); the
API server's answers come from this process and are remembered, as they are for a caller's
every request but the first of each 30 s: the figure is the cost of a known caller.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from kaiwo_gateway.domain.balancing import Balancer
from kaiwo_gateway.domain.catalog import Catalog
from kaiwo_gateway.http_api import Gateway, ProxySettings
from kaiwo_gateway.kubernetes_access import AccessSettings, KubernetesAccess
from kaiwo_gateway.metrics import GatewayMetrics
from kaiwo_runtime.nats_server import free_port

STANDIN = Path(__file__).parent.parent / "tests/integration/gateway/standin_openai.py"
BODY = {"model": "bench", "prompt": "Say something short."}
TOKEN = "bench-token"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


class ApiServerAnswers:
    """TokenReview and SubjectAccessReview as the API server answers them for one caller
    who may use the namespace ``bench``."""

    async def create(
        self,
        obj: dict[str, Any],
        *,
        field_manager: str | None = None,  # noqa: ARG002 (the port's signature)
    ) -> dict[str, Any]:
        if obj["kind"] == "TokenReview":
            user = {"username": "bench", "uid": "u", "groups": ["system:authenticated"]}
            ok = obj["spec"]["token"] == TOKEN
            return {**obj, "status": {"authenticated": ok, "user": user if ok else {}}}
        namespace = obj["spec"]["resourceAttributes"]["namespace"]
        return {**obj, "status": {"allowed": namespace == "bench"}}


BLOCK = 50


def bench_catalog(backend_port: int) -> Catalog:
    catalog = Catalog()
    catalog.apply(
        kind="Model",
        event="ADDED",
        obj={
            "metadata": {"name": "bench", "namespace": "bench", "uid": "m", "resourceVersion": "1"},
            "spec": {"url": "hf://org/model", "engine": "VLLM", "features": ["TextGeneration"]},
        },
    )
    catalog.apply(
        kind="Pod",
        event="ADDED",
        obj={
            "metadata": {
                "name": "server-0",
                "namespace": "bench",
                "uid": "p",
                "resourceVersion": "1",
                "labels": {"model": "bench", "kaiwo.silogen.ai/owner-uid": "m"},
                "annotations": {"model-pod-port": str(backend_port)},
            },
            "status": {"podIP": "127.0.0.1", "conditions": [{"type": "Ready", "status": "True"}]},
        },
    )
    return catalog


async def serve_gateway(port: int, backend_port: int) -> None:
    metrics = GatewayMetrics()
    gateway = Gateway(
        catalog=bench_catalog(backend_port),
        balancer=Balancer(),
        metrics=metrics,
        settings=ProxySettings(),
        access=KubernetesAccess(ApiServerAnswers(), AccessSettings(), metrics=metrics),
    )
    runner = web.AppRunner(gateway.application(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print("ready", flush=True)
    await asyncio.Event().wait()


async def start(*arguments: str) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        sys.executable, *arguments, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 30)
    if line.strip() != b"ready":
        raise RuntimeError(f"{arguments[0]} did not start")
    return process


async def one(session: aiohttp.ClientSession, url: str) -> float:
    started = time.perf_counter()
    async with session.post(url, json=BODY, headers=HEADERS) as response:
        await response.read()
        if response.status != 200:
            raise RuntimeError(f"{url} answered {response.status}")
    return time.perf_counter() - started


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def latencies(
    session: aiohttp.ClientSession, direct: str, proxied: str, requests: int
) -> tuple[list[float], list[float]]:
    for _ in range(200):  # warm up both paths (connections, caches)
        await one(session, direct)
        await one(session, proxied)
    straight: list[float] = []
    through: list[float] = []
    while len(straight) < requests:
        straight.extend([await one(session, direct) for _ in range(BLOCK)])
        through.extend([await one(session, proxied) for _ in range(BLOCK)])
    return straight, through


async def throughput(url: str, *, seconds: float, concurrency: int) -> float:
    done = 0
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        deadline = time.perf_counter() + seconds

        async def client() -> None:
            nonlocal done
            while time.perf_counter() < deadline:
                await one(session, url)
                done += 1

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        return done / (time.perf_counter() - started)


def milliseconds(value: float) -> str:
    return f"{value * 1000:.3f} ms"


async def main(arguments: argparse.Namespace) -> None:
    backend_port, gateway_port = free_port(), free_port()
    backend = await start(str(STANDIN), "bench-server", str(backend_port))
    gateway = await start(__file__, "--serve", str(gateway_port), str(backend_port))
    direct = f"http://127.0.0.1:{backend_port}/v1/completions"
    proxied = f"http://127.0.0.1:{gateway_port}/openai/v1/completions"
    try:
        async with aiohttp.ClientSession() as session:
            straight, through = await latencies(session, direct, proxied, arguments.requests)
        rates = {
            name: await throughput(
                url, seconds=arguments.seconds, concurrency=arguments.concurrency
            )
            for name, url in (("through the gateway", proxied), ("straight", direct))
        }
    finally:
        for process in (gateway, backend):
            process.terminate()
            await process.wait()
    print(f"latency, one at a time, {len(through)} requests each (p50 / p99 / mean):")
    for name, values in (("straight to the server", straight), ("through the gateway", through)):
        print(
            f"  {name:24} {milliseconds(percentile(values, 0.5))} / "
            f"{milliseconds(percentile(values, 0.99))} / {milliseconds(statistics.fmean(values))}"
        )
    print(
        f"  added by the gateway     "
        f"{milliseconds(percentile(through, 0.5) - percentile(straight, 0.5))} (p50) / "
        f"{milliseconds(percentile(through, 0.99) - percentile(straight, 0.99))} (p99)"
    )
    print(f"throughput, {arguments.concurrency} concurrent clients, {arguments.seconds:g} s:")
    for name, rate in rates.items():
        print(f"  {name:24} {rate:,.0f} requests/s")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        asyncio.run(serve_gateway(int(sys.argv[2]), int(sys.argv[3])))
    else:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("--requests", type=int, default=2000)
        parser.add_argument("--seconds", type=float, default=5.0)
        parser.add_argument("--concurrency", type=int, default=32)
        asyncio.run(main(parser.parse_args()))
