from __future__ import annotations

from datetime import timedelta

import pytest
from kaiwo_planner.domain.state.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("5m", timedelta(minutes=5)),
        ("1s", timedelta(seconds=1)),
        ("1.5h", timedelta(minutes=90)),
        ("300ms", timedelta(milliseconds=300)),
        ("2h0m0s", timedelta(hours=2)),
        ("0", timedelta(0)),
        ("24h", timedelta(days=1)),
        ("+90s", timedelta(seconds=90)),
    ],
)
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "5", "1d", "h", "-5m", "5m 3s", "m5"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_format_duration() -> None:
    assert format_duration(timedelta(seconds=5400)) == "1h30m0s"
    assert format_duration(timedelta(seconds=61)) == "1m1s"
    assert format_duration(timedelta(0)) == "0s"
