"""Constrained strings and numbers of the Kaiwo kinds (durations, label values, GPU vendors,
counts) and the check that an embedded object is of its field's kind.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from kaiwo_contracts.crds.go_duration import duration_nanoseconds, duration_schema


def must_match(pattern: str, *, meaning: str) -> AfterValidator:
    """A validator failing with ``meaning`` in plain words when a string does not match.

    Pair it with ``Field(json_schema_extra={"pattern": pattern})`` so the pattern still goes
    into the JSON schema (and so into the CRD); only the error message differs from pydantic's
    "String should match pattern '...'".
    """
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        # fullmatch: Python's "$" also matches before a final newline ("q\n"), the API
        # server's (Go RE2) does not.
        if compiled.fullmatch(value) is None:
            raise PydanticCustomError(
                "string_format",
                "{meaning}, got {value}",
                {"meaning": meaning, "value": repr(value)},
            )
        return value

    return AfterValidator(check)


MAX_COUNT: Final = 2**31 - 1
"""The largest count (GPUs, replicas): Kubernetes counts replicas and parallelism in int32."""

DURATION_PATTERN = r"^([0-9]+(s|m|h))+$"


def _within_go_range(value: str) -> str:
    if duration_nanoseconds(value) is None:
        raise PydanticCustomError(
            "duration_range",
            "must be at most 2562047h (the longest duration Go holds), got {value}",
            {"value": repr(value)},
        )
    return value


Duration = Annotated[
    str,
    Field(json_schema_extra=duration_schema(DURATION_PATTERN)),
    must_match(DURATION_PATTERN, meaning="must be a duration such as 30m, 1h or 1h30m"),
    AfterValidator(_within_go_range),
]
"""A duration in whole hours, minutes and seconds (``90s``, ``30m``, ``1h30m``, ``1h0m0s``)."""


LABEL_VALUE_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"

LabelValue = Annotated[
    str,
    Field(max_length=63, json_schema_extra={"pattern": LABEL_VALUE_PATTERN}),
    must_match(
        LABEL_VALUE_PATTERN,
        meaning="must be a name of lower-case letters, digits, '-' and '.' (it becomes a label)",
    ),
]
"""A name that becomes a Kueue label value as it is (the queue, the priority class): Kueue
matches it exactly, so it cannot be shortened and must fit a label (63 characters)."""

GPU_VENDOR_PATTERN = r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"

GpuVendor = Annotated[
    str,
    Field(max_length=63, json_schema_extra={"pattern": GPU_VENDOR_PATTERN}),
    must_match(
        GPU_VENDOR_PATTERN,
        meaning="must be a vendor name such as amd or nvidia (letters, digits, '-', '_', '.')",
    ),
]
"""A GPU vendor: the reference says "e.g. amd, nvidia" and upstream maps any other to the
default GPU resource key, so the set stays open; but the value is matched against node pool
labels and printed in conditions and Events, so it has a label value's grammar (no newline,
no space, at most 63 characters)."""


def embedded_kind(kind: str) -> AfterValidator:
    """A validator for an embedded object: a ``kind``, when given, is the field's ``kind``.

    ``apiVersion`` and ``kind`` may be left out, as the CRD allows (only ``spec`` is used);
    a Deployment given where a Job belongs is a mistake worth naming.
    """

    def check(value: dict[str, Any]) -> dict[str, Any]:
        given = value.get("kind")
        if given is not None and given != kind:
            raise PydanticCustomError(
                "embedded_object",
                "must be a {kind} object, got kind {given}",
                {"kind": kind, "given": repr(given)},
            )
        return value

    return AfterValidator(check)
