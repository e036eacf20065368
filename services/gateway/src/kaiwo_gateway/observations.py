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
from typing import Any

import structlog
from kaiwo_contracts.events.decoding import decode_envelope
from kaiwo_contracts.events.envelope import EnvelopeFormatError
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.streams import OBSERVED_STREAM
from kaiwo_contracts.events.subjects import ANY_TAIL, ROOT, Family, SubjectError, kind_token
from kaiwo_runtime.stored_reads import ObservationSource, StoredObservation, StoredReader
from pydantic import ValidationError

from kaiwo_gateway.domain.catalog import MODEL_KIND, POD_KIND, Catalog
from kaiwo_gateway.metrics import GatewayMetrics

log = structlog.get_logger("kaiwo.gateway.observations")

OBSERVED_KINDS = (MODEL_KIND, POD_KIND)


def observed_filters() -> tuple[str, ...]:
    """``kaiwo.obs.model.>`` and ``kaiwo.obs.pod.>`` (partitioned subjects included)."""
    return tuple(
        ".".join((ROOT, Family.OBSERVED.value, kind_token(kind), ANY_TAIL))
        for kind in OBSERVED_KINDS
    )


@dataclass
class ObservationFeed:
    """The gateway's :class:`~kaiwo_runtime.stored_reads.StoredReader` of Models and Pods,
    applying each observation to the catalog."""

    source: ObservationSource
    catalog: Catalog
    metrics: GatewayMetrics
    on_change: Callable[[], None]
    resync_seconds: float = 30.0
    stream: str = OBSERVED_STREAM
    reader: StoredReader = field(init=False)

    def __post_init__(self) -> None:
        self.reader = StoredReader(
            source=self.source,
            stream=self.stream,
            filters=observed_filters(),
            apply=self._apply,
            on_change=self.on_change,
            resync_seconds=self.resync_seconds,
        )

    @property
    def caught_up(self) -> bool:
        return self.reader.caught_up

    async def start(self) -> None:
        """Subscribe for wake-ups, then read everything stored so far."""
        await self.reader.start()

    async def run(self, stop: asyncio.Event) -> None:
        """Read new observations whenever woken, or every ``resync_seconds``, until ``stop``."""
        await self.reader.run(stop)

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
