"""The watcher: list and watch each resource type, publish every observed object version.

One task per watch stream (resource type, and namespace when the watcher is limited to some).
The streams of the cluster's settings (``WatchTarget.settings``: the configuration kinds,
queues, priorities, Nodes, Namespaces, Gateways) start first; the others once each of those
has listed, resumed or is not served, or after ``settings_first_wait`` (decision 0294). So on
a first list the planner sees the settings before any workload it would plan from them.

1. Read the checkpoint (:mod:`kaiwo_watcher.watch_state`). With one, watch from it; without
   one, LIST, publish every item as ``SYNC``, publish an inferred ``DELETED`` for each known
   object the list no longer has, set the checkpoint to the list's resourceVersion, watch.
2. Publish each watch event, then move the checkpoint (BOOKMARKs move it too). A publish that
   fails is retried until it succeeds: an event is never skipped. A publish the bus refuses
   for good (the object is too large for a message) is not retried: the object is published
   reduced to its metadata and marked ``oversized`` (:func:`oversized_observations`), so the
   stream moves on and the planner can report the object. While a publish keeps failing the
   stream is *blocked*; after ``stuck_after`` seconds it is *stuck*, and readiness fails
   naming it (``kaiwo_watcher_publish_blocked_seconds`` shows how long).
3. 410 Gone: relist. A dropped watch (connection lost, 429/5xx): resume from the last
   resourceVersion after a backoff with jitter. 404 (the kind's API is not installed, e.g. no
   Kueue): one warning, then look again after a backoff that starts at half a second and
   grows to ``missing_kind_retry_seconds``, and relist once it is served. For a custom kind
   the wait watches its CustomResourceDefinition and ends as soon as that becomes
   Established, so a kind installed after the watcher started is followed within moments
   (an API server may also answer 404 for a moment after a CRD is Established, which the
   short first delays cover). Nothing here ends the service but ``stop``.

Observing again (:meth:`WatcherService.handle_refusal`, decision 0038): when the executor
refuses a plan because an object it was made from is not what the API server holds, the
watcher reads that object again and publishes it marked ``reobserved`` (or, when the API
server has no object with the refused uid, a reobserved ``DELETED``), so the planner plans
from the truth again; see :mod:`kaiwo_watcher.reobservation`.

Two replicas may run at once: both publish the same ``Nats-Msg-Id`` for the same object
version and JetStream keeps one copy. The watcher never writes to Kubernetes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Final

import structlog
from kaiwo_contracts.events.observed import WatchEventType
from kaiwo_kube import KubeError, NotFound, ObjectReader, ResourceExpired, WatchEvent
from kaiwo_runtime.bus import Bus, BusError, PublishRefusedError
from kaiwo_runtime.cancellation import stop_if_cancelled
from kaiwo_runtime.kv import KeyValue
from kaiwo_runtime.startup import start_when_the_bus_answers
from pydantic import ValidationError

from kaiwo_watcher.backoff import Backoff, retry_delay
from kaiwo_watcher.metrics import WatcherMetrics
from kaiwo_watcher.observation import (
    ChildOwners,
    infer_deletion,
    known_from,
    log_identity,
    observe,
)
from kaiwo_watcher.progress import StreamProgress, WatcherTuning, relist_due, watch_timeout
from kaiwo_watcher.publishing import ObservationPublisher
from kaiwo_watcher.refusals import Reobserver
from kaiwo_watcher.reobservation import RecentlyRead
from kaiwo_watcher.served_kinds import MISSING_KIND_FIRST_RETRY, until_served
from kaiwo_watcher.watch_list import DEFAULT_WATCH_LIST, WatchTarget
from kaiwo_watcher.watch_state import WatchState, WatchStream, watch_streams

log = structlog.get_logger("kaiwo.watcher")

SETTINGS_POLL_SECONDS: Final = 0.02
"""How often the first list of the settings streams is checked (decision 0294)."""


class StreamsStuckError(RuntimeError):
    """Some streams cannot publish (readiness says which, and for how long)."""


class WatcherService:
    """List+watch every stream and publish observed events; see the module docstring."""

    def __init__(
        self,
        kube: ObjectReader,
        bus: Bus,
        *,
        kv: KeyValue,
        clock: Callable[[], datetime],
        watch_list: Iterable[WatchTarget] = DEFAULT_WATCH_LIST,
        namespaces: Iterable[str] = (),
        tuning: WatcherTuning | None = None,
        metrics: WatcherMetrics | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._kube = kube
        self._bus = bus
        self._clock = clock
        self._tuning = tuning or WatcherTuning()
        self._state = WatchState(kv, checkpoint_every=self._tuning.checkpoint_every)
        self.metrics = metrics or WatcherMetrics()
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not cryptography
        self.streams = watch_streams(watch_list, namespaces)
        self.progress = {stream.key: StreamProgress() for stream in self.streams}
        self._owners = ChildOwners()
        self._publisher = ObservationPublisher(
            bus, metrics=self.metrics, progress=self.progress, backoff=self._backoff
        )
        self._reobserver = Reobserver(
            kube,
            self.streams,
            clock=clock,
            owners=self._owners.by_child,
            publisher=self._publisher,
            metrics=self.metrics,
            recently_read=RecentlyRead(min_interval=self._tuning.reobserve_interval),
        )
        self._loaded = False
        for kind in {stream.kind for stream in self.streams}:
            self.metrics.publish_blocked_seconds.labels(kind=kind).set_function(
                functools.partial(self._blocked_seconds, kind)
            )

    # ------------------------------------------------------------------ lifecycle

    @property
    def ready(self) -> bool:
        """Every stream has listed (or resumed from its checkpoint), or its kind is missing."""
        return self._loaded and all(self._listed(stream) for stream in self.streams)

    def stuck_streams(self) -> dict[str, float]:
        """Streams whose publish has kept failing longer than ``stuck_after``: key -> seconds."""
        now = time.monotonic()
        return {
            key: now - progress.blocked_since
            for key, progress in self.progress.items()
            if progress.blocked_since is not None
            and now - progress.blocked_since >= self._tuning.stuck_after
        }

    async def publishing(self) -> bool:
        """Readiness: no stream is stuck. A watcher that cannot publish observes nothing, so
        it must not look ready; a restart would not help (it resumes at the same event)."""
        stuck = self.stuck_streams()
        if stuck:
            blocked = ", ".join(f"{key} for {seconds:.0f} s" for key, seconds in stuck.items())
            raise StreamsStuckError(f"publishing has failed: {blocked}")
        return True

    def _blocked_seconds(self, kind: str) -> float:
        now = time.monotonic()
        return max(
            (
                now - progress.blocked_since
                for stream in self.streams
                if stream.kind == kind
                and (progress := self.progress[stream.key]).blocked_since is not None
            ),
            default=0.0,
        )

    async def load_state(self) -> None:
        await self._state.load()
        self._loaded = True

    async def run(self, stop: asyncio.Event) -> None:
        """Follow every stream until ``stop`` is set."""
        if not self._loaded and not await start_when_the_bus_answers(
            self.load_state,
            stop,
            what="the known objects",
            pause_seconds=self._tuning.backoff_initial,
        ):
            return
        settings = [stream for stream in self.streams if stream.target.settings]
        tasks = [self._following(stream) for stream in settings]
        if self._tuning.checkpoint_every > 0:
            tasks.append(asyncio.create_task(self._flush_checkpoints(), name="checkpoints"))
        try:
            if await self._until_listed(settings, stop):
                tasks += [self._following(s) for s in self.streams if not s.target.settings]
                await stop.wait()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            try:
                await self._state.flush()
            except Exception as error:  # stopping: the next start resumes a little earlier
                log.warning("final checkpoint failed", error=str(error))

    def _following(self, stream: WatchStream) -> asyncio.Task[None]:
        return asyncio.create_task(self.follow(stream), name=f"watch {stream.key}")

    async def _until_listed(self, streams: list[WatchStream], stop: asyncio.Event) -> bool:
        """Wait until each of ``streams`` has listed (or resumed from its checkpoint, or its
        kind is not served), or ``settings_first_wait`` has passed (decision 0294): the
        planner, which reads the bus in order, then sees the cluster's settings before any
        workload on a first list, and plans none from the defaults that stand in for a
        configuration not observed yet. False: ``stop`` was set meanwhile."""
        deadline = time.monotonic() + self._tuning.settings_first_wait
        while waiting := [s.key for s in streams if not self._listed(s)]:
            if time.monotonic() >= deadline:
                log.warning("settings not listed in time; following every stream", streams=waiting)
                return True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SETTINGS_POLL_SECONDS)
            if stop.is_set():
                return False
        return True

    def _listed(self, stream: WatchStream) -> bool:
        progress = self.progress[stream.key]
        return progress.synced or progress.missing

    async def _flush_checkpoints(self) -> None:
        """Write checkpoints held back by the interval, so a quiet stream's is not left behind."""
        while True:
            await asyncio.sleep(self._tuning.checkpoint_every)
            try:
                await self._state.flush()
            except Exception as error:  # the bucket is unreachable: the next round retries
                log.warning("checkpoint flush failed", error=str(error))

    # ------------------------------------------------------------------ one stream

    async def follow(self, stream: WatchStream) -> None:
        """List/watch one stream forever (until cancelled)."""
        progress = self.progress[stream.key]
        backoff = self._backoff()
        missing = Backoff(
            initial=MISSING_KIND_FIRST_RETRY,
            maximum=max(self._tuning.missing_kind_retry, MISSING_KIND_FIRST_RETRY),
            rng=self._rng,
        )
        bound = log.bind(kind=stream.kind, stream=stream.key)
        resume = await self._checkpoint(stream, bound)
        if resume:
            progress.synced = True
            progress.resource_version = resume
            bound.info("resuming from checkpoint", resource_version=resume)
        while True:
            try:
                if not resume or relist_due(self._tuning, progress):
                    resume = await self.relist(stream)
                resume = await self.watch(stream, resume)
                backoff.reset()
                missing.reset()
            except ResourceExpired:
                bound.info("resourceVersion expired (410 Gone): relisting")
                resume = None
            except NotFound as error:
                self._mark_missing(stream, bound, reason=error.message)
                resume = None
                await until_served(self._kube, stream.target.resource, delay=missing.next_delay())
            except (KubeError, OSError) as error:
                stop_if_cancelled()
                # Resume after the last event handled (a relist in progress starts over).
                resume = progress.resource_version if resume else None
                self.metrics.watch_restarts.labels(kind=stream.kind).inc()
                delay = retry_delay(backoff, error)
                bound.warning("watch dropped; resuming", error=str(error), delay=round(delay, 2))
                await asyncio.sleep(delay)
            except Exception:  # a bug must not silence the other streams, nor this one
                stop_if_cancelled()
                resume = progress.resource_version if resume else None
                delay = backoff.next_delay()
                bound.exception("watch loop failed; resuming", delay=round(delay, 2))
                await asyncio.sleep(delay)

    async def _checkpoint(self, stream: WatchStream, bound: Any) -> str | None:
        """The stream's checkpoint, read again after a back-off while the bucket is out of
        reach: a follower that gave up here would leave its stream unwatched."""
        backoff = self._backoff()
        while True:
            try:
                return await self._state.checkpoint(stream)
            except BusError as error:
                delay = backoff.next_delay()
                bound.warning(
                    "checkpoint unreadable; retrying", error=str(error), delay=round(delay, 2)
                )
                await asyncio.sleep(delay)

    async def relist(self, stream: WatchStream) -> str:
        """LIST, publish each item as SYNC and each vanished known object as DELETED.

        Returns the list's resourceVersion (the checkpoint is set to it).
        """
        listed = await self._kube.list(
            stream.target.resource,
            namespace=stream.namespace,
            label_selector=stream.target.label_selector,
            field_selector=stream.target.field_selector,
        )
        self._mark_served(stream)
        self.metrics.relists.labels(kind=stream.kind).inc()
        present: set[str] = set()
        for item in listed.items:
            uid = await self._observe(stream, item, event_type="SYNC")
            if uid:
                present.add(uid)
        for uid, known in self._state.known(stream).items():
            if uid in present:
                continue
            observation = infer_deletion(
                known,
                uid=uid,
                target=stream.target,
                list_resource_version=listed.resource_version,
                time=self._clock(),
            )
            try:
                await self._publisher.publish(stream, observation)
            except PublishRefusedError as error:  # an identity alone: the bus is misconfigured
                self._publisher.skip(stream, observation, error)
            await self._state.forget(stream, uid)
        await self._state.reset(stream, listed.resource_version)
        progress = self.progress[stream.key]
        progress.synced = True
        progress.resource_version = listed.resource_version
        progress.relisted_at = time.monotonic()
        log.info(
            "listed",
            kind=stream.kind,
            stream=stream.key,
            objects=len(listed.items),
            resource_version=listed.resource_version,
        )
        return listed.resource_version

    async def watch(self, stream: WatchStream, resource_version: str) -> str:
        """Watch from ``resource_version`` until the server ends the watch or a relist is due;
        returns the last resourceVersion handled."""
        progress = self.progress[stream.key]
        stop_if_cancelled()  # a publish of the relist may have swallowed it (see below)
        events = self._kube.watch(
            stream.target.resource,
            resource_version=resource_version,
            namespace=stream.namespace,
            label_selector=stream.target.label_selector,
            field_selector=stream.target.field_selector,
            timeout_seconds=watch_timeout(self._tuning, progress),
            bookmarks=True,
        )
        async with contextlib.aclosing(events):
            async for event in events:
                self._mark_served(stream)
                resource_version = await self.handle(stream, event) or resource_version
                progress.resource_version = resource_version
                # A publish may have swallowed a cancellation (kaiwo_runtime.cancellation):
                # the next read would wait for an event that may never come.
                stop_if_cancelled()
                if relist_due(self._tuning, progress):
                    break
        return resource_version

    async def handle(self, stream: WatchStream, event: WatchEvent) -> str:
        """Publish one watch event, then checkpoint its resourceVersion (returned)."""
        if event.type != "BOOKMARK":
            await self._observe(stream, event.object, event_type=event.type)
        await self._state.advance(stream, event.resource_version)
        return event.resource_version

    # ------------------------------------------------------------------ publishing

    async def _observe(
        self, stream: WatchStream, obj: dict[str, Any], *, event_type: WatchEventType
    ) -> str | None:
        """Publish one object version (reduced when too large); remember or forget it.
        Returns its uid (also when the bus refused even its identity: it exists), None for
        an object the target does not accept (published as deleted if it was accepted
        before)."""
        accept = stream.target.accept
        if accept is not None:
            known = self._state.knows(stream, str((obj.get("metadata") or {}).get("uid") or ""))
            if event_type == "DELETED" and not known:
                return None
            if event_type != "DELETED" and not accept(obj):
                if not known:
                    return None
                event_type = "DELETED"
        try:
            observation = observe(
                obj,
                target=stream.target,
                event_type=event_type,
                time=self._clock(),
                owners=self._owners.by_child,
            )
        except (ValidationError, ValueError) as error:
            self.metrics.rejected_objects.labels(kind=stream.kind).inc()
            log.error(
                "object cannot be published",
                kind=stream.kind,
                **log_identity(obj),
                error=" ".join(str(error).split()),
            )
            return None
        try:
            await self._publisher.publish(stream, observation)
        except PublishRefusedError as refused:
            reduced = await self._publisher.publish_reduced(stream, observation, refused)
            if reduced is None:
                return observation.uid
            observation = reduced
        deleted = event_type == "DELETED"
        self._owners.learn(observation.envelope.data.object, deleted=deleted)
        if deleted:
            await self._state.forget(stream, observation.uid)
        else:
            await self._state.remember(stream, observation.uid, known_from(observation))
        return observation.uid

    # ------------------------------------------------------------------ observing again

    async def handle_refusal(
        self, headers: Mapping[str, str] | None, body: bytes, *, subject: str
    ) -> int:
        """See :meth:`Reobserver.handle_refusal`."""
        return await self._reobserver.handle_refusal(headers, body, subject=subject)

    # ------------------------------------------------------------------ helpers

    def _backoff(self) -> Backoff:
        """A fresh backoff for one stream's (or one publish's) failures in a row."""
        return Backoff(
            initial=self._tuning.backoff_initial, maximum=self._tuning.backoff_max, rng=self._rng
        )

    def _mark_missing(self, stream: WatchStream, bound: Any, *, reason: str) -> None:
        progress = self.progress[stream.key]
        if not progress.missing:
            bound.warning(
                "kind not served by the API server; skipping it and checking again later",
                api_version=stream.target.resource.api_version,
                retry_seconds=self._tuning.missing_kind_retry,
                reason=reason,
            )
            self.metrics.kind_missing.labels(kind=stream.kind).set(1)
        progress.missing = True

    def _mark_served(self, stream: WatchStream) -> None:
        progress = self.progress[stream.key]
        if progress.missing:
            log.info("kind is served now", kind=stream.kind, stream=stream.key)
            self.metrics.kind_missing.labels(kind=stream.kind).set(0)
        progress.missing = False
