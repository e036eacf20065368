"""`kaiwo nats credentials --tenant`: one key per messenger tenant, admitted by the server's
configuration with its own subjects only (decision 0049)."""

from __future__ import annotations

from pathlib import Path

from kaiwo_cli.commands.nats import app
from typer.testing import CliRunner


def test_a_tenant_gets_a_key_and_the_server_admits_it_with_its_own_subjects(
    tmp_path: Path,
) -> None:
    out = tmp_path / "credentials"

    result = CliRunner().invoke(app, ["credentials", "--out", str(out), "--tenant", "team-a"])

    assert result.exit_code == 0, result.output
    assert (out / "tenant-team-a.nk").read_text().startswith("SU")
    config = (out / "nats-server.conf").read_text()
    assert "kaiwo-messenger.team-a.requests" in config
    assert "kaiwo-messenger.team-a.responses" in config
    assert "kaiwo-messenger.team-b" not in config


def test_a_tenant_that_is_no_namespace_name_is_refused_naming_it(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["credentials", "--out", str(tmp_path / "c"), "--tenant", "Team_A"]
    )

    assert result.exit_code == 2
    assert "'Team_A' is not a namespace name" in result.output
