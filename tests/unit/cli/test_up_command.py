"""``kaiwo up`` refuses options it cannot honour before it starts anything (a taken gateway
port is not one of them: the rest runs without the gateway, see
tests/integration/test_up_resilience.py), and says who may call the gateway it starts."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner
from kaiwo_cli.commands import up
from kaiwo_cli.main import app
from kaiwo_cli.stack.local import LocalStack, StackOptions
from kaiwo_contracts.events.permissions import tenant_identity
from kaiwo_runtime.nats_credentials import write_credentials
from kaiwo_runtime.nats_server import NatsServer, free_port


def options_started(monkeypatch: pytest.MonkeyPatch) -> list[StackOptions]:
    """The options ``kaiwo up`` would start each stack with (none is started)."""
    started: list[StackOptions] = []

    async def run(options: StackOptions) -> None:
        started.append(options)

    monkeypatch.setattr(up, "_run", run)
    return started


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


def test_the_gateway_is_anonymous_on_loopback_by_default_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = options_started(monkeypatch)
    port = str(free_port())
    assert CliRunner().invoke(app, ["up", "--gateway-port", port]).exit_code == 0
    assert (
        CliRunner().invoke(app, ["up", "--gateway-port", port, "--gateway-tokens"]).exit_code == 0
    )

    anonymous, tokens = started
    assert (anonymous.gateway_anonymous, tokens.gateway_anonymous) == (True, False)
    assert up.gateway_line(anonymous) == (
        f"OpenAI API: http://127.0.0.1:{port}/openai/v1 - anonymous access ON, loopback only: "
        "any process on this machine may call every Model without a token (--gateway-tokens "
        "to require them)"
    )
    assert up.gateway_line(tokens).startswith(
        f"OpenAI API: http://127.0.0.1:{port}/openai/v1 - send a Kubernetes bearer token"
    )


def test_the_stack_passes_the_choice_to_the_gateway(tmp_path: Path) -> None:
    for anonymous, expected in ((True, "loopback"), (False, "off")):
        stack = LocalStack(
            StackOptions(state_dir=tmp_path, gateway_port=8000, gateway_anonymous=anonymous)
        )
        stack.nats = NatsServer(port=4222)
        env = stack._service_env(health_port=9000)
        assert (env["KAIWO_GATEWAY_HOST"], env["KAIWO_GATEWAY_ANONYMOUS"]) == (
            "127.0.0.1",
            expected,
        )


def test_the_console_starts_anonymous_on_loopback_says_where_and_asks_for_the_port_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = options_started(monkeypatch)
    gateway = str(free_port())
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        for arguments in (
            ["--console-port", str(taken)],
            ["--console-port", "0"],
            ["--console-tokens"],
        ):
            result = CliRunner().invoke(app, ["up", "--gateway-port", gateway, *arguments])
            assert result.exit_code == 0, result.output

    # The stack claims the port when it starts (and moves off it when taken: test_ports).
    moved, none, tokens = started
    assert moved.console_port == taken
    assert none.console_port is None and none.console_url is None
    assert up.console_line(moved) == (
        f"Console: http://127.0.0.1:{moved.console_port}/ - anonymous access ON, loopback only: "
        "anyone on this machine sees every namespace (--console-tokens to require tokens)"
    )
    assert tokens.console_anonymous is False
    assert up.console_line(tokens).endswith(
        "sign in with a Kubernetes token; each reader sees "
        "the namespaces where it may list KaiwoJobs"
    )


def test_the_stack_moves_the_console_off_a_taken_port_and_hands_it_the_socket(
    tmp_path: Path,
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        stack = LocalStack(StackOptions(state_dir=tmp_path, console_port=taken))
        stack.nats = NatsServer(port=4222)
        stack._listen_for_console()
        try:
            port = stack.options.console_port
            assert port is not None and port != taken
            assert stack.console_note == (
                f"port {taken} of 127.0.0.1 is taken; the console listens on {port} instead "
                "(--console-port chooses another)"
            )
            env = stack._service_env(health_port=9000)
            assert env["KAIWO_CONSOLE_PORT"] == str(port)
            descriptor = int(env["KAIWO_CONSOLE_LISTEN_FD"])
            with socket.socket(fileno=os.dup(descriptor)) as inherited:
                assert inherited.getsockname()[1] == port
            assert stack._inherited_fds("console") == (descriptor,)
            assert stack._inherited_fds("planner") == ()
        finally:
            assert stack._console_listener is not None
            stack._console_listener.close()


def test_the_stack_passes_the_console_its_port_and_access(tmp_path: Path) -> None:
    for anonymous, expected in ((True, "loopback"), (False, "off")):
        stack = LocalStack(
            StackOptions(state_dir=tmp_path, console_port=8090, console_anonymous=anonymous)
        )
        stack.nats = NatsServer(port=4222)
        env = stack._service_env(health_port=9000)
        assert (
            env["KAIWO_CONSOLE_HOST"],
            env["KAIWO_CONSOLE_PORT"],
            env["KAIWO_CONSOLE_ANONYMOUS"],
        ) == ("127.0.0.1", "8090", expected)


def test_a_subscriber_namespace_gets_its_key_and_a_name_that_is_no_namespace_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``kaiwo up --subscriber-namespace team-a`` (decision 0164)."""
    started = options_started(monkeypatch)
    runner = CliRunner()
    ok = runner.invoke(app, ["up", "--subscriber-namespace", "team-a"])
    bad = runner.invoke(app, ["up", "--subscriber-namespace", "Team_A"])

    assert ok.exit_code == 0, ok.output
    [options] = started
    assert options.subscriber_namespaces == ("team-a",)
    assert bad.exit_code == 2
    assert "--subscriber-namespace: 'Team_A' is not a namespace name" in bad.output


def test_the_messenger_runs_with_the_gateway_unless_switched_off_and_tenants_are_checked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    started = options_started(monkeypatch)
    port = str(free_port())
    runner = CliRunner()
    assert runner.invoke(app, ["up", "--gateway-port", port, "--tenant", "team-a"]).exit_code == 0
    assert runner.invoke(app, ["up", "--gateway-port", port, "--no-messenger"]).exit_code == 0
    bad = runner.invoke(app, ["up", "--gateway-port", port, "--tenant", "Team_A"])
    off = runner.invoke(app, ["up", "--gateway-port", port, "--no-messenger", "--tenant", "a"])
    without_gateway = runner.invoke(app, ["up", "--gateway-port", "0", "--tenant", "a"])

    on, switched_off = started
    assert (on.messenger_on, on.messenger_tenants) == (True, ("team-a",))
    assert (switched_off.messenger_on, switched_off.messenger_tenants) == (False, ())
    assert bad.exit_code == 2
    assert "--tenant: 'Team_A' is not a namespace name" in bad.output
    for refused in (off, without_gateway):
        assert refused.exit_code == 2
        assert "--tenant needs the messenger and the gateway" in refused.output
    # The gateway is told; without a gateway there is no messenger.
    for gateway_port, expected in ((8000, "true"), (None, None)):
        stack = LocalStack(StackOptions(state_dir=tmp_path, gateway_port=gateway_port))
        stack.nats = NatsServer(port=4222)
        assert stack._service_env(health_port=9000).get("KAIWO_MESSENGER_ENABLED") == expected


def test_the_summary_names_each_tenant_key_and_says_nothing_without_a_gateway(
    tmp_path: Path,
) -> None:
    options = StackOptions(state_dir=tmp_path, gateway_port=8000, messenger_tenants=("team-a",))
    stack = LocalStack(options)
    stack.credentials = write_credentials(tmp_path / "credentials", [tenant_identity("team-a")])
    key = tmp_path / "credentials" / "tenant-team-a.nk"

    assert up.messenger_line(stack) == ""  # the gateway is not running (its port was taken)
    stack.services["gateway"] = object()  # type: ignore[assignment]
    assert up.messenger_line(stack) == (
        "Messenger: requests on kaiwo-messenger.<namespace>.requests, answers on "
        "kaiwo-messenger.<namespace>.responses (python examples/batch_client.py; live on "
        "kaiwo-messenger.<namespace>.live); "
        f"tenant keys team-a: {key}"
    )


def test_the_core_services_run_in_one_process_unless_replicated_or_asked_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = options_started(monkeypatch)
    base = ["up", "--gateway-port", "0"]
    replicated = ["--partitions", "2", "--planners", "2"]
    for extra in ([], ["--processes"], replicated, ["--one-process"]):
        assert CliRunner().invoke(app, [*base, *extra]).exit_code == 0

    assert [options.one_process for options in started] == [True, False, False, True]
    refused = CliRunner().invoke(app, [*base, "--one-process", *replicated])
    assert refused.exit_code == 2
    assert refused.output.strip() == "kaiwo up: --one-process runs one planner and one executor"


def test_nats_runs_on_one_core_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    started = options_started(monkeypatch)
    for argv in (["up"], ["up", "--nats-cpus", "2"], ["up", "--nats-cpus", "0"]):
        assert CliRunner().invoke(app, [*argv, "--gateway-port", "0"]).exit_code == 0

    assert [options.nats_cpus for options in started] == [1, 2, None]
