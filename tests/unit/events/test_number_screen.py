"""The screen that spares most bodies the walk for out-of-range numbers
(``kaiwo_contracts.events.message_body``): digits read as zeros and literal searches now, one
pattern that found every number token that may be out of range before. It must pick out
every body that pattern did, or a body with an out-of-range number would be taken in (1e400
becomes infinity; a 20-digit integer overflows what reads it downstream). It may pick out a
few more (a string that looks like such a number): those are walked and found fine."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kaiwo_contracts.events.message_body import (
    DecodeFailure,
    EnvelopeFormatError,
    _check_numbers,
    parse_json,
)
from kaiwo_contracts.events.message_body import _maybe_out_of_range as screen
from pydantic_core import from_json

THE_ONE_PATTERN_BEFORE = re.compile(rb"(?:^|[:,\[])[ \t\r\n]*-?(?:\d{20}|[\d.]+[eE][+-]?\d{3})")

_SPACE = st.sampled_from([b"", b" ", b"\n", b"\t ", b"\r\n"])
_NUMBER = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80).map(lambda n: str(n).encode()),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda f: repr(f).encode()),
    st.sampled_from(
        [b"1e400", b"-1.5E+999", b"1e99", b"2e-0400", b"0.5e-300", b"12E3", b"9" * 19, b"1" * 20]
    ),
)


def _strings(alphabet: str) -> st.SearchStrategy[bytes]:
    return st.text(alphabet=alphabet, max_size=12).map(lambda text: b'"' + text.encode() + b'"')


def _joined(items: list[bytes], space: bytes, opening: bytes, closing: bytes) -> bytes:
    return opening + space + (b"," + space).join(items) + space + closing


def _json(strings: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    return st.recursive(
        st.tuples(_SPACE, _NUMBER | strings, _SPACE).map(b"".join),
        lambda inner: (
            st.builds(_joined, st.lists(inner, max_size=4), _SPACE, st.just(b"["), st.just(b"]"))
            | st.builds(
                _joined,
                st.lists(
                    st.builds(lambda key, value: key + b":" + value, strings, inner), max_size=4
                ),
                _SPACE,
                st.just(b"{"),
                st.just(b"}"),
            )
        ),
        max_leaves=12,
    )


_JSON = _json(_strings("0123456789eE+-.,:[]{} x"))
_JSON_WITH_NO_DIGIT_IN_A_STRING = _json(_strings("eE+-.,:[]{} x"))


@given(_JSON_WITH_NO_DIGIT_IN_A_STRING)
def test_the_screen_picks_out_every_number_the_one_pattern_did(raw: bytes) -> None:
    # Inside a string the old pattern also took ``",0E000"`` for a number; the screen does
    # not, and need not: only numbers are ever out of range (the test below).
    if THE_ONE_PATTERN_BEFORE.search(raw):
        assert screen(raw)


@given(_JSON)
def test_every_body_with_a_number_out_of_range_is_refused(raw: bytes) -> None:
    value = from_json(raw)  # allowed: infinity, as 1e400 reads
    try:
        _check_numbers(value)
    except EnvelopeFormatError:
        assert screen(raw)
        with pytest.raises(EnvelopeFormatError):
            parse_json(raw)


@pytest.mark.parametrize(
    ("body", "picked"),
    [
        (b'{"n":1e99,"m":[12345678901234567890]}', True),
        (b'{"n":1.5E+300}', True),
        (b"[2e-0400 ]", True),
        (b'{"n":1e99,"m":1234567890123456789}', False),
        (b'{"uid":"86f1093e-0ea1-4e12-b000-1e40ab0c9e12","image":"python:3.11"}', False),
        (b'{"s":"1e400,"}', True),  # looks like one: walked, and taken in
    ],
)
def test_written_by_hand(body: bytes, picked: bool) -> None:
    assert screen(body) is picked


@pytest.mark.parametrize(
    "body", [b"1e400", b" -1e400", b"18446744073709551616", b"[1, 1e400]", b'{"n":\n1E+400}']
)
def test_a_number_out_of_range_is_refused_alone_or_inside(body: bytes) -> None:
    with pytest.raises(EnvelopeFormatError) as refused:
        parse_json(body)
    assert refused.value.failure is DecodeFailure.NUMBER_OUT_OF_RANGE
