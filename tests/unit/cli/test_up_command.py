"""``kaiwo up`` refuses a gateway port that is taken before it starts anything."""

from __future__ import annotations

import socket
from pathlib import Path

from click.testing import CliRunner
from kaiwo_cli.main import app


def test_a_taken_gateway_port_is_refused_in_one_line(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(
            app, ["up", "--fake", "--state-dir", str(tmp_path), "--gateway-port", str(port)]
        )

    assert result.exit_code == 2
    assert result.output.strip() == (
        f"kaiwo up: port {port} of 127.0.0.1 is taken; choose the gateway's with "
        "--gateway-port (0: no gateway)"
    )
    assert not (tmp_path / "credentials").exists()


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
