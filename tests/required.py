"""What a test does when a server or program it needs is missing (a pytest plugin, see
``tests/conftest.py``).

Locally it is skipped with the reason. Under ``KAIWO_REQUIRE_REAL_APISERVER=1`` (``.ci/run``
sets it) it fails instead: there a skip would hide that the real thing was never tested. The
hook below holds every other skip to the same rule, so a skip added later cannot pass CI
quietly either.
"""

from __future__ import annotations

import os
from collections.abc import Generator
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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if required() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"{REQUIRE_VARIABLE}=1 but the test was skipped: {reason}"
    return report
