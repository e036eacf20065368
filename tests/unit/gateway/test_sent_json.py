"""A body forwarded as its client wrote it, but for the member the gateway names anew
(decision 0262)."""

from __future__ import annotations

import pytest
from kaiwo_gateway.domain.sent_json import member_text, with_member


def test_only_top_level_members_of_the_name_change_each_of_them() -> None:
    sent = (
        b'{ "model" :"alpha_sql","messages":[{"model":"inner"}],'
        b'"logit_bias":{"model":1},"model": "again", "x": NaN }'
    )

    assert with_member(sent, "model", "sql") == (
        b'{ "model" :"sql","messages":[{"model":"inner"}],'
        b'"logit_bias":{"model":1},"model": "sql", "x": NaN }'
    )


def test_a_body_in_utf16_or_with_a_byte_order_mark_goes_on_in_utf8() -> None:
    text = '{"model": "a_b", "prompt": "caf\u00e9"}'

    assert with_member(text.encode("utf-16"), "model", "b") == (
        b'{"model": "b", "prompt": "caf\xc3\xa9"}'
    )
    assert with_member(b"\xef\xbb\xbf" + text.encode(), "model", "b") == (
        b'{"model": "b", "prompt": "caf\xc3\xa9"}'
    )


def test_a_messages_body_is_its_last_body_member_as_written() -> None:
    sent = b'{"body": {"model": "old"}, "body": {"model": "m", "n": 1e400} , "path": "x"}'

    assert member_text(sent, "body") == b'{"model": "m", "n": 1e400}'
    with pytest.raises(KeyError):
        member_text(b'{"path": "x"}', "body")
