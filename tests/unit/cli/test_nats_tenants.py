"""`kaiwo nats credentials --tenant`: one key per messenger tenant, admitted by the server's
configuration with its own subjects only (decision 0049)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kaiwo_cli.commands.nats import app
from kaiwo_contracts.events.permissions import reader_identity
from kaiwo_runtime.nats_credentials import write_credentials
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


def test_a_reader_named_as_the_console_is_refused_and_no_key_is_written(tmp_path: Path) -> None:
    # The console's name was not reserved: its key file was written twice, the reader's last,
    # and the console Deployment ran with a reader's rights (every subject of kaiwo.>).
    out = tmp_path / "credentials"

    result = CliRunner().invoke(app, ["credentials", "--out", str(out), "--reader", "console"])

    assert result.exit_code != 0
    assert "'console' is taken by the operator" in result.output
    assert not (out / "console.nk").exists()


def test_two_identities_of_one_name_get_no_keys(tmp_path: Path) -> None:
    # One seed file per name: the second would replace the first's key.
    with pytest.raises(ValueError, match="two identities named 'reports'"):
        write_credentials(tmp_path / "keys", [reader_identity("reports")] * 2)
    assert not (tmp_path / "keys").exists()
