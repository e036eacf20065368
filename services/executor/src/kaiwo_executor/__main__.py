"""``python -m kaiwo_executor``: the executor process.

Connects to NATS (declaring the streams), opens the ``kaiwo-executor`` bucket, connects to the
API server (``KAIWO_KUBECONFIG``, the usual kubeconfig, or in-cluster), serves ``/healthz``,
``/readyz`` (NATS connected, API server reachable) and ``/metrics``, and carries out plans
until SIGTERM or SIGINT (the plan in hand is finished or, if cancelled, redelivered).
Without partitions it works while it holds the lease ``executor``: another replica waits as
a standby (:mod:`kaiwo_runtime.single_active`). With ``KAIWO_BUS_PARTITIONS`` > 1 every
replica works, on the partitions whose leases ``executor.p<k>`` it holds, and the shares
rebalance as replicas come and go (:mod:`kaiwo_runtime.partition_leases`).
Its bucket is bound to the cluster it was filled from (the uid of kube-system, decision
0042): started against another cluster, it refuses the bucket. A bucket that does not say
when it began to record owners (new, or deleted to start it afresh) is told it now
(``memo-since``): the owners created since need no list calls to prune (decision 0215).
A dependency that does not answer at start, or the single lease lost to another replica,
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

import structlog
from kaiwo_kube.reachability import api_server_reachable
from kaiwo_runtime.health import HealthServer
from kaiwo_runtime.single_active import SingleActive, this_replica
from kaiwo_runtime.startup import (
    bind_state_to_cluster,
    collect_young_objects_every,
    configure_service_logging,
    freeze_startup_objects,
    open_api_server,
    open_bus_and_bucket,
    open_lease_store,
    open_partition_leases,
    run_service,
    run_until_signalled,
    run_while_active,
    utc_now,
    within,
)

from kaiwo_executor.metrics import ExecutorMetrics
from kaiwo_executor.service import ExecutorService, executor_consumers
from kaiwo_executor.settings import ExecutorSettings

log = structlog.get_logger("kaiwo.executor")


async def serve(settings: ExecutorSettings, stop: asyncio.Event) -> None:
    timeout = settings.startup_timeout_seconds
    async with contextlib.AsyncExitStack() as stack:
        bus, kv = await open_bus_and_bucket(
            stack,
            settings=settings,
            service="executor",
            bucket=settings.executor_bucket,
            within_seconds=timeout,
        )
        leases = await open_lease_store(bus, settings=settings, within_seconds=timeout)
        kube = await open_api_server(
            stack, kubeconfig=settings.kubeconfig, within_seconds=timeout, service="executor"
        )
        await bind_state_to_cluster(
            kv, kube, bucket=settings.executor_bucket, within_seconds=timeout
        )
        metrics = ExecutorMetrics()
        service = ExecutorService(
            bus,
            kube,
            kv,
            utc_now,
            metrics=metrics,
            retry=settings.retry_policy(),
            consumers=executor_consumers(bus.topology),
        )
        await within(
            timeout,
            f"recording when {settings.executor_bucket} began to record owners",
            service.executor.start(),
        )

        async def nats_connected() -> bool:
            return bool(bus.client.is_connected)

        async def kubernetes_reachable() -> bool:
            return await api_server_reachable(kube)

        checks: dict[str, Callable[[], Awaitable[bool]]] = {
            "nats": nats_connected,
            "kubernetes": kubernetes_reachable,
        }
        health = HealthServer.of_service(settings, metrics=metrics.registry, checks=checks)
        freeze_startup_objects()
        async with health:
            log.info(
                "executor started",
                consumers=[spec.durable_name for spec in service.consumers],
                health=health.url,
            )
            if settings.active_active:
                share = open_partition_leases(
                    leases,
                    role="executor",
                    partitions=settings.bus_partitions,
                    work=service.partition_work(),
                    on_change=lambda held: metrics.partitions_held.set(len(held)),
                )
                await share.run(stop)
            else:
                single = SingleActive(leases, name="executor", holder=this_replica())
                await run_while_active(single, service.run, stop)
        log.info("executor stopped")


async def main() -> int:
    settings = ExecutorSettings()
    configure_service_logging(settings)
    collect_young_objects_every(settings.gc_young_allocations)
    return await run_until_signalled("kaiwo-executor", lambda stop: serve(settings, stop))


if __name__ == "__main__":
    sys.exit(run_service(main()))
