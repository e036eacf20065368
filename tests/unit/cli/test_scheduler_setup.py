"""The kaiwo-scheduler as ``kaiwo up`` and compose get it: one source (deploy/k8s/scheduler),
a copy in the CLI kept byte for byte, compose's configuration generated from it, and the
``--scheduler`` choice of ``kaiwo up``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from click.testing import CliRunner
from kaiwo_cli.commands import up
from kaiwo_cli.main import app
from kaiwo_cli.stack.local import StackOptions
from kaiwo_cli.stack.scheduler import (
    compose_scheduler_config,
    compose_scheduler_file,
    default_queue_setting,
    manifest_text,
    scheduler_configuration,
    scheduler_manifests,
    scheduler_name,
)
from kaiwo_planner.settings import PlannerSettings

ROOT: Final = Path(__file__).resolve().parents[3]
SOURCE: Final = ROOT / "deploy" / "k8s" / "scheduler" / "scheduler.yaml"
COMPOSE_CONFIG: Final = ROOT / "deploy" / "compose" / "kaiwo-scheduler.yaml"


def test_the_cli_carries_deploy_k8s_scheduler_byte_for_byte() -> None:
    assert manifest_text() == SOURCE.read_text(), "run `make scheduler`"


def test_namespaced_objects_go_to_kaiwo_system_as_kustomize_puts_them() -> None:
    assert [
        (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))
        for o in scheduler_manifests()
    ] == [
        ("ServiceAccount", "kaiwo-scheduler", "kaiwo-system"),
        ("ClusterRoleBinding", "kaiwo-scheduler-kube-scheduler", None),
        ("ClusterRoleBinding", "kaiwo-scheduler-volume-scheduler", None),
        ("Role", "kaiwo-scheduler-lease", "kaiwo-system"),
        ("RoleBinding", "kaiwo-scheduler-lease", "kaiwo-system"),
        ("ConfigMap", "kaiwo-scheduler-config", "kaiwo-system"),
        ("Deployment", "kaiwo-scheduler", "kaiwo-system"),
    ]


def test_compose_mounts_the_cluster_configuration_plus_the_kubeconfig() -> None:
    assert COMPOSE_CONFIG.read_text() == compose_scheduler_file(scheduler_manifests()), (
        "run `make scheduler`"
    )
    mounted: dict[str, Any] = yaml.safe_load(COMPOSE_CONFIG.read_text())
    assert mounted["clientConnection"] == {"kubeconfig": "/kube/config"}
    assert {k: v for k, v in mounted.items() if k != "clientConnection"} == (
        scheduler_configuration(scheduler_manifests())
    )
    [profile] = mounted["profiles"]
    assert profile["schedulerName"] == "kaiwo-scheduler"
    [fit] = profile["pluginConfig"]
    assert fit["args"]["scoringStrategy"]["resources"] == [
        {"name": "amd.com/gpu", "weight": 5},
        {"name": "nvidia.com/gpu", "weight": 5},
    ]
    assert mounted["leaderElection"] == {
        "leaderElect": True,
        "resourceNamespace": "kaiwo-system",
        "resourceName": "kaiwo-scheduler",
    }


def test_compose_configuration_changes_only_the_connection() -> None:
    base = scheduler_configuration(scheduler_manifests())
    assert "clientConnection" not in base  # in a cluster: its ServiceAccount
    assert set(compose_scheduler_config(scheduler_manifests())) - set(base) == {"clientConnection"}


@pytest.mark.parametrize(
    ("mode", "name"),
    [("install", "kaiwo-scheduler"), ("external", "default-scheduler"), ("existing", None)],
)
def test_each_mode_names_a_scheduler_that_serves_or_leaves_the_name(
    mode: str, name: str | None
) -> None:
    assert scheduler_name(mode) == name  # type: ignore[arg-type]


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[StackOptions]:
    found: list[StackOptions] = []

    async def run(options: StackOptions) -> None:
        found.append(options)

    monkeypatch.setattr(up, "_run", run)
    return found


def test_kaiwo_up_installs_the_kaiwo_scheduler_by_default(started: list[StackOptions]) -> None:
    result = CliRunner().invoke(app, ["up", "--gateway-port", "0"])
    assert result.exit_code == 0, result.output
    assert [options.scheduler for options in started] == ["install"]


def test_kaiwo_up_can_leave_it_to_the_cluster(started: list[StackOptions]) -> None:
    result = CliRunner().invoke(app, ["up", "--gateway-port", "0", "--scheduler", "external"])
    assert result.exit_code == 0, result.output
    assert [options.scheduler for options in started] == ["external"]


def test_an_unknown_choice_is_one_line_and_nothing_starts(started: list[StackOptions]) -> None:
    result = CliRunner().invoke(app, ["up", "--gateway-port", "0", "--scheduler", "none"])
    assert result.exit_code == 2
    assert "--scheduler is one of install, external, existing, not 'none'" in result.output
    assert started == []


def test_kaiwo_scheduler_manifests_prints_the_objects() -> None:
    result = CliRunner().invoke(app, ["scheduler", "manifests"])
    assert result.exit_code == 0, result.output
    printed = [o for o in yaml.safe_load_all(result.output) if o]
    assert printed == scheduler_manifests()
    compose = CliRunner().invoke(app, ["scheduler", "manifests", "--compose"])
    assert compose.output == COMPOSE_CONFIG.read_text()


@pytest.mark.parametrize(
    ("environ", "queue"),
    [
        ({}, ""),
        ({"DEFAULT_CLUSTER_QUEUE_NAME": "research"}, "research"),
        (
            {"KAIWO_DEFAULT_CLUSTER_QUEUE_NAME": "ops", "DEFAULT_CLUSTER_QUEUE_NAME": "research"},
            "ops",
        ),
        # Set, even empty, the project's name decides: "" is the CRD's default.
        (
            {"KAIWO_DEFAULT_CLUSTER_QUEUE_NAME": "", "DEFAULT_CLUSTER_QUEUE_NAME": "research"},
            "",
        ),
    ],
)
def test_the_default_queue_setting_is_read_as_the_planner_reads_it(
    environ: dict[str, str], queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert default_queue_setting(environ) == queue
    # The planner's own settings, from the same environment, name the same queue.
    for name in ("KAIWO_DEFAULT_CLUSTER_QUEUE_NAME", "DEFAULT_CLUSTER_QUEUE_NAME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert PlannerSettings().default_cluster_queue_name == queue
