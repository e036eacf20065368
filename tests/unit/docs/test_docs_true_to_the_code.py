"""docs/architecture.md and README.md say what the code, the build and the checks do: the
layers import-linter keeps, what the contracts may import, what the recorder leaves out (see
test_architecture_edges.py), the names the prose gives the code, the Go the stack needs and
what mypy checks strictly."""

from __future__ import annotations

import ast
import configparser
import re
import tomllib
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[3]
ARCHITECTURE: Final = ROOT / "docs" / "architecture.md"
README: Final = ROOT / "README.md"
PRODUCT_SOURCES: Final = (
    *sorted((ROOT / "libs").glob("*/src")),
    *sorted((ROOT / "services").glob("*/src")),
    ROOT / "cli" / "src",
)


def prose() -> str:
    """docs/architecture.md up to its index of decisions (which describes each decision as
    it was taken, not the code of today)."""
    text = ARCHITECTURE.read_text()
    return text[: text.index("\n## Decisions\n")]


def table_rows(text: str, header: str) -> list[list[str]]:
    """The cells of each row of the Markdown table whose header row is ``header``."""
    lines = text.splitlines()
    start = lines.index(header) + 2  # the header and its |---| line
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


def importlinter_contract(name: str) -> configparser.SectionProxy:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    return config[f"importlinter:contract:{name}"]


def test_the_planner_domain_table_is_the_layers_import_linter_keeps() -> None:
    # One layer a line, top first; "|" and ":" join the modules of one layer.
    layers = importlinter_contract("planner-domain-layers")["layers"].strip().splitlines()
    kept = [set(re.split(r"\s*[|:]\s*", layer.strip())) for layer in layers]
    drawn = [
        {
            name.removesuffix(".py").removesuffix("/")
            for name in re.findall(r"`([a-z_]+(?:\.py|/))`", modules)
        }
        for _, modules in table_rows(prose(), "| layer | modules |")
    ]
    assert drawn == kept


def test_the_contracts_may_import_every_library_they_depend_on() -> None:
    dependencies = tomllib.loads(
        (ROOT / "libs" / "kaiwo_contracts" / "pyproject.toml").read_text()
    )["project"]["dependencies"]
    libraries = {re.split(r"[^A-Za-z0-9_-]", dependency)[0] for dependency in dependencies}
    assert libraries == {"pydantic", "orjson"}
    contracts = next(
        row
        for row in table_rows(prose(), "| layer | packages | may import |")
        if row[0] == "contracts"
    )
    assert contracts[2] == "pydantic and orjson only"


@cache
def class_attributes() -> dict[str, set[str]]:
    """Every product class's name, with what its body defines (methods, fields)."""
    defined: dict[str, set[str]] = defaultdict(set)
    for source in PRODUCT_SOURCES:
        for path in source.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.ClassDef):
                    continue
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        defined[node.name].add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        defined[node.name].add(item.target.id)
    return defined


def product_files() -> set[str]:
    return {path.name for source in PRODUCT_SOURCES for path in source.rglob("*.py")}


def test_every_method_the_prose_names_is_a_method_of_that_class() -> None:
    named = re.findall(r"`([A-Z][A-Za-z0-9]+)\.([a-z_][a-z0-9_]*)`", prose())
    assert named, "the prose names no method: the pattern is out of date"
    for cls, attribute in named:
        assert attribute in class_attributes().get(cls, set()), f"{cls}.{attribute}"


def test_every_module_file_the_prose_names_exists() -> None:
    files = set(re.findall(r"`([a-z_]+\.py)`", prose()))
    assert "planning_loop.py" in files
    assert files <= product_files(), files - product_files()


def go_directive(go_mod: Path) -> tuple[int, ...]:
    found = re.search(r"^go (\d+(?:\.\d+)*)$", go_mod.read_text(), re.MULTILINE)
    assert found is not None, go_mod
    return tuple(int(part) for part in found[1].split("."))


def test_the_readme_names_the_go_every_module_of_the_stack_builds_with() -> None:
    # The stack is built with GOTOOLCHAIN=local: a Go older than a module's `go` line is
    # refused, not upgraded.
    modules = sorted((ROOT / "tools" / "k8s").glob("*/go.mod"))
    assert len(modules) >= 8
    needed = max(go_directive(go_mod) for go_mod in modules)
    said = re.search(r"Go (\d+(?:\.\d+)*) or newer for `make test`", README.read_text())
    assert said is not None
    assert tuple(int(part) for part in said[1].split(".")) == needed


def test_the_readme_and_make_help_say_what_mypy_checks_strictly() -> None:
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    strict = {
        module.removesuffix(".*")
        for override in mypy["overrides"]
        if override.get("strict")
        for module in override["module"]
    }
    packages = re.search(r"^PACKAGES := (.*?)\n\n", makefile(), re.MULTILINE | re.DOTALL)
    assert packages is not None
    checked = set(packages[1].split()) - {"\\"}
    # The words below are written for exactly these packages.
    assert checked - strict == {"kaiwo_kubefake", "kaiwo_watcher", "kaiwo_executor", "kaiwo_cli"}
    readme = " ".join(README.read_text().split())
    assert (
        "mypy (strict but for the Kubernetes fake, the watcher, the executor and the command)"
        in readme
    )
    assert (
        "## mypy (strict but for the Kubernetes fake, the watcher, the executor and the CLI)"
        in makefile()
    )


def makefile() -> str:
    return (ROOT / "Makefile").read_text()
