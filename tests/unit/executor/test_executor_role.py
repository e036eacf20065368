"""Which lease an executor replica holds: one active executor per share of the partitions."""

from __future__ import annotations

import pytest
from kaiwo_executor.settings import ExecutorSettings


@pytest.mark.parametrize(
    ("replicas", "replica", "role"),
    [("1", "kaiwo-executor-7d9f", "executor"), ("3", "0", "executor-0"), ("3", "2", "executor-2")],
)
def test_replicas_of_one_share_hold_one_lease(
    monkeypatch: pytest.MonkeyPatch, replicas: str, replica: str, role: str
) -> None:
    monkeypatch.setenv("KAIWO_REPLICAS", replicas)
    monkeypatch.setenv("KAIWO_REPLICA", replica)
    assert ExecutorSettings().role == role
