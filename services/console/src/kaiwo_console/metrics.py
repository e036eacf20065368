"""The console's metrics."""

from __future__ import annotations

from kaiwo_runtime.metrics import MetricsRegistry


class ConsoleMetrics:
    def __init__(self, registry: MetricsRegistry | None = None) -> None:
        self.registry = registry or MetricsRegistry()
        self.pages = self.registry.counter(
            "console_pages", "Pages served, by page and status", ("page", "status")
        )
        self.access_checks = self.registry.counter(
            "console_access_checks",
            "Callers' tokens and namespaces checked, by check (token, namespace), answer "
            "(allowed, refused, error, busy) and source (cache, api_server)",
            ("check", "answer", "source"),
        )
        self.observations = self.registry.counter(
            "console_observations", "Observations read, by outcome", ("outcome",)
        )
        self.recorded = self.registry.counter(
            "console_recorded_events", "Event store records folded into the queue history"
        )
