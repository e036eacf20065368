"""The image's environment built without Docker: the build context .dockerignore leaves, copied
to a directory of its own, and the Dockerfile's `uv sync` run there into another directory, as
the build stage runs it into /opt/kaiwo. What the final stage would hold is then checked: the
console scripts point at that environment, every service's module is there as an installed
package (not a link to the sources), the CLI reports the project's version, and no
development tool came along."""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Final

import pytest

from tests.unit.deploy.test_image import ROOT, context_files, dockerfile_stages

pytestmark = pytest.mark.timeout(180)

UV: Final = shutil.which("uv") or str(ROOT / ".tools" / "bin" / "uv")
SERVICES: Final = ("watcher", "planner", "executor", "monitor", "recorder")


@pytest.fixture(scope="module")
def environment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    context = tmp_path_factory.mktemp("context")
    for path in context_files():
        target = context / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    [_, build, _] = dockerfile_stages()
    [sync] = [arguments for instruction, arguments in build if instruction == "RUN" and "uv sync" in arguments]
    command = sync.split("&&")[0].split()
    assert command[:2] == ["uv", "sync"]
    venv = tmp_path_factory.mktemp("opt") / "kaiwo"
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(venv), "UV_PYTHON_DOWNLOADS": "never"}
    env.pop("VIRTUAL_ENV", None)
    result = subprocess.run(
        [UV, *command[1:], "--quiet"], cwd=context, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return venv


def run_in(venv: Path, *args: str) -> str:
    result = subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_console_scripts_run_from_the_environment(environment: Path) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    kaiwo = environment / "bin" / "kaiwo"

    assert kaiwo.read_text().splitlines()[0] == f"#!{environment}/bin/python"
    assert run_in(environment, "kaiwo", "version").strip() == f"kaiwo {version}"


def test_every_service_is_installed_not_linked(environment: Path) -> None:
    probe = (
        "import importlib.util, sys\n"
        "for name in sys.argv[1:]:\n"
        "    print(importlib.util.find_spec(name + '.__main__').origin)\n"
    )
    origins = run_in(environment, "python", "-c", probe, *(f"kaiwo_{s}" for s in SERVICES))
    for origin in origins.split():
        assert origin.startswith(f"{environment}/lib/"), origin


def test_no_development_tool_is_installed(environment: Path) -> None:
    scripts = {path.name for path in (environment / "bin").iterdir()}
    assert {"pytest", "mypy", "ruff", "hadolint", "lint-imports"}.isdisjoint(scripts)
    assert {"kaiwo", "python"} <= scripts
