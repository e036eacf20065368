"""``kaiwo up`` refuses a gateway port that is taken before it starts anything, and says who
may call the gateway it starts."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner
from kaiwo_cli.commands import up
from kaiwo_cli.main import app
from kaiwo_cli.stack.local import LocalStack, StackOptions
from kaiwo_runtime.nats_server import NatsServer, free_port


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


def test_the_gateway_is_anonymous_on_loopback_by_default_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[StackOptions] = []

    async def run(options: StackOptions) -> None:
        started.append(options)

    monkeypatch.setattr(up, "_run", run)
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
