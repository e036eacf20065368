"""The monitor's settings (``KAIWO_MONITOR_*`` environment variables, on top of the shared ones).

What to monitor and when to terminate lives in the KaiwoConfig (``spec.resourceMonitoring``,
re-read every tick); how to reach the metrics and how to run lives here. Leader election
uses the shared ``KAIWO_LEASE_BUCKET`` and ``KAIWO_LEASE_SECONDS`` (the ``monitor`` lease).

The API reference switches resource monitoring on with ``RESOURCE_MONITORING_ENABLED``,
``RESOURCE_MONITORING_METRICS_ENDPOINT`` and ``RESOURCE_MONITORING_POLLING_INTERVAL`` (a Go
duration, ``30s``): each is read too, and where both names are set the project's own
``KAIWO_MONITOR_*`` one decides (decision 0046).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Self

from kaiwo_contracts.gpu_preemption import parse_go_duration
from kaiwo_runtime.settings import SingleActiveSettings
from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import SettingsConfigDict

from kaiwo_monitor.prometheus import DEFAULT_QUERY, DEFAULT_TIME_QUERY

LEASE_ROLE = "monitor"
"""The monitor's lease in the lease bucket, next to ``planner`` and ``executor``."""


class MonitorSettings(SingleActiveSettings):
    """``KAIWO_MONITOR_METRICS_ENDPOINT``, ``KAIWO_MONITOR_POLLING_INTERVAL_SECONDS``, ..."""

    # Fields with the reference's names as aliases are still set by name in code and tests.
    model_config = SettingsConfigDict(**SingleActiveSettings.model_config, populate_by_name=True)

    monitor_enabled: bool = Field(
        default=True,
        validation_alias=AliasChoices("KAIWO_MONITOR_ENABLED", "RESOURCE_MONITORING_ENABLED"),
    )
    """``KAIWO_MONITOR_ENABLED`` (or the reference's ``RESOURCE_MONITORING_ENABLED``): false
    keeps the process up (probes answer) doing nothing."""
    monitor_metrics_endpoint: str = Field(
        default="",
        validation_alias=AliasChoices(
            "KAIWO_MONITOR_METRICS_ENDPOINT", "RESOURCE_MONITORING_METRICS_ENDPOINT"
        ),
    )
    """Base URL of the Prometheus server (``http://prometheus:9090``), or an exporter's own
    ``.../metrics`` page, as the reference's ``RESOURCE_MONITORING_METRICS_ENDPOINT`` names
    it (:func:`kaiwo_monitor.prometheus.scraper_for`); required when enabled."""
    monitor_query: str = DEFAULT_QUERY
    """PromQL instant query giving one GPU-utilization percentage per GPU and pod."""
    monitor_sample_time_query: str = DEFAULT_TIME_QUERY
    """PromQL instant query giving when each series' sample was taken (``timestamp(...)``,
    the same labels as ``monitor_query``); empty: only ``monitor_query`` is sent and each
    sample is taken as current (decision 0177)."""
    monitor_sample_tolerance_seconds: float = Field(default=120.0, gt=0)
    """How far a sample's time may lie from the tick's for it to be judged: longer than
    Prometheus' scrape interval (and a missed scrape), shorter than its five-minute lookback.
    An older sample is no reading (decision 0177)."""
    monitor_polling_interval_seconds: float = Field(default=30.0, gt=0)
    """How often the leader scrapes and judges."""
    resource_monitoring_polling_interval: str = Field(
        default="", validation_alias="RESOURCE_MONITORING_POLLING_INTERVAL"
    )
    """The reference's name for the interval, a Go duration; used unless
    ``KAIWO_MONITOR_POLLING_INTERVAL_SECONDS`` is set."""
    monitor_scrape_timeout_seconds: float = Field(default=5.0, gt=0)
    monitor_state_bucket: str = "kaiwo-monitor"
    """Key-value bucket keeping open underutilized stretches across leader changes."""
    startup_timeout_seconds: float = Field(default=10.0, gt=0)
    """How long to wait for NATS, the API server and the metrics endpoint at start."""

    @model_validator(mode="after")
    def _reference_polling_interval(self) -> Self:
        given = self.resource_monitoring_polling_interval
        if not given or "monitor_polling_interval_seconds" in self.model_fields_set:
            return self
        interval = parse_go_duration(given)
        if interval <= timedelta(0):
            raise ValueError(f"RESOURCE_MONITORING_POLLING_INTERVAL={given!r} is not positive")
        object.__setattr__(self, "monitor_polling_interval_seconds", interval.total_seconds())
        return self
