"""The planner's settings, from ``KAIWO_*`` environment variables."""

from __future__ import annotations

from kaiwo_runtime.settings import SingleActiveSettings
from pydantic import Field


class PlannerSettings(SingleActiveSettings):
    """``KAIWO_SNAPSHOT_BUCKET``, ``KAIWO_SNAPSHOT_EVERY_EVENTS``, ... on top of the shared ones."""

    snapshot_bucket: str = Field(default="kaiwo-planner", pattern=r"^[A-Za-z0-9_-]+$")
    """JetStream key-value bucket holding the projection snapshot."""
    snapshot_every_events: int = Field(default=1000, ge=1)
    """Write a snapshot after this many observations, or as many as the projection holds
    objects if that is more (a snapshot costs in proportion to them) ..."""
    snapshot_every_seconds: float = Field(default=60.0, gt=0)
    """... or after this long with at least one new observation, whichever comes first."""
    resync_on_start: bool = True
    """Re-plan every owner once the projection is restored (publishes only what differs)."""
    resync_every_seconds: float = Field(default=600.0, ge=0)
    """Re-plan every owner this often, re-applying what is absent or drifted (10 minutes by
    default, as a controller's resync); 0 turns periodic resync off."""
    poll_seconds: float = Field(default=1.0, gt=0)
    """Longest wait for new observations before timers and snapshots are looked at."""
    tombstone_retention: int = Field(default=100_000, ge=1)
    """Observations after which a deleted object's last resource version is forgotten."""
    connect_timeout_seconds: float = Field(default=10.0, gt=0)
