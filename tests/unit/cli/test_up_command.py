"""``kaiwo up`` refuses options it cannot honour before it starts anything (a taken gateway
port is not one of them: the rest runs without the gateway, see
tests/integration/test_up_resilience.py)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from kaiwo_cli.main import app


def test_several_planners_without_partitions_are_refused_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["up", "--fake", "--state-dir", str(tmp_path), "--gateway-port", "0", "--planners", "3"],
    )

    assert result.exit_code == 2
    assert result.output.strip() == (
        "kaiwo up: more than one planner or executor needs --partitions > 1 "
        "(one partition has one active replica)"
    )
    assert not (tmp_path / "credentials").exists()
