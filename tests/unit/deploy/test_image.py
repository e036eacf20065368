"""The image, checked without Docker: the build context that .dockerignore leaves (small, no
virtual environment, no keys), the Dockerfile's shape (base pinned by digest, non-root, the
environment created where the final stage runs it), hadolint's verdict, and that every
command the manifests run exists in the packages the image installs."""

from __future__ import annotations

import re
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import yaml

ROOT: Final = Path(__file__).resolve().parents[3]
DOCKERFILE: Final = ROOT / "deploy" / "Dockerfile"
HADOLINT: Final = ROOT / ".venv" / "bin" / "hadolint"
CONTEXT_LIMIT_BYTES: Final = 8 * 1024 * 1024
"""Twice the sources and the lock today (4.2 MB): room for the code to grow, and far below
what a virtual environment (hundreds of MB), a store or a stack cache would add."""
WORKSPACE_DIRS: Final = ("libs", "services", "cli")


def ignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    """(exclude?, pattern) per .dockerignore line, in order; the last match decides."""
    rules = []
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.removeprefix("!").strip("/")
        rules.append((not negated, re.compile(glob_regex(pattern))))
    return rules


def glob_regex(pattern: str) -> str:
    """Docker's matching: ``*`` within one path element, ``**`` across any number."""
    out = ""
    index = 0
    while index < len(pattern):
        if pattern.startswith("**/", index):
            out += "(?:.*/)?"
            index += 3
        elif pattern.startswith("**", index):
            out += ".*"
            index += 2
        elif pattern[index] == "*":
            out += "[^/]*"
            index += 1
        elif pattern[index] == "?":
            out += "[^/]"
            index += 1
        else:
            out += re.escape(pattern[index])
            index += 1
    return f"^{out}$"


def excluded(relative: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """A path is excluded by a rule matching it or one of its parent directories."""
    parts = relative.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    verdict = False
    for exclude, pattern in rules:
        if any(pattern.match(prefix) for prefix in prefixes):
            verdict = exclude
    return verdict


def context_files() -> Iterator[Path]:
    """What `docker build .` sends. A directory excluded with no re-inclusion under it is not
    walked (the rules here re-include top-level names only)."""
    rules = ignore_rules()
    stack = [ROOT]
    while stack:
        directory = stack.pop()
        for entry in directory.iterdir():
            relative = entry.relative_to(ROOT).as_posix()
            if excluded(relative, rules):
                continue
            if entry.is_dir() and not entry.is_symlink():
                stack.append(entry)
            elif entry.is_file():
                yield entry


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile as (INSTRUCTION, arguments) per stage, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    stages: list[list[tuple[str, str]]] = [[]]
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, arguments = line.partition(" ")
        if instruction.upper() == "FROM":
            stages.append([])
        stages[-1].append((instruction.upper(), arguments.strip()))
    return stages


def env_of(stage: list[tuple[str, str]]) -> dict[str, str]:
    found: dict[str, str] = {}
    for instruction, arguments in stage:
        if instruction == "ENV":
            for key, value in re.findall(r"(\w+)=(\S+)", arguments):
                found[key] = value
    return found


def test_the_build_context_is_the_sources_and_the_lock_only() -> None:
    files = [path.relative_to(ROOT).as_posix() for path in context_files()]
    size = sum((ROOT / name).stat().st_size for name in files)

    assert {"pyproject.toml", "uv.lock", "cli/pyproject.toml"} <= set(files)
    assert "services/watcher/src/kaiwo_watcher/__main__.py" in files
    tops = {name.split("/")[0] for name in files}
    assert tops == {"pyproject.toml", "uv.lock", "libs", "services", "cli"}
    assert not [name for name in files if "__pycache__" in name or name.endswith(".pyc")]
    assert size < CONTEXT_LIMIT_BYTES, f"build context {size} bytes"


def test_the_rules_keep_out_what_must_never_be_sent() -> None:
    rules = ignore_rules()
    for path in (
        ".venv/bin/python",
        ".tools/bin/uv",
        ".git/HEAD",
        "deploy/k8s/base/nats-credentials/admin.nk",
        "deploy/compose/nats-credentials/admin.nk",
        "deploy/helm/nats-credentials/admin.nk",
        "deploy/helm/nats-credentials.yaml",
        ".kaiwo/events.db",
        "libs/kaiwo_kube/src/kaiwo_kube/__pycache__/x.cpython-311.pyc",
        "tests/conftest.py",
    ):
        assert excluded(path, rules), path
    assert not excluded("libs/kaiwo_kube/src/kaiwo_kube/__init__.py", rules)


def test_every_copy_source_is_in_the_context() -> None:
    [_, build, final] = dockerfile_stages()
    rules = ignore_rules()
    copies = [arguments.split() for instruction, arguments in build if instruction == "COPY"]
    sources = [source for words in copies for source in words[:-1]]
    assert sources == ["pyproject.toml", "uv.lock", "libs", "services", "cli"]
    for source in sources:
        assert (ROOT / source).exists()
        assert not excluded(source, rules)
    assert [a for i, a in final if i == "COPY"] == ["--from=build /opt/kaiwo /opt/kaiwo"]


def test_the_base_is_pinned_by_digest_and_both_stages_use_it() -> None:
    [preamble, build, final] = dockerfile_stages()
    [(instruction, argument)] = preamble
    assert instruction == "ARG"
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.11-slim@sha256:[0-9a-f]{64}", argument)
    assert build[0] == ("FROM", "${PYTHON_IMAGE} AS build")
    assert final[0] == ("FROM", "${PYTHON_IMAGE}")


def test_the_final_stage_runs_as_non_root_without_build_tools() -> None:
    [_, build, final] = dockerfile_stages()
    users = [arguments for instruction, arguments in final if instruction == "USER"]
    assert users == ["65532:65532"]
    assert not [arguments for instruction, arguments in final if instruction == "RUN"]
    # The environment lives where it runs, so console scripts' shebangs hold after the copy.
    assert env_of(build)["UV_PROJECT_ENVIRONMENT"] == "/opt/kaiwo"
    assert env_of(final)["PATH"].startswith("/opt/kaiwo/bin:")
    [sync] = [a for i, a in build if i == "RUN" and "uv sync" in a]
    assert "--frozen" in sync
    assert "--no-dev" in sync
    assert "--no-editable" in sync


def test_hadolint_finds_nothing() -> None:
    result = subprocess.run(
        [str(HADOLINT), "--no-color", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_would_see_a_broken_dockerfile(tmp_path: Path) -> None:
    """The check is live: an unpinned base and a root final stage are reported."""
    broken = tmp_path / "Dockerfile"
    broken.write_text("FROM python:latest\nRUN cd /tmp && pip install uv\n")
    result = subprocess.run(
        [str(HADOLINT), "--no-color", str(broken)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1
    assert "DL3007" in result.stdout  # latest tag


def workspace_projects() -> list[dict[str, Any]]:
    paths = [ROOT / "cli" / "pyproject.toml"]
    for top in WORKSPACE_DIRS[:2]:
        paths += sorted((ROOT / top).glob("*/pyproject.toml"))
    return [tomllib.loads(path.read_text()) | {"_dir": path.parent} for path in paths]


def module_main(module: str) -> Path | None:
    for project in workspace_projects():
        candidate = project["_dir"] / "src" / module / "__main__.py"
        if candidate.exists():
            return candidate
    return None


def commands_in_manifests() -> list[list[str]]:
    found: list[list[str]] = []
    paths = [*sorted((ROOT / "deploy" / "k8s").rglob("*.yaml"))]
    paths += [ROOT / "deploy" / "compose" / "compose.yaml"]
    for path in paths:
        for document in yaml.safe_load_all(path.read_text()):
            found += list(_commands(document))
    return found


def _commands(node: Any) -> Iterator[list[str]]:
    if isinstance(node, dict):
        command = node.get("command")
        if isinstance(command, list) and node.get("image", "").startswith("kaiwo-operator"):
            yield command
        for value in node.values():
            yield from _commands(value)
    elif isinstance(node, list):
        for value in node:
            yield from _commands(value)


def test_every_command_the_manifests_run_exists_in_the_image() -> None:
    commands = commands_in_manifests()
    modules = {command[2] for command in commands if command[:2] == ["python", "-m"]}
    scripts = {command[0] for command in commands if command[0] != "python"}

    assert modules == {
        "kaiwo_watcher",
        "kaiwo_planner",
        "kaiwo_executor",
        "kaiwo_monitor",
        "kaiwo_recorder",
        "kaiwo_console",
        "kaiwo_gateway",
    }
    for module in modules:
        assert module_main(module) is not None, module
    assert scripts == {"kaiwo"}
    declared = {
        name: target
        for project in workspace_projects()
        for name, target in project.get("project", {}).get("scripts", {}).items()
    }
    assert declared["kaiwo"] == "kaiwo_cli.main:app"
    from kaiwo_cli.main import app

    assert callable(app)


def test_the_image_tag_is_the_project_version() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    [kustomization] = yaml.safe_load_all((ROOT / "deploy/k8s/base/kustomization.yaml").read_text())
    [image] = kustomization["images"]
    assert image == {
        "name": "kaiwo-operator",
        "newName": "ghcr.io/silogen/kaiwo-operator-py",
        "newTag": version,
    }


def test_the_chart_carries_the_same_crds_as_kustomize() -> None:
    """`make crds` writes both; Helm installs the chart's crds/ before its templates."""
    ours = {p.name: p.read_text() for p in (ROOT / "deploy/k8s/crds").glob("*.yaml")}
    chart = {p.name: p.read_text() for p in (ROOT / "deploy/helm/kaiwo/crds").glob("*.yaml")}
    assert chart == ours, "deploy/helm/kaiwo/crds/ is stale: run `make crds`"
