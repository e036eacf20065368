"""The envelope: binary (NATS headers) and structured round trips, causation, ids."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from kaiwo_contracts.events import (
    ActionOutcome,
    ApplyResultV1,
    Envelope,
    EnvelopeFormatError,
    ObservedObjectV1,
    PlanDecidedV1,
    RawPayload,
    observed_event_id,
    plan_event_id,
)
from kaiwo_contracts.events.envelope import body_json
from kaiwo_contracts.events.plans import FINGERPRINT_CHECKED_BY_READER
from kaiwo_contracts.plans import ObjectRef, Plan
from pydantic import ValidationError

WHEN = datetime(2026, 3, 1, 12, 30, 5, tzinfo=UTC)
UID = "0b8f0a52-2a4c-4c38-9a43-1f7d52a1c001"


def observation(name: str = "train.v1") -> ObservedObjectV1:
    return ObservedObjectV1(
        kind="KaiwoJob",
        api_version="kaiwo.silogen.ai/v1alpha1",
        namespace="team-a",
        name=name,
        uid=UID,
        resource_version="17",
        event_type="ADDED",
        object={"metadata": {"name": name, "uid": UID}},
    )


def observed_envelope() -> Envelope[ObservedObjectV1]:
    return Envelope.new(
        data=observation(),
        source="/kaiwo/watcher",
        time=WHEN,
        correlationid=UID,
        subject="team-a/train.v1",
        id=f"{UID}:17",
    )


EXPECTED_HEADERS = {
    "ce-id": f"{UID}:17",
    "ce-source": "/kaiwo/watcher",
    "ce-specversion": "1.0",
    "ce-type": "ai.silogen.kaiwo.obs.observed.v1",
    "ce-subject": "team-a/train.v1",
    "ce-time": "2026-03-01T12:30:05Z",
    "ce-correlationid": UID,
    "content-type": "application/json",
    "Nats-Msg-Id": f"{UID}:17",
}
EXPECTED_BODY = (
    b'{"apiVersion":"kaiwo.silogen.ai/v1alpha1","eventType":"ADDED","kind":"KaiwoJob",'
    b'"name":"train.v1","namespace":"team-a","object":{"metadata":{"name":"train.v1",'
    b'"uid":"0b8f0a52-2a4c-4c38-9a43-1f7d52a1c001"}},"resourceVersion":"17",'
    b'"uid":"0b8f0a52-2a4c-4c38-9a43-1f7d52a1c001"}'
)


def test_binary_mode_puts_attributes_in_ce_headers_and_data_in_the_body() -> None:
    headers, body = observed_envelope().to_nats()

    assert headers == EXPECTED_HEADERS
    assert body == EXPECTED_BODY


def test_binary_mode_round_trips() -> None:
    parsed = Envelope[ObservedObjectV1].from_nats(EXPECTED_HEADERS, EXPECTED_BODY)

    assert parsed == observed_envelope()
    assert parsed.data.name == "train.v1"
    assert parsed.causationid is None


def test_header_names_are_matched_whatever_their_case() -> None:
    shouted = {key.upper(): value for key, value in EXPECTED_HEADERS.items()}

    assert Envelope[ObservedObjectV1].from_nats(shouted, EXPECTED_BODY) == observed_envelope()


def test_an_already_parsed_body_gives_the_same_envelope() -> None:
    data = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "eventType": "ADDED",
        "kind": "KaiwoJob",
        "name": "train.v1",
        "namespace": "team-a",
        "object": {"metadata": {"name": "train.v1", "uid": UID}},
        "resourceVersion": "17",
        "uid": UID,
    }

    parsed = Envelope[ObservedObjectV1].from_nats_data(EXPECTED_HEADERS, data)

    assert parsed == observed_envelope()


def test_an_already_parsed_body_that_is_not_the_payload_is_a_format_error() -> None:
    with pytest.raises(EnvelopeFormatError, match="apiVersion"):
        Envelope[ObservedObjectV1].from_nats_data(EXPECTED_HEADERS, {"kind": "KaiwoJob"})


def test_structured_mode_is_one_json_object_without_absent_attributes() -> None:
    document = observed_envelope().to_structured()

    assert set(document) == {
        "id",
        "source",
        "specversion",
        "type",
        "subject",
        "time",
        "datacontenttype",
        "correlationid",
        "data",
    }
    assert document["time"] == "2026-03-01T12:30:05Z"
    assert document["data"]["resourceVersion"] == "17"
    assert Envelope[ObservedObjectV1].from_structured(document) == observed_envelope()
    assert (
        Envelope[ObservedObjectV1].from_structured(observed_envelope().to_structured_json())
        == observed_envelope()
    )


def test_raw_payload_keeps_an_unknown_body_verbatim() -> None:
    parsed = Envelope[RawPayload].from_nats(EXPECTED_HEADERS, EXPECTED_BODY)

    assert parsed.data.model_dump()["resourceVersion"] == "17"
    assert parsed.type == "ai.silogen.kaiwo.obs.observed.v1"


@pytest.mark.parametrize(
    ("headers", "body", "complaint"),
    [
        ({k: v for k, v in EXPECTED_HEADERS.items() if k != "ce-type"}, EXPECTED_BODY, "type"),
        ({**EXPECTED_HEADERS, "ce-time": "2026-03-01T12:30:05"}, EXPECTED_BODY, "time"),
        (EXPECTED_HEADERS, b"{not json", "^not-json: key must be a string"),
        (EXPECTED_HEADERS, b'{"kind": "KaiwoJob"}', "apiVersion"),
        ({**EXPECTED_HEADERS, "ce-specversion": "0.3"}, EXPECTED_BODY, "specversion"),
        ({**EXPECTED_HEADERS, "ce-source": "watcher"}, EXPECTED_BODY, "source"),
    ],
    ids=["no-type", "naive-time", "not-json", "missing-field", "old-spec", "bad-source"],
)
def test_invalid_messages_raise_a_format_error_naming_the_problem(
    headers: dict[str, str], body: bytes, complaint: str
) -> None:
    with pytest.raises(EnvelopeFormatError, match=complaint):
        Envelope[ObservedObjectV1].from_nats(headers, body)


def test_type_must_match_the_payload() -> None:
    wrong = {**EXPECTED_HEADERS, "ce-type": "ai.silogen.kaiwo.plan.decided.v1"}

    with pytest.raises(EnvelopeFormatError, match="does not match the payload"):
        Envelope[ObservedObjectV1].from_nats(wrong, EXPECTED_BODY)


def test_time_must_carry_a_zone() -> None:
    with pytest.raises(ValidationError):
        Envelope.new(
            data=observation(),
            source="/kaiwo/watcher",
            time=datetime(2026, 3, 1, 12, 30),
            correlationid=UID,
        )


def test_new_envelopes_get_a_random_uuid_when_no_id_is_given() -> None:
    first = Envelope.new(data=observation(), source="/kaiwo/watcher", time=WHEN, correlationid=UID)
    second = Envelope.new(data=observation(), source="/kaiwo/watcher", time=WHEN, correlationid=UID)

    assert uuid.UUID(first.id).version == 4
    assert first.id != second.id


def test_a_caused_event_keeps_correlation_and_trace_and_points_at_its_cause() -> None:
    cause = Envelope.new(
        data=observation(),
        source="/kaiwo/watcher",
        time=WHEN,
        correlationid=UID,
        subject="team-a/train.v1",
        traceparent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        id=f"{UID}:17",
    )
    plan = Plan(
        owner=ObjectRef(
            api_version="kaiwo.silogen.ai/v1alpha1",
            kind="KaiwoJob",
            name="train.v1",
            namespace="team-a",
            uid=UID,
        )
    )

    child = cause.caused(data=PlanDecidedV1.of(plan), source="/kaiwo/planner", time=WHEN)

    assert child.correlationid == UID
    assert child.causationid == f"{UID}:17"
    assert child.traceparent == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert child.subject == "team-a/train.v1"
    assert child.type == "ai.silogen.kaiwo.plan.decided.v1"
    assert child.source == "/kaiwo/planner"


def test_observed_event_ids_are_uid_and_resource_version() -> None:
    assert observed_event_id(uid=UID, resource_version="17") == f"{UID}:17"


def test_plan_event_ids_repeat_for_the_same_decision_and_differ_for_another_cause() -> None:
    owner = ObjectRef(
        api_version="kaiwo.silogen.ai/v1alpha1", kind="KaiwoJob", name="a", namespace="n", uid=UID
    )
    plan = Plan(owner=owner, status={"status": "PENDING"})
    same_plan = Plan(owner=owner, status={"status": "PENDING"}, observed_resource_version="99")
    other_plan = Plan(owner=owner, status={"status": "RUNNING"})

    first = plan_event_id(plan=plan, causation_id=f"{UID}:17")

    assert uuid.UUID(first).version == 5
    assert plan_event_id(plan=same_plan, causation_id=f"{UID}:17") == first
    assert plan_event_id(plan=plan, causation_id=f"{UID}:18") != first
    assert plan_event_id(plan=other_plan, causation_id=f"{UID}:17") != first


def test_a_plan_decision_rejects_a_fingerprint_of_another_plan() -> None:
    owner = ObjectRef(api_version="v1", kind="KaiwoJob", name="a", namespace="n", uid=UID)

    with pytest.raises(ValidationError, match="fingerprint"):
        PlanDecidedV1(plan=Plan(owner=owner), fingerprint="0" * 64)


def test_a_reader_that_checks_the_fingerprint_itself_may_leave_it_to_later() -> None:
    owner = ObjectRef(api_version="v1", kind="KaiwoJob", name="a", namespace="n", uid=UID)
    plan = Plan(owner=owner, status={"status": "PENDING"})
    data = {"plan": plan.model_dump(mode="json"), "fingerprint": "0" * 64}

    deferred = PlanDecidedV1.model_validate(data, context={FINGERPRINT_CHECKED_BY_READER: True})

    assert not deferred.fingerprint_holds()
    assert PlanDecidedV1.of(plan).fingerprint_holds()
    with pytest.raises(ValidationError, match="fingerprint"):
        PlanDecidedV1.model_validate(data)
    with pytest.raises(ValidationError, match="fingerprint"):
        PlanDecidedV1.model_validate(data, context={FINGERPRINT_CHECKED_BY_READER: "yes"})


def test_a_plan_decision_takes_the_fingerprint_its_caller_already_has() -> None:
    owner = ObjectRef(api_version="v1", kind="KaiwoJob", name="a", namespace="n", uid=UID)
    plan = Plan(owner=owner, status={"status": "PENDING"})

    given = PlanDecidedV1.of(plan, fingerprint=plan.fingerprint())

    assert given == PlanDecidedV1.of(plan)


def test_an_envelope_refuses_a_plan_decision_given_the_fingerprint_of_another_plan() -> None:
    owner = ObjectRef(api_version="v1", kind="KaiwoJob", name="a", namespace="n", uid=UID)
    plan = Plan(owner=owner, status={"status": "PENDING"})
    wrong = PlanDecidedV1.of(plan, fingerprint=Plan(owner=owner).fingerprint())

    with pytest.raises(ValidationError, match="fingerprint does not match"):
        Envelope.new(
            data=wrong,
            source="/kaiwo/planner",
            time=WHEN,
            correlationid=UID,
        )


def test_a_plan_decision_built_here_reads_back_equal_from_the_wire() -> None:
    owner = ObjectRef(api_version="v1", kind="KaiwoJob", name="a", namespace="n", uid=UID)
    job = ObjectRef(api_version="batch/v1", kind="Job", name="a", namespace="n")
    config = ObjectRef(api_version="v1", kind="ConfigMap", name="a", namespace="n")
    desired = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n"}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a", "namespace": "n"}},
    ]
    built = PlanDecidedV1.of(
        Plan(owner=owner, desired=desired, status={"status": "PENDING"}),
        planned_at=WHEN,
        obs_sequence=17,
        absent=(job, config),
    )

    wire = built.model_dump(mode="json", by_alias=True)
    # sorted by apiVersion, kind, namespace, name: batch/v1 before v1
    assert [ref["kind"] for ref in wire["absent"]] == ["Job", "ConfigMap"]
    assert wire["obsSequence"] == 17
    assert PlanDecidedV1.model_validate(wire) == built
    with pytest.raises(ValueError, match="obs_sequence"):
        PlanDecidedV1.of(Plan(owner=owner), obs_sequence=-1)
    with pytest.raises(ValueError, match="not in the plan's desired objects: Job/n/a"):
        PlanDecidedV1.of(Plan(owner=owner), absent=(job,))


def test_an_apply_result_outcome_follows_its_actions() -> None:
    owner = ObjectRef(api_version="v1", kind="KaiwoJob", name="a", namespace="n", uid=UID)
    job = ObjectRef(api_version="batch/v1", kind="Job", name="a", namespace="n")
    actions = (
        ActionOutcome(operation="apply", target=job, outcome="applied", http_status=200),
        ActionOutcome(
            operation="status",
            target=owner,
            outcome="failed",
            reason="Conflict",
            http_status=409,
            attempts=3,
        ),
    )

    result = ApplyResultV1.summarise(
        plan_id="p-1", plan_fingerprint="f", owner=owner, actions=actions
    )

    assert result.outcome == "failed"
    assert result.failures == (actions[1],)
    with pytest.raises(ValidationError, match="contradicts"):
        ApplyResultV1(
            plan_id="p-1", plan_fingerprint="f", owner=owner, outcome="applied", actions=actions
        )
    with pytest.raises(ValidationError, match="reason"):
        ActionOutcome(operation="delete", target=job, outcome="failed")


def test_observed_identity_must_agree_with_the_object_metadata() -> None:
    with pytest.raises(ValidationError, match="differs from object metadata"):
        ObservedObjectV1(
            kind="Node",
            api_version="v1",
            name="node-1.example.com",
            uid="u-1",
            resource_version="3",
            event_type="SYNC",
            object={"metadata": {"name": "node-2.example.com", "uid": "u-1"}},
        )


def test_a_body_is_compact_json_with_sorted_keys() -> None:
    assert body_json({"b": 1, "a": [True, None, "é", 2.5]}) == (
        b'{"a":[true,null,"\xc3\xa9",2.5],"b":1}'
    )


def test_a_body_takes_integers_beyond_64_bits_and_refuses_a_lone_surrogate() -> None:
    assert body_json({"n": 2**70}) == b'{"n":1180591620717411303424}'
    with pytest.raises(UnicodeEncodeError):
        body_json({"s": "\ud800"})
