"""A message body as bytes and back: JSON written canonically, and read bounded on every axis a
hostile body could stretch (size, nesting, numbers, UTF-8), every failure one
:class:`EnvelopeFormatError` whose :class:`DecodeFailure` says why.
"""

from __future__ import annotations

import math
import re
from enum import StrEnum
from typing import Any, Final

import orjson
from pydantic_core import from_json

from kaiwo_contracts.plans import canonical_json

MAX_MESSAGE_BYTES: Final = 1024 * 1024
"""The largest message, headers and body together, the operator publishes or accepts: NATS'
default ``max_payload``. A server may be configured to allow more; the operator does not rely
on it, so every consumer accepts whatever a producer of ours may send."""
MAX_JSON_DEPTH: Final = 201
"""How many levels a body may nest, the outermost object included: the limit of
pydantic-core's parser, which refuses deeper input with an error instead of exhausting the
interpreter's stack as ``json.loads`` does."""
MAX_JSON_INTEGER: Final = 2**64
"""Integers in a body must lie strictly between minus and plus this: the API server's widest
integers are 64-bit; larger ones overflow ``float()`` and quantity arithmetic downstream."""
# The screen for the only numbers that can be out of range: 20 or more digits, or an exponent
# of 3 or more digits. Most bodies have none, so most are never walked. Every digit is read
# as 0 first (one ``bytes.translate``), so both are searched for from a literal: a pattern
# that starts with a character set tried every ``:`` and ``,`` and took longer than the
# parse itself. What ends a number (``,``, ``]``, ``}``, white space or the end) follows an
# exponent; a string holding the same (``"1e000,"``, 20 digits) is walked, and found fine.
_DIGITS_READ_AS_ZERO: Final = bytes.maketrans(b"123456789E+", b"000000000e-")
_TWENTY_DIGITS: Final = b"0" * 20
_THREE_DIGIT_EXPONENT: Final = re.compile(rb"e-?000+(?=[,\]}\s]|\Z)")


def _maybe_out_of_range(raw: bytes) -> bool:
    read = raw.translate(_DIGITS_READ_AS_ZERO)
    return _TWENTY_DIGITS in read or _THREE_DIGIT_EXPONENT.search(read) is not None


class DecodeFailure(StrEnum):
    """Why a message could not be decoded (the first word of every decode error)."""

    TOO_LARGE = "too-large"
    NOT_JSON = "not-json"
    TOO_DEEP = "too-deep"
    NUMBER_OUT_OF_RANGE = "number-out-of-range"
    NOT_AN_OBJECT = "not-an-object"
    INVALID_ENVELOPE = "invalid-envelope"
    WRONG_TYPE = "wrong-type"
    INVALID_PAYLOAD = "invalid-payload"
    WRONG_SUBJECT = "wrong-subject"


class EnvelopeFormatError(ValueError):
    """The headers or body do not form a valid envelope: a poison message, never retried.

    The one error decoding raises, whatever went wrong (malformed JSON, nesting too deep, a
    number out of range, an attribute or payload the models refuse, a subject that does not
    match the payload); ``failure`` says which, and the message starts with it.
    """

    def __init__(
        self, detail: str, *, failure: DecodeFailure = DecodeFailure.INVALID_ENVELOPE
    ) -> None:
        super().__init__(f"{failure.value}: {detail}")
        self.failure = failure
        self.detail = detail


def body_json(value: Any) -> bytes:
    """A message body: JSON with sorted keys and no insignificant whitespace.

    orjson writes it in a third of the standard library's time (a body is encoded for every
    message published); what orjson refuses (integers beyond 64 bits, strings with a lone
    surrogate) goes to :func:`~kaiwo_contracts.plans.canonical_json`, which takes the
    integers and raises for the surrogates as before. Floats below 1e-4 are written
    ``0.00001`` where :func:`~kaiwo_contracts.plans.canonical_json` writes ``1e-05``: the
    same number to every reader. Hashes never use this: fingerprints hash
    :func:`~kaiwo_contracts.plans.canonical_json_bytes`, which checks for those floats.
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError
        return canonical_json(value).encode()


def parse_body(body: bytes | str) -> dict[str, Any]:
    """A message body as one JSON object, or :class:`EnvelopeFormatError` (see
    :func:`parse_json`)."""
    value = parse_json(body)
    if not isinstance(value, dict):
        raise EnvelopeFormatError(
            f"the body is a JSON {_json_kind(value)}, not an object",
            failure=DecodeFailure.NOT_AN_OBJECT,
        )
    return value


def parse_json(body: bytes | str) -> Any:
    """Any JSON value, or :class:`EnvelopeFormatError`.

    Bounded on every axis that a hostile body could stretch: size (:data:`MAX_MESSAGE_BYTES`),
    nesting (:data:`MAX_JSON_DEPTH`), numbers (no NaN or infinity, integers within
    :data:`MAX_JSON_INTEGER`), and strict UTF-8 (no lone surrogates), so whatever it returns
    can be serialised again and walked recursively without surprises.
    """
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else bytes(body)
    if len(raw) > MAX_MESSAGE_BYTES:
        raise EnvelopeFormatError(
            f"the body has {len(raw)} bytes, more than {MAX_MESSAGE_BYTES}",
            failure=DecodeFailure.TOO_LARGE,
        )
    try:
        value = from_json(raw, allow_inf_nan=False)
    except ValueError as error:
        detail = describe(error)
        if "recursion limit" in detail:
            raise EnvelopeFormatError(
                f"nested deeper than {MAX_JSON_DEPTH} levels ({detail})",
                failure=DecodeFailure.TOO_DEEP,
            ) from error
        if "number out of range" in detail:
            raise EnvelopeFormatError(detail, failure=DecodeFailure.NUMBER_OUT_OF_RANGE) from error
        raise EnvelopeFormatError(detail, failure=DecodeFailure.NOT_JSON) from error
    if _maybe_out_of_range(raw):
        _check_numbers(value)
    return value


def _check_numbers(value: Any) -> None:
    # Iterative: the depth is bounded already, but a stack of our own costs nothing extra.
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise EnvelopeFormatError(
                "a number is too large for a 64-bit float",
                failure=DecodeFailure.NUMBER_OUT_OF_RANGE,
            )
        elif (
            isinstance(item, int)
            and not isinstance(item, bool)
            and not -MAX_JSON_INTEGER < item < MAX_JSON_INTEGER
        ):
            raise EnvelopeFormatError(
                f"an integer of {len(str(abs(item)))} digits is outside the 64-bit range",
                failure=DecodeFailure.NUMBER_OUT_OF_RANGE,
            )


def _json_kind(value: Any) -> str:
    names = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def describe(error: BaseException | str) -> str:
    return re.sub(r"\s+", " ", str(error)).strip()[:1024]
