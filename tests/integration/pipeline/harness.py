"""The operator started as ``kaiwo up --fake`` starts it, and what the tests do with it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from kaiwo_cli.stack.local import LocalStack, StackOptions
from kaiwo_contracts.events.permissions import ADMIN
from kaiwo_contracts.events.streams import BusTopology, bus_topology
from kaiwo_eventstore import EventStore, open_event_store
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_runtime.nats_connection import connect_client
from nats.aio.client import Client
from nats.js import JetStreamContext

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.ledger import (
    StreamLedger,
    dead_letters,
    ledgers,
    unsettled_consumers,
)

T = TypeVar("T")

SERVICE_ENV: Final[Mapping[str, str]] = {
    # Short pulls: a stopping recorder answers SIGTERM quickly.
    "KAIWO_RECORDER_FETCH_WAIT_SECONDS": "0.5",
    # Snapshots often, so a killed planner restarts from a recent one and catches up.
    "KAIWO_SNAPSHOT_EVERY_SECONDS": "2",
    # A killed planner or executor holds its lease until it runs out; its restart waits.
    "KAIWO_LEASE_SECONDS": "2",
    "KAIWO_LOG_LEVEL": "INFO",
}
STEP_SECONDS: Final = 30.0
"""Longest wait for one step of a workload (a fault may cost a redelivery: 5 s ack wait)."""


class NotConvergedError(AssertionError):
    """A condition did not hold in time; the message says what and where things stood."""


@dataclass(frozen=True, slots=True)
class Pending:
    """A check's answer while the condition does not hold yet, with where things stand."""

    reason: str


async def eventually(
    check: Callable[[], Awaitable[T | Pending]],
    *,
    what: str,
    within: float = STEP_SECONDS,
    interval: float = 0.1,
) -> T:
    """Poll ``check`` until it answers something other than :class:`Pending`; return that."""
    deadline = time.monotonic() + within
    while True:
        value = await check()
        if not isinstance(value, Pending):
            return value
        if time.monotonic() > deadline:
            raise NotConvergedError(f"{what}: not within {within:g} s ({value.reason})")
        await asyncio.sleep(interval)


@dataclass
class Pipeline:
    """A running operator: the stack, an API client, a NATS client, the store's URL."""

    stack: LocalStack
    kube: KubernetesAsyncioAdapter
    nats: Client
    js: JetStreamContext
    store_url: str
    topology: BusTopology

    # ------------------------------------------------------------------ reading the cluster

    async def kaiwo_job(self, name: str, namespace: str = actors.NAMESPACE) -> dict[str, Any]:
        return await self.kube.get(resources.KAIWO_JOB, name, namespace=namespace)

    async def child(
        self, resource: resources.ResourceType, name: str, namespace: str = actors.NAMESPACE
    ) -> dict[str, Any] | None:
        return await actors.get_or_none(self.kube, resource, name, namespace=namespace)

    async def reaches(
        self, name: str, phase: str, *, within: float = STEP_SECONDS
    ) -> dict[str, Any]:
        """Wait until the KaiwoJob's ``status.status`` is ``phase``; returns the KaiwoJob."""

        async def check() -> dict[str, Any] | Pending:
            job = await self.child(resources.KAIWO_JOB, name)
            if job is None:
                return Pending("not created yet")
            found = (job.get("status") or {}).get("status", "")
            return job if found == phase else Pending(f"phase {found or '(none)'}")

        return await eventually(check, what=f"KaiwoJob {name} in {phase}", within=within)

    async def appears(
        self, resource: resources.ResourceType, name: str, *, within: float = STEP_SECONDS
    ) -> dict[str, Any]:
        async def check() -> dict[str, Any] | Pending:
            return await self.child(resource, name) or Pending("absent")

        return await eventually(check, what=f"{resource.kind} {name} exists", within=within)

    # ------------------------------------------------------------------ one workload's life

    async def run_to_completion(self, name: str) -> dict[str, Any]:
        """Create a KaiwoJob with a download and play the Job controller and Kueue through its
        whole life, waiting for the phase each step causes; returns the finished KaiwoJob."""
        await self.kube.create(actors.training_job(name))
        await self.reaches(name, "DOWNLOADING")
        await self.appears(resources.JOB, f"{name}-download")
        await actors.job_succeeds(self.kube, f"{name}-download")
        main = await self.appears(resources.JOB, name)
        await self.reaches(name, "PENDING")
        await actors.kueue_admits(self.kube, main)
        await actors.job_pods(self.kube, name, active=1, ready=0)
        await self.reaches(name, "STARTING")
        await actors.job_pods(self.kube, name, active=1, ready=1)
        await self.reaches(name, "RUNNING")
        await actors.job_succeeds(self.kube, name)
        return await self.reaches(name, "COMPLETE")

    # ------------------------------------------------------------------ the event log

    @contextlib.asynccontextmanager
    async def store(self) -> AsyncIterator[EventStore]:
        store = await open_event_store(self.store_url, migrate=False)
        try:
            yield store
        finally:
            await store.close()

    async def settled(self, *, within: float = STEP_SECONDS) -> dict[str, StreamLedger]:
        """Wait until every consumer is idle and the store holds every message exactly once;
        returns the ledgers (raises with what is still off)."""

        async def check() -> dict[str, StreamLedger] | Pending:
            unsettled = await unsettled_consumers(self.js, self.topology)
            if unsettled:
                return Pending(f"consumers not idle: {unsettled}")
            async with self.store() as store:
                found = await ledgers(self.js, store)
            off = {
                name: f"missing {len(ledger.missing)}, unexpected {len(ledger.unexpected)}, "
                f"twice {len(ledger.recorded_twice)}"
                for name, ledger in found.items()
                if not ledger.exact
            }
            return Pending(f"the store differs from the streams: {off}") if off else found

        return await eventually(check, what="the pipeline settles", within=within, interval=0.3)

    async def dead_letters(self) -> int:
        return await dead_letters(self.js)


@contextlib.asynccontextmanager
async def running_pipeline(
    state_dir: Path, *, store_url: str | None = None
) -> AsyncIterator[Pipeline]:
    """``kaiwo up --fake`` with ``state_dir``, the cluster set up for GPU workloads."""
    options = StackOptions(
        state_dir=state_dir,
        fake_cluster=True,
        seed_fake_cluster=False,
        store_url=store_url,
        service_env=SERVICE_ENV,
        ready_timeout=90.0,
    )
    async with contextlib.AsyncExitStack() as exits:
        stack = await exits.enter_async_context(LocalStack(options))
        assert stack.kubeconfig is not None and stack.nats is not None
        kube = await KubernetesAsyncioAdapter.from_kubeconfig(stack.kubeconfig)
        exits.push_async_callback(kube.close)
        # The administrator's identity: the tests read every stream and re-publish copies.
        client = await connect_client(stack.nats_connection(ADMIN), max_reconnect_attempts=-1)
        exits.push_async_callback(client.close)
        await actors.set_up_cluster(kube)
        yield Pipeline(
            stack=stack,
            kube=kube,
            nats=client,
            js=client.jetstream(),
            store_url=options.event_store_url,
            topology=bus_topology(),
        )
