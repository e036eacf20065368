"""``python -m kaiwo_watcher``: the watcher process.

Connects to NATS (declaring the streams), opens the ``kaiwo-watcher`` bucket, connects to the
API server (``KAIWO_KUBECONFIG``, the usual kubeconfig, or in-cluster), serves ``/healthz``,
``/readyz`` (NATS connected, API server reachable, every kind listed once) and ``/metrics``,
and follows every kind until SIGTERM or SIGINT. A dependency that does not answer at start
ends the process with status 1 and one line on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable

import structlog
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kube.reachability import api_server_reachable
from kaiwo_runtime.health import HealthServer
from kaiwo_runtime.kv import NatsKeyValue
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.startup import (
    StartupError,
    configure_service_logging,
    run_until_signalled,
    utc_now,
    within,
)

from kaiwo_watcher.metrics import WatcherMetrics
from kaiwo_watcher.service import WatcherService
from kaiwo_watcher.settings import WatcherSettings

log = structlog.get_logger("kaiwo.watcher")


async def serve(settings: WatcherSettings, stop: asyncio.Event) -> None:
    timeout = settings.startup_timeout_seconds
    topology = bus_topology(partitions=settings.bus_partitions)
    bus = await within(
        timeout,
        f"NATS at {settings.nats_url} is unreachable",
        NatsBus.connect(
            settings.nats_url, topology=topology, name=f"kaiwo-watcher-{settings.replica}"
        ),
    )
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(bus.close)
        await within(timeout, "declaring the JetStream streams failed", bus.ensure_streams())
        kv = await within(
            timeout,
            f"opening the key-value bucket {settings.watcher_bucket} failed",
            NatsKeyValue.open(bus.client, settings.watcher_bucket),
        )
        where = str(settings.kubeconfig or "the default kubeconfig or in-cluster account")
        kube = await within(
            timeout,
            f"no Kubernetes API server ({where})",
            KubernetesAsyncioAdapter.from_environment(settings.kubeconfig),
        )
        stack.push_async_callback(kube.close)
        if not await within(timeout, f"the API server ({where})", api_server_reachable(kube)):
            raise StartupError(f"the API server ({where}) is unreachable")
        metrics = WatcherMetrics()
        service = WatcherService(
            kube,
            bus,
            kv=kv,
            clock=utc_now,
            namespaces=settings.watch_namespaces,
            tuning=settings.tuning(),
            metrics=metrics,
        )

        async def nats_connected() -> bool:
            return bool(bus.client.is_connected)

        async def kinds_listed() -> bool:
            return service.ready

        async def kubernetes_reachable() -> bool:
            return await api_server_reachable(kube)

        checks: dict[str, Callable[[], Awaitable[bool]]] = {
            "nats": nats_connected,
            "kubernetes": kubernetes_reachable,
            "initial-lists": kinds_listed,
        }
        health = HealthServer(
            metrics=metrics.registry,
            checks=checks,
            host=settings.health_host,
            port=settings.health_port,
        )
        async with health:
            log.info(
                "watcher started",
                streams=len(service.streams),
                health=health.url,
                namespaces=list(settings.watch_namespaces) or "all",
            )
            await service.run(stop)
        log.info("watcher stopped")


async def main() -> int:
    settings = WatcherSettings()
    configure_service_logging(settings)
    return await run_until_signalled("kaiwo-watcher", lambda stop: serve(settings, stop))


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
