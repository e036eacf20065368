"""``kaiwo up`` that gives up on a service says why, not only that it waited (decision 0240):
the checks its ``/readyz`` failed, else the last complaint it logged (an unreachable event
store, NATS that does not answer), the secrets in it masked."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kaiwo_cli.stack.options import StackError
from kaiwo_cli.stack.processes import ServiceProcess
from kaiwo_cli.stack.readiness import last_complaint, wait_until_ready
from kaiwo_runtime.health import HealthServer
from kaiwo_runtime.metrics import MetricsRegistry

# Lines as the one-process operator's log holds them (operator.log of `kaiwo up
# --store postgresql://...` whose server refuses): the supervisor's JSON and a member's stderr.
RECORDER_ENDED = {
    "service": "recorder",
    "why": "StartupError: event store postgresql://kaiwo:***@127.0.0.1:1/events is "
    "unreachable: [Errno 111] Connection refused",
    "delay": 4.0,
    "event": "service ended; restarting",
    "logger": "kaiwo.together",
    "level": "warning",
    "timestamp": "2026-12-06T06:29:05.950179Z",
}
WATCHER_INFO = {
    "event": "watcher started",
    "service": "watcher",
    "logger": "kaiwo.watcher",
    "level": "info",
    "timestamp": "2026-12-06T06:29:06.000000Z",
}
PLANNER_STDERR = (
    "kaiwo-planner: cannot use NATS: NATS at nats://127.0.0.1:49907 is unreachable: "
    "no answer within 10 s"
)


def operator_log(*entries: object) -> str:
    return "".join(
        (entry if isinstance(entry, str) else json.dumps(entry)) + "\n" for entry in entries
    )


def test_the_last_warning_of_the_member_is_its_complaint() -> None:
    log = operator_log(RECORDER_ENDED, WATCHER_INFO, PLANNER_STDERR)

    assert last_complaint(log, "recorder") == (
        "service ended; restarting: StartupError: event store "
        "postgresql://kaiwo:***@127.0.0.1:1/events is unreachable: [Errno 111] Connection "
        "refused"
    )
    assert last_complaint(log, "planner") == (
        "cannot use NATS: NATS at nats://127.0.0.1:49907 is unreachable: no answer within 10 s"
    )
    assert last_complaint(log, "watcher") is None
    assert last_complaint(log, "executor") is None


def test_a_complaint_is_masked_again() -> None:
    unmasked = "kaiwo-recorder: event store postgresql://kaiwo:s3cret@db/events is unreachable"

    assert last_complaint(operator_log(unmasked), "recorder") == (
        "event store postgresql://kaiwo:***@db/events is unreachable"
    )


def test_an_error_field_is_told_when_there_is_no_why() -> None:
    entry = {"service": "executor", "level": "error", "event": "start failed", "error": "boom"}

    assert last_complaint(operator_log(entry, "not json {"), "executor") == "start failed: boom"


async def test_a_service_that_never_answers_is_told_with_what_it_logged(tmp_path: Path) -> None:
    log_path = tmp_path / "logs" / "operator.log"
    log_path.parent.mkdir()
    log_path.write_text(operator_log(RECORDER_ENDED, WATCHER_INFO))
    never_started = ServiceProcess(
        name="operator", module="nowhere", env={}, log_path=log_path, health_port=1
    )

    with pytest.raises(StackError) as raised:
        await wait_until_ready("recorder", never_started, within=0.2)

    assert str(raised.value) == (
        "recorder did not become ready in 0 s: service ended; restarting: StartupError: event "
        "store postgresql://kaiwo:***@127.0.0.1:1/events is unreachable: [Errno 111] "
        f"Connection refused (log: {log_path})"
    )


class AlwaysRunning(ServiceProcess):
    @property
    def running(self) -> bool:
        return True


@pytest.fixture
async def not_ready_health() -> AsyncIterator[HealthServer]:
    async def store_fails() -> bool:
        return False

    async def nats_ok() -> bool:
        return True

    checks = {"nats": nats_ok, "eventstore": store_fails}
    async with HealthServer(metrics=MetricsRegistry(), checks=checks) as server:
        yield server


async def test_a_service_that_answers_not_ready_is_told_with_its_failing_checks(
    tmp_path: Path, not_ready_health: HealthServer
) -> None:
    log_path = tmp_path / "recorder.log"
    log_path.write_text(operator_log(RECORDER_ENDED))
    service = AlwaysRunning(
        name="recorder",
        module="kaiwo_recorder",
        env={},
        log_path=log_path,
        health_port=not_ready_health.port,
    )

    with pytest.raises(StackError) as raised:
        await wait_until_ready("recorder", service, within=0.3)

    assert str(raised.value) == (
        f"recorder did not become ready in 0 s: not ready: eventstore: failed (log: {log_path})"
    )


async def test_a_replica_is_told_with_what_its_service_logged(tmp_path: Path) -> None:
    log_path = tmp_path / "planner-1.log"
    log_path.write_text(operator_log(PLANNER_STDERR))
    never_started = ServiceProcess(
        name="planner-1", module="kaiwo_planner", env={}, log_path=log_path, health_port=1
    )

    with pytest.raises(StackError) as raised:
        await wait_until_ready("planner-1", never_started, within=0.2)

    assert str(raised.value) == (
        "planner-1 did not become ready in 0 s: cannot use NATS: NATS at "
        f"nats://127.0.0.1:49907 is unreachable: no answer within 10 s (log: {log_path})"
    )
