"""The Queues page: quota, admissions per hour, depth and waits over time, pending workloads
with their estimated start."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from html import escape
from urllib.parse import quote

from kaiwo_console.domain.history import DepthStep, WaitPoint
from kaiwo_console.domain.pages.format import age, estimate_text
from kaiwo_console.domain.queues import PendingEntry, QueueView
from kaiwo_console.domain.quota import QuotaUse


def quota_bars(rows: Sequence[QuotaUse], *, width: int = 360) -> str:
    """One bar per flavor and resource with quota: use against nominal quota."""
    shown = [r for r in rows if r.quota > 0]
    if not shown:
        return "<p class=muted>No quota.</p>"
    height = 22 * len(shown)
    bars = []
    for index, row in enumerate(shown):
        y = index * 22
        used = min(row.used / row.quota, 1.0) * width
        colour = "#c0392b" if row.used >= row.quota else "#2e8b57"
        label = f"{row.flavor} {row.resource}: {_number(row.used)} of {_number(row.quota)}"
        bars.append(
            f'<rect x="0" y="{y}" width="{width}" height="16" fill="#e9ecef"/>'
            f'<rect x="0" y="{y}" width="{used:.1f}" height="16" fill="{colour}"/>'
            f'<text x="{width + 8}" y="{y + 12}" font-size="12">{escape(label)}</text>'
        )
    return (
        f'<svg class=quota width="{width + 320}" height="{height}" role="img" '
        f'aria-label="quota against use">{"".join(bars)}</svg>'
    )


def hourly_bars(counts: Sequence[int], *, width: int = 360, height: int = 40) -> str:
    """Admissions per hour over the last hours, oldest left."""
    if not counts:
        return ""
    top = max(*counts, 1)
    step = width / len(counts)
    bars = "".join(
        f'<rect x="{i * step:.1f}" y="{height - c / top * height:.1f}" width="{step - 1:.1f}" '
        f'height="{c / top * height:.1f}" fill="#5b9bd5"><title>{c}</title></rect>'
        for i, c in enumerate(counts)
    )
    return (
        f'<svg class=hourly width="{width}" height="{height}" role="img" '
        f'aria-label="admissions per hour">{bars}</svg>'
    )


def depth_chart(steps: Sequence[DepthStep], *, width: int = 360, height: int = 40) -> str:
    """Workloads waiting over time: one step line from the window's start to now, in whole
    pixels (a thousand changes in a day collapse to the few hundred corners one can see)."""
    if not steps:
        return ""
    start, end = steps[0].at, steps[-1].at
    span = max((end - start).total_seconds(), 1.0)
    top = max(*(s.depth for s in steps), 1)

    def x(at: datetime) -> int:
        return round((at - start).total_seconds() / span * width)

    def y(depth: int) -> int:
        return round(height - depth / top * (height - 2))

    corners: list[tuple[int, int]] = []
    for index, step in enumerate(steps):
        corners.append((x(step.at), y(step.depth)))
        if index + 1 < len(steps):
            corners.append((x(steps[index + 1].at), y(step.depth)))
    shown = [c for i, c in enumerate(corners) if i == 0 or c != corners[i - 1]]
    return (
        f'<svg class=depth width="{width}" height="{height}" role="img" '
        f'aria-label="queue depth over time">'
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#f4f6f8"/>'
        f'<polyline points="{" ".join(f"{cx},{cy}" for cx, cy in shown)}" fill="none" '
        f'stroke="#e67e22" stroke-width="2"><title>most {top} waiting</title></polyline></svg>'
    )


def wait_chart(
    points: Sequence[WaitPoint],
    *,
    start: datetime,
    now: datetime,
    width: int = 360,
    height: int = 40,
) -> str:
    """How long each workload admitted from ``start`` to ``now`` waited: a dot at its
    admission, higher the longer it waited. Whole pixels, one dot per pixel drawn once, no
    title per dot: a busy queue's day stays a few KiB (the summary line gives the figures)."""
    if not points:
        return "<span class=muted>No admission in this window.</span>"
    span = max((now - start).total_seconds(), 1.0)
    top = max(*(p.seconds for p in points), 1.0)
    places = dict.fromkeys(
        (
            round((p.at - start).total_seconds() / span * width),
            round(height - 3 - p.seconds / top * (height - 6)),
        )
        for p in points
    )
    dots = "".join(f'<circle cx="{cx}" cy="{cy}" r="3"/>' for cx, cy in places)
    return (
        f'<svg class=waits width="{width}" height="{height}" role="img" '
        f'aria-label="wait time over time">'
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#f4f6f8"/>'
        f'<g fill="#8e44ad"><title>longest {age(top)}</title>{dots}</g></svg>'
    )


def _wait_summary(points: Sequence[WaitPoint]) -> str:
    if not points:
        return "none admitted"
    ordered = sorted(p.seconds for p in points)
    return (
        f"{len(points)} admitted, median {age(ordered[len(ordered) // 2])}, "
        f"longest {age(ordered[-1])}"
    )


def _number(value: float) -> str:
    """A quota short: ``16``, ``1.5``, memory as ``512Gi``."""
    for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20)):
        if value >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def queues_body(views: Sequence[QueueView], *, now: datetime) -> str:
    sections = []
    for view in views:
        pending = (
            "".join(
                f"<tr><td>{entry.eta.position}</td>"
                f"<td>{_namespace_cell(entry)}</td>"
                f"<td>{_workload_link(entry)}</td><td>{entry.gpus} {escape(entry.resource)}</td>"
                f"<td>{estimate_text(entry, now)}</td></tr>"
                for entry in view.pending
            )
            or "<tr><td colspan=5 class=muted>Nothing waits.</td></tr>"
        )
        sections.append(
            f'<section class=queue id="queue-{escape(view.name)}"><h2>{escape(view.name)} '
            f"<span class=muted>{view.admitted} admitted, {len(view.pending)} pending</span></h2>"
            f"{quota_bars(view.quota)}"
            f"<p class=muted>Admissions per hour, last {len(view.admissions_by_hour)} h "
            f"({sum(view.admissions_by_hour)}):</p>{hourly_bars(view.admissions_by_hour)}"
            f"{_depth_section(view)}{_wait_section(view, now)}"
            "<table class=pending><tr><th>#</th><th>Namespace</th><th>Workload</th><th>GPUs</th>"
            f"<th>Estimated start</th></tr>{pending}</table></section>"
        )
    return "<h2>Queues</h2>" + ("".join(sections) or "<p class=muted>No ClusterQueue.</p>")


def _depth_section(view: QueueView) -> str:
    if not view.depth:
        return ""
    most = max(s.depth for s in view.depth)
    return (
        f"<p class=muted>Waiting over the same hours (now {view.depth[-1].depth}, "
        f"most {most}):</p>{depth_chart(view.depth)}"
    )


def _wait_section(view: QueueView, now: datetime) -> str:
    if not view.depth:
        return ""
    return (
        f"<p class=muted>Wait before admission ({_wait_summary(view.waits)}):</p>"
        f"{wait_chart(view.waits, start=view.depth[0].at, now=now)}"
    )


def _namespace_cell(entry: PendingEntry) -> str:
    return escape(entry.namespace) if entry.name else "<span class=muted>hidden</span>"


def _workload_link(entry: PendingEntry) -> str:
    if not entry.name:
        return "<span class=muted>another tenant's workload</span>"
    href = f"/workloads/{quote(entry.namespace)}/{quote(entry.name)}"
    return f'<a href="{href}">{escape(entry.name)}</a>'
