"""Operator bugs that the real API server shows and the fake does not, each an expected
failure (strict: the test must fail until the bug is fixed) of the tests that run into it."""

from __future__ import annotations

from typing import Final

import pytest

SUSPEND_FLIP_FLOP: Final = pytest.mark.xfail(
    strict=True,
    reason=(
        "operator bug: the planner keeps applying the observed spec.suspend of an existing Job "
        "(job_changes.KUEUE_OWNED_SPEC_FIELDS), force-applied under field manager 'kaiwo'. "
        "It takes suspend back from Kueue, and on a real server the Job controller answers "
        "every flip with a status write, so plans made from older observations flip suspend "
        "True/False without end (hundreds of writes a minute; pods made and deleted each time)"
    ),
)
