"""Shared pytest configuration: repository paths used by many tests, the real API server of
the session (``real_cluster``, from ``tests/real_cluster.py``) and its PostgreSQL server
(``postgres_server``, from ``tests/postgres.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ("tests.real_cluster", "tests.postgres")

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT
