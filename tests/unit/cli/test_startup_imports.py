"""``kaiwo --help`` and a command's help import none of the slow modules (the Kubernetes
client, aiohttp, pydantic, NATS, SQLAlchemy, the operator's contracts): the command table is
listed from names, and a command's module imports what it needs only when it runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from kaiwo_cli.main import app

HEAVY = (
    "kubernetes_asyncio",
    "aiohttp",
    "pydantic",
    "nats",
    "sqlalchemy",
    "kaiwo_contracts",
    "kaiwo_kube",
    "kaiwo_planner",
    "kaiwo_eventstore",
)

PROBE = """
import json, sys
from kaiwo_cli.main import app
try:
    app(sys.argv[1:], prog_name="kaiwo")
except SystemExit as done:
    code = done.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def loaded_by(*arguments: str) -> tuple[int, set[str]]:
    finished = subprocess.run(
        [sys.executable, "-c", PROBE, *arguments],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    answer = json.loads(finished.stdout.splitlines()[-1])
    return answer["code"], {name.split(".")[0] for name in answer["modules"]}


def test_the_top_level_help_imports_neither_typer_nor_rich_nor_anything_heavy() -> None:
    code, modules = loaded_by("--help")

    assert code == 0
    assert modules.isdisjoint({*HEAVY, "typer", "rich", "yaml"}), modules & {
        *HEAVY,
        "typer",
        "rich",
    }


@pytest.mark.parametrize(
    "command", [("list", "-h"), ("status", "--help"), ("submit", "-h"), ("queues", "-h")]
)
def test_a_cluster_command_s_help_imports_nothing_heavy(command: tuple[str, ...]) -> None:
    code, modules = loaded_by(*command)

    assert code == 0
    assert modules.isdisjoint(HEAVY), modules & set(HEAVY)


@pytest.mark.parametrize(
    ("command", "not_needed"),
    [
        ("explain", {"nats", "aiohttp", "kaiwo_planner"}),
        ("export", {"nats", "aiohttp", "kaiwo_planner"}),
        ("replay", {"nats", "aiohttp"}),
        ("tail", {"kaiwo_planner"}),
    ],
)
def test_an_events_subcommand_imports_what_it_needs_and_not_its_siblings_needs(
    command: str, not_needed: set[str]
) -> None:
    # tail follows NATS, replay runs the planner, explain and export read the store only.
    code, modules = loaded_by("events", command, "-h")

    assert code == 0
    assert "kaiwo_eventstore" in modules or command == "tail"
    assert modules.isdisjoint(not_needed), modules & not_needed


def test_list_and_status_reach_the_cluster_without_the_kubernetes_client_library(
    tmp_path: Path,
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: here\n"
        "clusters: [{name: here, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: me, user: {token: secret}}]\n"
        "contexts: [{name: here, context: {cluster: here, user: me}}]\n"
    )
    for command in (("list",), ("status", "ml-team/train"), ("logs", "ml-team/train")):
        code, modules = loaded_by(*command, "--kubeconfig", str(kubeconfig))

        assert code == 2  # nothing listens on port 9: the request was made, and failed
        assert "kubernetes_asyncio" not in modules
        assert "kaiwo_kube" in modules
        # Plain click commands: typer builds a pydantic adapter per parameter.
        assert modules.isdisjoint({"typer", "pydantic", "rich"}), modules & {
            "typer",
            "pydantic",
            "rich",
        }


@pytest.mark.parametrize(
    "command",
    [
        ("-h",),
        ("list", "-h"),
        ("events", "-h"),
        ("events", "tail", "-h"),
        ("events", "replay", "-h"),
        ("up", "-h"),
    ],
)
def test_h_is_help_and_flags_show_no_type(command: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, list(command), env={"COLUMNS": "200"}, prog_name="kaiwo")

    assert result.exit_code == 0, result.output
    assert "Usage: kaiwo" in result.output
    assert "<bool>" not in result.output
