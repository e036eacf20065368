"""The demo's scenario is valid input, and the demo refuses bad options naming them."""

from __future__ import annotations

from click.testing import CliRunner
from kaiwo_cli.commands.demo import DEFAULT_SCENARIO
from kaiwo_cli.main import app

runner = CliRunner()


def test_the_scenario_validates() -> None:
    result = runner.invoke(app, ["validate", "-f", str(DEFAULT_SCENARIO)])
    assert (result.exit_code, result.output.strip()) == (0, "6 document(s) valid")


def test_bad_options_are_named() -> None:
    result = runner.invoke(app, ["demo", "--fleet", "tpu=2"])
    assert result.exit_code == 2
    assert "--fleet: unknown node type 'tpu'" in result.output
    result = runner.invoke(app, ["demo", "--cluster", "kind"])
    assert result.exit_code == 2
    assert "--cluster: 'kind' is neither fake nor envtest" in result.output
