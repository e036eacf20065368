"""Every metric of the monitor (``kaiwo_monitor_*``); labels carry namespaces and kinds, never
workload names or uids."""

from __future__ import annotations

from kaiwo_runtime.metrics import MetricsRegistry


class MonitorMetrics:
    """The monitor's counters and gauges, created in ``registry``."""

    def __init__(self, registry: MetricsRegistry | None = None) -> None:
        self.registry = registry or MetricsRegistry()
        self.gpu_utilization = self.registry.gauge(
            "monitor_gpu_utilization_ratio",
            "Mean GPU utilization (0-1, of requested capacity) of the workloads of one kind in "
            "one namespace, at the last scrape; workloads without readings are left out, and "
            "every series is removed while scrapes fail",
            ("namespace", "workload_kind"),
        )
        self.scrapes = self.registry.counter(
            "monitor_scrapes",
            "Scrapes of the metrics endpoint by outcome (success, unreachable, http_error, "
            "query_error, garbage)",
            ("outcome",),
        )
        self.leader = self.registry.gauge(
            "monitor_leader",
            "1 while this instance holds the monitor lease (NATS lease bucket) and acts, else 0",
        )
        self.events_published = self.registry.counter(
            "monitor_events_published",
            "Monitor events stored by JetStream, by topic (utilization, underutilized)",
            ("topic",),
        )
        self.tick_failures = self.registry.counter(
            "monitor_tick_failures",
            "Ticks given up part-way, by stage (config, pods, workloads, publish); the next "
            "tick retries",
            ("stage",),
        )
        self.pods_without_readings = self.registry.gauge(
            "monitor_pods_without_readings",
            "Running GPU pods of workloads for which the last scrape had no reading",
        )
        self.stale_samples = self.registry.gauge(
            "monitor_stale_samples",
            "GPU samples of the last scrape taken longer ago than the tolerance (frozen "
            "readings), judged as no reading",
        )
