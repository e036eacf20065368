"""Leave structlog's console renderer libraries out of a service process (decision 0088).

structlog imports rich, and rich pygments, for its console renderer whenever rich is
installed, as it is beside the command (in the image too): 5-7 MB of every process. A service
writes JSON lines wherever a collector reads them and renders for a terminal only when one
is attached, which structlog still does without rich. This module imports nothing, so a
service's ``__main__`` can call it before anything imports structlog.
"""

from __future__ import annotations

import sys


def leave_out_console_rendering() -> None:
    """Make ``import rich`` fail in this process (an import blocked in ``sys.modules``);
    structlog then goes on as it does where rich is not installed. Call it before anything
    imports structlog, and only in a process that is a service, never in the command."""
    sys.modules.setdefault("rich", None)  # type: ignore[arg-type]
