"""From a delivered message to its row: events as published, dead letters, advisories, raw."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_eventstore import InMemoryEventStore
from kaiwo_recorder.records import (
    DEAD_LETTER_TYPE,
    MALFORMED_TYPE,
    MAX_DELIVERIES_TYPE,
    body_value,
    decode_body,
    record_of,
)
from kaiwo_runtime.bus import Delivery
from kaiwo_runtime.dead_letters import dead_letter

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LATER = datetime(2026, 3, 1, 12, 5, tzinfo=UTC)


def delivery_of(sent: Any, *, stream: str = "KAIWO_OBS", sequence: int = 7) -> Delivery:
    headers, body = sent.envelope.to_nats()
    return Delivery(
        stream=stream,
        consumer="recorder-obs",
        stream_sequence=sequence,
        attempt=1,
        subject=sent.subject,
        headers=headers,
        body=body,
    )


def test_an_event_is_recorded_as_published_with_nats_positions(samples: Any) -> None:
    sent = samples.job_observation()
    delivery = delivery_of(sent)

    event = record_of(delivery, now=LATER)

    assert event.event_id == f"{samples.JOB_UID}:100"
    assert event.stream_id == f"workload/{samples.JOB_UID}"
    assert event.type == "ai.silogen.kaiwo.obs.observed.v1"
    assert event.subject == "team-a/train"
    assert event.time == NOW
    assert event.source == "/kaiwo/watcher"
    assert event.correlation_id == samples.JOB_UID
    assert event.causation_id is None
    assert event.data == json.loads(delivery.body)
    assert event.data["object"]["spec"] == {"image": "busybox", "gpus": 1}
    assert event.metadata == {
        "natsStream": "KAIWO_OBS",
        "natsSequence": 7,
        "natsSubject": f"kaiwo.obs.kaiwojob.team-a.{samples.JOB_UID}",
        "traceparent": samples.TRACEPARENT,
    }


def test_a_plan_keeps_its_cause_and_goes_to_the_workload_stream(samples: Any) -> None:
    observed = samples.job_observation()
    plan = samples.plan_decision(observed.envelope)

    event = record_of(delivery_of(plan, stream="KAIWO_PLAN", sequence=3), now=LATER)

    assert event.stream_id == f"workload/{samples.JOB_UID}"
    assert event.causation_id == f"{samples.JOB_UID}:100"
    assert event.data["plannedAt"] == "2026-03-01T12:00:00Z"
    assert event.metadata["natsStream"] == "KAIWO_PLAN"


def test_a_node_goes_to_its_own_stream_by_name(samples: Any) -> None:
    event = record_of(delivery_of(samples.node_observation()), now=LATER)

    assert event.stream_id == "node/gpu-node-1.example.com"
    assert event.correlation_id == samples.NODE_UID


def test_bad_headers_are_recorded_raw_with_the_reason(samples: Any) -> None:
    sent = samples.job_observation()
    headers, body = sent.envelope.to_nats()
    headers["ce-time"] = "yesterday"
    delivery = Delivery(
        stream="KAIWO_OBS",
        consumer="recorder-obs",
        stream_sequence=9,
        attempt=1,
        subject=sent.subject,
        headers=headers,
        body=body,
    )

    event = record_of(delivery, now=LATER)

    assert event.type == MALFORMED_TYPE
    assert event.event_id == f"{samples.JOB_UID}:100"
    assert event.stream_id == f"workload/{samples.JOB_UID}"
    assert event.time == LATER  # the message's own time is unreadable
    assert "time" in event.data["reason"]
    assert event.data["type"] == "ai.silogen.kaiwo.obs.observed.v1"
    assert event.data["bodyEncoding"] == "json"
    assert event.data["body"]["name"] == "train"
    assert event.metadata["malformed"] == event.data["reason"]
    assert event.metadata["natsSequence"] == 9


def test_a_payload_failing_its_schema_is_malformed() -> None:
    headers = {
        "ce-id": "evt-1",
        "ce-source": "/kaiwo/watcher",
        "ce-specversion": "1.0",
        "ce-type": "ai.silogen.kaiwo.obs.observed.v1",
        "ce-time": "2026-03-01T12:00:00Z",
        "ce-correlationid": "corr-1",
    }
    delivery = Delivery(
        stream="KAIWO_OBS",
        consumer="recorder-obs",
        stream_sequence=1,
        attempt=1,
        subject="kaiwo.obs.kaiwojob.team-a.corr-1",
        headers=headers,
        body=b'{"kind": "KaiwoJob"}',
    )

    event = record_of(delivery, now=LATER)

    assert event.type == MALFORMED_TYPE
    assert event.event_id == "evt-1"
    assert event.time == NOW
    assert event.correlation_id == "corr-1"
    assert "Field required" in event.data["reason"]


def test_a_plan_whose_fingerprint_is_not_its_plans_is_malformed(samples: Any) -> None:
    plan = samples.plan_decision(samples.job_observation().envelope)
    delivery = delivery_of(plan, stream="KAIWO_PLAN", sequence=3)
    tampered = {**json.loads(delivery.body), "fingerprint": "0" * 64}
    delivery = replace(delivery, body=json.dumps(tampered).encode())

    event = record_of(delivery, now=LATER)

    assert event.type == MALFORMED_TYPE
    assert event.event_id == plan.envelope.id
    assert "fingerprint does not match the plan" in event.data["reason"]
    assert event.data["body"]["fingerprint"] == "0" * 64


def test_the_payload_is_checked_whatever_the_case_of_the_type_header(samples: Any) -> None:
    delivery = delivery_of(samples.job_observation())
    shouted = {key.upper(): value for key, value in delivery.headers.items()}
    broken = replace(delivery, headers=shouted, body=b'{"kind": "KaiwoJob"}')

    assert record_of(replace(delivery, headers=shouted), now=LATER).type == (
        "ai.silogen.kaiwo.obs.observed.v1"
    )
    assert record_of(broken, now=LATER).type == MALFORMED_TYPE


def test_a_body_that_is_json_but_not_an_object_is_malformed(samples: Any) -> None:
    delivery = replace(delivery_of(samples.job_observation()), body=b"[1, 2]")

    event = record_of(delivery, now=LATER)

    assert event.type == MALFORMED_TYPE
    assert event.data["reason"] == "not-an-object: the body is a JSON array, not an object"
    assert event.data["failure"] == "not-an-object"
    assert event.data["body"] == [1, 2]


@pytest.mark.parametrize(
    ("body", "failure"),
    [
        (b"[" * 5000 + b"]" * 5000, "too-deep"),
        (b'{"n": 1e400}', "number-out-of-range"),
        (b'{"n": ' + b"7" * 5000 + b"}", "number-out-of-range"),
    ],
    ids=["5000-deep", "float-overflow", "5000-digits"],
)
def test_a_body_json_cannot_hold_safely_is_recorded_raw_as_text(
    samples: Any, body: bytes, failure: str
) -> None:
    delivery = replace(delivery_of(samples.job_observation()), body=body)

    event = record_of(delivery, now=LATER)

    assert event.type == MALFORMED_TYPE
    assert event.data["failure"] == failure
    assert event.data["bodyEncoding"] == "text"
    assert decode_body(event.data["body"], "text") == body


def test_an_event_on_a_subject_that_does_not_fit_it_is_malformed(samples: Any) -> None:
    sent = samples.job_observation()
    elsewhere = f"kaiwo.plan.kaiwojob.team-a.{samples.JOB_UID}"

    event = record_of(replace(delivery_of(sent), subject=elsewhere), now=LATER)

    assert event.type == MALFORMED_TYPE
    assert event.data["failure"] == "wrong-subject"
    assert event.data["reason"] == (
        "wrong-subject: a obs event (ai.silogen.kaiwo.obs.observed.v1) on a plan subject "
        f"'{elsewhere}'"
    )


def test_a_message_without_any_header_is_kept_under_its_stream_position() -> None:
    delivery = Delivery(
        stream="KAIWO_RES",
        consumer="recorder-res",
        stream_sequence=42,
        attempt=1,
        subject="kaiwo.res.applied.kaiwojob.team-a.u1",
        headers={},
        body=b"\xff\xfe not json",
    )

    event = record_of(delivery, now=LATER)

    assert event.type == MALFORMED_TYPE
    assert event.event_id == "malformed:KAIWO_RES:42"
    assert event.correlation_id == "KAIWO_RES:42"
    assert event.stream_id == "workload/KAIWO_RES:42"
    assert event.data["bodyEncoding"] == "base64"
    assert decode_body(event.data["body"], "base64") == b"\xff\xfe not json"


def test_a_dead_letter_is_its_own_event_caused_by_the_original(samples: Any) -> None:
    sent = samples.job_observation()
    original = delivery_of(sent, sequence=12)
    subject, headers, body = dead_letter(
        original, consumer="planner-obs", reason="rejected: bad spec", attempts=1
    )
    delivery = Delivery(
        stream="KAIWO_DLQ",
        consumer="recorder-dlq",
        stream_sequence=2,
        attempt=1,
        subject=subject,
        headers=headers,
        body=body,
    )

    event = record_of(delivery, now=LATER)

    assert event.type == DEAD_LETTER_TYPE
    # The dead letter's Nats-Msg-Id and the first 16 hex digits of SHA-256 of the ce-id.
    assert event.event_id == "dlq:KAIWO_OBS:planner-obs:12:f7d46d351fe608d4"
    assert event.stream_id == "deadletter/KAIWO_OBS/planner-obs"
    assert event.causation_id == f"{samples.JOB_UID}:100"
    assert event.correlation_id == samples.JOB_UID
    assert event.source == "/kaiwo/planner"
    assert event.time == LATER
    assert event.data["reason"] == "rejected: bad spec"
    assert event.data["consumer"] == "planner-obs"
    assert event.data["sequence"] == 12
    assert event.data["deliveries"] == 1
    assert event.data["originalType"] == "ai.silogen.kaiwo.obs.observed.v1"
    assert event.data["body"] == json.loads(original.body)
    assert event.data["headers"]["ce-id"] == f"{samples.JOB_UID}:100"


def test_a_max_deliveries_advisory_is_recorded_with_the_server_time() -> None:
    advisory = {
        "type": "io.nats.jetstream.advisory.v1.max_deliver",
        "id": "Zr9f3",
        "timestamp": "2026-03-01T12:03:04.123456789Z",
        "stream": "KAIWO_PLAN",
        "consumer": "executor-plan",
        "stream_seq": 5,
        "deliveries": 6,
    }
    delivery = Delivery(
        stream="KAIWO_DLQ",
        consumer="recorder-dlq",
        stream_sequence=3,
        attempt=1,
        subject="$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.KAIWO_PLAN.executor-plan",
        headers={},
        body=json.dumps(advisory).encode(),
    )

    event = record_of(delivery, now=LATER)

    assert event.type == MAX_DELIVERIES_TYPE
    assert event.event_id == "advisory:Zr9f3"
    assert event.stream_id == "deadletter/KAIWO_PLAN/executor-plan"
    assert event.time == datetime(2026, 3, 1, 12, 3, 4, 123456, tzinfo=UTC)
    assert event.data == advisory


def test_bodies_round_trip_through_their_recorded_form() -> None:
    for raw, encoding in ((b'{"a": [1, 2]}', "json"), (b"plain words", "text")):
        value, found = body_value(raw)
        assert found == encoding
        assert body_value(decode_body(value, found))[0] == value


def test_a_raw_record_keeps_the_message_time_only_when_consumers_could_use_it(
    samples: Any,
) -> None:
    delivery = delivery_of(samples.job_observation())
    at_the_edge = {**delivery.headers, "ce-time": "9999-12-31T23:59:59-14:00"}

    event = record_of(replace(delivery, headers=at_the_edge), now=LATER)

    assert event.type == MALFORMED_TYPE
    assert event.time == LATER


def test_a_body_at_the_depth_limit_is_kept_as_text_so_the_row_can_be_read_back(
    samples: Any,
) -> None:
    at_the_limit = b"[" * 201 + b"]" * 201  # parses; one level down in a row it would not
    delivery = replace(delivery_of(samples.job_observation()), body=at_the_limit)

    event = record_of(delivery, now=LATER)

    assert event.data["failure"] == "not-an-object"
    assert (event.data["bodyEncoding"], event.data["body"]) == ("text", at_the_limit.decode())


def _dead_letter_row(sent: Any, *, sequence: int, reason: str, dlq_sequence: int) -> Any:
    subject, headers, body = dead_letter(
        delivery_of(sent, sequence=sequence), consumer="planner-obs", reason=reason, attempts=5
    )
    letter = Delivery(
        stream="KAIWO_DLQ",
        consumer="recorder-dlq",
        stream_sequence=dlq_sequence,
        attempt=1,
        subject=subject,
        headers=headers,
        body=body,
    )
    return record_of(letter, now=LATER)


def test_dead_letters_of_two_messages_at_one_sequence_of_two_stream_lifetimes_are_both_kept(
    samples: Any,
) -> None:
    # NATS lost its streams (an emptyDir), they were made again, and sequence 7 of KAIWO_OBS
    # now holds another message; the event store kept the first lifetime's dead letter.
    first = _dead_letter_row(
        samples.job_observation(resource_version="100"),
        sequence=7,
        reason="first lifetime",
        dlq_sequence=3,
    )
    second = _dead_letter_row(
        samples.job_observation(resource_version="150"),
        sequence=7,
        reason="after the streams were made again",
        dlq_sequence=3,
    )
    # The same message dead-lettered again (the relay after the planner) is the same fact.
    again = _dead_letter_row(
        samples.job_observation(resource_version="150"),
        sequence=7,
        reason="max deliveries (5) exhausted without an acknowledgement",
        dlq_sequence=4,
    )

    async def store_all() -> list[Any]:
        store = InMemoryEventStore()
        for row in (first, second, again):
            await store.append_next([row])
        return [event.data["reason"] for event in await store.read_stream(first.stream_id)]

    assert asyncio.run(store_all()) == ["first lifetime", "after the streams were made again"]
