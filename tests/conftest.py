"""Shared pytest configuration: repository paths used by many tests, the real API server of
the session (``real_cluster``, from ``tests/real_cluster.py``), the session's whole real stack
with Kueue, the kube-scheduler and kwok (``real_stack``, from ``tests/real_stack.py``), its
PostgreSQL server (``postgres_server``, from ``tests/postgres.py``), no quiet skip under
``KAIWO_REQUIRE_REAL_APISERVER=1`` (``tests/required.py``), and the order the tests run in and
how ``make test``'s workers share them (``tests/scheduling.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = (
    "tests.required",
    "tests.real_cluster",
    "tests.real_stack",
    "tests.postgres",
    "tests.scheduling",
)

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT
