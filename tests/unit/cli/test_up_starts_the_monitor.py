"""``kaiwo up`` starts the monitor whenever a metrics endpoint is configured: the flag, or
``KAIWO_MONITOR_METRICS_ENDPOINT`` (or the API reference's ``RESOURCE_MONITORING_METRICS_ENDPOINT``,
decision 0046) in the environment or in the monitor's settings; and it says, first, whose
rights its services use."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from kaiwo_cli.commands import up
from kaiwo_cli.main import app
from kaiwo_cli.stack.local import LocalStack, StackOptions

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


def test_the_api_references_name_is_enough(started: list[StackOptions]) -> None:
    result = CliRunner().invoke(
        app,
        ["up", *NO_GATEWAY],
        env={
            "KAIWO_MONITOR_METRICS_ENDPOINT": "",
            "RESOURCE_MONITORING_METRICS_ENDPOINT": "http://exporter:5000/metrics",
        },
    )
    assert result.exit_code == 0, result.output
    assert [options.metrics_endpoint for options in started] == ["http://exporter:5000/metrics"]


def test_the_projects_name_decides_where_both_are_set(started: list[StackOptions]) -> None:
    result = CliRunner().invoke(
        app,
        ["up", *NO_GATEWAY],
        env={
            "KAIWO_MONITOR_METRICS_ENDPOINT": "http://prometheus:9090",
            "RESOURCE_MONITORING_METRICS_ENDPOINT": "http://exporter:5000/metrics",
        },
    )
    assert result.exit_code == 0, result.output
    assert [options.metrics_endpoint for options in started] == ["http://prometheus:9090"]


@pytest.mark.parametrize(
    ("service_env", "by_service", "runs"),
    [
        ({}, {}, False),
        ({"RESOURCE_MONITORING_METRICS_ENDPOINT": "http://exporter:5000/metrics"}, {}, True),
        ({}, {"monitor": {"KAIWO_MONITOR_METRICS_ENDPOINT": "http://prometheus:9090"}}, True),
        ({}, {"planner": {"RESOURCE_MONITORING_METRICS_ENDPOINT": "http://e:5000/metrics"}}, False),
        ({"RESOURCE_MONITORING_ENABLED": "true"}, {}, False),
    ],
)
def test_the_stack_runs_the_monitor_when_its_settings_name_an_endpoint(
    tmp_path: Path,
    service_env: dict[str, str],
    by_service: dict[str, dict[str, str]],
    runs: bool,
) -> None:
    options = StackOptions(state_dir=tmp_path, service_env=service_env, env_by_service=by_service)
    assert LocalStack(options).runs_monitor is runs
