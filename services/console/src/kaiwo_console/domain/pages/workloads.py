"""The Workloads list and one workload's page: summary, phases, GPU utilization, early stop,
conditions, children and the causal timeline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape
from urllib.parse import quote

from kaiwo_console.domain.pages.format import PHASE_COLOURS, age, estimate_text, phase_badge
from kaiwo_console.domain.queues import PendingEntry
from kaiwo_console.domain.workload_rows import WorkloadFilter, WorkloadRow


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
                f", starts in ~{age(entry.eta.wait_seconds(now) or 0)}"
                if entry.eta.start is not None
                else ""
            )
        lines.append(
            f"<tr><td>{escape(row.namespace)}</td><td>{escape(row.kind)}</td>"
            f'<td><a href="{link}">{escape(row.name)}</a></td><td>{escape(row.user or "-")}</td>'
            f"<td>{escape(row.queue)}</td><td>{phase_badge(row.phase)}</td>"
            f"<td>{age(row.age_seconds(now))}</td><td>{row.gpus or '-'}</td>"
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
        facts += f"<tr><th>Queue position</th><td>{estimate_text(estimate, now)}</td></tr>"
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
        f"{phase_badge(row.phase)}</h2>{why}"
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
