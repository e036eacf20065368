"""A dead letter always fits on the bus, however close to the limit its original was."""

from __future__ import annotations

from kaiwo_runtime.bus import Delivery, message_size
from kaiwo_runtime.dead_letters import DLQ_BODY_BYTES, DLQ_REASON, dead_letter


def delivery(headers: dict[str, str], body: bytes) -> Delivery:
    return Delivery(
        stream="KAIWO_OBS",
        consumer="planner-obs",
        stream_sequence=3,
        attempt=1,
        subject="kaiwo.obs.kaiwojob.team-a.u1",
        headers=headers,
        body=body,
    )


def test_the_header_block_counts_as_nats_encodes_it() -> None:
    # "NATS/1.0\r\n" + "a: bc\r\n" + "\r\n" = 10 + 7 + 2
    assert message_size({"a": "bc"}, b"12345") == 19 + 5
    assert message_size({}, b"12345") == 5


def test_a_small_message_is_dead_lettered_whole() -> None:
    _, headers, body = dead_letter(
        delivery({"ce-id": "e1"}, b"{}"), consumer="planner-obs", reason="rejected", attempts=1
    )

    assert body == b"{}"
    assert DLQ_BODY_BYTES not in headers


def test_a_body_that_leaves_no_room_for_the_reason_is_cut() -> None:
    _, headers, body = dead_letter(
        delivery({"ce-id": "e1"}, b"x" * 1000),
        consumer="planner-obs",
        reason="rejected",
        attempts=1,
        max_bytes=600,
    )

    assert headers[DLQ_BODY_BYTES] == "1000"
    assert message_size(headers, body) == 600
    assert body == b"x" * len(body)


def test_headers_that_crowd_out_the_dead_letter_are_dropped_but_the_identity() -> None:
    crowded = {"ce-id": "e1", "ce-type": "t", "x-huge": "h" * 900}

    _, headers, body = dead_letter(
        delivery(crowded, b"{}"),
        consumer="planner-obs",
        reason="r" * 2000,
        attempts=1,
        max_bytes=700,
    )

    assert "x-huge" not in headers
    assert headers["ce-id"] == "e1"
    assert headers["ce-type"] == "t"
    assert headers[DLQ_REASON] == "r" * 256
    assert message_size(headers, body) <= 700
