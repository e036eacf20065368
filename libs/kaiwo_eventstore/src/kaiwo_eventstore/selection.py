"""Small argument checks shared by the adapters' read methods."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime


def type_names(types: Iterable[str]) -> tuple[str, ...]:
    """The requested event types; a lone string means one type, not its characters."""
    return (types,) if isinstance(types, str) else tuple(types)


def check_time_range(start: datetime, end: datetime) -> None:
    for name, value in (("start", start), ("end", end)):
        if value.tzinfo is None or value.utcoffset() is None:
            msg = f"{name} must be timezone-aware, got {value.isoformat()}"
            raise ValueError(msg)


def check_page(*, batch_size: int) -> None:
    if batch_size < 1:
        msg = f"batch size and limit must be >= 1, got {batch_size}"
        raise ValueError(msg)
