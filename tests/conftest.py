"""Shared pytest configuration: repository paths used by many tests, the real API server of
the session (``real_cluster``, from ``tests/real_cluster.py``) and the session's whole real
stack with Kueue, the kube-scheduler and kwok (``real_stack``, from ``tests/real_stack.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ("tests.real_cluster", "tests.real_stack")

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT
