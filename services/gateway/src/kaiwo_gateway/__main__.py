"""``python -m kaiwo_gateway``: the gateway process.

Connects to NATS as ``gateway`` (waiting for ``KAIWO_OBS`` to be declared), reads the stored
observations of Models and their Pods, then serves the OpenAI API on ``KAIWO_GATEWAY_PORT``
and ``/healthz``, ``/readyz`` (NATS connected, observations read) and ``/metrics`` on
``KAIWO_HEALTH_PORT`` until SIGTERM or SIGINT. NATS not answering at start ends the process
with status 1 and one line on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable

import structlog
from aiohttp import web
from kaiwo_runtime.health import HealthServer
from kaiwo_runtime.startup import configure_service_logging, connect_bus, run_until_signalled

from kaiwo_gateway.domain.balancing import Balancer
from kaiwo_gateway.domain.catalog import Catalog
from kaiwo_gateway.http_api import Gateway, ProxySettings
from kaiwo_gateway.metrics import GatewayMetrics
from kaiwo_gateway.nats_source import NatsObservationSource
from kaiwo_gateway.observations import ObservationFeed
from kaiwo_gateway.settings import GatewaySettings

log = structlog.get_logger("kaiwo.gateway")


async def serve(settings: GatewaySettings, stop: asyncio.Event) -> None:
    bus = await connect_bus(
        settings=settings, service="gateway", within_seconds=settings.startup_timeout_seconds
    )
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(bus.close)
        metrics = GatewayMetrics()
        catalog = Catalog(namespaces=settings.gateway_namespaces)
        gateway = Gateway(
            catalog=catalog,
            balancer=Balancer(),
            metrics=metrics,
            settings=ProxySettings(
                endpoint_wait_seconds=settings.gateway_endpoint_wait_seconds,
                connect_timeout_seconds=settings.gateway_connect_timeout_seconds,
                attempts=settings.gateway_attempts,
            ),
        )
        feed = ObservationFeed(
            source=NatsObservationSource(bus.client),
            catalog=catalog,
            metrics=metrics,
            on_change=gateway.catalog_changed,
            resync_seconds=settings.gateway_resync_seconds,
        )
        await feed.start()

        async def nats_connected() -> bool:
            return bool(bus.client.is_connected)

        async def observations_read() -> bool:
            return feed.caught_up

        checks: dict[str, Callable[[], Awaitable[bool]]] = {
            "nats": nats_connected,
            "observations": observations_read,
        }
        runner = web.AppRunner(gateway.application(), access_log=None)
        await runner.setup()
        stack.push_async_callback(runner.cleanup)
        site = web.TCPSite(runner, settings.gateway_host, settings.gateway_port)
        await site.start()
        port = runner.addresses[0][1]
        health = HealthServer(
            metrics=metrics.registry,
            checks=checks,
            host=settings.health_host,
            port=settings.health_port,
        )
        async with health:
            log.info(
                "gateway started",
                openai=f"http://{settings.gateway_host}:{port}/openai/v1",
                health=health.url,
                models=len(catalog.models()),
            )
            await feed.run(stop)
        log.info("gateway stopped")


async def main() -> int:
    settings = GatewaySettings()
    configure_service_logging(settings)
    return await run_until_signalled("kaiwo-gateway", lambda stop: serve(settings, stop))


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
