"""The gateway's memory under large and hostile bodies (decision 0041).

Run: ``uv run python bench/gateway_memory.py``.

The gateway's HTTP application runs alone in a child process (one Model, whose endpoint
refuses connections: only the gateway's own handling of a body counts), anonymous on
loopback, with the default limits. Four requests at once of each body are sent, and the
child's resident memory (``VmRSS``) is read after each kind:

* a 12 MB prompt (over the limit: refused before it is read);
* 7.9 MiB of ``{}`` (2.7 million objects: refused before it is parsed);
* JSON nested 200,000 deep (refused before it is parsed);
* a 7.9 MiB prompt (within the 8 MiB limit: read, parsed, forwarded), last.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import aiohttp
from aiohttp import web
from kaiwo_gateway.access import LOOPBACK_ONLY
from kaiwo_gateway.domain.balancing import Balancer
from kaiwo_gateway.http_api import CallerPolicy, Gateway, ProxySettings
from kaiwo_gateway.metrics import GatewayMetrics
from kaiwo_runtime.nats_server import free_port

sys.path.insert(0, str(Path(__file__).parent))
from gateway import bench_catalog  # the other bench's one-Model catalog

AT_ONCE = 4


def bodies() -> dict[str, bytes]:
    return {
        "12 MB prompt": json.dumps({"model": "bench", "prompt": "x" * 12_000_000}).encode(),
        "7.9 MiB of {}": b'{"model": "bench", "p": [' + b"{}," * 2_700_000 + b"{}]}",
        "200,000 deep": b'{"model": "bench", "p": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
        "7.9 MiB prompt (allowed)": json.dumps(
            {"model": "bench", "prompt": "x" * 8_200_000}
        ).encode(),
    }


def resident_mib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024
    raise RuntimeError("no VmRSS")


async def serve(port: int) -> None:
    gateway = Gateway(
        catalog=bench_catalog(free_port()),  # nothing listens there
        balancer=Balancer(),
        metrics=GatewayMetrics(),
        settings=ProxySettings(connect_timeout_seconds=0.2, attempts=1),
        access=LOOPBACK_ONLY,
        policy=CallerPolicy(anonymous="loopback"),
    )
    runner = web.AppRunner(gateway.application(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print("ready", flush=True)
    await asyncio.Event().wait()


async def measure() -> None:
    port = free_port()
    child = subprocess.Popen(  # noqa: ASYNC220 (started once, read by its pid)
        [sys.executable, __file__, "--serve", str(port)], stdout=subprocess.PIPE
    )
    assert child.stdout is not None
    if child.stdout.readline().strip() != b"ready":
        raise RuntimeError("the gateway did not start")
    url = f"http://127.0.0.1:{port}/openai/v1/completions"
    print(f"idle: {resident_mib(child.pid)} MiB resident")
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
            for name, body in bodies().items():

                async def one(body: bytes = body) -> int:
                    headers = {"Content-Type": "application/json"}
                    async with session.post(url, data=body, headers=headers) as response:
                        await response.read()
                        return response.status

                statuses = await asyncio.gather(*(one() for _ in range(AT_ONCE)))
                print(f"{name:26} answered {statuses}: {resident_mib(child.pid)} MiB resident")
    finally:
        child.terminate()
        child.wait()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        asyncio.run(serve(int(sys.argv[2])))
    else:
        asyncio.run(measure())
