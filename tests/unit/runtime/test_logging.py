from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import structlog
from kaiwo_contracts.events import Envelope, ObservedObjectV1
from kaiwo_contracts.events.envelope import RawPayload
from kaiwo_runtime.logging import bind_event, bound_context, configure_logging, event_fields

UID = "0b8f0a52-2a4c-4c38-9a43-1f7d52a1c001"


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


def test_json_lines_carry_the_event_context() -> None:
    out = io.StringIO()
    configure_logging(level="INFO", stream=out)
    envelope = Envelope.new(
        data=ObservedObjectV1(
            kind="KaiwoJob",
            api_version="kaiwo.silogen.ai/v1alpha1",
            namespace="team-a",
            name="train.v1",
            uid=UID,
            resource_version="5",
            event_type="ADDED",
            object={},
        ),
        source="/kaiwo/watcher",
        time=datetime(2026, 1, 1, tzinfo=UTC),
        correlationid=UID,
        id=f"{UID}:5",
    )

    with bind_event(envelope):
        structlog.get_logger("kaiwo.test").info("planned", children=2)
    structlog.get_logger("kaiwo.test").info("after")
    logging.getLogger("nats").warning("from the standard library")

    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines[0]["event"] == "planned"
    assert lines[0]["children"] == 2
    assert lines[0]["event_id"] == f"{UID}:5"
    assert lines[0]["correlation_id"] == UID
    assert (lines[0]["kind"], lines[0]["namespace"], lines[0]["name"], lines[0]["uid"]) == (
        "KaiwoJob",
        "team-a",
        "train.v1",
        UID,
    )
    assert lines[0]["level"] == "info"
    assert "event_id" not in lines[1]
    assert lines[2]["event"] == "from the standard library"
    assert lines[2]["logger"] == "nats"


def test_console_format_when_asked() -> None:
    out = io.StringIO()
    configure_logging(level="WARNING", json=False, stream=out)

    structlog.get_logger("kaiwo.test").info("hidden")
    structlog.get_logger("kaiwo.test").warning("shown", reason="x")

    text = out.getvalue()
    assert "hidden" not in text
    assert "shown" in text
    assert "reason=x" in text
    assert not text.startswith("{")


def test_a_bound_context_restores_what_was_bound_before_it() -> None:
    get = structlog.contextvars.get_contextvars
    with bound_context({"uid": "outer", "seq": "1"}):
        with bound_context({"uid": "inner", "trigger": "timer", "skipped": None}):
            assert get() == {"uid": "inner", "seq": "1", "trigger": "timer"}
        assert get() == {"uid": "outer", "seq": "1"}
    assert get() == {}


def test_a_bound_context_is_undone_when_its_block_raises() -> None:
    with pytest.raises(RuntimeError), bound_context({"uid": "u1"}):
        raise RuntimeError("handler failed")
    assert structlog.contextvars.get_contextvars() == {}


def test_event_fields_of_a_raw_payload_are_its_string_fields_of_those_names() -> None:
    envelope = Envelope[RawPayload].from_nats(
        {"ce-id": "e-1", "ce-source": "/kaiwo/tests", "ce-specversion": "1.0",
         "ce-type": "ai.silogen.kaiwo.test.thing.v1", "ce-time": "2026-01-01T00:00:00Z",
         "ce-correlationid": UID},
        b'{"kind":"Job","name":"j","uid":7,"spec":{}}',
    )  # fmt: skip
    assert event_fields(envelope) == {
        "event_id": "e-1",
        "event_type": "ai.silogen.kaiwo.test.thing.v1",
        "correlation_id": UID,
        "kind": "Job",
        "name": "j",
    }


def test_a_line_below_the_level_runs_no_processor_and_one_at_it_is_written() -> None:
    out = io.StringIO()
    configure_logging(level="WARNING", json=True, stream=out)
    ran: list[str] = []

    def spy(_logger: object, method: str, event: dict[str, object]) -> dict[str, object]:
        ran.append(method)
        return event

    # A spy before the last processor: it sees every line the chain processes.
    processors = structlog.get_config()["processors"]
    structlog.configure(processors=[*processors[:-1], spy, processors[-1]])
    log = structlog.get_logger("kaiwo.test")

    log.debug("dropped")
    log.info("dropped too")
    log.warning("kept", level_of="warning")

    assert ran == ["warning"]
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["kept"]


def test_debug_lines_are_written_at_debug_level() -> None:
    out = io.StringIO()
    configure_logging(level="DEBUG", json=True, stream=out)

    structlog.get_logger("kaiwo.test").debug("published", sequence=7)
    structlog.get_logger("kaiwo.test").info("planned")

    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["event"], line["level"]) for line in lines] == [
        ("published", "debug"),
        ("planned", "info"),
    ]
    assert lines[0]["sequence"] == 7
