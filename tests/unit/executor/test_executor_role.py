"""One active executor without partitions; with partitions every replica works."""

from __future__ import annotations

import pytest
from kaiwo_executor.settings import ExecutorSettings


@pytest.mark.parametrize(("partitions", "active_active"), [("1", False), ("4", True)])
def test_partitions_make_every_replica_active(
    monkeypatch: pytest.MonkeyPatch, partitions: str, active_active: bool
) -> None:
    monkeypatch.setenv("KAIWO_BUS_PARTITIONS", partitions)
    assert ExecutorSettings().active_active is active_active
