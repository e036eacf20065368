"""The GPU nodes page: allocation per node, GPUs busy now and over time, and the workloads
on each node, the idle ones flagged (decision 0065)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from datetime import datetime, timedelta
from html import escape
from urllib.parse import quote

from kaiwo_console.domain.nodes import NodeView, NodeWorkload, UsedSample
from kaiwo_console.domain.pages.workloads import UtilizationPoint, utilization_chart


def nodes_body(views: Sequence[NodeView], *, chart_width: int = 240) -> str:
    """Per GPU node: GPUs allocated (a bar) and busy now, its utilization over time, and the
    workloads on it, the idle ones flagged with why and linked to their page."""
    total = sum(v.row.gpus for v in views)
    allocated = sum(v.row.allocated for v in views)
    busy = sum(v.used or 0.0 for v in views)
    idle_workloads = sum(1 for v in views for w in v.workloads if w.idle)
    lines = (
        "".join(
            f'<tr id="node-{escape(v.row.name)}"><td>{escape(v.row.name)}</td>'
            f"<td>{escape(v.row.vendor)}</td><td>{escape(v.row.product)}</td>"
            f"<td>{v.row.allocated} / {v.row.gpus}"
            f"<br>{_usage_bar(v.row.allocated, v.row.gpus)}</td>"
            f"<td class=used>{_used_text(v)}</td>"
            f"<td>{_node_chart(v, width=chart_width)}</td>"
            f"<td>{'Ready' if v.row.ready else 'NotReady'}"
            f"{'<br><b>idle</b>' if v.row.allocated == 0 else ''}</td>"
            f"<td>{_node_workloads(v.workloads)}</td></tr>"
            for v in views
        )
        or "<tr><td colspan=8 class=muted>No GPU node.</td></tr>"
    )
    return (
        f"<h2>GPU nodes <span class=muted>{allocated} of {total} GPUs allocated, "
        f"{busy:.1f} busy; {idle_workloads} idle "
        f"workload{'' if idle_workloads == 1 else 's'}</span></h2>"
        "<table id=nodes><tr><th>Node</th><th>Vendor</th><th>Product</th><th>Allocated</th>"
        "<th>Busy now</th><th>Utilization over time</th><th>Status</th>"
        f"<th>Workloads (idle first)</th></tr>{lines}</table>"
    )


def _used_text(view: NodeView) -> str:
    if view.used is None:
        return "<span class=muted>no reading</span>"
    share = view.used / view.row.gpus if view.row.gpus else 0.0
    return f"{view.used:.1f} GPUs ({share:.0%})"


def _node_chart(view: NodeView, *, width: int) -> str:
    """The node's GPUs busy over time as a share of its GPUs, drawn by the workload page's
    chart: the last sample of each three-pixel column, found by bisection (a day of minutes
    is 1,440 samples; a hundred nodes' charts stay small and quick)."""
    capacity = max(view.row.gpus, 1)
    usage = view.usage
    points = []
    if usage:
        columns = max(width // 3, 1)
        step = timedelta(seconds=max((usage[-1].at - usage[0].at).total_seconds(), 1.0) / columns)
        boundary, low = usage[0].at + step / 2, 0
        for _ in range(columns + 1):
            high = bisect_left(usage, boundary, lo=low, key=_sample_time)
            boundary += step
            if high > low:
                last = usage[high - 1]
                share = None if last.used is None else min(last.used / capacity, 1.0)
                points.append(UtilizationPoint(last.at, share))
                low = high
    return utilization_chart(points, width=width, height=30, label="class=node-use", summary=False)


def _sample_time(sample: UsedSample) -> datetime:
    return sample.at


def _node_workloads(workloads: Sequence[NodeWorkload]) -> str:
    if not workloads:
        return "<span class=muted>none</span>"
    items = []
    for w in workloads:
        name = (
            f'<a href="/workloads/{quote(w.namespace)}/{quote(w.name)}">'
            f"{escape(w.namespace)}/{escape(w.name)}</a>"
            if w.name
            else "<span class=muted>another tenant's workload</span>"
        )
        reading = "" if w.ratio is None else f" {w.ratio:.0%}"
        flag = (
            f' <b class="why idle">idle</b> <span class=why>{escape(w.idle)}</span>'
            if w.idle
            else ""
        )
        items.append(f"<li>{name} <span class=muted>{w.gpus} GPUs{reading}</span>{flag}</li>")
    return f"<ul class=on-node>{''.join(items)}</ul>"


def _usage_bar(used: int, total: int, width: int = 120) -> str:
    filled = 0 if total == 0 else min(used / total, 1.0) * width
    return (
        f'<svg width="{width}" height="12"><rect width="{width}" height="12" fill="#e9ecef"/>'
        f'<rect width="{filled:.1f}" height="12" fill="#2e8b57"/></svg>'
    )
