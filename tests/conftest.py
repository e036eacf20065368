"""Shared pytest configuration: repository paths used by many tests, and the real API server
of the session (``real_cluster``, from ``tests/real_cluster.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ("tests.real_cluster",)

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT
