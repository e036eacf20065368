"""The example subscriber (``examples/subscriber.py``) as a user runs it: a separate process
with the ``subscriber`` identity ``kaiwo up`` provisioned, printing the public events of one
KaiwoJob while the operator takes it through its whole life on the real API server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any, Final

import nats
import pytest
from kaiwo_cli.stack.state import StackState
from kaiwo_contracts.events.permissions import (
    ADMIN,
    CLI,
    PLANNER,
    SUBSCRIBER,
    inbox_prefix,
    namespace_subscriber_identity,
    operator_identities,
)
from kaiwo_contracts.events.streams import PUBLIC_STREAM, bus_topology
from kaiwo_contracts.events.subjects import public_workload_subject
from kaiwo_kube import resources
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_credentials import CredentialsDirectory, write_credentials
from kaiwo_runtime.nats_server import NatsServer
from nats.js.api import ConsumerConfig

from tests.integration.conftest import real_sqlite
from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import STEP_SECONDS, Pending, eventually
from tests.nats_keys import connected_as
from tests.real_cluster import REPO_ROOT

pytestmark = [pytest.mark.nats, pytest.mark.slow]

EXAMPLE: Final = REPO_ROOT / "examples" / "subscriber.py"
NAME: Final = "told-job"
UID: Final = "6f1c2d3e-0000-4000-8000-00000000beef"


async def lines_until(stream: asyncio.StreamReader, last: str, *, within: float) -> list[str]:
    """Lines of ``stream`` up to and including the first whose transition is ``last``."""
    lines: list[str] = []
    async with asyncio.timeout(within):
        while True:
            raw = await stream.readline()
            if not raw:
                return lines  # the subscriber exited: its stderr says why
            lines.append(raw.decode().rstrip("\n"))
            if lines[-1].split()[1] == last:
                return lines


async def a_whole_life(pipeline: Any) -> None:
    """A KaiwoJob with a download, from creation to completion; Kueue's admission is seen
    before the pod starts (so it is told in PENDING)."""
    kube, namespace = pipeline.kube, pipeline.namespace
    await kube.create(actors.training_job(NAME, namespace=namespace))
    await pipeline.reaches(NAME, "DOWNLOADING")
    await pipeline.appears(resources.JOB, f"{NAME}-download")
    await pipeline.jobs.pod_succeeded(f"{NAME}-download", namespace=namespace)
    main = await pipeline.appears(resources.JOB, NAME)
    await pipeline.reaches(NAME, "PENDING")
    await actors.kueue_admits(kube, main)

    async def admitted() -> bool | Pending:
        conditions = (await pipeline.kaiwo_job(NAME)).get("status", {}).get("conditions", [])
        told = {c["type"]: c["status"] for c in conditions}
        return True if told.get("Admitted") == "True" else Pending(f"conditions {told}")

    await eventually(admitted, what=f"{NAME} admitted")
    await pipeline.jobs.pod_running(NAME, namespace=namespace, ready=False)
    await pipeline.reaches(NAME, "STARTING")
    await pipeline.jobs.pod_running(NAME, namespace=namespace, ready=True)
    await pipeline.reaches(NAME, "RUNNING")
    await pipeline.jobs.pod_succeeded(NAME, namespace=namespace)
    await pipeline.reaches(NAME, "COMPLETE")


@pytest.mark.parametrize("pipeline", [real_sqlite()], indirect=True)
async def test_the_example_subscriber_prints_the_whole_life_of_a_kaiwojob(pipeline: Any) -> None:
    env = {**os.environ, "KAIWO_STATE": str(pipeline.stack.options.state_dir)}
    subscriber = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE),
        "--namespace",
        pipeline.namespace,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        await a_whole_life(pipeline)
        assert subscriber.stdout is not None
        lines = await lines_until(subscriber.stdout, "completed", within=STEP_SECONDS)
    finally:
        subscriber.terminate()
        _, errors = await subscriber.communicate()
    assert lines, errors.decode()

    where = f"{pipeline.namespace}/{NAME}"
    told = [line.split()[1:] for line in lines]
    # The admitted version and the next one (pod started) can reach the planner as one: a
    # watch that restarts under load relists, and the relist shows only the newest version.
    # Subscribers are then told "admitted" with the phase that version shows.
    assert told[3][3] in ("phase=PENDING", "phase=STARTING"), told[3]
    told[3][3] = "phase=PENDING"
    assert told == [
        ["submitted", "KaiwoJob", where, "phase=-", "queue=kaiwo"],
        ["phase-changed", "KaiwoJob", where, "phase=DOWNLOADING", "from=-", "queue=kaiwo"],
        ["phase-changed", "KaiwoJob", where, "phase=PENDING", "from=DOWNLOADING", "queue=kaiwo"],
        ["admitted", "KaiwoJob", where, "phase=PENDING", "reason=Admitted", "queue=kaiwo"],
        ["phase-changed", "KaiwoJob", where, "phase=STARTING", "from=PENDING", "queue=kaiwo"],
        ["phase-changed", "KaiwoJob", where, "phase=RUNNING", "from=STARTING", "queue=kaiwo"],
        ["phase-changed", "KaiwoJob", where, "phase=COMPLETE", "from=RUNNING", "queue=kaiwo"],
        ["completed", "KaiwoJob", where, "phase=COMPLETE", "queue=kaiwo"],
    ]


def told_event(namespace: str, name: str, transition: str, phase: str) -> bytes:
    """A ``WorkloadEventV1`` body as the planner publishes it (docs/events.md)."""
    return json.dumps(
        {
            "transition": transition,
            "workload": {"kind": "KaiwoJob", "namespace": namespace, "name": name, "uid": UID},
            "user": "ada@example.com",
            "queue": "kaiwo",
            "phase": phase,
            "previousPhase": None,
            "reason": None,
            "message": None,
            "observedAt": "2026-03-01T12:30:05Z",
            "createdAt": "2026-03-01T12:00:00Z",
            "resourceVersion": "7",
        }
    ).encode()


async def example_lines(env: dict[str, str], count: int) -> list[str]:
    """The first ``count`` lines the example prints with a namespace's own key."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE),
        "--namespace",
        "team-a",
        "--own-key",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    assert process.stdout is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(STEP_SECONDS):
            while len(lines) < count:
                raw = await process.stdout.readline()
                if not raw:
                    break
                lines.append(raw.decode().split()[1] + " " + raw.decode().split()[3])
    finally:
        process.terminate()
        _, errors = await process.communicate()
    assert len(lines) == count, errors.decode()
    return lines


async def test_the_example_with_a_namespaces_own_key_reads_that_namespace_and_resumes(
    tmp_path: Path,
) -> None:
    """``--own-key`` with ``subscriber-team-a.nk`` (decision 0164): what team-a's workloads
    were told before it started, then on a second run only what came since, never team-b's."""
    credentials = write_credentials(
        tmp_path / "credentials",
        (*operator_identities(bus_topology()), namespace_subscriber_identity("team-a")),
    )
    async with NatsServer(config=credentials.server_config.read_text()) as server:
        await teams_told_and_team_a_followed(server, credentials)


async def test_the_example_with_a_namespaces_own_key_drops_a_consumer_of_its_name_made_wider(
    tmp_path: Path,
) -> None:
    """Decision 0288: before team-a's key was issued, nothing denied the ``subscriber`` key
    (every namespace's events) the consumer ``subscriber-team-a``, and it made one filtered to
    every namespace. The example with team-a's key finds it filtered wider than team-a's
    events, deletes it and makes its own: it is told team-a's events and never team-b's."""
    topology, store = bus_topology(), tmp_path / "jetstream"
    before = write_credentials(tmp_path / "credentials", operator_identities(topology))
    async with NatsServer(config=before.server_config.read_text(), store_dir=store) as server:
        admin = await NatsBus.connect(connected_as(server.url, before, ADMIN), topology=topology)
        subscriber = await nats.connect(
            server.url,
            nkeys_seed=str(before.seed(SUBSCRIBER)),
            inbox_prefix=inbox_prefix(SUBSCRIBER),
        )
        try:
            await admin.ensure_streams()
            await subscriber.jetstream().add_consumer(
                PUBLIC_STREAM,
                ConsumerConfig(durable_name="subscriber-team-a", filter_subject="kaiwo.public.>"),
            )
        finally:
            await subscriber.close()
            await admin.close()
    after = write_credentials(
        tmp_path / "credentials",
        (*operator_identities(topology), namespace_subscriber_identity("team-a")),
        keep_existing=True,
    )
    async with NatsServer(config=after.server_config.read_text(), store_dir=store) as server:
        await teams_told_and_team_a_followed(server, after)


async def teams_told_and_team_a_followed(
    server: NatsServer, credentials: CredentialsDirectory
) -> None:
    """team-a's and team-b's workloads told of, and the example with team-a's key shown only
    team-a's: on its first run what came before, on a second only what came since."""
    topology = bus_topology()
    admin = await NatsBus.connect(connected_as(server.url, credentials, ADMIN), topology=topology)
    planner = await NatsBus.connect(
        connected_as(server.url, credentials, PLANNER), topology=topology
    )
    try:
        await admin.ensure_streams()

        async def tell(namespace: str, name: str, transition: str, phase: str) -> None:
            subject = public_workload_subject(namespace=namespace, kind="KaiwoJob", uid=UID)
            await planner.publish_raw(
                subject,
                body=told_event(namespace, name, transition, phase),
                headers={
                    "ce-type": "ai.silogen.kaiwo.public.workload.v1",
                    "Nats-Msg-Id": f"{namespace}:{transition}",
                },
            )

        await tell("team-b", "theirs", "submitted", "")
        await tell("team-a", "ours", "submitted", "")
        await tell("team-b", "theirs", "completed", "COMPLETE")
        env = {
            **os.environ,
            "KAIWO_NATS_URL": server.url,
            "KAIWO_NATS_CREDENTIALS_FILE": str(credentials.seed("subscriber-team-a")),
        }
        assert await example_lines(env, 1) == ["submitted team-a/ours"]
        await tell("team-a", "ours", "completed", "COMPLETE")
        await tell("team-b", "theirs", "deleted", "COMPLETE")
        assert await example_lines(env, 1) == ["completed team-a/ours"]
    finally:
        await planner.close()
        await admin.close()


async def first_line(env: dict[str, str], cwd: Path) -> tuple[int | None, str, str]:
    """The example started in ``cwd``: its exit status (None while it runs), its first line
    and what it wrote on stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(STEP_SECONDS):
            raw = await process.stdout.readline()
            code = process.returncode if raw else await process.wait()
    finally:
        if process.returncode is None:
            process.terminate()
        _, errors = await process.communicate()
    return code, raw.decode(), errors.decode()


async def test_the_example_finds_the_stack_as_the_kaiwo_command_does(tmp_path: Path) -> None:
    """The ``kaiwo up`` banner says ``export KAIWO_STATE=...``: the example read only
    ``KAIWO_STATE_DIR`` or ``./.kaiwo`` and failed with a traceback. Now ``$KAIWO_STATE``, else
    ``.kaiwo`` found upwards (decision 0021; ``KAIWO_STATE_DIR`` still works), and without a
    stack one line naming where it looked."""
    topology = bus_topology()
    credentials = write_credentials(tmp_path / "credentials", operator_identities(topology))
    async with NatsServer(config=credentials.server_config.read_text()) as server:
        admin = await NatsBus.connect(
            connected_as(server.url, credentials, ADMIN), topology=topology
        )
        planner = await NatsBus.connect(
            connected_as(server.url, credentials, PLANNER), topology=topology
        )
        try:
            await admin.ensure_streams()
            await planner.publish_raw(
                public_workload_subject(namespace="team-a", kind="KaiwoJob", uid=UID),
                body=told_event("team-a", "ours", "submitted", ""),
                headers={"ce-type": "ai.silogen.kaiwo.public.workload.v1", "Nats-Msg-Id": "1"},
            )
        finally:
            await planner.close()
            await admin.close()
        checkout = tmp_path / "checkout"
        StackState(
            nats_url=server.url,
            cli_credentials_file=credentials.seed(CLI),
            event_store_url=f"sqlite:///{checkout / '.kaiwo' / 'events.db'}",
            subscriber_credentials_file=credentials.seed(SUBSCRIBER),
        ).write(checkout / ".kaiwo")
        (checkout / "src" / "deep").mkdir(parents=True)
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        told = "2026-03-01T12:30:05Z submitted KaiwoJob team-a/ours phase=- user=ada@example.com "
        told += "queue=kaiwo\n"
        plain = {
            key: value
            for key, value in os.environ.items()
            if key not in ("KAIWO_STATE", "KAIWO_STATE_DIR") and not key.startswith("KAIWO_NATS")
        }

        state = str(checkout / ".kaiwo")
        assert await first_line({**plain, "KAIWO_STATE": state}, elsewhere) == (None, told, "")
        assert await first_line(plain, checkout / "src" / "deep") == (None, told, "")
        assert await first_line({**plain, "KAIWO_STATE_DIR": state}, elsewhere) == (None, told, "")

        empty = str(tmp_path / "empty")
        assert await first_line({**plain, "KAIWO_STATE": empty}, checkout) == (
            1,
            "",
            f"subscriber: no stack.json in $KAIWO_STATE ({empty}): start kaiwo up, export "
            "KAIWO_STATE=<its state directory>, or set KAIWO_NATS_URL and "
            "KAIWO_NATS_CREDENTIALS_FILE\n",
        )
        assert await first_line(plain, elsewhere) == (
            1,
            "",
            f"subscriber: no stack.json in .kaiwo of {elsewhere} or its parents: start kaiwo "
            "up, export KAIWO_STATE=<its state directory>, or set KAIWO_NATS_URL and "
            "KAIWO_NATS_CREDENTIALS_FILE\n",
        )
