"""Go-style duration strings (``1h30m``, ``5m``, ``300ms``), as Kubernetes APIs carry them."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from types import MappingProxyType

_UNIT_SECONDS = MappingProxyType(
    {
        "ns": Decimal("1e-9"),
        "us": Decimal("1e-6"),
        "µs": Decimal("1e-6"),
        "ms": Decimal("1e-3"),
        "s": Decimal(1),
        "m": Decimal(60),
        "h": Decimal(3600),
    }
)
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_WHOLE = re.compile(r"(\d{1,9})(h|m|s)")
"""The common case (``30m``, ``1h``, ``90s``), read without Decimal arithmetic."""
_WHOLE_SECONDS = MappingProxyType({"h": 3600, "m": 60, "s": 1})


def parse_duration(text: str) -> timedelta:
    """Parse a Go duration string; ``"0"`` is zero. Raises ValueError for anything else.

    Negative durations are rejected: every duration in these APIs is a length of time.
    """
    value = text.strip().removeprefix("+")
    whole = _WHOLE.fullmatch(value)
    if whole is not None:
        return timedelta(seconds=int(whole.group(1)) * _WHOLE_SECONDS[whole.group(2)])
    if value == "0":
        return timedelta(0)
    if not value:
        raise ValueError("empty duration")
    position = 0
    seconds = Decimal(0)
    for match in _PART.finditer(value):
        if match.start() != position:
            break
        seconds += Decimal(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if position != len(value):
        raise ValueError(f"not a duration: {text!r} (expected e.g. 90s, 5m, 1h30m)")
    return timedelta(microseconds=int(seconds * 1_000_000))


def format_duration(duration: timedelta) -> str:
    """The shortest Go-style form of whole seconds: ``5400s`` -> ``1h30m0s``, zero -> ``0s``."""
    total = int(duration.total_seconds())
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{seconds}s"
    if minutes:
        return f"{minutes}m{seconds}s"
    return f"{seconds}s"
