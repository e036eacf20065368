"""The console's pages as HTML with inline SVG plots: pure functions of view rows (decision 0051).

No frontend build: each page is rendered on the server, styled by one small stylesheet, and
kept current by a few lines of script that listen to ``/events`` (server-sent events) and,
when the state changed, fetch the same page again and swap its ``<main>``. Every value from
the cluster is escaped.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape
from typing import Final
from urllib.parse import quote

from kaiwo_console.domain.cluster import ModelRow, QuotaUse, WorkloadFilter, WorkloadRow
from kaiwo_console.domain.history import DepthStep, WaitPoint
from kaiwo_console.domain.model_load import LoadPoint, ScaleDecision
from kaiwo_console.domain.nodes import NodeView, NodeWorkload, UsedSample
from kaiwo_console.domain.queues import PendingEntry, QueueView

PAGES: Final = (
    ("/workloads", "Workloads"),
    ("/queues", "Queues"),
    ("/nodes", "GPU nodes"),
    ("/models", "Models"),
)
PHASE_COLOURS: Final = {
    "PENDING": "#e0a800",
    "STARTING": "#5b9bd5",
    "DOWNLOADING": "#5b9bd5",
    "RUNNING": "#2e8b57",
    "READY": "#2e8b57",
    "COMPLETE": "#6c757d",
    "FAILED": "#c0392b",
    "ERROR": "#c0392b",
    "TERMINATING": "#8e44ad",
    "TERMINATED": "#8e44ad",
}

STYLE: Final = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f2a36;color:#fff;padding:8px 16px;display:flex;gap:18px;align-items:center}
header a{color:#cfe3ff;text-decoration:none}header a.on{color:#fff;font-weight:600}
header .who{margin-left:auto;color:#9fb3c8;font-size:12px}
main{padding:12px 16px}table{border-collapse:collapse;width:100%;background:#fff}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e4e4e4;vertical-align:top}
th{background:#f0f2f5;font-weight:600}.phase{font-weight:600}.muted{color:#777}
.why{color:#8a5a00}form.filters{margin:0 0 10px;display:flex;gap:8px;flex-wrap:wrap}
form.filters input{width:120px}section{margin-bottom:22px}h2{margin:8px 0}
ul.tree{list-style:none;padding-left:18px;border-left:1px solid #ddd}
ul.tree li{margin:2px 0}ul.on-node{margin:0;padding-left:16px}td.used{white-space:nowrap}
.t{color:#777;font-size:12px;margin-right:6px}
"""

SCRIPT: Final = """"use strict";
(function(){var seen=null;var source=new EventSource('/events');
source.onmessage=function(e){if(seen===null){seen=e.data;return}
if(e.data===seen)return;seen=e.data;
fetch(location.href,{headers:{'X-Console-Fragment':'1'}}).then(function(r){return r.text()})
.then(function(html){document.querySelector('main').innerHTML=html;});};})();
"""


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One recorded event of a workload, placed in its causal tree."""

    depth: int
    time: datetime
    kind: str
    """observed, plan, result, preemption, monitor, scale, dead letter..."""
    text: str
    phase: str = ""
    """The workload's phase an observation of it showed ("" otherwise)."""


def login_body(message: str = "") -> str:
    said = f"<p class=why>{escape(message)}</p>" if message else ""
    return (
        f"<h2>Sign in</h2>{said}<p>Paste a Kubernetes token (<code>kubectl create token "
        "SERVICE-ACCOUNT</code>): the console shows the namespaces it may list KaiwoJobs in."
        '</p><form method=post action="/login"><input type=password name=token size=60 '
        "autocomplete=off> <button>Sign in</button></form>"
    )


def page(title: str, path: str, body: str, *, who: str) -> str:
    nav = "".join(
        f'<a href="{href}"{" class=on" if path.startswith(href) else ""}>{escape(label)}</a>'
        for href, label in PAGES
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{escape(title)} · kaiwo</title><style>{STYLE}</style></head><body>"
        f"<header><strong>kaiwo</strong>{nav}<span class=who>{escape(who)}</span></header>"
        f'<main>{body}</main><script src="/console.js"></script></body></html>'
    )


def _age(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 3 * 3600:
        return f"{seconds // 60}m"
    if seconds < 2 * 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def _phase(phase: str) -> str:
    colour = PHASE_COLOURS.get(phase, "#444")
    return f'<span class=phase style="color:{colour}">{escape(phase)}</span>'


def workloads_body(
    rows: Sequence[WorkloadRow],
    chosen: WorkloadFilter,
    *,
    now: datetime,
    estimates: dict[tuple[str, str], PendingEntry],
) -> str:
    fields = "".join(
        f'<label>{name} <input name="{name}" value="{escape(getattr(chosen, name))}"></label>'
        for name in ("namespace", "user", "queue", "kind", "phase")
    )
    lines = []
    for row in rows:
        link = f"/workloads/{quote(row.namespace)}/{quote(row.name)}"
        entry = estimates.get((row.namespace, row.name))
        wait = ""
        if entry is not None:
            wait = f" · #{entry.eta.position}" + (
                f", starts in ~{_age(entry.eta.wait_seconds(now) or 0)}"
                if entry.eta.start is not None
                else ""
            )
        lines.append(
            f"<tr><td>{escape(row.namespace)}</td><td>{escape(row.kind)}</td>"
            f'<td><a href="{link}">{escape(row.name)}</a></td><td>{escape(row.user or "-")}</td>'
            f"<td>{escape(row.queue)}</td><td>{_phase(row.phase)}</td>"
            f"<td>{_age(row.age_seconds(now))}</td><td>{row.gpus or '-'}</td>"
            f"<td class=why>{escape(row.why)}{escape(wait)}</td></tr>"
        )
    table = "".join(lines) or "<tr><td colspan=9 class=muted>No workloads.</td></tr>"
    return (
        f"<h2>Workloads <span class=muted>({len(rows)})</span></h2>"
        f"<form class=filters method=get>{fields}<button>Filter</button></form>"
        "<table id=workloads><tr><th>Namespace</th><th>Kind</th><th>Name</th><th>User</th>"
        "<th>Queue</th><th>Phase</th><th>Age</th><th>GPUs</th><th>Why</th></tr>"
        f"{table}</table>"
    )


def workload_body(
    row: WorkloadRow,
    *,
    summary: Sequence[tuple[str, str]],
    conditions: Sequence[tuple[str, str, str, str]],
    children: Sequence[tuple[str, str, str]],
    timeline: Sequence[TimelineEntry],
    estimate: PendingEntry | None,
    now: datetime,
    utilization: Sequence[UtilizationPoint] = (),
    ending: Ending | None = None,
) -> str:
    facts = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in summary)
    if estimate is not None:
        facts += f"<tr><th>Queue position</th><td>{_estimate_text(estimate, now)}</td></tr>"
    conds = (
        "".join(
            f"<tr><td>{escape(t)}</td><td>{escape(s)}</td><td>{escape(r)}</td><td>{escape(m)}</td></tr>"
            for t, s, r, m in conditions
        )
        or "<tr><td colspan=4 class=muted>None.</td></tr>"
    )
    kids = (
        "".join(
            f"<tr><td>{escape(k)}</td><td>{escape(n)}</td><td>{escape(s)}</td></tr>"
            for k, n, s in children
        )
        or "<tr><td colspan=3 class=muted>None observed.</td></tr>"
    )
    why = f"<p class=why id=why>{escape(row.why)}</p>" if row.why else ""
    return (
        f"<h2>{escape(row.kind)} {escape(row.namespace)}/{escape(row.name)} "
        f"{_phase(row.phase)}</h2>{why}"
        f"<section><table id=summary>{facts}</table></section>"
        f"<section><h3>Phases</h3>{phase_strip(timeline, now=now)}</section>"
        f"{ending_section(ending)}"
        "<section><h3>GPU utilization <span class=muted>(the monitor)</span></h3>"
        f"{utilization_chart(utilization)}</section>"
        "<section><h3>Conditions</h3><table id=conditions><tr><th>Type</th><th>Status</th>"
        f"<th>Reason</th><th>Message</th></tr>{conds}</table></section>"
        "<section><h3>Children</h3><table id=children><tr><th>Kind</th><th>Name</th>"
        f"<th>State</th></tr>{kids}</table></section>"
        "<section><h3>Timeline <span class=muted>(kaiwo events explain)</span></h3>"
        f"{timeline_tree(timeline)}</section>"
    )


def timeline_tree(entries: Sequence[TimelineEntry]) -> str:
    """The causal tree as nested lists: each event under the one that caused it."""
    if not entries:
        return "<p class=muted>Nothing recorded yet.</p>"
    out = ["<ul class=tree id=timeline>"]
    depth = 0
    for entry in entries:
        while depth < entry.depth:
            out.append("<ul class=tree>")
            depth += 1
        while depth > entry.depth:
            out.append("</ul>")
            depth -= 1
        out.append(
            f"<li><span class=t>{entry.time.strftime('%H:%M:%S')}</span>"
            f"<b>{escape(entry.kind)}</b> {escape(entry.text)}</li>"
        )
    out.append("</ul>" * (depth + 1))
    return "".join(out)


@dataclass(frozen=True, slots=True)
class UtilizationPoint:
    """One of the monitor's readings of the workload's GPUs (the end of its window)."""

    time: datetime
    ratio: float | None
    """None: the metrics endpoint had no sample for the window."""
    threshold: float | None = None
    """The low-utilization threshold then in force (None: not monitored)."""


@dataclass(frozen=True, slots=True)
class Ending:
    """Why the workload was stopped early: the reason, the message, and for whom."""

    reason: str
    message: str
    beneficiary: str
    """``Kind namespace/name`` of the pending workload the GPUs were freed for ("": none)."""


@dataclass(frozen=True, slots=True)
class WorkloadHistory:
    """What the event store recorded of one workload."""

    timeline: tuple[TimelineEntry, ...] = ()
    utilization: tuple[UtilizationPoint, ...] = ()


def utilization_chart(
    points: Sequence[UtilizationPoint],
    *,
    width: int = 800,
    height: int = 80,
    label: str = "id=utilization",
    summary: bool = True,
) -> str:
    """GPU utilization over time (a workload's life, a node's day): a line (gaps where the
    monitor had no sample) from 0 to 100%, the low-utilization threshold dashed. ``label``:
    the svg's id or class; ``summary``: the line of figures below it."""
    known = sorted((p for p in points), key=lambda p: p.time)
    if not any(p.ratio is not None for p in known):
        return "<p class=muted>No GPU utilization recorded.</p>"
    start, end = known[0].time, known[-1].time
    span = max((end - start).total_seconds(), 1.0)

    def x(at: datetime) -> float:
        return (at - start).total_seconds() / span * width

    def y(ratio: float) -> float:
        return height - ratio * height

    lines: list[list[str]] = [[]]
    for point in known:
        if point.ratio is None:
            lines.append([])
        else:
            lines[-1].append(f"{x(point.time):.1f},{y(point.ratio):.1f}")
    paths = "".join(
        f'<polyline points="{" ".join(line)}" fill="none" stroke="#2e8b57" stroke-width="2"/>'
        if len(line) > 1
        else f'<circle cx="{line[0].split(",")[0]}" cy="{line[0].split(",")[1]}" r="2" '
        'fill="#2e8b57"/>'
        for line in lines
        if line
    )
    threshold = next((p.threshold for p in reversed(known) if p.threshold is not None), None)
    dashed = (
        f'<line x1="0" x2="{width}" y1="{y(threshold):.1f}" y2="{y(threshold):.1f}" '
        f'stroke="#c0392b" stroke-dasharray="4 3"><title>low-utilization threshold '
        f"{threshold:.0%}</title></line>"
        if threshold is not None
        else ""
    )
    last = next(p for p in reversed(known) if p.ratio is not None)
    assert last.ratio is not None
    figures = (
        f"<p class=muted>{len(known)} readings; last {last.ratio:.0%} at {last.time:%H:%M:%S}</p>"
        if summary
        else ""
    )
    return (
        f'<svg {label} width="{width}" height="{height + 14}" role="img" '
        f'aria-label="GPU utilization over time">'
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#f4f6f8"/>'
        f"{dashed}{paths}"
        f'<text x="0" y="{height + 12}" font-size="11">{start:%H:%M}</text>'
        f'<text x="{width - 34}" y="{height + 12}" font-size="11">{end:%H:%M}</text>'
        f"</svg>{figures}"
    )


def ending_section(ending: Ending | None) -> str:
    if ending is None:
        return ""
    beneficiary = (
        f" for <b id=beneficiary>{escape(ending.beneficiary)}</b>" if ending.beneficiary else ""
    )
    return (
        "<section><h3>Stopped early</h3>"
        f"<p id=ending><b>{escape(ending.reason)}</b>{beneficiary}: "
        f"{escape(ending.message)}</p></section>"
    )


def phase_strip(entries: Sequence[TimelineEntry], *, now: datetime, width: int = 800) -> str:
    """A bar of the workload's phases over its life, one colour per phase."""
    changes: list[tuple[datetime, str]] = []
    for entry in sorted((e for e in entries if e.phase), key=lambda e: e.time):
        if not changes or changes[-1][1] != entry.phase:
            changes.append((entry.time, entry.phase))
    if not changes:
        return "<p class=muted>No phase recorded yet.</p>"
    start = changes[0][0]
    span = max((now - start).total_seconds(), 1.0)
    parts = []
    for index, (at, phase) in enumerate(changes):
        until = changes[index + 1][0] if index + 1 < len(changes) else now
        x = (at - start).total_seconds() / span * width
        w = max((until - at).total_seconds() / span * width, 2)
        colour = PHASE_COLOURS.get(phase, "#999")
        parts.append(
            f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="18" fill="{colour}">'
            f"<title>{escape(phase)} from {at:%H:%M:%S}</title></rect>"
            f'<text x="{x + 3:.1f}" y="32" font-size="11">{escape(phase)}</text>'
        )
    return (
        f'<svg id=phases width="{width}" height="36" role="img" '
        f'aria-label="phases over time">{"".join(parts)}</svg>'
    )


def _estimate_text(entry: PendingEntry, now: datetime) -> str:
    eta = entry.eta
    basis = eta.basis
    if eta.start is None:
        return f"#{eta.position} · no estimate ({escape(basis.method.value)})"
    spread = ""
    if eta.earliest is not None and eta.latest is not None and eta.earliest != eta.latest:
        spread = f" (80%: {eta.earliest:%H:%M} to {eta.latest:%H:%M})"
    rate = (
        f", {basis.admissions_per_hour:.1f} admissions/h"
        if basis.admissions_per_hour is not None
        else ""
    )
    return escape(
        f"#{eta.position} · starts ~{eta.start:%H:%M} UTC, in {_age(eta.wait_seconds(now) or 0)}"
        f"{spread}; from {basis.method.value}: {basis.recorded_runs} runs, "
        f"{basis.declared} declared durations, {basis.capacity_gpus} GPUs{rate}"
    )


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
        f'<g fill="#8e44ad"><title>longest {_age(top)}</title>{dots}</g></svg>'
    )


def _wait_summary(points: Sequence[WaitPoint]) -> str:
    if not points:
        return "none admitted"
    ordered = sorted(p.seconds for p in points)
    return (
        f"{len(points)} admitted, median {_age(ordered[len(ordered) // 2])}, "
        f"longest {_age(ordered[-1])}"
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
                f"<td>{_estimate_text(entry, now)}</td></tr>"
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


@dataclass(frozen=True, slots=True)
class ModelLoad:
    """A Model's requests in flight now (active, waiting), over time, and the autoscaler's
    decisions (the gateway's events)."""

    in_flight: tuple[int, int] = (0, 0)
    points: tuple[LoadPoint, ...] = ()
    decisions: tuple[ScaleDecision, ...] = ()


def load_chart(
    points: Sequence[LoadPoint],
    decisions: Sequence[ScaleDecision],
    *,
    width: int = 360,
    height: int = 40,
) -> str:
    """Requests in flight over time (a line) with the autoscaler's decisions marked (a tick
    labelled with the new replica count)."""
    if not points and not decisions:
        return "<span class=muted>No load reported.</span>"
    times = [p.time for p in points] + [d.time for d in decisions]
    start, end = min(times), max(times)
    span = max((end - start).total_seconds(), 1.0)
    top = max([p.active for p in points] + [1])

    def x(at: datetime) -> float:
        return (at - start).total_seconds() / span * width

    line = " ".join(f"{x(p.time):.1f},{height - p.active / top * height:.1f}" for p in points)
    path = (
        f'<polyline points="{line}" fill="none" stroke="#5b9bd5" stroke-width="2"/>'
        if len(points) > 1
        else "".join(
            f'<circle cx="{x(p.time):.1f}" cy="{height - p.active / top * height:.1f}" r="3" '
            f'fill="#5b9bd5"><title>{p.active} in flight</title></circle>'
            for p in points
        )
    )
    ticks = "".join(
        f'<line x1="{x(d.time):.1f}" x2="{x(d.time):.1f}" y1="0" y2="{height}" '
        f'stroke="#8e44ad"><title>{d.time:%H:%M:%S} {d.from_replicas} → {d.replicas}: '
        f"{escape(d.reason)}</title></line>"
        f'<text x="{min(x(d.time) + 2, width - 10):.1f}" y="10" font-size="10">'
        f"{d.replicas}</text>"
        for d in decisions
    )
    return (
        f'<svg class=load width="{width}" height="{height}" role="img" '
        f'aria-label="requests in flight and scaling decisions">'
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#f4f6f8"/>{path}{ticks}</svg>'
    )


def decisions_list(decisions: Sequence[ScaleDecision], *, last: int = 5) -> str:
    if not decisions:
        return "<span class=muted>None.</span>"
    items = "".join(
        f"<li><span class=t>{d.time:%H:%M:%S}</span>{d.from_replicas} → {d.replicas} "
        f"({escape(d.cause)}, average {d.average_active_requests:.1f}): {escape(d.reason)}</li>"
        for d in reversed(decisions[-last:])
    )
    return f"<ul class=decisions>{items}</ul>"


def models_body(rows: Iterable[ModelRow], *, loads: Mapping[tuple[str, str], ModelLoad]) -> str:
    cells = []
    for r in rows:
        load = loads.get((r.namespace, r.name), ModelLoad())
        active, waiting = load.in_flight
        cells.append(
            f"<tr><td>{escape(r.namespace)}</td><td>{escape(r.name)}</td><td>{escape(r.engine)}</td>"
            f"<td>{r.ready} / {r.desired}</td><td>{r.min_replicas}-"
            f"{'∞' if r.max_replicas is None else r.max_replicas}</td>"
            f"<td>{escape(', '.join(r.endpoints) or '-')}</td>"
            f"<td class=inflight>{active}" + (f" ({waiting} waiting)" if waiting else "") + "</td>"
            f"<td>{load_chart(load.points, load.decisions)}"
            f"{decisions_list(load.decisions)}</td></tr>"
        )
    lines = "".join(cells) or "<tr><td colspan=8 class=muted>No Model.</td></tr>"
    return (
        "<h2>Models</h2><table id=models><tr><th>Namespace</th><th>Name</th><th>Engine</th>"
        "<th>Ready / desired</th><th>Replicas</th><th>Endpoints</th><th>In flight</th>"
        "<th>Load and autoscaler decisions</th></tr>"
        f"{lines}</table>"
    )
