"""How every service process starts and stops (``python -m kaiwo_<service>``).

One rule for all of them: a dependency that does not answer at start ends the process with
status 1 and one line on stderr (:class:`StartupError`); SIGTERM and SIGINT set the ``stop``
event the service runs until; logs are configured from the shared settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.metadata
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import structlog
from kaiwo_contracts.events.permissions import service_identity
from nats.aio.client import Client

from kaiwo_runtime.bus import BusError
from kaiwo_runtime.cluster_binding import (
    WATCHER_BUCKET,
    bind_bucket_to_cluster,
    recorded_cluster,
)
from kaiwo_runtime.kv import KeyValue, NatsKeyValue
from kaiwo_runtime.leases import LeaseStore, NatsLeaseStore
from kaiwo_runtime.logging import configure_logging
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.partition_leases import PartitionLeases, PartitionWork
from kaiwo_runtime.redaction import redact_secrets
from kaiwo_runtime.settings import ServiceSettings, SingleActiveSettings
from kaiwo_runtime.single_active import SingleActive, this_replica

if TYPE_CHECKING:
    from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter

EXIT_UNAVAILABLE = 1
log = structlog.get_logger("kaiwo.startup")
T = TypeVar("T")


class StartupError(RuntimeError):
    """A dependency is unreachable at start; the message is the one line to print."""


class ForeignStateError(StartupError):
    """Kept state belongs to another cluster (decision 0042): nothing is used or overwritten."""


class LeaseLostError(RuntimeError):
    """Another replica took over this one's role; the message is the one line to print."""


def utc_now() -> datetime:
    """The wall clock services hand to their cores (the cores never read a clock)."""
    return datetime.now(UTC)


async def within(seconds: float, what: str, step: Awaitable[T]) -> T:
    """``step``, or a :class:`StartupError` saying ``what`` failed (or took too long)."""
    try:
        return await asyncio.wait_for(step, seconds)
    except TimeoutError as error:
        raise StartupError(f"{what}: no answer within {seconds:g} s") from error
    except StartupError:
        raise
    except Exception as error:
        detail = " ".join(str(error).split()) or type(error).__name__
        raise StartupError(f"{what}: {detail}") from error


def collect_young_objects_every(allocations: int) -> None:
    """Run the garbage collector's youngest generation after ``allocations`` net container
    allocations instead of CPython's 700 (the older generations keep their ratios).

    A service that keeps a large, long-lived state (the planner's projection) allocates
    thousands of short-lived containers per message; at 700 the collector runs every few
    messages and promotes enough survivors to sweep the whole heap again and again, a tenth
    of the planner's CPU at a few thousand workloads. Cyclic garbage lives a little longer.
    """
    if allocations < 1:
        raise ValueError("allocations must be >= 1")
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(allocations, middle, oldest)


def freeze_startup_objects() -> None:
    """Keep what start-up allocated (modules, pydantic schemas, SQLAlchemy's caches) out of
    the garbage collector's full passes.

    A service allocates a few dozen short-lived objects per message, so the collector runs
    often; each full pass used to walk the ~140,000 objects that live as long as the
    process. Freezing them took about a sixth off the recorder's CPU per message.
    """
    gc.collect()
    gc.freeze()


def run_service(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on uvloop's event loop (libuv), where uvloop is installed (every
    platform but Windows): it does the loop's socket writes, polling and callbacks in C, on
    every message and API call of a workload's path (decision 0083)."""
    try:
        import uvloop
    except ImportError:  # Windows: the standard loop
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


def configure_service_logging(settings: ServiceSettings) -> None:
    json_logs = {"auto": None, "json": True, "console": False}[settings.log_format]
    configure_logging(level=settings.log_level, json=json_logs)


def stop_on_signals() -> asyncio.Event:
    """An event SIGTERM or SIGINT sets (call it in the running loop): how a service is told
    to stop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return stop


async def until_signalled(serve: Callable[[asyncio.Event], Awaitable[T]]) -> T:
    """``serve(stop)``, with ``stop`` set by SIGTERM or SIGINT."""
    return await serve(stop_on_signals())


async def start_when_the_bus_answers(
    start: Callable[[], Awaitable[None]],
    stop: asyncio.Event,
    *,
    what: str,
    pause_seconds: float = 1.0,
) -> bool:
    """``start()``, begun again after ``pause_seconds`` each time the bus or a bucket is out
    of reach (:class:`BusError`: NATS restarting, a request unanswered), as a restart of the
    process would, but without the crash. True once it completes; False when ``stop`` came
    first."""
    while not stop.is_set():
        try:
            await start()
            return True
        except BusError as error:
            log.warning(
                "bus unavailable while starting; starting again", what=what, error=str(error)
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), pause_seconds)
    return False


async def run_until_signalled(name: str, serve: Callable[[asyncio.Event], Awaitable[None]]) -> int:
    """Run ``serve(stop)`` until SIGTERM/SIGINT; the process exit status."""
    try:
        await until_signalled(serve)
    except (StartupError, LeaseLostError) as error:
        sys.stderr.write(f"{name}: {redact_secrets(str(error))}\n")
        return EXIT_UNAVAILABLE
    return 0


async def connect_bus(*, settings: ServiceSettings, service: str, within_seconds: float) -> NatsBus:
    """Connect to NATS as ``service`` and make sure the streams and consumers it uses exist:
    declared by itself when it may (see ``KAIWO_NATS_DECLARE_STREAMS``), else waited for,
    up to ``within_seconds``, as the administrator declares them. The caller closes the bus."""
    connection = settings.nats_connection(service)
    where = f"NATS at {connection.redacted_url}"
    bus = await within(
        within_seconds,
        f"{where} is unreachable",
        NatsBus.connect(
            connection,
            topology=settings.bus_topology(),
            name=connection.name,
        ),
    )
    try:
        if settings.declares_streams(connection):
            await within(
                within_seconds, "declaring the JetStream streams failed", bus.ensure_streams()
            )
        else:
            await _declared(bus, service, within_seconds=within_seconds)
    except BaseException:
        await bus.close()
        raise
    return bus


async def _declared(
    bus: NatsBus, service: str, *, within_seconds: float, poll_seconds: float = 0.5
) -> None:
    """Wait until every stream and consumer ``service`` uses exists (the administrator
    declares them; in a cluster the provisioning Job may still be running)."""
    identity = service_identity(service, bus.topology)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_seconds
    logged = False
    while True:
        missing = await within(
            max(deadline - loop.time(), 0.1),
            "reading the JetStream streams and consumers",
            bus.missing(streams=identity.streams, consumers=identity.consumers),
        )
        if not missing:
            return
        if loop.time() >= deadline:
            raise StartupError(
                f"missing {', '.join(missing)}: the administrator declares them "
                "(kaiwo up does; else kaiwo nats provision with the admin credentials)"
            )
        if not logged:
            log.info("waiting for the streams and consumers to be declared", missing=missing)
            logged = True
        await asyncio.sleep(poll_seconds)


async def open_bus_and_bucket(
    stack: AsyncExitStack,
    *,
    settings: ServiceSettings,
    service: str,
    bucket: str,
    within_seconds: float,
) -> tuple[NatsBus, NatsKeyValue]:
    """Connect to NATS, see to the streams and open the service's key-value bucket."""
    bus = await connect_bus(settings=settings, service=service, within_seconds=within_seconds)
    stack.push_async_callback(bus.close)
    kv = await within(
        within_seconds,
        f"opening the key-value bucket {bucket} failed",
        NatsKeyValue.open(bus.client, bucket, replicas=settings.bus_stream_replicas),
    )
    return bus, kv


async def open_lease_store(
    bus: NatsBus, *, settings: SingleActiveSettings, within_seconds: float
) -> NatsLeaseStore:
    """The lease bucket (created with the configured duration when missing)."""
    return await within(
        within_seconds,
        f"opening the lease bucket {settings.lease_bucket} failed",
        NatsLeaseStore.open(
            bus.client,
            settings.lease_bucket,
            duration_seconds=settings.lease_seconds,
            replicas=settings.bus_stream_replicas,
        ),
    )


async def open_single_active(
    bus: NatsBus, *, settings: SingleActiveSettings, role: str, within_seconds: float
) -> SingleActive:
    """The lease that keeps this replica the only active one of ``role``, or a standby."""
    leases = await open_lease_store(bus, settings=settings, within_seconds=within_seconds)
    return SingleActive(leases, name=role, holder=this_replica())


def open_partition_leases(
    leases: LeaseStore,
    *,
    role: str,
    partitions: int,
    work: PartitionWork,
    on_change: Callable[[frozenset[int]], None] | None = None,
) -> PartitionLeases:
    """This replica's share of ``role``'s partitions (active-active replicas)."""
    return PartitionLeases(
        leases,
        role=role,
        member=this_replica(),
        partitions=partitions,
        work=work,
        on_change=on_change,
    )


def user_agent(service: str) -> str:
    """``kaiwo-<service>/<version of the operator>``."""
    try:
        version = importlib.metadata.version("kaiwo-runtime")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return f"kaiwo-{service}/{version}"


async def run_while_active(
    single: SingleActive, work: Callable[[asyncio.Event], Awaitable[None]], stop: asyncio.Event
) -> None:
    """``work`` while this replica holds its lease; :class:`LeaseLostError` if it lost it."""
    if await single.run(work, stop):
        raise LeaseLostError(
            f"another replica took over the lease {single.name!r}; exiting so that a "
            "restart waits as a standby"
        )


async def open_api_server(
    stack: AsyncExitStack,
    *,
    kubeconfig: Path | None,
    within_seconds: float,
    service: str,
) -> KubernetesAsyncioAdapter:
    """A client of the API server named by ``kubeconfig`` (or the defaults), known to answer.

    Its requests carry the user agent ``kaiwo-<service>/<version>``, which the API server's
    audit log shows for each write."""
    # Imported here: the planner and the recorder, which share this module, never talk to
    # the API server.
    from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
    from kaiwo_kube.reachability import api_server_reachable

    where = str(kubeconfig or "the default kubeconfig or in-cluster account")
    kube = await within(
        within_seconds,
        f"no Kubernetes API server ({where})",
        KubernetesAsyncioAdapter.from_environment(kubeconfig, user_agent=user_agent(service)),
    )
    stack.push_async_callback(kube.close)
    if not await within(within_seconds, f"the API server ({where})", api_server_reachable(kube)):
        raise StartupError(f"the API server ({where}) is unreachable")
    return kube


async def bind_state_to_cluster(
    kv: KeyValue,
    kube: KubernetesAsyncioAdapter,
    *,
    bucket: str,
    within_seconds: float,
) -> str:
    """The cluster's identity, recorded in ``bucket`` when it has none; a
    :class:`StartupError` (one line) when the bucket belongs to another cluster."""
    from kaiwo_kube.cluster_identity import cluster_identity

    identity = await within(
        within_seconds,
        "reading the cluster's identity (namespace kube-system)",
        cluster_identity(kube),
    )
    problem = await within(
        within_seconds,
        f"reading the key-value bucket {bucket}",
        bind_bucket_to_cluster(kv, identity, bucket=bucket),
    )
    if problem is not None:
        raise ForeignStateError(problem)
    log.info("state bound to the cluster", bucket=bucket, cluster=identity)
    return identity


async def watchers_cluster(
    client: Client, *, within_seconds: float, watcher_bucket: str = WATCHER_BUCKET
) -> str | None:
    """The cluster the watcher records in its bucket (the uid of kube-system, read from the
    API server and checked at its every start), or None while it has recorded none: what
    the planner and the recorder, which never talk to the API server, bind their state to.
    They keep what the watcher sends them, so the watcher's cluster is theirs."""
    bucket = await within(
        within_seconds,
        f"opening the key-value bucket {watcher_bucket}",
        NatsKeyValue.open_existing(client, watcher_bucket),
    )
    if bucket is None:
        return None
    return await within(
        within_seconds, f"reading the key-value bucket {watcher_bucket}", recorded_cluster(bucket)
    )


async def bind_bucket_to_watchers_cluster(
    client: Client, kv: KeyValue, *, bucket: str, within_seconds: float
) -> str | None:
    """The watcher's cluster (:func:`watchers_cluster`), recorded in ``bucket`` when it has
    none; a :class:`StartupError` (one line) when ``bucket`` belongs to another cluster. None
    (nothing checked, nothing recorded, said in the log) while the watcher recorded none."""
    identity = await watchers_cluster(client, within_seconds=within_seconds)
    if identity is None:
        log.info("the watcher has recorded no cluster yet; state not bound", bucket=bucket)
        return None
    problem = await within(
        within_seconds,
        f"reading the key-value bucket {bucket}",
        bind_bucket_to_cluster(kv, identity, bucket=bucket),
    )
    if problem is not None:
        raise ForeignStateError(problem)
    log.info("state bound to the cluster", bucket=bucket, cluster=identity)
    return identity
