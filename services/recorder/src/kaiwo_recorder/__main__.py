"""``python -m kaiwo_recorder``: record every stream into the event store until SIGTERM/SIGINT.

Start-up: open the event store (migrating it to the latest schema), connect to NATS and make
sure the streams and the recorder's consumers exist, then serve ``/healthz``, ``/readyz``
(NATS connected and the store answering) and ``/metrics``. A dependency that cannot be reached
at start ends the process with exit code 2 and one line saying which; so does a store that
holds the events of another cluster than the one the watcher records (the uid of
kube-system, decision 0042), which is recorded in a store that records none.
"""

from __future__ import annotations

if __name__ == "__main__":  # a service process: first of all (decision 0088)
    from kaiwo_runtime.console_rendering import leave_out_console_rendering

    leave_out_console_rendering()

import asyncio
import os
import sys
from pathlib import Path

import structlog
from kaiwo_eventstore import EventStore, open_event_store, sqlite_file
from kaiwo_runtime.cluster_binding import foreign_state_problem
from kaiwo_runtime.health import HealthServer
from kaiwo_runtime.logging import configure_logging
from kaiwo_runtime.redaction import redact_secrets, redact_url
from kaiwo_runtime.startup import (
    ForeignStateError,
    StartupError,
    collect_young_objects_every,
    connect_bus,
    freeze_startup_objects,
    run_service,
    until_signalled,
    utc_now,
    watchers_cluster,
)

from kaiwo_recorder.metrics import RecorderMetrics
from kaiwo_recorder.service import RecorderService
from kaiwo_recorder.settings import RecorderSettings

log = structlog.get_logger("kaiwo.recorder")

EXIT_UNREACHABLE = 2
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def private_sqlite_file(database: Path) -> None:
    """Create the SQLite file readable by its owner only (0600), in a directory of its own
    (0700) when we create that too: the store keeps whole objects, literal env values
    included. SQLite gives its journal files the database file's mode."""
    if not database.parent.exists():
        database.parent.mkdir(parents=True, mode=0o700)
    descriptor = os.open(database, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(descriptor)
    # A store written before (0644 then) is made private too, its journal files with it.
    for path in (database, *(Path(f"{database}{suffix}") for suffix in SQLITE_COMPANIONS)):
        if path.exists():
            path.chmod(0o600)


async def open_store(url: str) -> EventStore:
    database = sqlite_file(url)
    if database is not None:
        private_sqlite_file(database)
    try:
        return await asyncio.wait_for(open_event_store(url, migrate_apart=True), timeout=30)
    except Exception as error:  # any driver error: the operator needs the one line below
        reason = redact_secrets(" ".join(str(error).split()) or type(error).__name__)
        raise StartupError(f"event store {redact_url(url)} is unreachable: {reason}") from error


async def bind_store_to_cluster(store: EventStore, identity: str | None, *, url: str) -> str | None:
    """Record the watcher's cluster ``identity`` in a store that records none; a
    :class:`ForeignStateError` (one line) when the store holds another cluster's events.
    None (nothing checked) while the watcher has recorded no cluster."""
    if identity is None:
        log.info("the watcher has recorded no cluster yet; the event store is not bound")
        return None
    recorded = await store.bind_cluster(identity)
    problem = foreign_state_problem(recorded, identity, state=f"the event store {redact_url(url)}")
    if problem is not None:
        raise ForeignStateError(
            f"{problem}; point KAIWO_EVENTSTORE_URL at this cluster's own store"
        )
    log.info("event store bound to the cluster", cluster=identity)
    return identity


async def serve(settings: RecorderSettings, stop: asyncio.Event) -> None:
    store = await open_store(settings.eventstore_url)
    try:
        bus = await connect_bus(
            settings=settings, service="recorder", within_seconds=settings.startup_timeout_seconds
        )
    except BaseException:
        await store.close()
        raise
    try:
        identity = await watchers_cluster(
            bus.client, within_seconds=settings.startup_timeout_seconds
        )
        await bind_store_to_cluster(store, identity, url=settings.eventstore_url)
    except BaseException:
        await bus.close()
        await store.close()
        raise
    metrics = RecorderMetrics()
    service = RecorderService(
        bus=bus,
        store=store,
        clock=utc_now,
        metrics=metrics,
        batch_size=settings.recorder_batch_size,
        fetch_wait_seconds=settings.recorder_fetch_wait_seconds,
        linger_seconds=settings.recorder_linger_seconds,
    )

    async def nats_connected() -> bool:
        return bool(bus.client.is_connected)

    freeze_startup_objects()
    health = HealthServer.of_service(
        settings,
        metrics=metrics.registry,
        checks={"nats": nats_connected, "eventstore": service.store_ready},
    )
    try:
        async with health:
            log.info(
                "recorder started",
                consumers=[c.durable_name for c in service.consumers],
                health_port=health.port,
            )
            await service.run(stop)
    finally:
        await bus.close()
        await store.close()
        log.info("recorder stopped")


def main() -> int:
    settings = RecorderSettings()
    json_logs = {"json": True, "console": False}.get(settings.log_format)
    configure_logging(level=settings.log_level, json=json_logs)
    collect_young_objects_every(settings.gc_young_allocations)
    try:
        run_service(until_signalled(lambda stop: serve(settings, stop)))
    except StartupError as error:
        print(f"kaiwo-recorder: {redact_secrets(str(error))}", file=sys.stderr)  # noqa: T201 - the one line asked for
        return EXIT_UNREACHABLE
    return 0


if __name__ == "__main__":
    sys.exit(main())
