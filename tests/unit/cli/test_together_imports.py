"""The operator process of ``kaiwo up`` loads no console renderer (decision 0088): importing
its module loads no structlog, so :func:`together.main` can keep rich and pygments (7 MB)
out before anything imports structlog; logging works as before without them."""

from __future__ import annotations

import json
import subprocess
import sys

LOADED = (
    "print(sorted({n.split('.')[0] for n, m in sys.modules.items() if m is not None}"
    " & {'structlog', 'rich', 'pygments'}))"
)

LOG_WITHOUT_RICH = """
import io, sys
from kaiwo_cli.stack import together
together.leave_out_console_rendering()
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


def run(code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.strip().splitlines()


def test_importing_the_operator_process_module_loads_no_structlog() -> None:
    assert run(f"import sys\nimport kaiwo_cli.stack.together\n{LOADED}") == ["[]"]


def test_without_rich_the_process_still_logs_json_and_console_lines() -> None:
    *lines, loaded = run(f"{LOG_WITHOUT_RICH}\n{LOADED}")

    assert loaded == "['structlog']"
    logged = json.loads(lines[0])
    assert (logged["event"], logged["service"]) == ("member failed", "planner")
    assert "boom" in json.dumps(logged["exception"])
    assert "ValueError: boom" in lines[-1]
