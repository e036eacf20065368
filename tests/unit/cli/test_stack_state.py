"""What ``kaiwo up`` leaves for ``kaiwo events``, and how the commands use it."""

from __future__ import annotations

import stat
from pathlib import Path

from click.testing import CliRunner
from kaiwo_cli.commands.events import store_url, tail_connection
from kaiwo_cli.main import app
from kaiwo_cli.stack.state import StackState


def test_the_state_round_trips_through_a_private_file(tmp_path: Path) -> None:
    state = StackState(
        nats_url="tls://127.0.0.1:40111",
        cli_credentials_file=tmp_path / "credentials" / "cli.nk",
        event_store_url="postgresql://kaiwo:pw@db/kaiwo",
        nats_tls_ca_file=tmp_path / "ca.pem",
    )

    written = state.write(tmp_path)

    assert written == tmp_path / "stack.json"
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert StackState.read(tmp_path) == state


def test_the_commands_take_nats_and_the_store_from_the_state(tmp_path: Path) -> None:
    StackState(
        nats_url="nats://127.0.0.1:40111",
        cli_credentials_file=tmp_path / "cli.nk",
        event_store_url=f"sqlite:///{tmp_path / 'events.db'}",
    ).write(tmp_path)

    connection = tail_connection(nats_url=None, credentials=None, tls_ca=None, state_dir=tmp_path)

    assert (connection.url, connection.credentials_file, connection.inbox_prefix) == (
        "nats://127.0.0.1:40111",
        tmp_path / "cli.nk",
        "_INBOX.cli",
    )
    assert connection.tls is None
    assert store_url(None, tmp_path) == f"sqlite:///{tmp_path / 'events.db'}"
    assert store_url("sqlite:///given.db", tmp_path) == "sqlite:///given.db"
    elsewhere = tmp_path / "elsewhere"
    assert store_url(None, elsewhere) == f"sqlite:///{elsewhere / 'events.db'}"


def test_tail_without_a_stack_says_so_instead_of_trying_port_4222(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["events", "tail", "--state-dir", str(tmp_path)], env={"COLUMNS": "300"}
    )

    assert result.exit_code == 2
    assert f"no {tmp_path / 'stack.json'}: start the operator with kaiwo up" in " ".join(
        result.output.split()
    )
