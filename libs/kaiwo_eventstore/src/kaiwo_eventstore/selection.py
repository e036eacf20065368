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


def check_shares(shares: Iterable[float]) -> None:
    """The shares of ``positions_of_type``: each from 0 to 1, 1 excluded."""
    for share in shares:
        if not 0 <= share < 1:
            raise ValueError(f"share {share}: it must be from 0 to 1, 1 excluded")


def nth_of(share: float, count: int) -> int:
    """Which of ``count`` events (from 0) lies ``share`` of the way into them."""
    return min(int(share * count), count - 1)
