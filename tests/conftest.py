"""Shared pytest configuration: repository paths used by many tests, and the real API server
of the session (``real_cluster``, from ``tests/real_cluster.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ("tests.real_cluster",)

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = REPO_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(autouse=True)
def _fresh_kept_values() -> None:
    """Each test plans from scratch: values the planner keeps between plans (kept_values)
    live for the process, and tests reuse uids and generations for different specs."""
    from kaiwo_planner.domain.state.kept_values import forget_kept

    forget_kept()
