"""``python -m kaiwo_gateway``: the gateway process.

Connects to NATS as ``gateway`` (waiting for ``KAIWO_OBS`` and ``KAIWO_GATEWAY`` to be
declared) and to the API server (``KAIWO_KUBECONFIG``, else its in-cluster account), which it
asks only who a caller is and what they may use (TokenReview, SubjectAccessReview; not with
``KAIWO_GATEWAY_ANONYMOUS=loopback``, where every caller is a local anonymous one), reads
the stored observations of Models and their Pods, then serves the OpenAI API
on ``KAIWO_GATEWAY_PORT`` and ``/healthz``, ``/readyz`` (NATS connected, observations read)
and ``/metrics`` on ``KAIWO_HEALTH_PORT`` until SIGTERM or SIGINT. Meanwhile it reports its
load every ``KAIWO_AUTOSCALER_INTERVAL_SECONDS`` and, unless ``KAIWO_AUTOSCALER_ENABLED`` is
false, waits for the ``autoscaler`` lease and runs the autoscaler while it holds it (a lost
lease makes it a standby again; it keeps serving). With ``KAIWO_MESSENGER_ENABLED`` it also
answers the requests of the messenger's consumer (:mod:`kaiwo_gateway.messenger`, decision
0049; ``/readyz`` checks it is reading). NATS or the API server not answering at
start ends the process with status 1 and one line on stderr.
"""

from __future__ import annotations

if __name__ == "__main__":  # a service process: first of all (decision 0088)
    from kaiwo_runtime.console_rendering import leave_out_console_rendering

    leave_out_console_rendering()

import asyncio
import contextlib
import sys
import uuid
from collections.abc import Awaitable, Callable

import structlog
from aiohttp import web
from kaiwo_contracts.events.permissions import AUTOSCALER_LEASE
from kaiwo_runtime.health import HealthServer
from kaiwo_runtime.kv import NatsKeyValue
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.single_active import this_replica
from kaiwo_runtime.startup import (
    configure_service_logging,
    connect_bus,
    open_api_server,
    open_single_active,
    run_service,
    run_until_signalled,
    utc_now,
    within,
)
from kaiwo_runtime.subscriptions import NatsSubscriber
from kaiwo_runtime.work_queue import NatsWorkQueue

from kaiwo_gateway.access import LOOPBACK_ONLY, Access
from kaiwo_gateway.autoscaler_leader import Autoscaler, AutoscalerSettings
from kaiwo_gateway.backlog import StreamBacklog
from kaiwo_gateway.domain.access import CacheSettings, Limits
from kaiwo_gateway.domain.balancing import Balancer
from kaiwo_gateway.domain.bodies import BodyLimits
from kaiwo_gateway.domain.catalog import Catalog
from kaiwo_gateway.domain.load import RequestCounts
from kaiwo_gateway.endpoint_wait import LoadTracking
from kaiwo_gateway.http_api import CallerPolicy, Gateway, ProxySettings
from kaiwo_gateway.kubernetes_access import AccessSettings, KubernetesAccess
from kaiwo_gateway.load_reports import LoadReporter
from kaiwo_gateway.messenger import Messenger
from kaiwo_gateway.messenger_settings import MessengerSettings
from kaiwo_gateway.metrics import GatewayMetrics
from kaiwo_gateway.nats_source import NatsObservationSource, subscribe_load_reports
from kaiwo_gateway.observations import ObservationFeed
from kaiwo_gateway.settings import GatewaySettings

log = structlog.get_logger("kaiwo.gateway")


async def serve(
    settings: GatewaySettings, stop: asyncio.Event, *, access: Access | None = None
) -> None:
    """Serve until ``stop``; ``access`` answers who callers are (default: the API server)."""
    bus = await connect_bus(
        settings=settings, service="gateway", within_seconds=settings.startup_timeout_seconds
    )
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(bus.close)
        metrics = GatewayMetrics()
        if access is None:
            access = (
                LOOPBACK_ONLY
                if settings.gateway_anonymous == "loopback"
                else await _api_server_access(stack, settings, metrics)
            )
        catalog = Catalog(namespaces=settings.gateway_namespaces)
        reporter = LoadReporter(
            counts=RequestCounts(),
            publisher=bus,
            # Unique per start: a restarted replica's last report must not add to its new ones.
            replica=f"{this_replica()}/{uuid.uuid4().hex[:8]}",
            interval_seconds=settings.autoscaler_interval_seconds,
            clock=utc_now,
            metrics=metrics,
        )
        gateway = Gateway(
            catalog=catalog,
            balancer=Balancer(),
            metrics=metrics,
            settings=ProxySettings(
                endpoint_wait_seconds=settings.gateway_endpoint_wait_seconds,
                connect_timeout_seconds=settings.gateway_connect_timeout_seconds,
                attempts=settings.gateway_attempts,
            ),
            access=access,
            policy=caller_policy(settings),
            load=LoadTracking(counts=reporter.counts, on_first_wait=reporter.report_now),
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
        messenger = _messenger(settings, bus, gateway, metrics)
        if messenger is not None:
            await within(
                settings.startup_timeout_seconds,
                "opening the messenger's consumer failed",
                messenger.open(),
            )
            stack.push_async_callback(messenger.close)

            async def messenger_reading() -> bool:
                return messenger.reading

            checks["messenger"] = messenger_reading
        runner = web.AppRunner(gateway.application(), access_log=None)
        await runner.setup()
        stack.push_async_callback(runner.cleanup)
        site = web.TCPSite(runner, settings.gateway_host, settings.gateway_port)
        await site.start()
        port = runner.addresses[0][1]
        health = HealthServer.of_service(settings, metrics=metrics.registry, checks=checks)
        async with health:
            log.info(
                "gateway started",
                openai=f"http://{settings.gateway_host}:{port}/openai/v1",
                health=health.url,
                models=len(catalog.models()),
                anonymous=settings.gateway_anonymous,
            )
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(feed.run(stop))
                tasks.create_task(reporter.run(stop))
                if messenger is not None:
                    tasks.create_task(messenger.run(stop))
                if settings.autoscaler_enabled:
                    tasks.create_task(_lead_autoscaler(bus, catalog, metrics, settings, stop))
        log.info("gateway stopped")


def _messenger(
    settings: GatewaySettings, bus: NatsBus, gateway: Gateway, metrics: GatewayMetrics
) -> Messenger | None:
    if not settings.messenger_enabled:
        return None
    policy = caller_policy(settings)
    return Messenger(
        queue=NatsWorkQueue(bus),
        gateway=gateway,
        metrics=metrics,
        settings=MessengerSettings(
            handlers=settings.messenger_handlers,
            endpoint_wait_seconds=settings.messenger_endpoint_wait_seconds,
            request_timeout_seconds=settings.messenger_request_timeout_seconds,
            connect_timeout_seconds=settings.gateway_connect_timeout_seconds,
            attempts=settings.gateway_attempts,
            bodies=policy.bodies,
        ),
    )


def caller_policy(settings: GatewaySettings) -> CallerPolicy:
    return CallerPolicy(
        anonymous=settings.gateway_anonymous,
        limits=Limits(
            requests=settings.gateway_caller_max_requests,
            body_bytes=settings.gateway_caller_max_body_bytes,
        ),
        bodies=BodyLimits(
            json_bytes=settings.gateway_max_body_bytes,
            audio_bytes=settings.gateway_max_audio_body_bytes,
            json_depth=settings.gateway_max_json_depth,
        ),
    )


async def _api_server_access(
    stack: contextlib.AsyncExitStack, settings: GatewaySettings, metrics: GatewayMetrics
) -> KubernetesAccess:
    kube = await open_api_server(
        stack,
        kubeconfig=settings.kubeconfig,
        within_seconds=settings.startup_timeout_seconds,
        service="gateway",
    )
    return KubernetesAccess(
        kube,
        AccessSettings(
            audiences=settings.gateway_token_audiences,
            cache=CacheSettings(
                allowed_seconds=settings.gateway_access_cache_seconds,
                denied_seconds=settings.gateway_access_denied_cache_seconds,
                entries=settings.gateway_access_cache_entries,
            ),
            reviews_in_flight=settings.gateway_token_reviews_in_flight,
        ),
        metrics=metrics,
    )


async def _lead_autoscaler(
    bus: NatsBus,
    catalog: Catalog,
    metrics: GatewayMetrics,
    settings: GatewaySettings,
    stop: asyncio.Event,
) -> None:
    """Take in every load report; run the autoscaler while holding its lease, and wait for
    the lease again after losing it (the replica keeps serving requests meanwhile)."""
    timeout = settings.startup_timeout_seconds
    state = await within(
        timeout,
        f"opening the key-value bucket {settings.autoscaler_bucket} failed",
        NatsKeyValue.open(
            bus.client, settings.autoscaler_bucket, replicas=settings.bus_stream_replicas
        ),
    )
    autoscaler = Autoscaler(
        catalog=catalog,
        publisher=bus,
        state=state,
        clock=utc_now,
        settings=AutoscalerSettings(
            interval_seconds=settings.autoscaler_interval_seconds,
            window_seconds=settings.autoscaler_window_seconds,
        ),
        metrics=metrics,
        # The stream's backlog counts when this replica runs the messenger (decision 0057).
        backlog=StreamBacklog(NatsWorkQueue(bus)) if settings.messenger_enabled else None,
    )
    await subscribe_load_reports(NatsSubscriber(bus.client), autoscaler.receive, metrics=metrics)
    single = await open_single_active(
        bus, settings=settings, role=AUTOSCALER_LEASE, within_seconds=timeout
    )
    while not stop.is_set():
        if await single.run(autoscaler.lead, stop):
            log.warning("autoscaler lease lost; waiting to lead again")


async def main() -> int:
    settings = GatewaySettings()
    configure_service_logging(settings)
    return await run_until_signalled("kaiwo-gateway", lambda stop: serve(settings, stop))


if __name__ == "__main__":
    sys.exit(run_service(main()))
