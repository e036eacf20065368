"""Go-style durations ("12h", "1h30m", "90s") as seconds, for a workload's ``spec.duration``."""

from __future__ import annotations

import re
from typing import Final

_PART: Final = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_SECONDS: Final = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def duration_seconds(text: object) -> float | None:
    """The duration in seconds; None for anything that is not a Go duration."""
    if not isinstance(text, str) or not text:
        return None
    parts = _PART.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        return None
    return sum(float(number) * _SECONDS[unit] for number, unit in parts)
