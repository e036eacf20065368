"""The gateway's NATS adapters (nats-py): stored reads of observations and their wake-ups,
and the subscription to every replica's load reports."""

from __future__ import annotations

from collections.abc import Callable

import nats.js.errors
import structlog
from kaiwo_contracts.events.autoscaling import ActiveRequestsV1
from kaiwo_contracts.events.decoding import decode_envelope
from kaiwo_contracts.events.envelope import EnvelopeFormatError
from kaiwo_contracts.events.subjects import ANY_TAIL, ROOT, Family, SubjectError
from nats.aio.client import Client
from nats.aio.msg import Msg
from pydantic import ValidationError

from kaiwo_gateway.metrics import GatewayMetrics
from kaiwo_gateway.observations import StoredObservation

log = structlog.get_logger("kaiwo.gateway.nats")

LOAD_REPORTS = f"{ROOT}.{Family.GATEWAY.value}.load.{ANY_TAIL}"


class NatsObservationSource:
    def __init__(self, client: Client) -> None:
        self._client = client
        self._jsm = client.jsm()

    async def next_stored(
        self, *, stream: str, subject: str, after: int
    ) -> StoredObservation | None:
        try:
            raw = await self._jsm.get_msg(stream, seq=after + 1, subject=subject, next=True)
        except nats.js.errors.NotFoundError:
            return None
        return StoredObservation(
            sequence=int(raw.seq or 0),
            subject=raw.subject or "",
            headers=dict(raw.headers or {}),
            body=raw.data or b"",
        )

    async def subscribe(self, subject: str, wake: Callable[[], None]) -> None:
        async def woken(_message: Msg) -> None:
            wake()

        await self._client.subscribe(subject, cb=woken)


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
