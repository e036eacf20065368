"""Durations as Go's ``time.ParseDuration`` reads them, range included.

A Go duration is a count of nanoseconds in a signed 64-bit integer, so ``99999999999999h``
matches every duration pattern and still fails to parse (Go: "invalid duration"). A regular
expression cannot bound a sum, so the models compute the value (:func:`duration_nanoseconds`)
and the CRDs ask the API server's CEL ``duration()`` (Go's own parser) with
:data:`DURATION_RULE`: both refuse what Go refuses.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any, Final

MAX_NANOSECONDS: Final = 2**63 - 1
"""The longest Go duration, about 292 years (``2562047h47m16.854775807s``)."""

MAX_DURATION_TEXT_LENGTH: Final = 64
"""A bound for the CRD (and for CEL's cost estimate); no sensible duration is longer."""

DURATION_RULE: Final = {
    "rule": "duration(self) >= duration('0s')",
    "message": "must be a duration Go can hold (at most 2562047h), not negative",
}
"""The CEL rule the CRD puts on every duration: ``duration()`` fails on what Go cannot parse."""

_UNITS: Final = {
    "ns": 1,
    "us": 10**3,
    "µs": 10**3,
    "μs": 10**3,
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
_TERM: Final = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")


def duration_nanoseconds(text: str) -> int | None:
    """``text`` in nanoseconds (``"1h30m"`` -> 5400000000000); None if Go would refuse it.

    Refused: anything outside the grammar and any value beyond :data:`MAX_NANOSECONDS`.
    """
    if len(text) > MAX_DURATION_TEXT_LENGTH:
        return None
    sign, body = (-1, text[1:]) if text.startswith("-") else (1, text.removeprefix("+"))
    if body == "0":
        return 0
    if not body:
        return None
    total, position = Fraction(0), 0
    while position < len(body):
        term = _TERM.match(body, position)
        if term is None:
            return None
        total += Fraction(term.group(1)) * _UNITS[term.group(2)]
        position = term.end()
    nanoseconds = int(total)
    if nanoseconds > MAX_NANOSECONDS:
        return None
    return sign * nanoseconds


def duration_schema(pattern: str) -> dict[str, Any]:
    """The CRD keywords of a duration field: its pattern, a length bound and the range rule."""
    return {
        "pattern": pattern,
        "maxLength": MAX_DURATION_TEXT_LENGTH,
        "x-kubernetes-validations": [dict(DURATION_RULE)],
    }
