"""The load-report subscription through the gateway's Subscriber port: every replica's
well-formed report reaches the autoscaler; a malformed one is counted and dropped."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from kaiwo_contracts.events.autoscaling import ActiveRequestsV1
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_gateway.metrics import GatewayMetrics
from kaiwo_gateway.nats_source import subscribe_load_reports
from kaiwo_runtime.subscriptions import Published

Receiver = Callable[[Published], Awaitable[None]]


class RecordingSubscriber:
    def __init__(self) -> None:
        self.subscribed: dict[str, Receiver] = {}

    async def subscribe(self, subject: str, receive: Receiver) -> None:
        self.subscribed[subject] = receive


def _report(replica: str) -> Published:
    envelope = Envelope.new(
        data=ActiveRequestsV1(gateway=replica, interval_seconds=5.0),
        source="/kaiwo/gateway",
        time=datetime(2026, 1, 1, tzinfo=UTC),
        correlationid=replica,
    )
    headers, body = envelope.to_nats()
    return Published(subject=f"kaiwo.gateway.load._cluster.{replica}", headers=headers, body=body)


async def test_reports_reach_the_autoscaler_and_malformed_ones_are_counted() -> None:
    subscriber = RecordingSubscriber()
    metrics = GatewayMetrics()
    received: list[ActiveRequestsV1] = []

    await subscribe_load_reports(subscriber, received.append, metrics=metrics)

    assert list(subscriber.subscribed) == ["kaiwo.gateway.load.>"]
    deliver = subscriber.subscribed["kaiwo.gateway.load.>"]
    await deliver(_report("gateway-a-1"))
    await deliver(
        Published(subject="kaiwo.gateway.load._cluster.gateway-b-1", headers={}, body=b"{")
    )

    assert [report.gateway for report in received] == ["gateway-a-1"]
    exposed = metrics.registry.exposition().decode().splitlines()
    assert 'kaiwo_autoscaler_reports_total{outcome="malformed"} 1.0' in exposed
