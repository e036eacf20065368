"""The first few of a list, for a message, and how many more there are."""

from __future__ import annotations

from collections.abc import Sequence


def first_few(
    items: Sequence[str], *, shown: int, separator: str = ", ", and_more: str = " and "
) -> str:
    """The first ``shown`` of ``items`` joined by ``separator``, then ``and_more`` and "N
    more" for the rest: "a, b, c and 2 more", or "a; b; and 2 more"."""
    listed = separator.join(items[:shown])
    more = len(items) - shown
    return f"{listed}{and_more}{more} more" if more > 0 else listed
