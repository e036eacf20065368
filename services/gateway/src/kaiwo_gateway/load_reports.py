"""This replica's load reports: its active requests per Model, published on NATS.

Every ``interval_seconds`` (and at once when a request starts waiting for an endpoint of a
Model that had none waiting, so a Model at zero replicas is scaled up without waiting a tick)
the replica publishes one ``ActiveRequestsV1`` on ``kaiwo.gateway.load._cluster.<replica>``,
listing the Models it has requests in flight for; one with none is left out. A report that
fails to go out is counted and logged; the next one says the same, newer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Protocol

import structlog
from kaiwo_contracts.events.autoscaling import ActiveRequestsV1, ModelLoad
from kaiwo_contracts.events.envelope import Envelope, service_source
from kaiwo_contracts.events.subjects import load_report_subject

from kaiwo_gateway.asyncio_waits import first_of
from kaiwo_gateway.domain.load import RequestCounts
from kaiwo_gateway.metrics import GatewayMetrics

log = structlog.get_logger("kaiwo.gateway.load")

SOURCE: Final = service_source("gateway")


class Publisher(Protocol):
    """Publishes an event on a subject (the bus; JetStream acknowledges it)."""

    async def publish(self, envelope: Envelope[Any], subject: str) -> object: ...


def load_report(
    counts: RequestCounts, *, replica: str, interval_seconds: float
) -> ActiveRequestsV1:
    return ActiveRequestsV1(
        gateway=replica,
        interval_seconds=interval_seconds,
        models=tuple(
            ModelLoad(
                model=found.model,
                active_requests=found.active,
                waiting_requests=found.waiting,
                messages=found.messages,
            )
            for found in counts.current()
        ),
    )


@dataclass
class LoadReporter:
    counts: RequestCounts
    publisher: Publisher
    replica: str
    interval_seconds: float
    clock: Callable[[], datetime]
    metrics: GatewayMetrics
    _urgent: asyncio.Event = field(default_factory=asyncio.Event)

    def report_now(self) -> None:
        """Publish a report as soon as possible (a request waits for an endpoint)."""
        self._urgent.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Report every interval, and at once when asked, until ``stop``."""
        loop = asyncio.get_running_loop()
        due = loop.time()
        while not stop.is_set():
            urgent = self._urgent.is_set()
            if urgent or loop.time() >= due:
                self._urgent.clear()
                await self.publish_once(trigger="waiting" if urgent else "interval")
                if not urgent:
                    due += self.interval_seconds
                    due = max(due, loop.time())  # a long stall does not cause a burst
            await first_of(stop, self._urgent, seconds=max(due - loop.time(), 0.0))

    async def publish_once(self, *, trigger: str = "interval") -> None:
        try:
            report = load_report(
                self.counts, replica=self.replica, interval_seconds=self.interval_seconds
            )
            envelope = Envelope.new(
                data=report, source=SOURCE, time=self.clock(), correlationid=self.replica
            )
            await self.publisher.publish(envelope, load_report_subject(self.replica))
        except Exception as error:  # the next report says the same, newer
            self.metrics.load_reports.labels(outcome="failed", trigger=trigger).inc()
            log.warning("load report not published", error=str(error))
            return
        self.metrics.load_reports.labels(outcome="published", trigger=trigger).inc()
