"""The screen that spares most bodies the walk for out-of-range numbers
(``kaiwo_contracts.events.message_body``): two patterns now, one with ``(?:^|...)`` before.
They must pick out the same bodies, or a body with an out-of-range number would be taken in
(1e400 becomes infinity; a 20-digit integer overflows what reads it downstream)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kaiwo_contracts.events.message_body import DecodeFailure, EnvelopeFormatError, parse_json
from kaiwo_contracts.events.message_body import _maybe_out_of_range as screen

THE_ONE_PATTERN_BEFORE = re.compile(rb"(?:^|[:,\[])[ \t\r\n]*-?(?:\d{20}|[\d.]+[eE][+-]?\d{3})")

TOKENS = st.sampled_from(
    [b"{", b"}", b"[", b"]", b":", b",", b" ", b"\n", b"-", b".", b"e", b"E", b"+", b'"', b"x"]
    + [str(digit).encode() for digit in range(10)]
    + [b"1" * 20, b"9" * 19, b"1e400", b"1.5E+999", b"1e99"]
)


@given(st.lists(TOKENS, max_size=40).map(b"".join))
def test_the_screen_picks_out_the_bodies_the_one_pattern_did(raw: bytes) -> None:
    assert screen(raw) == bool(THE_ONE_PATTERN_BEFORE.search(raw))


@pytest.mark.parametrize(
    "body", [b"1e400", b" -1e400", b"18446744073709551616", b"[1, 1e400]", b'{"n":\n1E+400}']
)
def test_a_number_out_of_range_is_refused_alone_or_inside(body: bytes) -> None:
    with pytest.raises(EnvelopeFormatError) as refused:
        parse_json(body)
    assert refused.value.failure is DecodeFailure.NUMBER_OUT_OF_RANGE
