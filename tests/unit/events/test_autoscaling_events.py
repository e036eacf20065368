"""The gateway's load reports and the autoscaler's decisions: subjects, bytes, decoding."""

from __future__ import annotations

import pytest
from kaiwo_contracts.events import (
    DecodeFailure,
    EnvelopeFormatError,
    ScaleDecidedV1,
    decode_event,
)
from kaiwo_contracts.events.subjects import (
    Family,
    ParsedSubject,
    load_report_subject,
    parse_subject,
    scale_subject,
)

MODEL_UID = "0b8f0a52-2a4c-4c38-9a43-1f7d52a1c001"
OTHER_UID = "5d2e9c1e-77a1-4f0e-8f0a-0c1b2d3e4f02"
REPLICA = "kaiwo-gateway-7d9f-x2x/1"


def headers(event_type: str, correlation: str) -> dict[str, str]:
    return {
        "ce-id": "e-1",
        "ce-source": "/kaiwo/gateway",
        "ce-specversion": "1.0",
        "ce-type": event_type,
        "ce-time": "2026-03-01T12:30:05Z",
        "ce-correlationid": correlation,
        "content-type": "application/json",
    }


LOAD_BODY = (
    b'{"gateway":"kaiwo-gateway-7d9f-x2x/1","intervalSeconds":10.0,"models":[{"model":'
    b'{"apiVersion":"kubeai.org/v1","kind":"Model","name":"llm","namespace":"ai","uid":"'
    + MODEL_UID.encode()
    + b'"},"activeRequests":7,"waitingRequests":2}]}'
)
SCALE_BODY = (
    b'{"model":{"apiVersion":"kubeai.org/v1","kind":"Model","name":"llm","namespace":"ai",'
    b'"uid":"' + MODEL_UID.encode() + b'"},"generation":4,"fromReplicas":1,"replicas":3,'
    b'"cause":"load","activeRequests":250.0,"averageActiveRequests":212.5,'
    b'"windowSeconds":600.0,"samples":60,"targetRequests":100,"scaleDownDelaySeconds":30,'
    b'"reason":"scale up from 1 to 3"}'
)


def test_the_subjects_follow_the_documented_layout_and_parse_back() -> None:
    assert load_report_subject(REPLICA) == "kaiwo.gateway.load._cluster.kaiwo-gateway-7d9f-x2x_2F1"
    assert scale_subject(namespace="ai", uid=MODEL_UID) == f"kaiwo.gateway.scale.ai.{MODEL_UID}"
    assert parse_subject(load_report_subject(REPLICA)) == ParsedSubject(
        family=Family.GATEWAY, namespace=None, uid=REPLICA, qualifier="load"
    )
    assert parse_subject(f"kaiwo.gateway.scale.ai.{MODEL_UID}") == ParsedSubject(
        family=Family.GATEWAY, namespace="ai", uid=MODEL_UID, qualifier="scale"
    )


def test_a_load_report_decodes_on_its_replica_s_subject_only() -> None:
    wire_type = "ai.silogen.kaiwo.gateway.active-requests.v1"
    decoded = decode_event(
        headers(wire_type, REPLICA), LOAD_BODY, subject=load_report_subject(REPLICA)
    )
    [load] = decoded.envelope.data.models
    assert (load.model.name, load.active_requests, load.waiting_requests) == ("llm", 7, 2)

    with pytest.raises(EnvelopeFormatError) as refused:
        decode_event(
            headers(wire_type, REPLICA), LOAD_BODY, subject=load_report_subject("another/2")
        )
    assert refused.value.failure is DecodeFailure.WRONG_SUBJECT


def test_a_scale_decision_decodes_on_its_model_s_subject_only() -> None:
    wire_type = "ai.silogen.kaiwo.gateway.scale-decided.v1"
    decoded = decode_event(
        headers(wire_type, MODEL_UID),
        SCALE_BODY,
        subject=scale_subject(namespace="ai", uid=MODEL_UID),
    )
    decision = decoded.envelope.data
    assert isinstance(decision, ScaleDecidedV1)
    assert (decision.from_replicas, decision.replicas, decision.generation) == (1, 3, 4)

    for wrong in (
        scale_subject(namespace="ai", uid=OTHER_UID),
        scale_subject(namespace="other", uid=MODEL_UID),
        f"kaiwo.gateway.load.ai.{MODEL_UID}",
        f"kaiwo.mon.scale.ai.{MODEL_UID}",
    ):
        with pytest.raises(EnvelopeFormatError) as refused:
            decode_event(headers(wire_type, MODEL_UID), SCALE_BODY, subject=wrong)
        assert refused.value.failure is DecodeFailure.WRONG_SUBJECT, wrong


def test_negative_counts_are_invalid_payloads() -> None:
    wire_type = "ai.silogen.kaiwo.gateway.active-requests.v1"
    body = LOAD_BODY.replace(b'"activeRequests":7', b'"activeRequests":-1')
    with pytest.raises(EnvelopeFormatError) as refused:
        decode_event(headers(wire_type, REPLICA), body, subject=load_report_subject(REPLICA))
    assert refused.value.failure is DecodeFailure.INVALID_PAYLOAD
