"""The messenger's pure decisions: what a request message asks, what goes back with its
answer, and when a request is answered, delivered again or given up (decision 0049)."""

from __future__ import annotations

import json

import pytest
from kaiwo_contracts.events.streams import ConsumerSpec
from kaiwo_gateway.domain.bodies import BodyLimits
from kaiwo_gateway.domain.messages import (
    Answer,
    Failure,
    MessageRequest,
    Redeliver,
    Reply,
    backend_answer,
    echoed_headers,
    failure,
    metadata_of,
    parse_request,
    request_id,
    response_document,
    settle,
    trace_headers,
)

LIMITS = BodyLimits(json_bytes=1024 * 1024, json_depth=8)
CONSUMER = ConsumerSpec(
    durable_name="gateway-messenger",
    stream="KAIWO_MSG_REQ",
    filter_subjects=("kaiwo-messenger.*.requests",),
    description="test",
    max_deliver=3,
    backoff_seconds=(30.0, 60.0),
)


def message(**document: object) -> bytes:
    return json.dumps(document).encode()


def test_a_request_is_kubeais_message_with_the_path_defaulting_to_completions() -> None:
    parsed = parse_request(
        message(metadata={"id": 7}, body={"model": "llama", "prompt": "hi"}), LIMITS
    )

    assert parsed == MessageRequest(
        metadata={"id": 7},
        path="/v1/completions",
        body={"model": "llama", "prompt": "hi"},
        model="llama",
        sent=b'{"model": "llama", "prompt": "hi"}',
    )


def test_a_path_without_its_slash_gets_one_and_only_the_json_routes_are_served() -> None:
    chat = parse_request(message(path="v1/chat/completions", body={"model": "m"}), LIMITS)
    audio = parse_request(message(path="/v1/audio/transcriptions", body={"model": "m"}), LIMITS)

    assert isinstance(chat, MessageRequest)
    assert chat.path == "/v1/chat/completions"
    assert isinstance(audio, Failure)
    assert audio.status == 404
    assert "'/v1/audio/transcriptions' is not served" in audio.body["error"]["message"]


@pytest.mark.parametrize(
    ("raw", "status", "says"),
    [
        (b"{not json", 400, "the message is not JSON"),
        (b"[1, 2]", 400, "the message must be a JSON object"),
        (message(body="text"), 400, "'body' must be a JSON object"),
        (message(body={"prompt": "x"}), 400, "missing 'model' field"),
        (message(body={"model": ""}), 400, "missing 'model' field"),
        (message(path=3, body={"model": "m"}), 400, "'path' must be a string"),
        (message(body={"model": "m", "stream": True}), 400, "'stream' is not supported"),
        (b"[" * 20 + b"]" * 20, 400, "nest"),
    ],
)
def test_a_request_that_cannot_be_served_as_written_is_a_final_error(
    raw: bytes, status: int, says: str
) -> None:
    parsed = parse_request(raw, LIMITS)

    assert isinstance(parsed, Failure)
    assert parsed.status == status
    assert says in parsed.body["error"]["message"]
    assert not parsed.transient


def test_the_metadata_of_a_request_that_failed_is_read_where_it_can_be() -> None:
    assert metadata_of(message(metadata={"row": 3}, body="x")) == {"row": 3}
    assert metadata_of(b"garbage") is None
    assert metadata_of(b"[1]") is None


def test_a_model_servers_answer_is_final_whatever_its_status() -> None:
    assert backend_answer(200, b'{"id": "x"}') == Answer(status=200, body={"id": "x"})
    assert backend_answer(500, b"oops") == Answer(
        status=500, body={"error": {"message": "oops", "type": "server_error"}}
    )
    assert not backend_answer(500, b"oops").transient


def test_the_answer_carries_the_metadata_the_status_and_the_body() -> None:
    document = response_document({"row": 3}, Answer(status=200, body={"ok": True}))

    assert json.loads(document) == {
        "metadata": {"row": 3},
        "status_code": 200,
        "body": {"ok": True},
    }


def test_a_clients_ids_go_back_and_natss_own_headers_stay() -> None:
    headers = [
        ("X-Batch", "b1"),
        ("Nats-Msg-Id", "row-3"),
        ("Nats-Expected-Stream", "KAIWO_MSG_REQ"),
        ("Kaiwo-Request-Id", "forged"),
        ("traceparent", "00-abc-def-01"),
    ]

    assert echoed_headers(headers) == {"X-Batch": "b1", "traceparent": "00-abc-def-01"}
    assert trace_headers(headers) == {"traceparent": "00-abc-def-01"}
    assert len(echoed_headers((f"X-{n}", "v") for n in range(100))) == 32


def test_the_request_id_is_the_clients_message_id_else_the_stream_sequence() -> None:
    assert request_id({"Nats-Msg-Id": "row-3"}, sequence=41) == "row-3"
    assert request_id({"nats-msg-id": "row-4"}, sequence=41) == "row-4"
    assert request_id({"X-Batch": "b1"}, sequence=41) == "41"


def test_the_gateways_502_and_503_are_delivered_again_after_the_backoff() -> None:
    unavailable = failure(503, "no ready endpoint")

    assert unavailable.transient
    assert settle(unavailable, delivery=1, consumer=CONSUMER) == Redeliver(delay_seconds=30.0)
    assert settle(unavailable, delivery=2, consumer=CONSUMER) == Redeliver(delay_seconds=60.0)


def test_on_its_last_delivery_a_failing_request_is_answered_and_kept_as_a_dead_letter() -> None:
    settled = settle(failure(502, "refused"), delivery=3, consumer=CONSUMER)

    assert isinstance(settled, Reply)
    assert settled.dead_reason == "gave up after 3 deliveries: the last one got 502"
    assert settled.answer.status == 502
    assert settled.answer.body["error"]["message"] == (
        "refused (gave up after 3 deliveries: the last one got 502)"
    )


def test_final_errors_and_answers_are_answered_on_the_first_delivery() -> None:
    not_found = failure(404, "model not found")
    answered = Answer(status=200, body={"id": "x"})

    assert settle(not_found, delivery=1, consumer=CONSUMER) == Reply(not_found)
    assert settle(answered, delivery=1, consumer=CONSUMER) == Reply(answered)
