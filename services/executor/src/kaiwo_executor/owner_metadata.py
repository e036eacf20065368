"""What the executor writes on a plan's owner: the operator's finalizers and labels, merged
into what the owner carries so nothing of other controllers or of the user is lost."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def merged_finalizers(
    current: list[str], wanted: tuple[str, ...], *, managed: frozenset[str]
) -> list[str]:
    """``current`` with the operator's finalizers (``managed``) made exactly ``wanted``;
    other controllers' finalizers kept in place."""
    merged = [f for f in current if f not in managed or f in wanted]
    return merged + [f for f in wanted if f not in merged]


def label_changes(
    current: Mapping[str, Any], wanted: Mapping[str, str], *, owns: Callable[[str], bool]
) -> dict[str, str | None]:
    """The merge patch of ``labels`` that makes the operator's labels (keys ``owns``
    accepts) exactly ``wanted``: None removes one; the user's labels are not mentioned."""
    changes: dict[str, str | None] = {
        key: None for key in current if owns(str(key)) and key not in wanted
    }
    changes.update({key: value for key, value in wanted.items() if current.get(key) != value})
    return changes
