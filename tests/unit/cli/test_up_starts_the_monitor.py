"""``kaiwo up`` starts the monitor whenever a metrics endpoint is configured: the flag, or
``KAIWO_MONITOR_METRICS_ENDPOINT`` in the environment (the same variable the monitor reads);
and it says, first, whose rights its services use."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from kaiwo_cli.commands import up
from kaiwo_cli.main import app
from kaiwo_cli.stack.local import StackOptions

NO_GATEWAY = ("--gateway-port", "0")
"""Without it ``kaiwo up`` wants port 8000, and refuses to start when anything holds it."""


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[StackOptions]:
    found: list[StackOptions] = []

    async def run(options: StackOptions) -> None:
        found.append(options)

    monkeypatch.setattr(up, "_run", run)
    return found


def test_the_environment_variable_is_enough(started: list[StackOptions]) -> None:
    result = CliRunner().invoke(
        app,
        ["up", *NO_GATEWAY],
        env={"KAIWO_MONITOR_METRICS_ENDPOINT": "http://prometheus:9090"},
    )
    assert result.exit_code == 0, result.output
    assert [options.metrics_endpoint for options in started] == ["http://prometheus:9090"]


def test_without_either_there_is_no_monitor(started: list[StackOptions]) -> None:
    result = CliRunner().invoke(
        app, ["up", *NO_GATEWAY], env={"KAIWO_MONITOR_METRICS_ENDPOINT": ""}
    )
    assert result.exit_code == 0, result.output
    assert [options.metrics_endpoint for options in started] == [None]


def test_it_says_first_that_the_services_use_the_users_kubeconfig(
    started: list[StackOptions],
) -> None:
    result = CliRunner().invoke(app, ["up", "--kubeconfig", "/home/ada/.kube/lab"])

    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (
        "kaiwo up: every service acts with your kubeconfig's identity (/home/ada/.kube/lab) "
        "and all its rights, not the least-privilege ServiceAccounts of a cluster install"
    )


def test_on_the_fake_cluster_it_says_whose_identity_that_is(started: list[StackOptions]) -> None:
    result = CliRunner().invoke(app, ["up", "--fake"])

    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (
        "kaiwo up: the services act as the fake cluster's administrator"
    )
