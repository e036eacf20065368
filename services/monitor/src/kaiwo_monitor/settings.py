"""The monitor's settings (``KAIWO_MONITOR_*`` environment variables, on top of the shared ones).

What to monitor and when to terminate lives in the KaiwoConfig (``spec.resourceMonitoring``,
re-read every tick); how to reach the metrics and how to run lives here.
"""

from __future__ import annotations

from pathlib import Path

from kaiwo_runtime.settings import ServiceSettings
from pydantic import Field

from kaiwo_monitor.leader import LeaseTiming
from kaiwo_monitor.prometheus import DEFAULT_QUERY

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
FALLBACK_LEASE_NAMESPACE = "default"


class MonitorSettings(ServiceSettings):
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
    monitor_lease_name: str = "kaiwo-monitor"
    monitor_lease_namespace: str | None = None
    """Namespace of the Lease; unset: the pod's own namespace in a cluster, else ``default``."""
    monitor_lease_duration_seconds: int = Field(default=15, ge=1)
    """How long a leader's claim lasts; a follower takes over this long after a crash."""
    monitor_state_bucket: str = "kaiwo-monitor"
    """Key-value bucket keeping open underutilized stretches across leader changes."""
    startup_timeout_seconds: float = Field(default=10.0, gt=0)
    """How long to wait for NATS, the API server and the metrics endpoint at start."""

    def lease_namespace(self, account_namespace: Path = SERVICE_ACCOUNT_NAMESPACE) -> str:
        if self.monitor_lease_namespace:
            return self.monitor_lease_namespace
        try:
            found = account_namespace.read_text().strip()
        except OSError:
            found = ""
        return found or FALLBACK_LEASE_NAMESPACE

    def lease_timing(self) -> LeaseTiming:
        return LeaseTiming.for_duration(self.monitor_lease_duration_seconds)
