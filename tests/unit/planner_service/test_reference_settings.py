"""The planner reads the API reference's ``DEFAULT_CLUSTER_QUEUE_NAME``; the project's own
``KAIWO_DEFAULT_CLUSTER_QUEUE_NAME`` decides where both are set (decision 0046)."""

from __future__ import annotations

import pytest
from kaiwo_planner.settings import PlannerSettings
from pydantic import ValidationError


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEFAULT_CLUSTER_QUEUE_NAME", raising=False)
    monkeypatch.delenv("KAIWO_DEFAULT_CLUSTER_QUEUE_NAME", raising=False)


def test_unset_it_leaves_the_crds_default() -> None:
    assert PlannerSettings().default_cluster_queue_name == ""


def test_the_reference_name_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEFAULT_CLUSTER_QUEUE_NAME", "research")
    assert PlannerSettings().default_cluster_queue_name == "research"


def test_the_projects_own_name_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEFAULT_CLUSTER_QUEUE_NAME", "research")
    monkeypatch.setenv("KAIWO_DEFAULT_CLUSTER_QUEUE_NAME", "ops")
    assert PlannerSettings().default_cluster_queue_name == "ops"


def test_a_name_no_label_can_carry_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEFAULT_CLUSTER_QUEUE_NAME", "Not_A_Queue")
    with pytest.raises(ValidationError, match="DEFAULT_CLUSTER_QUEUE_NAME"):
        PlannerSettings()
