"""Every metric of the recorder (prefix ``kaiwo_recorder_``); labels are NATS stream names."""

from __future__ import annotations

from kaiwo_runtime.metrics import MetricsRegistry

_BATCH_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class RecorderMetrics:
    """The recorder's metrics in one registry (a fresh one per test)."""

    def __init__(self, registry: MetricsRegistry | None = None) -> None:
        self.registry = registry or MetricsRegistry()
        self.events_appended = self.registry.counter(
            "recorder_events_appended",
            "Events the recorder stored (first time seen), by NATS stream",
            labels=("stream",),
        )
        self.duplicates = self.registry.counter(
            "recorder_duplicates",
            "Messages whose event id was already stored (redeliveries, re-publications)",
            labels=("stream",),
        )
        self.append_batch_seconds = self.registry.histogram(
            "recorder_append_batch_seconds",
            "Time of one batched append (one transaction)",
            buckets=_BATCH_SECONDS_BUCKETS,
        )
        self.malformed = self.registry.counter(
            "recorder_malformed",
            "Messages recorded raw because they are not valid events",
            labels=("stream",),
        )
        self.dead_lettered = self.registry.counter(
            "recorder_dead_lettered",
            "Messages the recorder could not store in any form and dead-lettered",
            labels=("stream",),
        )
        self.lag = self.registry.gauge(
            "recorder_lag_messages",
            "Messages in the stream the recorder has not stored yet (checked periodically)",
            labels=("stream",),
        )
        self.gap_messages = self.registry.counter(
            "recorder_gap_messages",
            "Messages the stream dropped (byte or age limit) before the recorder read them: "
            "never stored",
            labels=("stream",),
        )
        self.store_unavailable = self.registry.counter(
            "recorder_store_unavailable",
            "Append attempts that failed because the event store could not write "
            "(unreachable, disk full, read-only, locked)",
        )
        self.held_messages = self.registry.gauge(
            "recorder_held_messages",
            "Messages held unacknowledged because the event store cannot write now",
        )
