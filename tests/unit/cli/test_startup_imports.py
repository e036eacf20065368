"""``kaiwo --help`` and a command's help import none of the slow modules (the Kubernetes
client, aiohttp, pydantic, NATS, SQLAlchemy, the operator's contracts): the command table is
listed from names, and a command's module imports what it needs only when it runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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
