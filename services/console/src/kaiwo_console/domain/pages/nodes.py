"""The GPU nodes page: allocation per node."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from kaiwo_console.domain.node_rows import NodeRow


def nodes_body(rows: Sequence[NodeRow]) -> str:
    total = sum(r.gpus for r in rows)
    allocated = sum(r.allocated for r in rows)
    lines = (
        "".join(
            f"<tr><td>{escape(r.name)}</td><td>{escape(r.vendor)}</td><td>{escape(r.product)}</td>"
            f"<td>{r.allocated} / {r.gpus}</td><td>{_usage_bar(r.allocated, r.gpus)}</td>"
            f"<td>{'Ready' if r.ready else 'NotReady'}</td>"
            f"<td>{'idle' if r.allocated == 0 else ''}</td></tr>"
            for r in rows
        )
        or "<tr><td colspan=7 class=muted>No GPU node.</td></tr>"
    )
    return (
        f"<h2>GPU nodes <span class=muted>{allocated} of {total} GPUs allocated</span></h2>"
        "<table id=nodes><tr><th>Node</th><th>Vendor</th><th>Product</th><th>Allocated</th>"
        f"<th></th><th>Status</th><th></th></tr>{lines}</table>"
    )


def _usage_bar(used: int, total: int, width: int = 120) -> str:
    filled = 0 if total == 0 else min(used / total, 1.0) * width
    return (
        f'<svg width="{width}" height="12"><rect width="{width}" height="12" fill="#e9ecef"/>'
        f'<rect width="{filled:.1f}" height="12" fill="#2e8b57"/></svg>'
    )
