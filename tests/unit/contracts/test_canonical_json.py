"""canonical_json_bytes: the bytes of canonical_json, whatever the value (hashes over either
must agree: recorded fingerprints are checked against plans hashed today)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kaiwo_contracts.plans import canonical_json, canonical_json_bytes

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.floats(min_value=-1e-3, max_value=1e-3)
    | st.text()
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400)
@given(_JSON)
def test_equal_to_the_standard_librarys_bytes_for_any_json_value(value: Any) -> None:
    assert canonical_json_bytes(value) == canonical_json(value).encode()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"b": 1, "a": [1.5, None, True]}, b'{"a":[1.5,null,true],"b":1}'),
        ({"small": 1e-05}, b'{"small":1e-05}'),  # orjson alone writes 0.00001
        ({"smaller": 2.5e-09}, b'{"smaller":2.5e-09}'),  # orjson alone writes 2.5e-9
        ({"edge": 9.99e-05, "not": 0.0001}, b'{"edge":9.99e-05,"not":0.0001}'),
        ({"big": 2**70}, b'{"big":1180591620717411303424}'),  # beyond orjson's 64 bits
        ({"ü": "\u2028\x1f\x7f"}, '{"ü":"\u2028\\u001f\x7f"}'.encode()),
        ({"image": "python:3.11", "name": "a5e-1"}, b'{"image":"python:3.11","name":"a5e-1"}'),
        ([{"z": {}, "y": []}], b'[{"y":[],"z":{}}]'),
        ([3e-07, 1e-10], b"[3e-07,1e-10]"),  # e-10 on: the same from both
        (7e-06, b"7e-06"),
        ({"uid": "86f1093e-0ea1", "q": "queue-1"}, b'{"q":"queue-1","uid":"86f1093e-0ea1"}'),
    ],
)
def test_written_by_hand(value: Any, expected: bytes) -> None:
    assert canonical_json_bytes(value) == expected


def test_what_the_standard_library_refuses_is_refused() -> None:
    with pytest.raises(TypeError):
        json.dumps(datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(TypeError):
        canonical_json_bytes({"at": datetime(2026, 1, 1, tzinfo=UTC)})
    with pytest.raises(UnicodeEncodeError):  # a lone surrogate is no UTF-8, as before
        canonical_json_bytes({"bad": "\ud800"})
