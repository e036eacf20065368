"""A monitor whose metrics endpoint does not answer runs, and says it is not ready, instead of
exiting (which had ``kaiwo up`` restart it in a loop and give up on the whole operator); it
becomes ready once the endpoint answers."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_kubefake import FakeKubeServer
from kaiwo_runtime.nats_server import NatsServer, free_port

from tests.health_sockets import health_env, health_socket, inherited_fds
from tests.integration.pipeline.harness import Pending, eventually

pytestmark = [pytest.mark.nats, pytest.mark.slow]


@pytest.fixture
async def kube_server(tmp_path: Path) -> AsyncIterator[FakeKubeServer]:
    async with FakeKubeServer(kubeconfig_path=tmp_path / "kubeconfig") as server:
        for crd in custom_resource_definitions(SERVED_KINDS):
            server.store.register_crd(crd)
        yield server


async def readiness(port: int) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/readyz") as response,
    ):
        return response.status, json.loads(await response.text())


async def prometheus_answering_on(port: int) -> web.AppRunner:
    """A stand-in for Prometheus' instant query API: an empty vector."""

    async def query(_request: web.Request) -> web.Response:
        return web.json_response(
            {"status": "success", "data": {"resultType": "vector", "result": []}}
        )

    app = web.Application()
    app.router.add_get("/api/v1/query", query)
    app.router.add_post("/api/v1/query", query)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


def start_monitor(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "kaiwo_monitor"],
            env=env,
            stdout=out,
            stderr=out,
            pass_fds=inherited_fds(env),
        )


async def test_an_unreachable_endpoint_leaves_the_monitor_running_and_not_ready(
    tmp_path: Path, kube_server: FakeKubeServer
) -> None:
    endpoint_port = free_port()
    log = tmp_path / "monitor.log"
    with health_socket() as health:
        health_port = health.port
        async with NatsServer(store_dir=tmp_path / "nats") as nats:
            env = {
                **os.environ,
                "KAIWO_NATS_URL": nats.url,
                "KAIWO_KUBECONFIG": str(kube_server.kubeconfig_path),
                "KAIWO_MONITOR_METRICS_ENDPOINT": f"http://127.0.0.1:{endpoint_port}",
                "KAIWO_MONITOR_POLLING_INTERVAL_SECONDS": "0.5",
                "KAIWO_MONITOR_SCRAPE_TIMEOUT_SECONDS": "1",
                **health_env(health),
                "KAIWO_STARTUP_TIMEOUT_SECONDS": "30",
                "KAIWO_LOG_FORMAT": "json",
            }
            process = start_monitor(env, log)
            runner = None
            try:

                async def not_ready_for_the_endpoint() -> bool | Pending:
                    if process.poll() is not None:
                        raise AssertionError(f"the monitor exited: {log.read_text()}")
                    try:
                        status, body = await readiness(health_port)
                    except aiohttp.ClientError as error:
                        return Pending(f"/readyz does not answer yet: {error}")
                    checks = body["checks"]
                    return (
                        status == 503
                        and checks["nats"] == "ok"
                        and checks["metrics-endpoint"] != "ok"
                    ) or Pending(f"/readyz: {status} {body}")

                await eventually(not_ready_for_the_endpoint, what="not ready", within=60)
                await asyncio.sleep(2)  # several polling intervals: still running
                assert process.poll() is None, log.read_text()
                assert "the metrics endpoint does not answer" in log.read_text()

                runner = await prometheus_answering_on(endpoint_port)

                async def ready() -> bool | Pending:
                    status, body = await readiness(health_port)
                    return status == 200 or Pending(f"/readyz: {status} {body}")

                await eventually(ready, what="ready once the endpoint answers", within=60)
            finally:
                if runner is not None:
                    await runner.cleanup()
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)
