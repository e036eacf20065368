"""The probe and metrics endpoint, served for real on a free port."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import aiohttp
import pytest
from kaiwo_runtime.health import HealthServer, ReadinessCheck
from kaiwo_runtime.metrics import MetricsRegistry
from kaiwo_runtime.settings import ServiceSettings


async def passes() -> bool:
    return True


async def fails() -> bool:
    return False


async def raises() -> bool:
    raise ConnectionError("nats not connected")


async def hangs() -> bool:
    await asyncio.sleep(10)
    return True


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def server(
    checks: dict[str, ReadinessCheck], metrics: MetricsRegistry | None = None
) -> HealthServer:
    return HealthServer(metrics=metrics or MetricsRegistry(), checks=checks, check_timeout=0.2)


async def test_healthz_answers_while_the_loop_runs(http: aiohttp.ClientSession) -> None:
    async with server({}) as health:
        async with http.get(f"{health.url}/healthz") as response:
            assert response.status == 200
            assert await response.json() == {"status": "ok"}
        assert health.port > 0


async def test_readyz_is_200_when_every_check_passes(http: aiohttp.ClientSession) -> None:
    async with (
        server({"nats": passes, "streams": passes}) as health,
        http.get(f"{health.url}/readyz") as response,
    ):
        assert response.status == 200
        assert await response.json() == {
            "status": "ready",
            "checks": {"nats": "ok", "streams": "ok"},
        }


async def test_readyz_is_503_and_names_each_failure(http: aiohttp.ClientSession) -> None:
    checks = {"ok": passes, "false": fails, "error": raises, "slow": hangs}
    async with server(checks) as health, http.get(f"{health.url}/readyz") as response:
        assert response.status == 503
        assert await response.json() == {
            "status": "not ready",
            "checks": {
                "ok": "ok",
                "false": "failed",
                "error": "ConnectionError: nats not connected",
                "slow": "timed out after 0.2s",
            },
        }


async def test_metrics_serves_the_prometheus_text_format(http: aiohttp.ClientSession) -> None:
    metrics = MetricsRegistry()
    handled = metrics.counter("bus_messages_handled", "Messages handled", labels=("outcome",))
    handled.labels(outcome="ack").inc(3)
    async with server({}, metrics) as health, http.get(f"{health.url}/metrics") as response:
        text = await response.text()
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
    assert 'kaiwo_bus_messages_handled_total{outcome="ack"} 3.0' in text.splitlines()


async def test_the_port_is_released_on_exit() -> None:
    health = server({})
    async with health:
        assert health.port > 0
    with pytest.raises(RuntimeError):
        _ = health.port


async def test_an_inherited_socket_is_served_and_stays_open_for_the_next_start(
    http: aiohttp.ClientSession,
) -> None:
    """As ``kaiwo up`` hands each service its health socket: the port is the socket's, and a
    service started again in the same process (``kaiwo up --one-process``) serves it again."""
    with socket.socket() as inherited:
        inherited.bind(("127.0.0.1", 0))
        inherited.listen()
        port = inherited.getsockname()[1]
        for _start in range(2):
            health = HealthServer(metrics=MetricsRegistry(), port=1, listen_fd=inherited.fileno())
            async with health:
                assert health.port == port
                async with http.get(f"http://127.0.0.1:{port}/healthz") as response:
                    assert response.status == 200
        assert inherited.fileno() >= 0
        assert inherited.getsockname()[1] == port  # still bound: no one else can take it


async def test_a_service_serves_the_socket_its_settings_say_it_inherited(
    http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What every service does with ``KAIWO_HEALTH_LISTEN_FD``, which ``kaiwo up`` sets."""
    with socket.socket() as inherited:
        inherited.bind(("127.0.0.1", 0))
        inherited.listen()
        port = inherited.getsockname()[1]
        monkeypatch.setenv("KAIWO_HEALTH_PORT", "1")
        monkeypatch.setenv("KAIWO_HEALTH_LISTEN_FD", str(inherited.fileno()))

        health = HealthServer.of_service(
            ServiceSettings(), metrics=MetricsRegistry(), checks={"nats": fails}
        )
        async with health:
            assert health.port == port
            async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                assert response.status == 503
