"""``kaiwo up --one-process``: the recorder, watcher, planner and executor in one process, each
with its own NATS identity, settings and health port, carry a KaiwoJob through its life as
four processes do; a member that fails is started again and the others go on."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kaiwo_cli.stack import together
from kaiwo_cli.stack.local import TOGETHER
from kaiwo_cli.stack.processes import RestartBackOff
from kaiwo_cli.stack.together import TOGETHER_ENV

from tests.integration.conftest import FAKE_SQLITE, real_cluster_if, real_sqlite
from tests.integration.pipeline.harness import Pipeline, running_pipeline

pytestmark = [pytest.mark.nats, pytest.mark.slow]

CORE = ("recorder", "watcher", "planner", "executor")


@pytest.fixture(params=[FAKE_SQLITE, real_sqlite()])
async def one_process(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Pipeline]:
    backend, _ = request.param
    real = real_cluster_if(request, backend)
    async with running_pipeline(tmp_path / "kaiwo", real=real, one_process=True) as running:
        yield running


async def ready(port: int) -> bool:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}/readyz") as response,
    ):
        return response.status == 200


async def test_the_core_services_in_one_process_carry_a_kaiwojob_through(
    one_process: Pipeline,
) -> None:
    stack = one_process.stack
    pids = stack.process_ids()
    assert TOGETHER in pids
    assert not set(CORE) & set(pids)  # no process of their own

    # Each keeps its own identity: the credentials kaiwo up issued for it, and its own port.
    members = json.loads(stack.services[TOGETHER].env[TOGETHER_ENV])
    assert set(members) == set(CORE)
    assert stack.credentials is not None
    for name, env in members.items():
        assert env["KAIWO_NATS_CREDENTIALS_FILE"] == str(stack.credentials.seed(name))
        assert env["KAIWO_HEALTH_PORT"] == str(stack.member_ports[name])
    assert len(set(stack.member_ports.values())) == len(CORE)
    for name in CORE:
        assert await ready(stack.member_ports[name]), name
    assert set(stack.state().health_urls) >= set(CORE)

    finished = await one_process.run_to_completion("one-process")
    assert finished["status"]["status"] == "COMPLETE"

    # The recorder, in the same process, kept the story.
    async with one_process.store() as store:
        kinds = {event.type async for batch in store.iter_all() for event in batch}
    assert {"ai.silogen.kaiwo.plan.decided.v1", "ai.silogen.kaiwo.res.applied.v1"} <= kinds


async def test_a_failed_member_starts_again_and_the_others_go_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[str] = []
    stop = asyncio.Event()

    async def serve(settings: Any, until: asyncio.Event) -> int:
        started.append(settings)
        if settings == "planner" and started.count("planner") == 1:
            raise RuntimeError("planner broke")
        if settings == "planner":
            stop.set()  # its second start: enough seen
        await until.wait()
        return 0

    monkeypatch.setattr(together, "settings_of", lambda member: member.name)
    monkeypatch.setattr(together, "serve_of", lambda member: serve)
    members = together.members_of(json.dumps({"planner": {}, "executor": {}}))
    quickly = RestartBackOff(first=0.01)

    await asyncio.wait_for(
        asyncio.gather(*(together.run_member(member, stop, quickly) for member in members)), 30
    )

    assert started.count("planner") == 2
    assert started.count("executor") == 1  # never restarted: the planner's failure was its own


def test_only_the_core_services_run_together() -> None:
    with pytest.raises(ValueError, match="gateway cannot run together"):
        together.members_of(json.dumps({"planner": {}, "gateway": {}}))
    with pytest.raises(ValueError, match="must map service names"):
        together.members_of("[]")


def test_a_members_settings_are_read_from_its_own_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAIWO_LOG_LEVEL", "ERROR")
    member = together.Member(
        name="recorder", env={"KAIWO_LOG_LEVEL": "DEBUG", "KAIWO_RECORDER_BATCH_SIZE": "7"}
    )

    settings = together.settings_of(member)

    assert (settings.log_level, settings.recorder_batch_size) == ("DEBUG", 7)
    assert os.environ["KAIWO_LOG_LEVEL"] == "ERROR"  # the process's own, put back
    assert "KAIWO_RECORDER_BATCH_SIZE" not in os.environ
