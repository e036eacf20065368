"""Every service of one local stack gets a health port of its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from kaiwo_cli.stack import local
from kaiwo_cli.stack.local import LocalStack, StackOptions


def test_a_port_the_os_hands_out_twice_goes_to_one_service_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The OS may offer a free port again before the first process has bound it.
    offered = iter([41000, 41000, 41001])
    monkeypatch.setattr(local, "free_port", lambda: next(offered))
    stack = LocalStack(StackOptions(state_dir=tmp_path))

    assert [stack._health_port(), stack._health_port()] == [41000, 41001]


def test_replicas_and_partitions_are_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="partitions and replicas"):
        StackOptions(state_dir=tmp_path, partitions=0)
    with pytest.raises(ValueError, match="partitions and replicas"):
        StackOptions(state_dir=tmp_path, replicas={"planner": 0})
