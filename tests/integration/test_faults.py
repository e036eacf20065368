"""Faults under load: while several KaiwoJobs go through their whole life, a service is killed
(and restarted by its supervisor), nats-server restarts, messages arrive twice, the event
store goes away. Afterwards every workload must have converged (its children, COMPLETE), the
store must hold every message of the streams exactly once and no durable consumer may hold a
pending or unacknowledged message.

One operator serves the whole module (starting one takes seconds); every test uses its own
workload names and checks the log as a whole, so an earlier fault that lost something would
fail the later tests too.

The faults that meet the API server (a killed watcher must resume its watches, a killed
executor re-applies what it had half done) run on the real API server too, under an operator
of their own. The others (planner, recorder, NATS, duplicates, the event store) touch only
the bus and the store, and stay on the fake, which is faster.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kaiwo_contracts.events.streams import OBSERVED_STREAM, PLAN_STREAM
from kaiwo_kube import resources
from sqlalchemy.engine import make_url

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pipeline, running_pipeline
from tests.integration.pipeline.postgres import TcpProxy, fresh_database
from tests.managed_fields import field_managers_of

pytestmark = [pytest.mark.nats, pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

WORKLOADS = 6
OUTAGE_SECONDS = 3.0


async def under_fault(
    pipeline: Pipeline, prefix: str, fault: Callable[[], Awaitable[None]]
) -> list[dict[str, Any]]:
    """Run ``WORKLOADS`` KaiwoJobs to completion, injecting ``fault`` once the first one is
    downloading; then wait until the log settles. Returns the finished KaiwoJobs."""
    names = [f"{prefix}-{index}" for index in range(WORKLOADS)]
    lives = [asyncio.create_task(pipeline.run_to_completion(name)) for name in names]
    try:
        await pipeline.reaches(names[0], "DOWNLOADING")
        await fault()
        finished = await asyncio.gather(*lives)
    finally:
        for life in lives:
            life.cancel()
        await asyncio.gather(*lives, return_exceptions=True)
    for job in finished:
        await has_all_children(pipeline, job)
    await pipeline.settled(within=60)
    assert await pipeline.dead_letters() == 0
    return finished


async def has_all_children(pipeline: Pipeline, job: dict[str, Any]) -> None:
    name, uid = job["metadata"]["name"], job["metadata"]["uid"]
    assert job["status"]["status"] == "COMPLETE"
    assert job["status"]["startTime"] <= job["status"]["completionTime"]
    children = (
        (resources.JOB, name),
        (resources.JOB, f"{name}-download"),
        (resources.CONFIG_MAP, f"{name}-download"),
        (resources.PERSISTENT_VOLUME_CLAIM, f"{name}-data"),
    )
    for resource, child_name in children:
        child = await pipeline.child(resource, child_name)
        assert child is not None, f"{resource.kind} {child_name} is missing"
        assert child["metadata"]["labels"][actors.OWNER_UID_LABEL] == uid
        [owner] = child["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"]) == ("KaiwoJob", uid)
        if pipeline.real and resource == resources.JOB:
            # Kueue's field once the Job exists (see test_pipeline).
            assert "kaiwo" not in field_managers_of(child, "spec", "suspend")


async def killed_mid_stream(pipeline: Pipeline, service: str) -> None:
    process = pipeline.stack.services[service]
    restarts, pid = process.restarts, process.pid

    async def kill() -> None:
        await process.kill()

    await under_fault(pipeline, f"kill-{service}", kill)
    assert process.restarts == restarts + 1
    assert process.pid != pid


@pytest.mark.parametrize("service", ["watcher", "planner", "executor", "recorder"])
async def test_a_service_killed_mid_stream_is_restarted_and_loses_nothing(
    shared_pipeline: Pipeline, service: str
) -> None:
    await killed_mid_stream(shared_pipeline, service)


async def test_a_nats_server_restart_mid_stream_loses_nothing(shared_pipeline: Pipeline) -> None:
    nats_server = shared_pipeline.stack.nats
    assert nats_server is not None
    await under_fault(shared_pipeline, "nats-restart", nats_server.restart)


async def test_duplicated_and_copied_messages_are_handled_once(shared_pipeline: Pipeline) -> None:
    js = shared_pipeline.js

    async def duplicate() -> None:
        for stream in (OBSERVED_STREAM, PLAN_STREAM):
            last = (await js.stream_info(stream)).state.last_seq
            for sequence in (last, max(1, last - 1)):
                message = await js.get_msg(stream, seq=sequence)
                headers = dict(message.headers or {})
                assert message.subject is not None
                # The same message again: JetStream's duplicate window drops it.
                again = await js.publish(message.subject, message.data or b"", headers=headers)
                assert again.duplicate
                # A copy under another message id: stored, so every consumer gets it twice.
                headers["Nats-Msg-Id"] = f"{headers['Nats-Msg-Id']}:copy"
                copy = await js.publish(message.subject, message.data or b"", headers=headers)
                assert not copy.duplicate

    await under_fault(shared_pipeline, "duplicates", duplicate)
    ledgers = await shared_pipeline.settled()
    copied = {
        stream: len(ledger.message_ids) - len(set(ledger.message_ids))
        for stream, ledger in ledgers.items()
    }
    assert copied[OBSERVED_STREAM] >= 2
    assert copied[PLAN_STREAM] >= 2


@contextlib.contextmanager
def sqlite_locked(database: Path, seconds: float) -> Any:
    """An exclusive transaction on the SQLite file for ``seconds``, in a thread of its own
    (as another process holding the database would)."""
    ready, release = threading.Event(), threading.Event()

    def hold() -> None:
        connection = sqlite3.connect(database, timeout=30, isolation_level=None)
        try:
            connection.execute("BEGIN EXCLUSIVE")
            ready.set()
            release.wait(seconds)
            connection.execute("ROLLBACK")
        finally:
            connection.close()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    ready.wait(30)
    try:
        yield
    finally:
        release.set()
        holder.join(30)


async def test_the_event_store_locked_under_the_recorder_loses_nothing(
    shared_pipeline: Pipeline,
) -> None:
    database = Path(shared_pipeline.stack.options.state_dir) / "events.db"
    appended_before = await recorder_appends(shared_pipeline)

    async def lock() -> None:
        with sqlite_locked(database, OUTAGE_SECONDS):
            await asyncio.sleep(OUTAGE_SECONDS)

    await under_fault(shared_pipeline, "store-locked", lock)
    assert await recorder_appends(shared_pipeline) > appended_before


async def recorder_appends(pipeline: Pipeline) -> float:
    """``kaiwo_recorder_events_appended_total`` summed over streams, from /metrics."""
    port = pipeline.stack.services["recorder"].health_port
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as r:
        text = await r.text()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("kaiwo_recorder_events_appended_total{")
    )


@pytest.fixture
async def postgres_behind_proxy(
    tmp_path: Path, postgres_server: str
) -> AsyncIterator[tuple[Pipeline, TcpProxy]]:
    async with fresh_database(postgres_server) as url:
        parsed = make_url(url)
        if not parsed.host or parsed.host.startswith("/"):
            pytest.skip("the PostgreSQL server is reached over a unix socket: no TCP to cut")
        proxy = TcpProxy(target_host=parsed.host, target_port=parsed.port or 5432)
        await proxy.restore()
        through_proxy = parsed.set(host="127.0.0.1", port=proxy.port)
        try:
            async with running_pipeline(
                tmp_path / "kaiwo", store_url=through_proxy.render_as_string(hide_password=False)
            ) as pipeline:
                yield pipeline, proxy
        finally:
            await proxy.cut()


@pytest.mark.postgres
@pytest.mark.asyncio(loop_scope="function")
async def test_a_postgresql_restart_under_the_recorder_loses_nothing(
    postgres_behind_proxy: tuple[Pipeline, TcpProxy],
) -> None:
    pipeline, proxy = postgres_behind_proxy

    async def restart() -> None:
        await proxy.cut()
        await asyncio.sleep(OUTAGE_SECONDS)
        await proxy.restore()

    await under_fault(pipeline, "pg-restart", restart)


# Last in the module, so the fake's operator above is not stopped and started again around it.
@pytest.mark.k8s
@pytest.mark.parametrize("shared_pipeline", ["real"], indirect=True)
@pytest.mark.parametrize("service", ["watcher", "executor"])
async def test_on_a_real_api_server_a_killed_service_loses_nothing(
    shared_pipeline: Pipeline, service: str
) -> None:
    await killed_mid_stream(shared_pipeline, service)
