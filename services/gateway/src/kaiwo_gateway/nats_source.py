"""The gateway's NATS adapters (nats-py): stored reads of observations and their wake-ups,
and the subscription to every replica's load reports."""

from __future__ import annotations

from collections.abc import Callable

import structlog
from kaiwo_contracts.events.autoscaling import ActiveRequestsV1
from kaiwo_contracts.events.decoding import decode_envelope
from kaiwo_contracts.events.envelope import EnvelopeFormatError
from kaiwo_contracts.events.subjects import ANY_TAIL, ROOT, Family, SubjectError
from kaiwo_runtime.stored_reads import NatsObservationSource
from nats.aio.client import Client
from nats.aio.msg import Msg
from pydantic import ValidationError

from kaiwo_gateway.metrics import GatewayMetrics

log = structlog.get_logger("kaiwo.gateway.nats")

__all__ = ["NatsObservationSource", "subscribe_load_reports"]

LOAD_REPORTS = f"{ROOT}.{Family.GATEWAY.value}.load.{ANY_TAIL}"


async def subscribe_load_reports(
    client: Client, receive: Callable[[ActiveRequestsV1], None], *, metrics: GatewayMetrics
) -> None:
    """Hand every replica's load report to ``receive``; malformed ones are counted and
    dropped (the recorder keeps them)."""

    async def received(message: Msg) -> None:
        try:
            envelope = decode_envelope(
                dict(message.headers or {}), message.data, ActiveRequestsV1, subject=message.subject
            )
        except (EnvelopeFormatError, ValidationError, SubjectError) as error:
            metrics.autoscaler_reports.labels(outcome="malformed").inc()
            log.warning("malformed load report dropped", subject=message.subject, error=str(error))
            return
        receive(envelope.data)

    await client.subscribe(LOAD_REPORTS, cb=received)
