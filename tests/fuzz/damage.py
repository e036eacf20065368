"""Damage to a JSON body, as a faulty network, proxy or producer would do it: bytes cut,
inserted or flipped, the body wrapped in deep nesting or replaced by it, numbers JSON cannot
hold, NaN, bad UTF-8, lone surrogates, other JSON. Shared by the bus and the Kubernetes
response targets."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from tests.fuzz.bus.model_strategies import json_values

HOSTILE_VALUES = (
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"1e999",
    b"-1e999",
    b"9" * 25,
    b"-" + b"9" * 25,
    b"9" * 5000,
    b'"\\ud800"',
    b'"\\udfff x"',
    b"[1]",
    b"[" * 300 + b"]" * 300,
    b'{"a":' * 150 + b"1" + b"}" * 150,
)


def _insert(data: st.DataObject, body: bytes, chunk: bytes) -> bytes:
    at = data.draw(st.integers(min_value=0, max_value=len(body)))
    return body[:at] + chunk + body[at:]


def damage_body(data: st.DataObject, body: bytes) -> bytes:  # noqa: PLR0911 - one per damage
    how = data.draw(
        st.sampled_from(
            [
                "truncate",
                "insert",
                "flip",
                "wrap-deep",
                "replace-deep",
                "big-number",
                "huge-float",
                "nan",
                "bad-utf8",
                "surrogate",
                "hostile-value",
                "other-json",
                "random",
            ]
        )
    )
    if how == "truncate":
        return body[: data.draw(st.integers(min_value=0, max_value=len(body)))]
    if how == "insert":
        return _insert(data, body, data.draw(st.binary(min_size=1, max_size=8)))
    if how == "flip" and body:
        at = data.draw(st.integers(min_value=0, max_value=len(body) - 1))
        return body[:at] + bytes([data.draw(st.integers(0, 255))]) + body[at + 1 :]
    if how == "wrap-deep":
        depth = data.draw(st.integers(min_value=190, max_value=3000))
        return b'{"a":' * depth + body + b"}" * depth
    if how == "replace-deep":
        depth = data.draw(st.integers(min_value=190, max_value=6000))
        return b"[" * depth + b"]" * depth
    if how == "big-number":
        digits = data.draw(st.integers(min_value=19, max_value=6000))
        return _insert(data, body, b"9" * digits)
    if how == "huge-float":
        return body.replace(b":", b":1e999,", 1) if b":" in body else b"1e999"
    if how == "nan":
        return body.replace(b":", b":NaN,", 1) if b":" in body else b"NaN"
    if how == "bad-utf8":
        return _insert(data, body, data.draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])))
    if how == "surrogate":
        return _insert(data, body, b'"\\udc00"')
    if how == "hostile-value":  # valid JSON still: a value inside the object or the body
        value = data.draw(st.sampled_from(HOSTILE_VALUES))
        key = data.draw(st.sampled_from([b'"zz"', b'"metadata"']))  # metadata: not an object
        if not body.startswith(b"{"):
            return value
        at = body.find(b'"object":{') + len(b'"object":{') if b'"object":{' in body else 1
        rest = body[at:]
        return body[:at] + key + b":" + value + (b"" if rest.startswith(b"}") else b",") + rest
    if how == "other-json":
        return json.dumps(data.draw(json_values)).encode()
    return data.draw(st.binary(max_size=300))
