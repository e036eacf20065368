"""Every metric of the watcher (``kaiwo_watcher_*``); labels carry kinds, never names or uids."""

from __future__ import annotations

from kaiwo_runtime.metrics import MetricsRegistry


class WatcherMetrics:
    """The watcher's counters and gauges, created in ``registry``."""

    def __init__(self, registry: MetricsRegistry | None = None) -> None:
        self.registry = registry or MetricsRegistry()
        self.events_published = self.registry.counter(
            "watcher_events_published",
            "Observed events stored by JetStream (duplicates excluded), by kind and event type",
            ("kind", "type"),
        )
        self.duplicates = self.registry.counter(
            "watcher_duplicates",
            "Observed events JetStream dropped as copies of a stored one (same Nats-Msg-Id)",
            ("kind",),
        )
        self.relists = self.registry.counter(
            "watcher_relists",
            "Full lists of a kind: at start without a checkpoint, after 410 Gone, periodic",
            ("kind",),
        )
        self.watch_restarts = self.registry.counter(
            "watcher_watch_restarts",
            "Watches resumed from the last resourceVersion after a failure",
            ("kind",),
        )
        self.publish_failures = self.registry.counter(
            "watcher_publish_failures",
            "Failed publish attempts (each is retried until it succeeds)",
            ("kind",),
        )
        self.rejected_objects = self.registry.counter(
            "watcher_rejected_objects",
            "Objects that cannot become an observed event (no uid or resourceVersion)",
            ("kind",),
        )
        self.oversized_objects = self.registry.counter(
            "watcher_oversized_objects",
            "Objects too large for a bus message, published reduced to their metadata",
            ("kind",),
        )
        self.unpublishable_objects = self.registry.counter(
            "watcher_unpublishable_objects",
            "Events the bus refused in every form (even the identity alone): skipped",
            ("kind",),
        )
        self.reobservations = self.registry.counter(
            "watcher_reobservations",
            "Objects observed again because the executor refused a plan made from them, by "
            "kind and outcome: published (read and published marked reobserved), deleted (no "
            "such object: published as a reobserved deletion), not_watched (a kind or "
            "namespace the watcher does not watch), throttled (read again moments ago), "
            "unreadable (the refusal itself)",
            ("kind", "outcome"),
        )
        self.publish_blocked_seconds = self.registry.gauge(
            "watcher_publish_blocked_seconds",
            "How long the oldest failing publish of the kind's streams has been retried "
            "(0: publishing works); a stream blocked longer than the stuck limit fails "
            "readiness",
            ("kind",),
        )
        self.kind_missing = self.registry.gauge(
            "watcher_kind_missing",
            "1 while the API server does not serve the kind (its API is not installed)",
            ("kind",),
        )
