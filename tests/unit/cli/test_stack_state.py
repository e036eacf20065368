"""What ``kaiwo up`` leaves for ``kaiwo events``, and how the commands use it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner
from kaiwo_cli.commands.events.store_access import store_url
from kaiwo_cli.commands.events.tail import tail_connection
from kaiwo_cli.main import app
from kaiwo_cli.stack.cluster_setup import missing_kubeconfig
from kaiwo_cli.stack.state import StackLockedError, StackState, StateLock, resolve_state_dir


def test_the_state_round_trips_through_a_private_file(tmp_path: Path) -> None:
    state = StackState(
        nats_url="tls://127.0.0.1:40111",
        cli_credentials_file=tmp_path / "credentials" / "cli.nk",
        event_store_url="postgresql://kaiwo:pw@db/kaiwo",
        nats_tls_ca_file=tmp_path / "ca.pem",
        subscriber_credentials_file=tmp_path / "credentials" / "subscriber.nk",
    )

    written = state.write(tmp_path)

    assert written == tmp_path / "stack.json"
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert StackState.read(tmp_path) == state


def test_the_state_is_not_written_through_a_planted_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / ".stack.json.tmp").symlink_to(victim)
    (state_dir / "stack.json").symlink_to(victim)

    StackState(
        nats_url="nats://127.0.0.1:40111",
        cli_credentials_file=tmp_path / "cli.nk",
        event_store_url="sqlite:///events.db",
    ).write(state_dir)

    assert victim.read_text() == "precious\n"
    written = state_dir / "stack.json"
    assert not written.is_symlink()
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert StackState.read(state_dir).nats_url == "nats://127.0.0.1:40111"
    assert sorted(p.name for p in state_dir.iterdir()) == [".stack.json.tmp", "stack.json"]


def test_a_lock_file_planted_as_a_link_is_refused_and_its_target_left_alone(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / "up.lock").symlink_to(victim)

    with pytest.raises(StackLockedError, match=r"cannot open .*up\.lock"):
        StateLock(state_dir).acquire()
    assert victim.read_text() == "precious\n"


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


def test_the_state_names_the_cluster_and_the_health_urls(tmp_path: Path) -> None:
    state = StackState(
        nats_url="nats://127.0.0.1:40111",
        cli_credentials_file=tmp_path / "cli.nk",
        event_store_url="sqlite:///x.db",
        kubeconfig=tmp_path / "fake-cluster" / "kubeconfig",
        health_urls={"planner": "http://127.0.0.1:41000/readyz"},
        pid=4242,
    )
    state.write(tmp_path)

    assert StackState.read(tmp_path) == state


def test_the_state_directory_is_the_flag_else_the_environment_else_found_upwards(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    nested = project / "src" / "deep"
    nested.mkdir(parents=True)
    (project / ".kaiwo").mkdir()
    (project / ".kaiwo" / "stack.json").write_text("{}")

    assert resolve_state_dir(tmp_path / "given", environ={"KAIWO_STATE": "/env"}, cwd=nested) == (
        tmp_path / "given"
    )
    assert resolve_state_dir(None, environ={"KAIWO_STATE": "/env"}, cwd=nested) == Path("/env")
    assert resolve_state_dir(None, environ={}, cwd=nested) == project / ".kaiwo"
    assert resolve_state_dir(None, environ={}, cwd=project / ".kaiwo") == project / ".kaiwo"
    assert resolve_state_dir(None, environ={}, cwd=tmp_path) == tmp_path / ".kaiwo"


def test_a_second_holder_of_the_state_directory_is_refused_in_one_line(tmp_path: Path) -> None:
    first = StateLock(tmp_path)
    first.acquire()
    try:
        with pytest.raises(StackLockedError) as refused:
            StateLock(tmp_path).acquire()
        assert str(refused.value) == (
            f"another kaiwo up (pid {os.getpid()}) is running on {tmp_path}; stop it first, "
            "or give this one another --state-dir"
        )
    finally:
        first.release()
    again = StateLock(tmp_path)
    again.acquire()  # released: free again
    again.release()


def test_no_kubeconfig_says_what_is_missing_and_offers_the_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)

    assert missing_kubeconfig(None) == (
        "no cluster to operate: ~/.kube/config does not exist. Point --kubeconfig (make run "
        "ARGS=--kubeconfig=FILE) or $KUBECONFIG at a cluster, or try the simulated one: make demo"
    )
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "gone"))
    assert missing_kubeconfig(None) is not None
    assert f"$KUBECONFIG ({tmp_path / 'gone'}) does not exist" in str(missing_kubeconfig(None))
    (tmp_path / "gone").write_text("apiVersion: v1\n")
    assert missing_kubeconfig(None) is None
    assert missing_kubeconfig(tmp_path / "other") == (
        f"no kubeconfig at {tmp_path / 'other'} (--kubeconfig)"
    )
