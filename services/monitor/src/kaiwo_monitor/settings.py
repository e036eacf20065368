"""The monitor's settings (``KAIWO_MONITOR_*`` environment variables, on top of the shared ones).

What to monitor and when to terminate lives in the KaiwoConfig (``spec.resourceMonitoring``,
re-read every tick); how to reach the metrics and how to run lives here. Leader election
uses the shared ``KAIWO_LEASE_BUCKET`` and ``KAIWO_LEASE_SECONDS`` (the ``monitor`` lease).
"""

from __future__ import annotations

from kaiwo_runtime.settings import SingleActiveSettings
from pydantic import Field

from kaiwo_monitor.prometheus import DEFAULT_QUERY

LEASE_ROLE = "monitor"
"""The monitor's lease in the lease bucket, next to ``planner`` and ``executor``."""


class MonitorSettings(SingleActiveSettings):
    """``KAIWO_MONITOR_METRICS_ENDPOINT``, ``KAIWO_MONITOR_POLLING_INTERVAL_SECONDS``, ..."""

    monitor_enabled: bool = True
    """``KAIWO_MONITOR_ENABLED``: false keeps the process up (probes answer) doing nothing."""
    monitor_metrics_endpoint: str = ""
    """Base URL of the Prometheus server (``http://prometheus:9090``); required when enabled."""
    monitor_query: str = DEFAULT_QUERY
    """PromQL instant query giving one GPU-utilization percentage per GPU and pod."""
    monitor_polling_interval_seconds: float = Field(default=30.0, gt=0)
    """How often the leader scrapes and judges."""
    monitor_scrape_timeout_seconds: float = Field(default=5.0, gt=0)
    monitor_state_bucket: str = "kaiwo-monitor"
    """Key-value bucket keeping open underutilized stretches across leader changes."""
    startup_timeout_seconds: float = Field(default=10.0, gt=0)
    """How long to wait for NATS, the API server and the metrics endpoint at start."""
