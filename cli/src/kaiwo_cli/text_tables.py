"""Plain-text tables as kubectl prints them: upper-case headers, columns padded to the widest
cell and three spaces apart, no borders, so they read in a terminal and in a pipe alike."""

from __future__ import annotations

from collections.abc import Sequence

GAP = "   "


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """The table as lines; the last column is not padded (no trailing spaces)."""
    widths = [len(header) for header in headers]
    for row in rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))
    lines = []
    for row in (list(headers), *rows):
        cells = [cell.ljust(widths[index]) for index, cell in enumerate(row)]
        lines.append(GAP.join(cells).rstrip())
    return "\n".join(lines)
