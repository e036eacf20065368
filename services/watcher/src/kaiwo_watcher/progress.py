"""How the watch loop is timed, and where each stream stands (for readiness and tests)."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WatcherTuning:
    """Timings of the watch loop (seconds)."""

    watch_timeout: int = 300
    """The server ends each watch after this long; the watcher resumes at once."""
    relist_interval: float = 0.0
    """Relist (and re-publish everything as SYNC) this often; 0 never (only on 410)."""
    missing_kind_retry: float = 60.0
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    checkpoint_every: float = 0.0
    """Write each stream's checkpoint at most this often (0: after every event)."""
    stuck_after: float = 60.0
    """A stream whose publish has kept failing this long is stuck: readiness fails."""
    reobserve_interval: float = 5.0
    """An object the executor asks to observe again is read at most this often."""
    settings_first_wait: float = 30.0
    """How long the other streams wait for the settings streams' first list (decision 0294);
    then they start anyway: a settings stream that cannot list must not stop the watcher."""


@dataclass(slots=True)
class StreamProgress:
    """Where one stream stands, for readiness and tests."""

    synced: bool = False
    """Listed, or resumed from a checkpoint: what the stream publishes is complete."""
    missing: bool = False
    """The API server does not serve the kind right now."""
    resource_version: str | None = None
    relisted_at: float | None = None
    blocked_since: float | None = None
    """When the publish this stream waits on first failed (monotonic); None when not blocked."""
    last_published_at: float | None = None


def relist_due(tuning: WatcherTuning, progress: StreamProgress) -> bool:
    interval = tuning.relist_interval
    if interval <= 0 or progress.relisted_at is None:
        return False
    return time.monotonic() - progress.relisted_at >= interval


def watch_timeout(tuning: WatcherTuning, progress: StreamProgress) -> int:
    """The server-side timeout of the next watch: ends it when a relist is due."""
    timeout = tuning.watch_timeout
    interval = tuning.relist_interval
    if interval > 0 and progress.relisted_at is not None:
        remaining = interval - (time.monotonic() - progress.relisted_at)
        timeout = min(timeout, max(1, int(remaining) + 1))
    return timeout
