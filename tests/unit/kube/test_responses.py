"""Decoding the API server's answers: anything that is not what the API promises becomes a
typed error (found by fuzzing, ``tests/fuzz/kube``); what is, decodes as before."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kaiwo_kube.errors import (
    MalformedResponse,
    ResourceExpired,
    Retryable,
    error_from_status,
)
from kaiwo_kube.port import WatchEvent
from kaiwo_kube.responses import crd_established, decode_body, list_page_of, watch_event_of


def test_a_watch_event_decodes() -> None:
    event = watch_event_of(b'{"type":"ADDED","object":{"metadata":{"resourceVersion":"7"}}}')
    assert event == WatchEvent(type="ADDED", object={"metadata": {"resourceVersion": "7"}})
    assert event.resource_version == "7"


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"ADDED","object":{"metadata"',  # cut short
        b"\xff\xfe{}",  # not UTF-8
        b"[" * 5000 + b"]" * 5000,  # RecursionError before
        b'[{"type":"ADDED"}]',  # not an object
        b'{"object":{}}',  # KeyError before
        b'{"type":[],"object":{}}',
        b'{"type":"9999BOOKMARK","object":{}}',  # passed through before
        b'{"type":"ADDED","object":[1]}',
        b'{"type":"MODIFIED","object":{"metadata":true}}',
    ],
)
def test_a_line_that_is_no_watch_event_is_a_malformed_response(line: bytes) -> None:
    with pytest.raises(MalformedResponse):
        watch_event_of(line)


def test_an_error_event_keeps_its_code_and_a_bad_code_counts_as_a_server_error() -> None:
    with pytest.raises(ResourceExpired):
        watch_event_of(b'{"type":"ERROR","object":{"kind":"Status","code":410}}')
    with pytest.raises(Retryable) as raised:
        watch_event_of(b'{"type":"ERROR","object":{"code":"x","message":["m"]}}')
    assert raised.value.code == 500
    assert raised.value.message == "the API server answered 500"


def test_a_lone_surrogate_becomes_the_replacement_character() -> None:
    event = watch_event_of(b'{"type":"ADDED","object":{"metadata":{"name":"a\\ud800"}}}')
    assert event.object["metadata"]["name"] == "a\ufffd"
    assert decode_body(b'{"message":"\\udfff"}') == {"message": "\ufffd"}
    # Found by fuzzing: the bytes that would encode U+D800 in UTF-8, not an escape.
    assert decode_body(b'{"message":"a\xed\xa0\x80"}') == {"message": "a\ufffd"}
    utf16 = '{"message":"a\ud800"}'.encode("utf-16-le", "surrogatepass")
    assert decode_body(utf16) == {"message": "a\ufffd"}


def test_an_escaped_pair_and_an_escaped_backslash_keep_their_text() -> None:
    # "\\ud800" is a backslash and the letters "ud800", not a surrogate; a pair is one
    # character: neither is replaced.
    event = watch_event_of(
        b'{"type":"ADDED","object":{"metadata":{"name":"a\\\\ud800","uid":"\\ud83d\\ude00"}}}'
    )
    assert event.object["metadata"] == {"name": "a\\ud800", "uid": "\U0001f600"}


def test_nesting_the_encoder_cannot_walk_is_malformed_whatever_the_bracket_count() -> None:
    deep = b'{"type":"ADDED","object":{"metadata":{},"spec":' + b"[" * 990 + b"]" * 990 + b"}}"
    with pytest.raises(MalformedResponse):
        watch_event_of(deep)
    shallow = b'{"type":"ADDED","object":{"metadata":{},"spec":' + b"[" * 150 + b"]" * 150 + b"}}"
    nested: list[object] = []
    for _ in range(149):
        nested = [nested]
    assert watch_event_of(shallow).object["spec"] == nested


def test_list_pages() -> None:
    page = list_page_of({"metadata": {"resourceVersion": "12"}, "items": [{"metadata": {}}]})
    assert (page.items, page.continue_token, page.resource_version) == (
        [{"metadata": {}}],
        "",
        "12",
    )
    assert list_page_of({"metadata": {"continue": "t"}}).continue_token == "t"
    for broken in (
        {"items": []},  # KeyError before
        {"metadata": {"resourceVersion": "1"}, "items": "ab"},  # two items "a" and "b" before
        {"metadata": {"resourceVersion": "1"}, "items": [1]},
        {"metadata": {"continue": 5}},
    ):
        with pytest.raises(MalformedResponse):
            list_page_of(broken)


def test_retry_after_is_a_finite_non_negative_number_or_nothing() -> None:
    def retry_after(details: object, header: str | None = None) -> float | None:
        error = error_from_status(code=429, status={"details": details}, retry_after_header=header)
        assert isinstance(error, Retryable)
        return error.retry_after

    assert retry_after({"retryAfterSeconds": 3}) == 3.0
    assert retry_after({"retryAfterSeconds": "3"}) == 3.0
    assert retry_after({}, "2") == 2.0
    assert retry_after({}, "inf") is None  # slept forever before
    assert retry_after({}, "-1") is None
    assert retry_after({"retryAfterSeconds": -5}) is None
    assert retry_after({"retryAfterSeconds": [2]}) is None  # TypeError before
    assert retry_after([1]) is None  # AttributeError before


def test_crd_conditions_of_any_shape() -> None:
    established = {"status": {"conditions": [{"type": "Established", "status": "True"}]}}
    assert crd_established(established)
    assert not crd_established({"status": [1]})
    assert not crd_established({"status": {"conditions": ["Established"]}})


def test_a_bookmark_with_odd_metadata_has_no_resource_version() -> None:
    assert WatchEvent(type="BOOKMARK", object={"metadata": True}).resource_version == ""
    odd = WatchEvent(type="BOOKMARK", object={"metadata": {"resourceVersion": [5]}})
    assert odd.resource_version == ""


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**90), max_value=2**90)
    | st.floats()
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300)
@given(value=_JSON, ascii_only=st.booleans())
def test_a_body_decodes_as_the_standard_library_decodes_it(value: Any, ascii_only: bool) -> None:
    # Bodies are read by a faster parser first; what it takes must come out the same, to the
    # exact integer and float, with the standard library's NaN and infinities.
    data = json.dumps({"v": value}, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    decoded = decode_body(data)
    expected = json.loads(data)
    if _has_surrogate(expected):  # replaced by U+FFFD, see above
        return
    assert repr(decoded) == repr(expected)  # repr: NaN equal to NaN, 1 not equal to 1.0


def test_an_integer_beyond_64_bits_keeps_every_digit() -> None:
    assert decode_body(b'{"n": 123456789012345678901234567890}') == {
        "n": 123456789012345678901234567890
    }


def _has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any("\ud800" <= char <= "\udfff" for char in value)
    if isinstance(value, list):
        return any(_has_surrogate(item) for item in value)
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    return False
