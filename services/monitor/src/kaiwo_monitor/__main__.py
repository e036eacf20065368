"""``python -m kaiwo_monitor``: the monitor process.

Connects to NATS (declaring the streams), opens the ``kaiwo-monitor`` bucket, connects to the
API server (``KAIWO_KUBECONFIG``, the usual kubeconfig, or in-cluster), asks the metrics
endpoint once, serves ``/healthz``, ``/readyz`` (NATS connected, API server reachable, the
metrics endpoint answered: the leader's last scrape, else the last probe) and ``/metrics``,
and competes for the ``monitor`` lease in the NATS lease bucket until SIGTERM or SIGINT (the
leader then releases it). NATS or the API server not answering at start ends the process with
status 1 and one line on stderr; so does a leader that lost its lease to another replica (its
restart waits as a standby). A metrics endpoint that does not answer does not: the monitor
runs, says so in one line, reports itself not ready and scrapes again every interval.
"""

from __future__ import annotations

if __name__ == "__main__":  # a service process: first of all (decision 0088)
    from kaiwo_runtime.console_rendering import leave_out_console_rendering

    leave_out_console_rendering()

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable

import structlog
from kaiwo_kube.reachability import api_server_reachable
from kaiwo_runtime.health import HealthServer
from kaiwo_runtime.startup import (
    StartupError,
    configure_service_logging,
    open_api_server,
    open_bus_and_bucket,
    open_single_active,
    run_service,
    run_until_signalled,
    utc_now,
)

from kaiwo_monitor.exporter import ExporterScraper, scraper_for
from kaiwo_monitor.metrics import MonitorMetrics
from kaiwo_monitor.prometheus import PrometheusScraper
from kaiwo_monitor.service import MonitorService
from kaiwo_monitor.settings import LEASE_ROLE, MonitorSettings

log = structlog.get_logger("kaiwo.monitor")


def _scraper(settings: MonitorSettings) -> PrometheusScraper | ExporterScraper:
    if not settings.monitor_metrics_endpoint:
        raise StartupError(
            "KAIWO_MONITOR_METRICS_ENDPOINT (or RESOURCE_MONITORING_METRICS_ENDPOINT) is not set "
            "(a Prometheus URL, or an exporter's /metrics page)"
        )
    try:
        return scraper_for(
            settings.monitor_metrics_endpoint,
            query=settings.monitor_query,
            time_query=settings.monitor_sample_time_query,
            timeout=settings.monitor_scrape_timeout_seconds,
        )
    except ValueError as error:
        raise StartupError(str(error)) from error


async def serve(settings: MonitorSettings, stop: asyncio.Event) -> None:
    timeout = settings.startup_timeout_seconds
    scraper = _scraper(settings)
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(scraper.close)
        bus, kv = await open_bus_and_bucket(
            stack,
            settings=settings,
            service="monitor",
            bucket=settings.monitor_state_bucket,
            within_seconds=timeout,
        )
        single_active = await open_single_active(
            bus, settings=settings, role=LEASE_ROLE, within_seconds=timeout
        )
        kube = await open_api_server(
            stack, kubeconfig=settings.kubeconfig, within_seconds=timeout, service="monitor"
        )
        metrics = MonitorMetrics()
        service = MonitorService(
            bus,
            kube,
            scraper=scraper,
            clock=utc_now,
            settings=settings,
            single_active=single_active,
            kv=kv,
            metrics=metrics,
        )

        async def nats_connected() -> bool:
            return bool(bus.client.is_connected)

        async def kubernetes_reachable() -> bool:
            return await api_server_reachable(kube)

        async def scraping() -> bool:
            return await service.endpoint_ready()

        if settings.monitor_enabled:
            unreached = await service.probe_endpoint()
            if unreached is not None:
                log.warning(
                    "the metrics endpoint does not answer; running without it, not ready "
                    "until it does",
                    endpoint=scraper.url,
                    error=unreached,
                )

        checks: dict[str, Callable[[], Awaitable[bool]]] = {
            "nats": nats_connected,
            "kubernetes": kubernetes_reachable,
            "metrics-endpoint": scraping,
        }
        health = HealthServer.of_service(settings, metrics=metrics.registry, checks=checks)
        async with health:
            log.info(
                "monitor started",
                health=health.url,
                endpoint=scraper.url,
                lease=f"{settings.lease_bucket}/{LEASE_ROLE}",
                enabled=settings.monitor_enabled,
            )
            await service.run(stop)
        log.info("monitor stopped")


async def main() -> int:
    settings = MonitorSettings()
    configure_service_logging(settings)
    return await run_until_signalled("kaiwo-monitor", lambda stop: serve(settings, stop))


if __name__ == "__main__":
    sys.exit(run_service(main()))
