"""The gateway's reads of the bus that are not the messenger's: stored reads of observations
and their wake-ups (:mod:`kaiwo_runtime.stored_reads`), and every replica's load reports
(through :mod:`kaiwo_runtime.subscriptions`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

import structlog
from kaiwo_contracts.events.autoscaling import ActiveRequestsV1
from kaiwo_contracts.events.decoding import decode_envelope
from kaiwo_contracts.events.envelope import EnvelopeFormatError
from kaiwo_contracts.events.subjects import ANY_TAIL, ROOT, Family, SubjectError
from kaiwo_runtime.stored_reads import NatsObservationSource
from kaiwo_runtime.subscriptions import Published
from pydantic import ValidationError

from kaiwo_gateway.metrics import GatewayMetrics

log = structlog.get_logger("kaiwo.gateway.nats")

__all__ = ["NatsObservationSource", "Subscriber", "subscribe_load_reports"]

LOAD_REPORTS = f"{ROOT}.{Family.GATEWAY.value}.load.{ANY_TAIL}"


class Subscriber(Protocol):
    async def subscribe(
        self, subject: str, receive: Callable[[Published], Awaitable[None]]
    ) -> None: ...


async def subscribe_load_reports(
    subscriber: Subscriber,
    receive: Callable[[ActiveRequestsV1], None],
    *,
    metrics: GatewayMetrics,
) -> None:
    """Hand every replica's load report to ``receive``; malformed ones are counted and
    dropped (the recorder keeps them)."""

    async def received(message: Published) -> None:
        try:
            envelope = decode_envelope(
                message.headers, message.body, ActiveRequestsV1, subject=message.subject
            )
        except (EnvelopeFormatError, ValidationError, SubjectError) as error:
            metrics.autoscaler_reports.labels(outcome="malformed").inc()
            log.warning("malformed load report dropped", subject=message.subject, error=str(error))
            return
        receive(envelope.data)

    await subscriber.subscribe(LOAD_REPORTS, received)
