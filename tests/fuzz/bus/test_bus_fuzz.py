"""Fuzzing the bus side: decoding a message, and the recorder's mapping of it to a row.

Messages start as valid envelopes drawn from the models (:mod:`.model_strategies`) and are
then, most of the time, damaged: bytes cut, inserted or flipped, bodies wrapped in deep
nesting or given numbers JSON cannot hold, headers dropped, re-cased or replaced, subjects
that do not fit. Properties:

* decoding raises nothing but :class:`EnvelopeFormatError`; what it returns encodes and
  decodes to itself; an undamaged message decodes to the envelope it came from;
* the recorder's mapping never raises, and its row is strict JSON (what the databases take);
  an undamaged message becomes a row under its own id, type and body.

How many cases: ``HYPOTHESIS_PROFILE=ci`` (the default) runs 1,000 per target, ``fuzz``
(``make fuzz``) 100,000.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from kaiwo_contracts.events import (
    PAYLOAD_TYPES,
    Envelope,
    EnvelopeFormatError,
    EventPayload,
    decode_envelope,
    decode_event,
)
from kaiwo_contracts.events.autoscaling import ActiveRequestsV1, ScaleDecidedV1
from kaiwo_contracts.events.monitor import PreemptionDecidedV1, UnderutilizedV1, UtilizationV1
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.public import PreemptionV1, WorkloadEventV1, WorkloadEventV2
from kaiwo_contracts.events.results import ApplyResultV1, PlanRefusedV1
from kaiwo_contracts.events.subjects import (
    MonitorTopic,
    SubjectError,
    load_report_subject,
    monitor_subject,
    observed_subject,
    plan_subject,
    public_workload_subject,
    result_subject,
    scale_subject,
)
from kaiwo_recorder.records import MALFORMED_TYPE, record_of
from kaiwo_runtime.bus import Delivery
from pydantic_core import from_json, to_json

from tests.fuzz.bus.model_strategies import envelopes
from tests.fuzz.damage import damage_body
from tests.fuzz.profiles import PROFILE
from tests.hostile.bus.corpus import ADVISORY

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
MODELS: tuple[type[EventPayload], ...] = tuple(PAYLOAD_TYPES.values())
ENVELOPES = {model: envelopes(model) for model in MODELS}  # built once: building is costly


@dataclass(frozen=True, slots=True)
class Message:
    """What a consumer is handed, and what it was before any damage (None: random)."""

    subject: str
    headers: dict[str, str]
    body: bytes
    model: type[EventPayload]
    original: Envelope[Any] | None


# ------------------------------------------------------------------- damage


def damage_headers(data: st.DataObject, headers: dict[str, str]) -> dict[str, str]:
    damaged = dict(headers)
    how = data.draw(
        st.sampled_from(["drop", "replace", "case", "add", "retype", "edge-time", "empty"])
    )
    keys = sorted(damaged)
    if how == "drop" and keys:
        damaged.pop(data.draw(st.sampled_from(keys)))
    elif how == "replace" and keys:
        damaged[data.draw(st.sampled_from(keys))] = data.draw(st.text(max_size=300))
    elif how == "case" and keys:
        key = data.draw(st.sampled_from(keys))
        damaged[key.upper()] = damaged.pop(key)
    elif how == "add":
        damaged[data.draw(st.text(min_size=1, max_size=12))] = data.draw(st.text(max_size=20))
    elif how == "edge-time":  # valid RFC 3339, but at the ends of what datetime can hold
        damaged["ce-time"] = data.draw(
            st.sampled_from(
                [
                    "9999-12-31T23:59:59-14:00",
                    "0001-01-01T00:00:00+14:00",
                    "9999-12-31T23:59:59.999999Z",
                    "1969-12-31T23:59:59Z",
                ]
            )
        )
    elif how == "retype":
        damaged["ce-type"] = data.draw(
            st.sampled_from([*PAYLOAD_TYPES, "ai.silogen.kaiwo.obs.other.v1", "x"])
        )
    else:
        damaged = {}
    return damaged


def subject_for(envelope: Envelope[Any]) -> str | None:
    """The subject the envelope's producer would publish it on (None when the payload's
    kind or namespace cannot be a subject token, as drawn values often cannot)."""
    data = envelope.data
    try:
        if isinstance(data, ObservedObjectV1):
            return observed_subject(kind=data.kind, namespace=data.namespace, uid=data.uid)
        if isinstance(data, PlanDecidedV1):
            owner = data.plan.owner
            uid = owner.uid or envelope.correlationid
            return plan_subject(kind=owner.kind, namespace=owner.namespace, uid=uid)
        if isinstance(data, ApplyResultV1 | PlanRefusedV1):
            owner = data.owner
            uid = owner.uid or envelope.correlationid
            outcome = data.outcome if isinstance(data, ApplyResultV1) else "refused"
            return result_subject(
                outcome=outcome, kind=owner.kind, namespace=owner.namespace, uid=uid
            )
        return _finding_subject(envelope)
    except SubjectError:
        return None


def _finding_subject(envelope: Envelope[Any]) -> str:
    """The subject of a public event, a monitor finding or a gateway event."""
    data = envelope.data
    if isinstance(data, ActiveRequestsV1):
        return load_report_subject(data.gateway)
    if isinstance(data, ScaleDecidedV1):
        uid = data.model.uid or envelope.correlationid
        return scale_subject(namespace=data.model.namespace or "", uid=uid)
    if isinstance(data, WorkloadEventV1 | WorkloadEventV2 | PreemptionV1):
        workload_ref = data.victim if isinstance(data, PreemptionV1) else data.workload
        return public_workload_subject(
            namespace=workload_ref.namespace, kind=workload_ref.kind, uid=workload_ref.uid
        )
    topic = MONITOR_TOPICS[type(data)]
    workload = data.workload
    uid = workload.uid or envelope.correlationid
    return monitor_subject(topic=topic, namespace=workload.namespace, uid=uid)


MONITOR_TOPICS: dict[type[Any], MonitorTopic] = {
    UtilizationV1: "utilization",
    UnderutilizedV1: "underutilized",
    PreemptionDecidedV1: "preemption",
}


@st.composite
def messages(draw: st.DrawFn, *, damaged: bool | None = None) -> Message:
    data = draw(st.data())
    model = draw(st.sampled_from(MODELS))
    if damaged is None and draw(st.integers(0, 20)) == 0:  # now and then pure noise
        return Message(
            subject=draw(st.sampled_from(["kaiwo.obs.x._cluster.u", "elsewhere", "kaiwo.dlq.S.c"])),
            headers=draw(st.dictionaries(st.text(max_size=12), st.text(max_size=40), max_size=6)),
            body=draw(st.binary(max_size=400)),
            model=model,
            original=None,
        )
    envelope = draw(ENVELOPES[model])
    headers, body = envelope.to_nats()
    subject = subject_for(envelope) or "elsewhere"
    hurt = draw(st.booleans()) if damaged is None else damaged
    if not hurt:
        return Message(subject, headers, body, model, envelope)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        part = draw(st.sampled_from(["body", "headers", "subject"]))
        if part == "body":
            body = damage_body(data, body)
        elif part == "headers":
            headers = damage_headers(data, headers)
        else:
            subject = draw(
                st.sampled_from(
                    [
                        "kaiwo.obs.kaiwojob.team-a.other-uid",
                        "kaiwo.plan.kaiwojob.team-a.other-uid",
                        "kaiwo.obs.kaiwojob",
                        "kaiwo.res.applied.kaiwojob._cluster.u",
                        f"{ADVISORY}.KAIWO_OBS.planner-obs",
                        "kaiwo.dlq.KAIWO_OBS.planner-obs",
                        "kaiwo",
                    ]
                )
            )
    return Message(subject, headers, body, model, None)


# ------------------------------------------------------------------- (a) decoding


def decode_or_none(message: Message) -> Envelope[Any] | None:
    """Decoded, or None for the one classified error; anything else fails the test."""
    try:
        return decode_envelope(
            message.headers, message.body, message.model, subject=message.subject
        )
    except EnvelopeFormatError:
        return None


@PROFILE
@given(messages())
def test_decoding_raises_only_the_classified_error_and_what_it_returns_round_trips(
    message: Message,
) -> None:
    decoded = decode_or_none(message)
    with contextlib.suppress(EnvelopeFormatError):
        decode_event(message.headers, message.body, subject=message.subject)
    if decoded is None:
        return
    headers, body = decoded.to_nats()
    assert decode_envelope(headers, body, message.model) == decoded
    if message.original is not None:
        assert decoded == message.original


@PROFILE
@given(messages(damaged=False))
def test_every_valid_envelope_decodes_to_itself(message: Message) -> None:
    assert message.original is not None
    assert decode_envelope(message.headers, message.body, message.model) == message.original
    event = decode_event(message.headers, message.body)
    assert event.envelope.id == message.original.id
    assert event.body == json.loads(message.body)


# ------------------------------------------------------------------- (b) recording


@PROFILE
@given(messages(), st.sampled_from(["KAIWO_OBS", "KAIWO_PLAN", "KAIWO_DLQ"]), st.integers(1, 2**40))
def test_the_recorder_maps_every_message_to_a_storable_row(
    message: Message, stream: str, sequence: int
) -> None:
    delivery = Delivery(
        stream=stream,
        consumer="recorder-test",
        stream_sequence=sequence,
        attempt=1,
        subject=message.subject,
        headers=message.headers,
        body=message.body,
    )

    event = record_of(delivery, now=NOW)

    for part in (event.data, event.metadata):
        strict = json.dumps(part, allow_nan=False)  # what PostgreSQL's jsonb takes
        assert json.loads(strict) == part
        assert from_json(to_json(part)) == part  # how the SQL store writes and reads it
    assert event.time.utcoffset() is not None
    assert event.time.astimezone(UTC).year >= 1
    original = message.original
    if original is not None and message.subject != "elsewhere":
        assert (event.event_id, event.type) == (original.id, original.type)
        assert event.data == json.loads(message.body)
    if event.type == MALFORMED_TYPE:
        assert event.data["failure"]
