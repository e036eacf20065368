"""``python -m kaiwo_console``: the read-only web console (decisions 0050, 0051).

Opens the event store at ``KAIWO_EVENTSTORE_URL`` without migrating it (the recorder owns its
schema; a store at a schema revision this version does not read ends it, decision 0242),
connects to NATS as ``console`` (waiting for ``KAIWO_OBS`` to be declared) and,
unless ``KAIWO_CONSOLE_ANONYMOUS=loopback`` (every caller a local anonymous one), the API
server (``KAIWO_KUBECONFIG``, else its in-cluster account), which it asks only who a caller
is and what they may list (TokenReview, SubjectAccessReview). It reads every stored
observation, then serves the pages on ``KAIWO_CONSOLE_PORT`` and ``/healthz``, ``/readyz``
(NATS connected, observations read) and ``/metrics`` on ``KAIWO_HEALTH_PORT`` until SIGTERM
or SIGINT. The event store, NATS or the API server not answering at start ends the process
with status 1 and one line on stderr.
"""

from __future__ import annotations

if __name__ == "__main__":  # a service process: first of all (decision 0088)
    from kaiwo_runtime.console_rendering import leave_out_console_rendering

    leave_out_console_rendering()

import asyncio
import contextlib
import socket
import sys
from collections.abc import Awaitable, Callable
from functools import partial

import structlog
from aiohttp import web
from kaiwo_contracts.access import NODES_ACCESS, WORKLOADS_ACCESS, CacheSettings, ResourceAccess
from kaiwo_eventstore import EventStore
from kaiwo_runtime.health import HealthServer
from kaiwo_runtime.kubernetes_access import (
    LOOPBACK_ONLY,
    Access,
    AccessSettings,
    KubernetesAccess,
)
from kaiwo_runtime.startup import (
    configure_service_logging,
    connect_bus,
    open_api_server,
    run_service,
    run_until_signalled,
    utc_now,
    within,
)
from kaiwo_runtime.stored_reads import NatsObservationSource

from kaiwo_console.domain.cluster import ClusterState
from kaiwo_console.domain.history import QueueRecords
from kaiwo_console.domain.model_load import ModelLoads
from kaiwo_console.domain.nodes import NodeRecords
from kaiwo_console.event_store import open_readable_store
from kaiwo_console.feeds import HistoryFeed, observation_reader, timeline
from kaiwo_console.http_api import Console
from kaiwo_console.metrics import ConsoleMetrics
from kaiwo_console.settings import ConsoleSettings

log = structlog.get_logger("kaiwo.console")


async def serve(
    settings: ConsoleSettings,
    stop: asyncio.Event,
    *,
    access: tuple[Access, Access] | None = None,
    on_started: Callable[[str], None] | None = None,
) -> None:
    """Serve until ``stop``; ``access`` (workloads, nodes) answers who callers are (default:
    the API server); ``on_started`` is told the pages' address."""
    # The store first: a revision this version cannot read is told before any wait for NATS.
    store: EventStore = await within(
        settings.startup_timeout_seconds,
        "opening the event store failed",
        open_readable_store(settings.eventstore_url),
    )
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(store.close)
        bus = await connect_bus(
            settings=settings, service="console", within_seconds=settings.startup_timeout_seconds
        )
        stack.push_async_callback(bus.close)
        metrics = ConsoleMetrics()
        if access is None:
            access = (
                (LOOPBACK_ONLY, LOOPBACK_ONLY)
                if settings.console_anonymous == "loopback"
                else await _api_server_access(stack, settings, metrics)
            )
        state, records, loads, nodes = ClusterState(), QueueRecords(), ModelLoads(), NodeRecords()
        console = Console(
            state=state,
            records=records,
            loads=loads,
            nodes=nodes,
            workloads_access=access[0],
            nodes_access=access[1],
            metrics=metrics,
            clock=utc_now,
            timeline=partial(timeline, store),
            anonymous=settings.console_anonymous,
        )
        reader = observation_reader(
            NatsObservationSource(bus.client),
            state,
            metrics,
            on_change=console.state_changed,
            resync_seconds=settings.console_resync_seconds,
        )
        history = HistoryFeed(
            store=store,
            records=records,
            loads=loads,
            nodes=nodes,
            metrics=metrics,
            on_change=console.history_changed,
            interval=settings.console_history_seconds,
        )
        await reader.start()
        with contextlib.suppress(Exception):  # not yet migrated: the next round reads it
            await history.catch_up()

        async def nats_connected() -> bool:
            return bool(bus.client.is_connected)

        async def observations_read() -> bool:
            return reader.caught_up

        checks: dict[str, Callable[[], Awaitable[bool]]] = {
            "nats": nats_connected,
            "observations": observations_read,
        }
        runner = web.AppRunner(console.application(), access_log=None)
        await runner.setup()
        stack.push_async_callback(runner.cleanup)
        site = _site(runner, settings)
        await site.start()
        host, port = runner.addresses[0][:2]
        url = f"http://{host}:{port}/"
        health = HealthServer.of_service(settings, metrics=metrics.registry, checks=checks)
        async with health:
            log.info(
                "console started",
                pages=url,
                health=health.url,
                anonymous=settings.console_anonymous,
            )
            if on_started is not None:
                on_started(url)
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(reader.run(stop))
                tasks.create_task(history.run(stop))
        log.info("console stopped")


async def _api_server_access(
    stack: contextlib.AsyncExitStack, settings: ConsoleSettings, metrics: ConsoleMetrics
) -> tuple[Access, Access]:
    kube = await open_api_server(
        stack,
        kubeconfig=settings.kubeconfig,
        within_seconds=settings.startup_timeout_seconds,
        service="console",
    )
    cache = CacheSettings(
        allowed_seconds=settings.console_access_cache_seconds,
        denied_seconds=settings.console_access_denied_cache_seconds,
        entries=settings.console_access_cache_entries,
    )

    def reviews(resource: ResourceAccess) -> KubernetesAccess:
        return KubernetesAccess(
            kube,
            AccessSettings(
                audiences=settings.console_token_audiences,
                cache=cache,
                reviews_in_flight=settings.console_token_reviews_in_flight,
                resource=resource,
            ),
            metrics=metrics,
        )

    return reviews(WORKLOADS_ACCESS), reviews(NODES_ACCESS)


def _site(runner: web.AppRunner, settings: ConsoleSettings) -> web.BaseSite:
    if settings.console_listen_fd is not None:
        return web.SockSite(runner, socket.socket(fileno=settings.console_listen_fd))
    return web.TCPSite(runner, settings.console_host, settings.console_port)


async def main() -> int:
    settings = ConsoleSettings()
    configure_service_logging(settings)
    return await run_until_signalled("kaiwo-console", lambda stop: serve(settings, stop))


if __name__ == "__main__":
    sys.exit(run_service(main()))
