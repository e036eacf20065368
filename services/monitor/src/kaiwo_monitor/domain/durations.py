"""Duration strings as KaiwoConfig carries them (``24h``, ``1h30m``, ``90s``).

``terminateUnderutilizedAfter`` follows the CRD pattern ``^([0-9]+(s|m|h))+$``; the parser
also reads the rest of Go's ``time.ParseDuration`` syntax (``1.5h``, ``300ms``, ``0``), the
same rules the planner applies to its durations, so one string means one length everywhere.
The monitor keeps its own parser because services do not import each other.
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

_SECONDS_PER_UNIT = {
    "h": Decimal(3600),
    "m": Decimal(60),
    "s": Decimal(1),
    "ms": Decimal("0.001"),
    "us": Decimal("0.000001"),
    "µs": Decimal("0.000001"),
    "μs": Decimal("0.000001"),
    "ns": Decimal("0.000000001"),
}
# Longer unit names first so "ms" is not read as "m" followed by garbage.
_TERM = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<unit>ns|us|µs|μs|ms|h|m|s)")


def parse_duration(text: str) -> timedelta:
    """The length of ``text``; ValueError when it is not a (non-negative) duration.

    >>> parse_duration("1h30m")
    datetime.timedelta(seconds=5400)
    """
    value = text.strip().removeprefix("+")
    if value == "0":
        return timedelta(0)
    total = Decimal(0)
    position = 0
    while position < len(value):
        term = _TERM.match(value, position)
        if term is None:
            break
        total += Decimal(term.group("number")) * _SECONDS_PER_UNIT[term.group("unit")]
        position = term.end()
    if not value or position != len(value):
        raise ValueError(f"{text!r} is not a duration such as 30s, 5m or 1h30m")
    return timedelta(microseconds=int(total * 1_000_000))
