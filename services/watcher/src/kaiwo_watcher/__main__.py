"""``python -m kaiwo_watcher``: the watcher process.

Connects to NATS (declaring the streams), opens the ``kaiwo-watcher`` bucket, connects to the
API server (``KAIWO_KUBECONFIG``, the usual kubeconfig, or in-cluster), serves ``/healthz``,
``/readyz`` (NATS connected, API server reachable, every kind listed once, no stream stuck
on a publish that keeps failing) and ``/metrics``,
and follows every kind until SIGTERM or SIGINT.
Its bucket is bound to the cluster it was filled from (the uid of kube-system, decision 0042):
started against another cluster, it refuses the bucket. A dependency that does not answer at start
ends the process with status 1 and one line on stderr.
"""

from __future__ import annotations

if __name__ == "__main__":  # a service process: first of all (decision 0088)
    from kaiwo_runtime.console_rendering import leave_out_console_rendering

    leave_out_console_rendering()

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from kaiwo_contracts.events.permissions import REFUSALS
from kaiwo_kube.reachability import api_server_reachable
from kaiwo_runtime.health import HealthServer
from kaiwo_runtime.startup import (
    bind_state_to_cluster,
    collect_young_objects_every,
    configure_service_logging,
    freeze_startup_objects,
    open_api_server,
    open_bus_and_bucket,
    run_service,
    run_until_signalled,
    utc_now,
)

from kaiwo_watcher.metrics import WatcherMetrics
from kaiwo_watcher.service import WatcherService
from kaiwo_watcher.settings import WatcherSettings
from kaiwo_watcher.watch_list import default_watch_list

log = structlog.get_logger("kaiwo.watcher")


async def serve(settings: WatcherSettings, stop: asyncio.Event) -> None:
    timeout = settings.startup_timeout_seconds
    async with contextlib.AsyncExitStack() as stack:
        bus, kv = await open_bus_and_bucket(
            stack,
            settings=settings,
            service="watcher",
            bucket=settings.watcher_bucket,
            within_seconds=timeout,
        )
        kube = await open_api_server(
            stack, kubeconfig=settings.kubeconfig, within_seconds=timeout, service="watcher"
        )
        await bind_state_to_cluster(
            kv, kube, bucket=settings.watcher_bucket, within_seconds=timeout
        )
        metrics = WatcherMetrics()
        service = WatcherService(
            kube,
            bus,
            kv=kv,
            clock=utc_now,
            watch_list=default_watch_list(settings.operator_namespace),
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
            "publishing": service.publishing,
        }
        health = HealthServer.of_service(settings, metrics=metrics.registry, checks=checks)

        async def refused(message: Any) -> None:
            try:
                await service.handle_refusal(message.headers, message.data, subject=message.subject)
            except Exception:  # one refusal must not end the subscription
                log.exception("observing a refused plan's sources again failed")

        # Plain subscription: a refusal missed while away is made good by the next one.
        await bus.client.subscribe(REFUSALS, cb=refused)
        freeze_startup_objects()
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
    collect_young_objects_every(settings.gc_young_allocations)
    return await run_until_signalled("kaiwo-watcher", lambda stop: serve(settings, stop))


if __name__ == "__main__":
    sys.exit(run_service(main()))
