"""The recorder's settings: ``KAIWO_EVENTSTORE_URL`` plus the settings every service shares."""

from __future__ import annotations

from kaiwo_runtime.settings import ServiceSettings
from pydantic import Field

DEFAULT_EVENTSTORE_URL = "sqlite:///.kaiwo/events.db"


class RecorderSettings(ServiceSettings):
    eventstore_url: str = DEFAULT_EVENTSTORE_URL
    """``KAIWO_EVENTSTORE_URL``: ``sqlite:///path.db`` (embedded) or ``postgresql://...``."""
    recorder_batch_size: int = Field(default=256, ge=1, le=10_000)
    """Most messages appended in one transaction per consumer (capped by max_ack_pending)."""
    recorder_fetch_wait_seconds: float = Field(default=1.0, gt=0, le=30)
    """How long a pull waits for the first message; also bounds how long a stop takes."""
    recorder_linger_seconds: float = Field(default=0.25, ge=0, le=5)
    """After a pull that brought less than a batch, how long to wait for more before
    appending (fewer, larger transactions at low rates; 0 appends at once)."""
    startup_timeout_seconds: float = Field(default=15.0, gt=0)
    """How long to wait for NATS at start before giving up (one line, exit status 2)."""
