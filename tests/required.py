"""What a test does when a server or program it needs is missing.

Locally it is skipped with the reason. Under ``KAIWO_REQUIRE_REAL_APISERVER=1`` (CI sets it)
it fails instead: there a skip would hide that the real thing was never tested.
"""

from __future__ import annotations

import os
from typing import Final, NoReturn

import pytest

REQUIRE_VARIABLE: Final = "KAIWO_REQUIRE_REAL_APISERVER"


def required() -> bool:
    return os.environ.get(REQUIRE_VARIABLE) == "1"


def unavailable(what: str, reason: str) -> NoReturn:
    """Skip the test because ``what`` is missing; under ``KAIWO_REQUIRE_REAL_APISERVER=1`` fail."""
    if required():
        pytest.fail(f"{REQUIRE_VARIABLE}=1 but {what} is missing: {reason}")
    pytest.skip(f"{what} is missing: {reason}")
