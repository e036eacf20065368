"""Duration strings of the config group, checked with a message a person can act on.

Two spellings exist upstream:

* :data:`SimpleDuration` — the CRD pattern ``^([0-9]+(s|m|h))+$`` (``30s``, ``5m``, ``1h30m``),
  used by ``terminateUnderutilizedAfter``.
* :data:`GoDuration` — what Go's ``time.ParseDuration`` accepts (also ``1.5h``, ``300ms``,
  ``0``). Upstream types those fields as plain strings (or ``metav1.Duration``) and only fails
  when the operator parses them at run time; we check the same syntax up front.

Both are also checked for range the way Go parses them (``99999999999999h`` matches the
patterns and overflows Go's 64-bit nanoseconds): in the models by computing the value, in the
CRDs by a CEL rule (:mod:`kaiwo_contracts.crds.go_duration`). Negative durations mean nothing
in these fields and are refused.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from kaiwo_contracts.crds.go_duration import duration_nanoseconds, duration_schema

SIMPLE_DURATION_PATTERN = r"^([0-9]+(s|m|h))+$"
GO_DURATION_PATTERN = r"^[+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$"
DURATION_MESSAGE = "must be a duration such as 30s, 5m or 1h30m, at most 2562047h"


def _matching(pattern: str) -> AfterValidator:
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if compiled.fullmatch(value) is None or duration_nanoseconds(value) is None:
            raise PydanticCustomError("duration", DURATION_MESSAGE)
        return value

    return AfterValidator(check)


SimpleDuration = Annotated[
    str,
    _matching(SIMPLE_DURATION_PATTERN),
    Field(json_schema_extra=duration_schema(SIMPLE_DURATION_PATTERN)),
]
"""Hours, minutes and seconds only: ``30s``, ``5m``, ``1h30m``."""

GoDuration = Annotated[
    str,
    _matching(GO_DURATION_PATTERN),
    Field(json_schema_extra=duration_schema(GO_DURATION_PATTERN)),
]
"""Anything Go's ``time.ParseDuration`` reads: ``30s``, ``1h30m``, ``1.5h``, ``300ms``, ``0``."""
