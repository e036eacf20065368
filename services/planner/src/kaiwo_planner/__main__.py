"""``python -m kaiwo_planner``: the planner service against NATS from ``KAIWO_NATS_URL``.

Serves ``/healthz``, ``/readyz`` (NATS connected, projection restored and caught up) and
``/metrics`` on ``KAIWO_HEALTH_PORT``; stops on SIGTERM/SIGINT after writing a snapshot.
Without partitions it plans only while it holds the ``planner`` lease: a second replica
waits as a standby and takes over when this one stops or dies
(:mod:`kaiwo_runtime.single_active`). With ``KAIWO_BUS_PARTITIONS`` > 1 every replica is
active: each reads every observation and plans the owners of the partitions whose leases
``planner.p<k>`` it holds, and the shares rebalance as replicas come and go
(:mod:`kaiwo_runtime.partition_leases`, decision 0030).
Exits 1 with one line on stderr when NATS cannot be reached at start, when another
replica took the single lease over (a restart then waits as a standby), or when its bucket
or snapshot holds the state of another cluster than the one the watcher records (the uid of
kube-system, decision 0042).
"""

from __future__ import annotations

if __name__ == "__main__":  # a service process: first of all (decision 0088)
    from kaiwo_runtime.console_rendering import leave_out_console_rendering

    leave_out_console_rendering()

import asyncio
import sys

import structlog
from kaiwo_runtime.health import HealthServer
from kaiwo_runtime.kv import NatsKeyValue
from kaiwo_runtime.leases import LeaseStore
from kaiwo_runtime.logging import configure_logging
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.redaction import redact_secrets, redact_url
from kaiwo_runtime.single_active import SingleActive, this_replica
from kaiwo_runtime.startup import (
    ForeignStateError,
    LeaseLostError,
    StartupError,
    bind_bucket_to_watchers_cluster,
    collect_young_objects_every,
    connect_bus,
    freeze_startup_objects,
    open_lease_store,
    open_partition_leases,
    run_service,
    run_while_active,
    until_signalled,
    utc_now,
)

from kaiwo_planner.feeds import DurableFeed
from kaiwo_planner.metrics import PlannerMetrics
from kaiwo_planner.partitioned_feed import PartitionedFeed
from kaiwo_planner.service import ForeignSnapshotError, PlannerService
from kaiwo_planner.settings import PlannerSettings

log = structlog.get_logger("kaiwo.planner")


async def open_state(
    bus: NatsBus, settings: PlannerSettings
) -> tuple[NatsKeyValue, LeaseStore, str | None]:
    """The planner's bucket, bound to the watcher's cluster (None: not recorded yet), and
    the lease store."""
    kv = await NatsKeyValue.open(
        bus.client, settings.snapshot_bucket, replicas=settings.bus_stream_replicas
    )
    leases = await open_lease_store(
        bus, settings=settings, within_seconds=settings.connect_timeout_seconds
    )
    cluster = await bind_bucket_to_watchers_cluster(
        bus.client,
        kv,
        bucket=settings.snapshot_bucket,
        within_seconds=settings.connect_timeout_seconds,
    )
    return kv, leases, cluster


def _start_failure(error: Exception, settings: PlannerSettings) -> str:
    """The one line saying why the planner could not start on its state."""
    if isinstance(error, ForeignStateError):
        return str(error)
    reason = (
        f"no connection within {settings.connect_timeout_seconds:g} s"
        if isinstance(error, TimeoutError)
        else " ".join(str(error).split()) or type(error).__name__
    )
    return f"cannot use NATS at {redact_url(settings.nats_url)}: {redact_secrets(reason)}"


async def serve(settings: PlannerSettings, stop: asyncio.Event) -> int:
    """Plan until ``stop`` is set; the exit status (1: could not start, or lost its lease)."""
    shown_url = redact_url(settings.nats_url)
    try:
        bus = await connect_bus(
            settings=settings, service="planner", within_seconds=settings.connect_timeout_seconds
        )
    except StartupError as error:
        print(f"kaiwo-planner: cannot use NATS: {redact_secrets(str(error))}", file=sys.stderr)  # noqa: T201
        return 1
    try:
        kv, leases, cluster = await open_state(bus, settings)
    except Exception as error:  # another cluster's bucket, or NATS unreachable: one line
        await bus.close()
        print(f"kaiwo-planner: {_start_failure(error, settings)}", file=sys.stderr)  # noqa: T201
        return 1
    metrics = PlannerMetrics()
    # More than one partition: every replica reads every stream by sequence and plans the
    # owners of the partitions whose leases it holds (decision 0030); else the durable
    # consumers, for the one active replica.
    partitioned = bus.topology.partitions > 1
    feed = PartitionedFeed(bus, metrics=metrics) if partitioned else DurableFeed(bus)
    service = PlannerService(
        bus, kv, clock=utc_now, settings=settings, metrics=metrics, cluster=cluster, feed=feed
    )

    async def nats_connected() -> bool:
        return bus.client.is_connected

    single = SingleActive(leases, name="planner", holder=this_replica())

    async def projection_ready() -> bool:
        # A standby is ready too: it is healthy and takes over when needed (and a rolling
        # update waits for the new pod to be ready before it stops the active one).
        if partitioned:
            return service.ready
        return service.ready or not single.active

    async def share_once_started() -> None:
        # Claim partitions only with a caught-up projection: a partition taken on is planned
        # at once, and its owners' plans must not come from an older state.
        started = asyncio.create_task(service.started())
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait((started, stopped), return_when=asyncio.FIRST_COMPLETED)
        started.cancel()
        stopped.cancel()
        if stop.is_set():
            return
        share = open_partition_leases(
            leases,
            role="planner",
            partitions=settings.bus_partitions,
            work=service,
        )
        await share.run(stop)

    async def active_active() -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(service.run(stop))
            group.create_task(share_once_started())

    health = HealthServer.of_service(
        settings,
        metrics=metrics.registry,
        checks={"nats": nats_connected, "projection": projection_ready},
    )
    freeze_startup_objects()
    try:
        async with health:
            log.info("planner starting", nats=shown_url, health_port=health.port)
            if partitioned:
                await active_active()
            else:
                await run_while_active(single, service.run, stop)
    except (LeaseLostError, ForeignSnapshotError) as error:
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
    return run_service(until_signalled(lambda stop: serve(settings, stop)))


if __name__ == "__main__":
    sys.exit(main())
