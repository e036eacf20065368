"""Service processes, and ``kaiwo up``'s operator process, load no console renderer
(decision 0088): each blocks rich (and with it pygments, 5-7 MB) before anything imports
structlog, and logging works as before without them."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SERVICES = ("watcher", "planner", "executor", "recorder", "monitor", "gateway", "console")
ROOT = Path(__file__).resolve().parents[3]

LOADED = (
    "print(sorted({n.split('.')[0] for n, m in sys.modules.items() if m is not None}"
    " & {'structlog', 'rich', 'pygments'}))"
)

LOG_WITHOUT_RICH = """
import io, sys
from kaiwo_runtime.console_rendering import leave_out_console_rendering
leave_out_console_rendering()
import structlog
from kaiwo_runtime.logging import configure_logging
for as_json in (True, False):
    lines = io.StringIO()
    configure_logging(json=as_json, stream=lines)
    try:
        raise ValueError("boom")
    except ValueError:
        structlog.get_logger("kaiwo.test").exception("member failed", service="planner")
    print(lines.getvalue().splitlines()[0 if as_json else -1])
"""


def run(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_without_rich_a_process_still_logs_json_and_console_lines() -> None:
    *lines, loaded = run("-c", f"{LOG_WITHOUT_RICH}\n{LOADED}").stdout.strip().splitlines()

    assert loaded == "['structlog']"
    logged = json.loads(lines[0])
    assert (logged["event"], logged["service"]) == ("member failed", "planner")
    assert "boom" in json.dumps(logged["exception"])
    assert "ValueError: boom" in lines[-1]


def test_importing_the_operator_process_module_loads_no_structlog() -> None:
    """So that ``together.main()`` runs before structlog is imported."""
    done = run("-c", f"import sys\nimport kaiwo_cli.stack.together\n{LOADED}")
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_leaves_rich_out_before_any_other_import(service: str) -> None:
    """Its package imports nothing, and its ``__main__``'s first statement, when run as a
    program, blocks rich."""
    package = ROOT / "services" / service / "src" / f"kaiwo_{service}"
    initial = ast.parse((package / "__init__.py").read_text())
    assert not [n for n in initial.body if isinstance(n, ast.Import | ast.ImportFrom)]
    body = [
        statement
        for statement in ast.parse((package / "__main__.py").read_text()).body
        if not isinstance(statement, ast.Expr)  # the docstring
        and not (isinstance(statement, ast.ImportFrom) and statement.module == "__future__")
    ]
    first = body[0]
    assert isinstance(first, ast.If)
    assert ast.unparse(first.test) == "__name__ == '__main__'"
    assert "leave_out_console_rendering()" in ast.unparse(first)


def test_a_service_run_as_a_program_imports_structlog_without_rich() -> None:
    """The recorder, stopped at once by a store it cannot create: by then it has imported
    everything its start needs, structlog included."""
    done = run(
        "-X",
        "importtime",
        "-m",
        "kaiwo_recorder",
        env={"KAIWO_EVENTSTORE_URL": "sqlite:////proc/no-such-directory/events.db"},
    )

    imported = re.findall(r"\|\s+([\w.]+)$", done.stderr, flags=re.MULTILINE)
    assert "structlog" in imported
    assert [m for m in imported if m.startswith(("rich.", "pygments"))] == []
