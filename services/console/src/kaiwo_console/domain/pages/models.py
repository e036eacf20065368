"""The Models page: replicas, endpoints, requests in flight and autoscaler decisions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

from kaiwo_console.domain.model_load import LoadPoint, ScaleDecision
from kaiwo_console.domain.model_rows import ModelRow


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
