"""Observing again what a refused plan names (see :mod:`kaiwo_watcher.reobservation` for why
and within which limits): read each object by name within the stream that watches its kind,
publish it marked ``reobserved``, or a reobserved deletion when the API server holds no
object with the refused uid."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

import structlog
from kaiwo_contracts.events.envelope import EnvelopeFormatError
from kaiwo_contracts.plans import ObjectRef
from kaiwo_kube import ObjectReader

from kaiwo_watcher.metrics import WatcherMetrics
from kaiwo_watcher.observation import (
    KnownObject,
    infer_deletion,
    observe,
    reobserved,
)
from kaiwo_watcher.publishing import ObservationPublisher
from kaiwo_watcher.reobservation import RecentlyRead, refused_sources, stream_for
from kaiwo_watcher.watch_state import WatchStream

log = structlog.get_logger("kaiwo.watcher")


class Reobserver:
    """Answers ``PlanRefusedV1`` messages by observing their sources again."""

    def __init__(
        self,
        kube: ObjectReader,
        streams: tuple[WatchStream, ...],
        *,
        clock: Callable[[], datetime],
        owners: Mapping[str, str],
        publisher: ObservationPublisher,
        metrics: WatcherMetrics,
        recently_read: RecentlyRead,
    ) -> None:
        self._kube = kube
        self.streams = streams
        self._clock = clock
        self._owners = owners
        self._publisher = publisher
        self.metrics = metrics
        self._recently_read = recently_read

    async def handle_refusal(
        self, headers: Mapping[str, str] | None, body: bytes, *, subject: str
    ) -> int:
        """Observe again what one ``PlanRefusedV1`` names; returns how many observations
        were published. A message that is not a refusal is logged and counted, nothing more."""
        try:
            refused = refused_sources(headers, body, subject=subject)
        except EnvelopeFormatError as error:
            self.metrics.reobservations.labels(kind="-", outcome="unreadable").inc()
            log.warning("unreadable refusal ignored", subject=subject, error=str(error))
            return 0
        published = 0
        for ref in refused.objects:
            published += await self.reobserve(ref, refusal=refused.refusal_id)
        return published

    async def reobserve(self, ref: ObjectRef, *, refusal: str) -> int:
        """Read ``ref`` again (its name, within the stream that watches its kind there) and
        publish what the API server holds, marked ``reobserved``; a reobserved deletion for
        its uid when the API server holds no object with it. Returns how many were published."""
        stream = stream_for(self.streams, ref)
        if stream is None:
            self.metrics.reobservations.labels(kind=ref.kind, outcome="not_watched").inc()
            log.warning("asked to observe a kind the watcher does not watch", object=ref.display())
            return 0
        if not self._recently_read.due(ref):
            self.metrics.reobservations.labels(kind=ref.kind, outcome="throttled").inc()
            return 0
        namespace = ref.namespace if stream.target.resource.namespaced else None
        listed = await self._kube.list(
            stream.target.resource,
            namespace=namespace,
            label_selector=stream.target.label_selector,
            field_selector=",".join(
                filter(None, (f"metadata.name={ref.name}", stream.target.field_selector))
            ),
        )
        items = [
            item
            for item in listed.items
            if (item.get("metadata") or {}).get("name") == ref.name
            and (item.get("metadata") or {}).get("namespace") == namespace
        ]
        published = 0
        for item in items:
            observation = observe(
                item,
                target=stream.target,
                event_type="SYNC",
                time=self._clock(),
                owners=self._owners,
            )
            await self._publisher.publish_reobserved(
                stream, reobserved(observation, refusal=refusal)
            )
            self.metrics.reobservations.labels(kind=ref.kind, outcome="published").inc()
            published += 1
        held = {(item.get("metadata") or {}).get("uid") for item in items}
        if ref.uid and ref.uid not in held:
            known = KnownObject(namespace=namespace, name=ref.name, correlation=ref.uid)
            deletion = infer_deletion(
                known,
                uid=ref.uid,
                target=stream.target,
                list_resource_version=listed.resource_version,
                time=self._clock(),
            )
            await self._publisher.publish_reobserved(stream, reobserved(deletion, refusal=refusal))
            self.metrics.reobservations.labels(kind=ref.kind, outcome="deleted").inc()
            published += 1
        log.info("observed again after a refused plan", object=ref.display(), published=published)
        return published
