"""A real Prometheus for tests: the built stack's ``prometheus`` scraping a small GPU exporter.

:class:`GpuExporter` is an HTTP server in the test's own event loop serving the Prometheus
text format with the GPU series the test sets (AMD ``gpu_gfx_activity`` with ``gpu_id``,
NVIDIA DCGM ``DCGM_FI_DEV_GPU_UTIL`` with ``gpu``; both labelled ``namespace`` and ``pod``).
:func:`running_prometheus` starts ``prometheus`` on a free port with a temporary config that
scrapes the exporter every second, waits until it is ready, and stops it afterwards. A series
the exporter stops serving is marked stale at the next scrape, so an instant query no longer
returns it, as with a pod that went away.

The binary is Prometheus 3 from the stack ``make stack`` builds (``tests/stack_programs.py``);
a Prometheus the machine may run on 9090 is never used. Without the binary the tests are
skipped with the reason, or fail under ``KAIWO_REQUIRE_REAL_APISERVER=1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import aiohttp
from aiohttp import web

from tests.stack_programs import stack_program

SCRAPE_SECONDS: Final = 1
READY_WITHIN: Final = 30.0
AMD: Final = "gpu_gfx_activity"
NVIDIA: Final = "DCGM_FI_DEV_GPU_UTIL"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True, slots=True)
class GpuSeries:
    """One GPU's utilization in percent, as an exporter reports it for the pod using it;
    with ``timestamp_ms``, stamped with that time by the exporter itself (Prometheus keeps
    it, and marks no such series stale when it stops changing)."""

    namespace: str
    pod: str
    gpu: str
    percent: float
    metric: str = AMD
    timestamp_ms: int | None = None

    def line(self) -> str:
        gpu_label = "gpu_id" if self.metric == AMD else "gpu"
        labels = f'namespace="{self.namespace}",pod="{self.pod}",{gpu_label}="{self.gpu}"'
        stamp = "" if self.timestamp_ms is None else f" {self.timestamp_ms}"
        return f"{self.metric}{{{labels}}} {self.percent}{stamp}"


@dataclass
class GpuExporter:
    """Serves ``series`` (replace the list to change what the next scrape sees)."""

    series: list[GpuSeries] = field(default_factory=list)
    port: int = field(default_factory=free_port)
    scrapes: int = 0

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def _metrics(self, _: web.Request) -> web.Response:
        self.scrapes += 1
        lines = [f"# TYPE {AMD} gauge", f"# TYPE {NVIDIA} gauge"]
        lines += [series.line() for series in self.series]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[GpuExporter]:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        try:
            yield self
        finally:
            await runner.cleanup()


@dataclass(frozen=True, slots=True)
class Prometheus:
    url: str
    process: subprocess.Popen[bytes]


@contextlib.asynccontextmanager
async def running_prometheus(exporter: GpuExporter, workdir: Path) -> AsyncIterator[Prometheus]:
    """``prometheus`` on a free port scraping ``exporter`` every second, until the block ends."""
    binary = stack_program("prometheus")
    port = free_port()
    config = workdir / "prometheus.yml"
    config.write_text(
        "global:\n"
        f"  scrape_interval: {SCRAPE_SECONDS}s\n"
        f"  evaluation_interval: {SCRAPE_SECONDS}s\n"
        "scrape_configs:\n"
        "  - job_name: gpus\n"
        "    honor_labels: true\n"
        f"    static_configs: [{{targets: ['{exporter.target}']}}]\n"
    )
    log = (workdir / "prometheus.log").open("wb")
    process = subprocess.Popen(  # noqa: ASYNC220 - started once, not waited for here
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-lifecycle",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        await _ready(url, process, workdir / "prometheus.log")
        yield Prometheus(url=url, process=process)
    finally:
        process.terminate()
        try:
            await asyncio.to_thread(process.wait, 10)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait)
        log.close()


async def _ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_WITHIN
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                text = await asyncio.to_thread(log.read_text)
                raise AssertionError(f"prometheus exited: {text[-2000:]}")
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(f"{url}/-/ready") as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.1)
    raise AssertionError(f"prometheus was not ready within {READY_WITHIN} s")


async def wait_for_series(url: str, query: str, count: int, *, within: float = 60.0) -> None:
    """Until an instant ``query`` returns ``count`` series (scrapes and staleness land).

    A scrape every second lands it in a few seconds when idle; ``within`` only tells a hang
    from a loaded machine."""
    deadline = time.monotonic() + within
    found: object = None
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            async with session.get(f"{url}/api/v1/query", params={"query": query}) as response:
                body = await response.json()
            found = len(body["data"]["result"])
            if found == count:
                return
            await asyncio.sleep(0.2)
    raise AssertionError(f"{query!r} gave {found} series, not {count}, within {within} s")
