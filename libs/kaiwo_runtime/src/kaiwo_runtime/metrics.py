"""Prometheus metrics with the one ``kaiwo_`` prefix, in a registry per process.

Each service declares all its metrics in its own ``metrics.py`` through a
:class:`MetricsRegistry`, so names stay consistent and tests can use a fresh registry.
Labels never carry object names or uids (unbounded cardinality).
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

PREFIX = "kaiwo_"
EXPOSITION_CONTENT_TYPE = CONTENT_TYPE_LATEST


class MetricsRegistry:
    """Creates ``kaiwo_``-prefixed metrics in its own collector registry."""

    def __init__(self, *, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)

    @staticmethod
    def full_name(name: str) -> str:
        return name if name.startswith(PREFIX) else f"{PREFIX}{name}"

    def counter(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Counter:
        """``name`` without ``_total``: the client adds it to the exposed sample."""
        return Counter(
            self.full_name(name), documentation, labelnames=labels, registry=self.registry
        )

    def gauge(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Gauge:
        return Gauge(self.full_name(name), documentation, labelnames=labels, registry=self.registry)

    def histogram(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str] = (),
        buckets: Sequence[float] = Histogram.DEFAULT_BUCKETS,
    ) -> Histogram:
        return Histogram(
            self.full_name(name),
            documentation,
            labelnames=labels,
            buckets=buckets,
            registry=self.registry,
        )

    def exposition(self) -> bytes:
        """The text format Prometheus scrapes."""
        return generate_latest(self.registry)
