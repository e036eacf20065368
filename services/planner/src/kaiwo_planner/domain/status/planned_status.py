"""Which status the planner plans an owner from.

Only the operator writes the status of the objects it plans (through the executor), so its
own last decision is the newest truth about that status; the observed object can lag behind
until the executor's write comes back through the watcher. Planning from the lagging status
would re-announce every transition (Events) and move every ``lastTransitionTime`` on each
observation until the write lands. The service therefore plans from its last published
status, and records it in the plan (``PlanDecidedV1.assumed_status``) so replay uses the same
input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def owner_with_status(
    owner: Mapping[str, Any], status: Mapping[str, Any] | None
) -> Mapping[str, Any]:
    """``owner`` as planned: with ``status`` in place of its observed one (when given)."""
    if status is None or owner.get("status") == status:
        return owner
    return {**owner, "status": dict(status)}


def status_to_assume(
    owner: Mapping[str, Any], last_planned: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The status to plan from when it differs from the observed one, else None."""
    if last_planned is None or owner.get("status") == last_planned:
        return None
    return dict(last_planned)
