"""terminateUnderutilizedAfter and other duration strings, read as the planner reads them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from kaiwo_monitor.domain.durations import parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("24h", timedelta(hours=24)),
        ("1h30m", timedelta(minutes=90)),
        ("90s", timedelta(seconds=90)),
        ("2h0m5s", timedelta(hours=2, seconds=5)),
        ("1.5h", timedelta(minutes=90)),
        ("300ms", timedelta(milliseconds=300)),
        ("0", timedelta(0)),
        ("+5m", timedelta(minutes=5)),
    ],
)
def test_durations_in_the_api_syntax(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "24", "h", "1d", "-5m", "5m junk", "5 m", "1h-30m"])
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)
