"""Publishing observations: retried until JetStream stores them (an event is never skipped
while the bus is only down), and an object too large for a message reduced to its metadata,
then to its identity alone, so it cannot block its stream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

import structlog
from kaiwo_runtime.bus import Bus, PublishRefusedError
from kaiwo_runtime.logging import bind_event

from kaiwo_watcher.backoff import Backoff
from kaiwo_watcher.metrics import WatcherMetrics
from kaiwo_watcher.observation import Observation, oversized_observations
from kaiwo_watcher.progress import StreamProgress
from kaiwo_watcher.watch_state import WatchStream

log = structlog.get_logger("kaiwo.watcher")


class ObservationPublisher:
    """Publishes each stream's observations; marks the stream blocked while a publish fails."""

    def __init__(
        self,
        bus: Bus,
        *,
        metrics: WatcherMetrics,
        progress: Mapping[str, StreamProgress],
        backoff: Callable[[], Backoff],
    ) -> None:
        self._bus = bus
        self.metrics = metrics
        self._progress = progress
        self._backoff = backoff

    async def publish_reduced(
        self, stream: WatchStream, observation: Observation, refused: PublishRefusedError
    ) -> Observation | None:
        """Publish an object too large for the bus as its metadata (then its identity alone);
        None when the bus refuses even that: the event is skipped, never retried, so it
        cannot block the stream."""
        self.metrics.oversized_objects.labels(kind=stream.kind).inc()
        for reduced in oversized_observations(observation, limit_bytes=refused.limit):
            try:
                await self.publish(stream, reduced)
            except PublishRefusedError as again:
                refused = again
                continue
            marker = reduced.envelope.data.oversized
            assert marker is not None
            with bind_event(reduced.envelope):
                log.warning(
                    "object too large for the bus; published its metadata only",
                    size_bytes=marker.size_bytes,
                    limit_bytes=marker.limit_bytes,
                )
            return reduced
        self.skip(stream, observation, refused)
        return None

    def skip(self, stream: WatchStream, observation: Observation, error: Exception) -> None:
        self.metrics.unpublishable_objects.labels(kind=stream.kind).inc()
        with bind_event(observation.envelope):
            log.error("the bus refuses this event in every form; skipped", error=str(error))

    async def publish(self, stream: WatchStream, observation: Observation) -> None:
        """Publish until JetStream stores it (or says it already has it); a refusal for good
        (:class:`PublishRefusedError`) is raised at once, for the caller to decide."""
        envelope = observation.envelope
        backoff = self._backoff()
        progress = self._progress[stream.key]
        with bind_event(envelope):
            while True:
                try:
                    ack = await self._bus.publish(envelope, observation.subject)
                except PublishRefusedError:
                    raise
                except Exception as error:  # the bus is down or slow: retry, never skip
                    self.metrics.publish_failures.labels(kind=stream.kind).inc()
                    if progress.blocked_since is None:
                        progress.blocked_since = time.monotonic()
                    delay = backoff.next_delay()
                    log.warning("publish failed; retrying", error=str(error), delay=delay)
                    await asyncio.sleep(delay)
                    continue
                break
            progress.blocked_since = None
            progress.last_published_at = time.monotonic()
            if ack.duplicate:
                self.metrics.duplicates.labels(kind=stream.kind).inc()
                log.debug("duplicate dropped by JetStream", subject=observation.subject)
            else:
                self.metrics.events_published.labels(
                    kind=stream.kind, type=envelope.data.event_type
                ).inc()
                log.debug("published", subject=observation.subject, sequence=ack.sequence)

    async def publish_reobserved(self, stream: WatchStream, observation: Observation) -> None:
        try:
            await self.publish(stream, observation)
        except PublishRefusedError as refused:
            await self.publish_reduced(stream, observation, refused)
