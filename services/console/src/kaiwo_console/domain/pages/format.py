"""How several pages show an age, a phase and a queue estimate."""

from __future__ import annotations

from datetime import datetime
from html import escape
from typing import Final

from kaiwo_console.domain.queues import PendingEntry

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


def age(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 3 * 3600:
        return f"{seconds // 60}m"
    if seconds < 2 * 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def phase_badge(phase: str) -> str:
    colour = PHASE_COLOURS.get(phase, "#444")
    return f'<span class=phase style="color:{colour}">{escape(phase)}</span>'


def estimate_text(entry: PendingEntry, now: datetime) -> str:
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
        f"#{eta.position} · starts ~{eta.start:%H:%M} UTC, in {age(eta.wait_seconds(now) or 0)}"
        f"{spread}; from {basis.method.value}: {basis.recorded_runs} runs, "
        f"{basis.declared} declared durations, {basis.capacity_gpus} GPUs{rate}"
    )
