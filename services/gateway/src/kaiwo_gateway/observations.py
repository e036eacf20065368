"""Keeping the catalog current from the watcher's observations on NATS.

The gateway reads the ``KAIWO_OBS`` stream's stored messages of Models and Pods in order,
with ``next_by_subj`` from the last sequence it read (one cursor per subject filter), and
subscribes to the same subjects live only to be woken when one is published. So it reads
every observation once, in stream order, with read-only rights: no consumer to create
(an identity allowed to create consumers on ``KAIWO_OBS`` could reconfigure the planner's),
and a replica that starts reads the whole history still in the stream. A missed wake-up
costs at most ``resync_seconds``.

Malformed messages are counted and skipped (the planner dead-letters them, the recorder
keeps them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from kaiwo_contracts.events.decoding import decode_envelope
from kaiwo_contracts.events.envelope import EnvelopeFormatError
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.streams import OBSERVED_STREAM
from kaiwo_contracts.events.subjects import ANY_TAIL, ROOT, Family, SubjectError, kind_token
from pydantic import ValidationError

from kaiwo_gateway.domain.catalog import MODEL_KIND, POD_KIND, Catalog
from kaiwo_gateway.metrics import GatewayMetrics

log = structlog.get_logger("kaiwo.gateway.observations")

OBSERVED_KINDS = (MODEL_KIND, POD_KIND)


@dataclass(frozen=True, slots=True)
class StoredObservation:
    sequence: int
    subject: str
    headers: dict[str, str]
    body: bytes


class ObservationSource(Protocol):
    """Stored messages of a stream, and wake-ups when one is published."""

    async def next_stored(
        self, *, stream: str, subject: str, after: int
    ) -> StoredObservation | None: ...

    async def subscribe(self, subject: str, wake: Callable[[], None]) -> None: ...


def observed_filters() -> tuple[str, ...]:
    """``kaiwo.obs.model.>`` and ``kaiwo.obs.pod.>`` (partitioned subjects included)."""
    return tuple(
        ".".join((ROOT, Family.OBSERVED.value, kind_token(kind), ANY_TAIL))
        for kind in OBSERVED_KINDS
    )


@dataclass
class ObservationFeed:
    source: ObservationSource
    catalog: Catalog
    metrics: GatewayMetrics
    on_change: Callable[[], None]
    resync_seconds: float = 30.0
    stream: str = OBSERVED_STREAM
    cursors: dict[str, int] = field(default_factory=dict)
    caught_up: bool = False
    _wake: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        """Subscribe for wake-ups, then read everything stored so far."""
        for subject in observed_filters():
            await self.source.subscribe(subject, self._wake.set)
        await self.catch_up()
        self.caught_up = True

    async def run(self, stop: asyncio.Event) -> None:
        """Read new observations whenever woken, or every ``resync_seconds``, until ``stop``."""
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                woken = asyncio.ensure_future(self._wake.wait())
                await asyncio.wait(
                    (woken, stopping),
                    timeout=self.resync_seconds,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                woken.cancel()
                if stop.is_set():
                    return
                await self._read_once()
        finally:
            stopping.cancel()

    async def _read_once(self) -> None:
        self._wake.clear()
        try:
            await self.catch_up()
        except Exception as error:  # the next wake-up or resync tries again
            log.warning("reading observations failed", error=str(error))

    async def catch_up(self) -> None:
        changed = False
        for subject in observed_filters():
            while True:
                after = self.cursors.get(subject, 0)
                stored = await self.source.next_stored(
                    stream=self.stream, subject=subject, after=after
                )
                if stored is None:
                    break
                self.cursors[subject] = stored.sequence
                changed = self._apply(stored) or changed
        if changed:
            self.on_change()

    def _apply(self, stored: StoredObservation) -> bool:
        try:
            envelope = decode_envelope(
                stored.headers, stored.body, ObservedObjectV1, subject=stored.subject
            )
        except (EnvelopeFormatError, ValidationError, SubjectError) as error:
            self.metrics.observations.labels(kind="", outcome="malformed").inc()
            log.warning("malformed observation skipped", subject=stored.subject, error=str(error))
            return False
        payload: ObservedObjectV1 = envelope.data
        changed = self.catalog.apply(
            kind=payload.kind, event=payload.event_type, obj=_object(payload)
        )
        outcome = "applied" if changed else "unchanged"
        self.metrics.observations.labels(kind=payload.kind, outcome=outcome).inc()
        return changed


def _object(payload: ObservedObjectV1) -> dict[str, Any]:
    return payload.object
