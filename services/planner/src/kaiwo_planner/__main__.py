"""``python -m kaiwo_planner``: the planner service against NATS from ``KAIWO_NATS_URL``.

Serves ``/healthz``, ``/readyz`` (NATS connected, projection restored and caught up) and
``/metrics`` on ``KAIWO_HEALTH_PORT``; stops on SIGTERM/SIGINT after writing a snapshot.
Plans only while it holds the ``planner`` lease: a second replica waits as a standby and
takes over when this one stops or dies (:mod:`kaiwo_runtime.single_active`).
Exits 1 with one line on stderr when NATS cannot be reached at start, or when another
replica took the lease over (a restart then waits as a standby).
"""

from __future__ import annotations

import asyncio
import signal
import sys

import structlog
from kaiwo_runtime.health import HealthServer
from kaiwo_runtime.kv import NatsKeyValue
from kaiwo_runtime.logging import configure_logging
from kaiwo_runtime.redaction import redact_secrets, redact_url
from kaiwo_runtime.startup import (
    LeaseLostError,
    StartupError,
    collect_young_objects_every,
    connect_bus,
    freeze_startup_objects,
    open_single_active,
    run_while_active,
    utc_now,
)

from kaiwo_planner.metrics import PlannerMetrics
from kaiwo_planner.service import PlannerService
from kaiwo_planner.settings import PlannerSettings

log = structlog.get_logger("kaiwo.planner")


async def serve(settings: PlannerSettings) -> int:
    shown_url = redact_url(settings.nats_url)
    try:
        bus = await connect_bus(
            settings=settings, service="planner", within_seconds=settings.connect_timeout_seconds
        )
    except StartupError as error:
        print(f"kaiwo-planner: cannot use NATS: {redact_secrets(str(error))}", file=sys.stderr)  # noqa: T201
        return 1
    try:
        kv = await NatsKeyValue.open(
            bus.client, settings.snapshot_bucket, replicas=settings.bus_stream_replicas
        )
        single = await open_single_active(
            bus, settings=settings, role="planner", within_seconds=settings.connect_timeout_seconds
        )
    except Exception as error:  # any failure to reach NATS at start: one clear line
        await bus.close()
        reason = (
            f"no connection within {settings.connect_timeout_seconds:g} s"
            if isinstance(error, TimeoutError)
            else " ".join(str(error).split()) or type(error).__name__
        )
        print(  # noqa: T201
            f"kaiwo-planner: cannot use NATS at {shown_url}: {redact_secrets(reason)}",
            file=sys.stderr,
        )
        return 1
    metrics = PlannerMetrics()
    service = PlannerService(bus, kv, clock=utc_now, settings=settings, metrics=metrics)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    async def nats_connected() -> bool:
        return bus.client.is_connected

    async def projection_ready() -> bool:
        # A standby is ready too: it is healthy and takes over when needed (and a rolling
        # update waits for the new pod to be ready before it stops the active one).
        return service.ready or not single.active

    health = HealthServer(
        metrics=metrics.registry,
        checks={"nats": nats_connected, "projection": projection_ready},
        host=settings.health_host,
        port=settings.health_port,
    )
    freeze_startup_objects()
    try:
        async with health:
            log.info("planner starting", nats=shown_url, health_port=health.port)
            await run_while_active(single, service.run, stop)
    except LeaseLostError as error:
        print(f"kaiwo-planner: {error}", file=sys.stderr)  # noqa: T201
        return 1
    finally:
        await bus.close()
    log.info("planner stopped")
    return 0


def main() -> int:
    settings = PlannerSettings()
    json_logs = None if settings.log_format == "auto" else settings.log_format == "json"
    configure_logging(level=settings.log_level, json=json_logs)
    collect_young_objects_every(settings.gc_young_allocations)
    if settings.bus_partitions > 1:
        print(  # noqa: T201
            "kaiwo-planner: KAIWO_BUS_PARTITIONS > 1 is not supported yet; run one replica",
            file=sys.stderr,
        )
        return 1
    return asyncio.run(serve(settings))


if __name__ == "__main__":
    sys.exit(main())
