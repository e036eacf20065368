"""Decoding a message: every hostile body or header is one classified error, nothing else."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from kaiwo_contracts.events import (
    MAX_MESSAGE_BYTES,
    DecodeFailure,
    Envelope,
    EnvelopeFormatError,
    ObservedObjectV1,
    PlanDecidedV1,
    RawPayload,
    decode_envelope,
    decode_event,
    parse_body,
)
from kaiwo_contracts.plans import ObjectRef, Plan

UID = "0b8f0a52-2a4c-4c38-9a43-1f7d52a1c001"
OTHER_UID = "5d2e9c1e-77a1-4f0e-8f0a-0c1b2d3e4f02"
SUBJECT = f"kaiwo.obs.kaiwojob.team-a.{UID}"
HEADERS = {
    "ce-id": f"{UID}:17",
    "ce-source": "/kaiwo/watcher",
    "ce-specversion": "1.0",
    "ce-type": "ai.silogen.kaiwo.obs.observed.v1",
    "ce-subject": "team-a/train",
    "ce-time": "2026-03-01T12:30:05Z",
    "ce-correlationid": UID,
    "content-type": "application/json",
    "Nats-Msg-Id": f"{UID}:17",
}
BODY = (
    b'{"apiVersion":"kaiwo.silogen.ai/v1alpha1","eventType":"ADDED","kind":"KaiwoJob",'
    b'"name":"train","namespace":"team-a","object":{"metadata":{"name":"train","uid":"'
    + UID.encode()
    + b'"}},"resourceVersion":"17","uid":"'
    + UID.encode()
    + b'"}'
)


def nested(depth: int) -> bytes:
    """An object whose ``object`` value nests arrays so that the body is ``depth`` deep."""
    inner = b"[" * (depth - 2) + b"]" * (depth - 2)
    return b'{"object":{"x":' + inner + b"}}" if depth > 2 else b'{"object":{}}'


def failure_of(headers: dict[str, str], body: bytes, *, subject: str = SUBJECT) -> str:
    with pytest.raises(EnvelopeFormatError) as raised:
        decode_envelope(headers, body, ObservedObjectV1, subject=subject)
    return str(raised.value)


def test_a_valid_observation_decodes_and_fits_its_subject() -> None:
    envelope = decode_envelope(HEADERS, BODY, ObservedObjectV1, subject=SUBJECT)

    assert envelope.id == f"{UID}:17"
    assert envelope.data.uid == UID
    assert envelope.time == datetime(2026, 3, 1, 12, 30, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("body", "failure"),
    [
        (b"[" * 5000 + b"]" * 5000, DecodeFailure.TOO_DEEP),
        (b'{"a":' * 5000 + b"1" + b"}" * 5000, DecodeFailure.TOO_DEEP),
        (b'{"n":' + b"9" * 5000 + b"}", DecodeFailure.NUMBER_OUT_OF_RANGE),
        (b'{"n":18446744073709551616}', DecodeFailure.NUMBER_OUT_OF_RANGE),
        (b'{"n":-18446744073709551616}', DecodeFailure.NUMBER_OUT_OF_RANGE),
        (b'{"n":1e400}', DecodeFailure.NUMBER_OUT_OF_RANGE),
        (b'{"n":[1, -1.5E+999]}', DecodeFailure.NUMBER_OUT_OF_RANGE),
        (b'{"n":NaN}', DecodeFailure.NOT_JSON),
        (b'{"n":Infinity}', DecodeFailure.NOT_JSON),
        (b'{"s":"\xff\xfe"}', DecodeFailure.NOT_JSON),
        (b'{"s":"\\ud800"}', DecodeFailure.NOT_JSON),
        (b"\xef\xbb\xbf{}", DecodeFailure.NOT_JSON),
        (b"", DecodeFailure.NOT_JSON),
        (b"{not json", DecodeFailure.NOT_JSON),
        (b"[1, 2]", DecodeFailure.NOT_AN_OBJECT),
        (b'"text"', DecodeFailure.NOT_AN_OBJECT),
        (b"null", DecodeFailure.NOT_AN_OBJECT),
        (b'{"s":"' + b"x" * MAX_MESSAGE_BYTES + b'"}', DecodeFailure.TOO_LARGE),
    ],
    ids=[
        "arrays-5000-deep",
        "objects-5000-deep",
        "5000-digit-integer",
        "integer-2-to-the-64",
        "integer-minus-2-to-the-64",
        "float-overflow",
        "float-overflow-in-a-list",
        "nan",
        "infinity",
        "invalid-utf-8",
        "lone-surrogate",
        "byte-order-mark",
        "empty",
        "not-json",
        "array",
        "string",
        "null",
        "over-one-mebibyte",
    ],
)
def test_hostile_bodies_are_one_classified_error(body: bytes, failure: DecodeFailure) -> None:
    with pytest.raises(EnvelopeFormatError) as raised:
        parse_body(body)

    assert raised.value.failure is failure
    assert str(raised.value).startswith(f"{failure.value}: ")


def test_the_parser_limits_nesting_at_201_levels() -> None:
    deepest = parse_body(nested(201))["object"]["x"]
    for _ in range(197):  # 199 arrays inside the two objects
        deepest = deepest[0]

    assert deepest == [[]]
    with pytest.raises(EnvelopeFormatError, match=r"^too-deep: nested deeper than 201"):
        parse_body(nested(202))


def test_numbers_inside_the_64_bit_range_are_kept_exactly() -> None:
    body = b'{"big":18446744073709551615,"small":-18446744073709551615,"f":1.5e308,"e":"1e999"}'

    assert parse_body(body) == {
        "big": 18446744073709551615,
        "small": -18446744073709551615,
        "f": 1.5e308,
        "e": "1e999",
    }


@pytest.mark.parametrize(
    ("headers", "body", "expected"),
    [
        (
            {k: v for k, v in HEADERS.items() if k != "ce-id"},
            BODY,
            "invalid-envelope: id: Field required",
        ),
        (
            {**HEADERS, "ce-type": "ai.silogen.kaiwo.plan.decided.v1"},
            BODY,
            "wrong-type: type 'ai.silogen.kaiwo.plan.decided.v1' does not match the payload's "
            "event type 'ai.silogen.kaiwo.obs.observed.v1'",
        ),
        (
            {**HEADERS, "ce-type": "com.example.forged"},
            BODY,
            "wrong-type: type 'com.example.forged' does not match the payload's event type "
            "'ai.silogen.kaiwo.obs.observed.v1'",
        ),
        (
            {**HEADERS, "ce-subject": "team-a/train\r\nce-type: forged"},
            BODY,
            "invalid-envelope: subject: String should match pattern '^[^\\x00-\\x1f\\x7f]+$'",
        ),
        (
            {**HEADERS, "ce-correlationid": "x" * 300},
            BODY,
            "invalid-envelope: correlationid: String should have at most 256 characters",
        ),
        (
            HEADERS,
            BODY.replace(b'"resourceVersion":"17"', b'"resourceVersion":17'),
            "invalid-payload: data.resourceVersion: Input should be a valid string",
        ),
        (
            HEADERS,
            BODY.replace(b'"eventType":"ADDED"', b'"eventType":"EXPLODED"'),
            "invalid-payload: data.eventType: Input should be 'ADDED', 'MODIFIED', 'DELETED' "
            "or 'SYNC'",
        ),
    ],
    ids=[
        "missing-id",
        "another-type",
        "forged-type",
        "header-injection",
        "oversized-header",
        "number-for-string",
        "unknown-event-type",
    ],
)
def test_envelope_and_payload_problems_name_the_field(
    headers: dict[str, str], body: bytes, expected: str
) -> None:
    assert failure_of(headers, body) == expected


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        (
            f"kaiwo.obs.kaiwojob.team-a.{OTHER_UID}",
            f"wrong-subject: the subject's uid is '{OTHER_UID}', the payload's '{UID}' "
            f"(kaiwo.obs.kaiwojob.team-a.{OTHER_UID})",
        ),
        (
            f"kaiwo.obs.kaiwojob.team-b.{UID}",
            f"wrong-subject: the subject's namespace is 'team-b', the payload's 'team-a' "
            f"(kaiwo.obs.kaiwojob.team-b.{UID})",
        ),
        (
            f"kaiwo.obs.node._cluster.{UID}",
            f"wrong-subject: the subject's kind is 'node', the payload's 'kaiwojob' "
            f"(kaiwo.obs.node._cluster.{UID})",
        ),
        (
            f"kaiwo.plan.kaiwojob.team-a.{UID}",
            "wrong-subject: a obs event (ai.silogen.kaiwo.obs.observed.v1) on a plan subject "
            f"'kaiwo.plan.kaiwojob.team-a.{UID}'",
        ),
        (
            "kaiwo.obs.kaiwojob",
            "wrong-subject: 'kaiwo.obs.kaiwojob' does not have the tokens kind.scope.uid",
        ),
    ],
    ids=["other-uid", "other-namespace", "other-kind", "other-family", "malformed"],
)
def test_a_subject_that_does_not_fit_the_payload_is_refused(subject: str, expected: str) -> None:
    assert failure_of(HEADERS, BODY, subject=subject) == expected


@pytest.mark.parametrize(
    "subject",
    [
        f"kaiwo.obs.kaiwojob.team-a.{UID}.3",  # partitioned: the stored form
        "kaiwo.dlq.KAIWO_OBS.planner-obs",  # a dead letter keeps the original's headers
        "elsewhere.subject",  # not one of ours
    ],
    ids=["partitioned", "dead-letter", "foreign"],
)
def test_subjects_that_fit_or_are_not_checked(subject: str) -> None:
    assert decode_envelope(HEADERS, BODY, ObservedObjectV1, subject=subject).data.uid == UID


def test_any_type_decodes_with_its_model_and_keeps_the_parsed_body() -> None:
    decoded = decode_event(HEADERS, BODY, subject=SUBJECT)

    assert isinstance(decoded.envelope.data, ObservedObjectV1)
    assert decoded.body["object"] == {"metadata": {"name": "train", "uid": UID}}


def test_an_unknown_type_of_our_family_is_kept_raw_and_a_known_one_is_checked() -> None:
    newer = {**HEADERS, "ce-type": "ai.silogen.kaiwo.obs.forecast.v1"}

    decoded = decode_event(newer, b'{"anything":[1,2]}', subject=SUBJECT)

    assert isinstance(decoded.envelope.data, RawPayload)
    assert decoded.body == {"anything": [1, 2]}
    with pytest.raises(
        EnvelopeFormatError, match=r"^invalid-payload: data.kind: Field required; data.apiVersion"
    ):
        decode_event(HEADERS, b'{"anything":[1,2]}', subject=SUBJECT)


def test_a_plan_must_be_filed_under_its_owner() -> None:
    owner = ObjectRef(
        api_version="kaiwo.silogen.ai/v1alpha1",
        kind="KaiwoJob",
        name="train",
        namespace="team-a",
        uid=UID,
    )
    envelope = Envelope.new(
        data=PlanDecidedV1.of(Plan(owner=owner)),
        source="/kaiwo/planner",
        time=datetime(2026, 3, 1, tzinfo=UTC),
        correlationid=UID,
    )
    headers, body = envelope.to_nats()

    assert (
        decode_envelope(headers, body, PlanDecidedV1, subject=f"kaiwo.plan.kaiwojob.team-a.{UID}")
        == envelope
    )
    with pytest.raises(EnvelopeFormatError, match=r"^wrong-subject: the subject.s uid"):
        decode_envelope(
            headers, body, PlanDecidedV1, subject=f"kaiwo.plan.kaiwojob.team-a.{OTHER_UID}"
        )


@pytest.mark.parametrize(
    "moment",
    ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "1969-12-31T23:59:59Z"],
    ids=["overflows-utc", "underflows-utc", "before-1970"],
)
def test_a_time_consumers_could_not_compute_with_is_refused(moment: str) -> None:
    assert failure_of({**HEADERS, "ce-time": moment}, BODY) == (
        "invalid-envelope: time: Value error, must lie between 1970 and 9000 (UTC)"
    )


def test_metadata_that_is_not_an_object_is_an_invalid_payload() -> None:
    body = BODY.replace(b'"object":{"metadata":{', b'"object":{"x":{').replace(
        b'"object":{"x"', b'"object":{"metadata":[1],"x"'
    )

    assert failure_of(HEADERS, body) == (
        "invalid-payload: data: Value error, object.metadata must be an object"
    )


PUBLIC_BODY = (
    b'{"transition":"completed","workload":{"kind":"KaiwoJob","namespace":"team-a",'
    b'"name":"train","uid":"' + UID.encode() + b'"},"phase":"COMPLETE",'
    b'"observedAt":"2026-03-01T12:30:05Z","resourceVersion":"17"}'
)
PUBLIC_HEADERS = {
    **HEADERS,
    "ce-id": f"{UID}:completed:17",
    "ce-source": "/kaiwo/planner",
    "ce-type": "ai.silogen.kaiwo.public.workload.v1",
    "Nats-Msg-Id": f"{UID}:completed:17",
}


def test_a_public_event_decodes_on_its_own_subject_only() -> None:
    right = f"kaiwo.public.workload.team-a.kaiwojob.{UID}"

    decoded = decode_event(PUBLIC_HEADERS, PUBLIC_BODY, subject=right)
    assert decoded.envelope.data.transition == "completed"
    for wrong in (
        f"kaiwo.public.workload.team-a.kaiwojob.{OTHER_UID}",
        f"kaiwo.public.workload.team-b.kaiwojob.{UID}",
        f"kaiwo.public.workload.team-a.kaiwoservice.{UID}",
        f"kaiwo.obs.kaiwojob.team-a.{UID}",
    ):
        with pytest.raises(EnvelopeFormatError) as refused:
            decode_event(PUBLIC_HEADERS, PUBLIC_BODY, subject=wrong)
        assert refused.value.failure is DecodeFailure.WRONG_SUBJECT, wrong
