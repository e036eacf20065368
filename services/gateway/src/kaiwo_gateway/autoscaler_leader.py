"""The autoscaler, run by the one gateway replica that holds the ``autoscaler`` lease.

Every replica takes in every replica's load reports (:meth:`Autoscaler.receive`, from a
subscription to ``kaiwo.gateway.load.>``), so whichever becomes leader knows the latest load
at once. The leader (:meth:`Autoscaler.lead`, run by ``SingleActive``):

1. restores each Model's window from the ``kaiwo-autoscaler`` bucket (written by the
   previous leader, or by itself before a restart);
2. every ``interval_seconds`` runs one tick (:func:`~kaiwo_gateway.domain.autoscaler.autoscale`)
   over the Models of the catalog, publishes a ``ScaleDecidedV1`` for each decision and saves
   the windows that changed (and forgets those of Models no longer autoscaled); a Model
   whose decision failed to publish keeps its window from before the tick, so the next tick
   decides it again (decision 0175);
3. whenever a report says requests wait for a Model at zero replicas, decides scale from
   zero at once (:func:`~kaiwo_gateway.domain.autoscaler.scale_from_zero`), and a tick
   does so before its own decisions.

With the messenger on, each tick also reads how many requests the request stream stores per
tenant namespace (:class:`Backlog`), so a backlog no replica has in hand drives the Models
too (decision 0057).

A decision is published once per Model generation, from and to: the leader decides again
every tick until the Model's new replicas come back through the observations, and the same
decision need not travel twice. Its event id is derived from the same values, so a new
leader's first copy of a decision already published is dropped by JetStream as a duplicate.
One decided for longer than :data:`RETELL_HELD_BACK_SECONDS` (a scale up the cluster's
ceiling holds back, which the planner does not carry out) is published again then, under a
new id (decision 0238): the planner forgets a decision an hour older than the newest of any
Model, and would then say the ceiling no longer limits the Model.
The planner carries the decision out (decision 0027); the autoscaler writes nothing to the
API server.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Protocol

import structlog
from kaiwo_contracts.events.autoscaling import ActiveRequestsV1, ScaleDecidedV1
from kaiwo_contracts.events.envelope import (
    Envelope,
    derived_event_id,
    object_subject,
    service_source,
)
from kaiwo_contracts.events.subjects import scale_subject
from kaiwo_contracts.plans import ObjectRef
from kaiwo_runtime.kv import KeyValue

from kaiwo_gateway.asyncio_waits import first_of
from kaiwo_gateway.domain.autoscaler import (
    AutoscaledModel,
    Decision,
    LoadReport,
    autoscale,
    scale_from_zero,
    states_after_publishing,
)
from kaiwo_gateway.domain.autoscaling import RETELL_HELD_BACK_SECONDS, ScalingState
from kaiwo_gateway.domain.catalog import Catalog
from kaiwo_gateway.domain.load import MODEL_API_VERSION
from kaiwo_gateway.load_reports import Publisher
from kaiwo_gateway.metrics import GatewayMetrics

log = structlog.get_logger("kaiwo.gateway.autoscaler")

SOURCE: Final = service_source("gateway")


class Backlog(Protocol):
    """The messenger's request stream: requests stored per tenant namespace."""

    async def stored_requests(self) -> Mapping[str, int]: ...


@dataclass(frozen=True, slots=True)
class AutoscalerSettings:
    interval_seconds: float
    window_seconds: float


def autoscaled_models(catalog: Catalog) -> tuple[AutoscaledModel, ...]:
    return tuple(
        AutoscaledModel(
            uid=model.uid,
            namespace=model.namespace,
            name=model.name,
            generation=model.generation,
            spec=model.scaling,
        )
        for model in catalog.models()
    )


def decision_event(decision: Decision, *, window_seconds: float) -> ScaleDecidedV1:
    model = decision.model
    return ScaleDecidedV1(
        model=ObjectRef(
            api_version=MODEL_API_VERSION,
            kind="Model",
            name=model.name,
            namespace=model.namespace,
            uid=model.uid,
        ),
        generation=model.generation,
        from_replicas=decision.from_replicas,
        replicas=decision.replicas,
        cause=decision.cause,
        active_requests=decision.active_requests,
        average_active_requests=decision.average,
        window_seconds=window_seconds,
        samples=decision.samples,
        target_requests=model.spec.target_requests,
        scale_down_delay_seconds=model.spec.scale_down_delay_seconds,
        reason=decision.reason,
    )


class Autoscaler:
    """Load reports in (every replica), scale decisions out (the leader only)."""

    def __init__(
        self,
        *,
        catalog: Catalog,
        publisher: Publisher,
        state: KeyValue,
        clock: Callable[[], datetime],
        settings: AutoscalerSettings,
        metrics: GatewayMetrics,
        backlog: Backlog | None = None,
    ) -> None:
        self._catalog = catalog
        self._backlog = backlog
        self._publisher = publisher
        self._state = state
        self._clock = clock
        self._settings = settings
        self._metrics = metrics
        self._reports: dict[str, LoadReport] = {}
        self._states: dict[str, ScalingState] = {}
        self._published: dict[tuple[str, int, int, int], datetime] = {}
        """Each decision published, and when (last)."""
        self._waiting = asyncio.Event()
        self._gauged: set[tuple[str, str]] = set()

    # ------------------------------------------------------------------ every replica

    def receive(self, report: ActiveRequestsV1) -> None:
        """Keep ``report`` as its replica's latest (received now), and forget replicas whose
        reports went stale (a restarted replica reports under a new name)."""
        now = self._clock()
        active = {m.model.uid: m.active_requests for m in report.models if m.model.uid}
        waiting = {
            m.model.uid: m.waiting_requests
            for m in report.models
            if m.model.uid and m.waiting_requests > 0
        }
        messages = {m.model.uid: m.messages for m in report.models if m.model.uid and m.messages}
        self._reports = {
            gateway: kept for gateway, kept in self._reports.items() if kept.fresh(now)
        }
        self._reports[report.gateway] = LoadReport(
            gateway=report.gateway,
            received_at=now,
            interval_seconds=report.interval_seconds,
            active=active,
            waiting=waiting,
            messages=messages,
        )
        self._metrics.autoscaler_reports.labels(outcome="taken").inc()
        if waiting:
            self._waiting.set()

    # ------------------------------------------------------------------ the leader

    async def lead(self, stop: asyncio.Event) -> None:
        """Restore the windows, then tick every interval and scale from zero when asked,
        until ``stop`` (the lease is lost or the replica stops)."""
        await self.restore()
        self._published.clear()
        self._metrics.autoscaler_leading.set(1)
        log.info("leading the autoscaler", models=len(self._states))
        loop = asyncio.get_running_loop()
        due = loop.time() + self._settings.interval_seconds
        try:
            while not stop.is_set():
                if self._waiting.is_set():
                    self._waiting.clear()
                    await self.scale_from_zero_once()
                if loop.time() >= due:
                    await self.tick_once()
                    due = max(due + self._settings.interval_seconds, loop.time())
                await first_of(stop, self._waiting, seconds=max(due - loop.time(), 0.0))
        finally:
            self._metrics.autoscaler_leading.set(0)
            self._record_gauges({})  # the next leader's are the ones that count

    async def restore(self) -> None:
        """The windows the bucket holds (a damaged entry starts empty, and says so)."""
        restored: dict[str, ScalingState] = {}
        async for uid, value in self._state.items():
            try:
                restored[uid] = ScalingState.from_document(json.loads(value))
            except (ValueError, TypeError, AttributeError) as error:
                log.warning("saved window unreadable; starting it empty", uid=uid, error=str(error))
        self._states = restored

    async def tick_once(self) -> tuple[Decision, ...]:
        """One tick: sample, decide, publish, save.

        A report saying requests wait for a Model at zero may come in while the backlog is
        read; the tick then scales that Model from zero first, from the same reports, so the
        decision is published as the request's (the tick's own one to the same replicas is
        then the same decision, and is not sent again)."""
        backlog = await self._stored_requests()
        models = autoscaled_models(self._catalog)
        reports = tuple(self._reports.values())
        now = self._clock()
        from_zero = scale_from_zero(models, reports, self._states, now=now)
        tick = autoscale(
            models,
            self._states,
            reports,
            now=now,
            interval_seconds=self._settings.interval_seconds,
            window_seconds=self._settings.window_seconds,
            backlog=backlog,
        )
        self._metrics.autoscaler_ticks.labels(
            outcome="sampled" if tick.sampled else "skipped"
        ).inc()
        if not tick.sampled:
            return ()
        self._record_gauges(tick.states)
        self._forget_superseded()
        published, failed = await self._publish(from_zero + tick.decisions)
        unpublished = {d.model.uid for d in failed if d in tick.decisions}
        await self._save(states_after_publishing(tick, self._states, unpublished))
        return published

    async def _stored_requests(self) -> Mapping[str, int] | None:
        """The messenger's backlog per namespace; None (requests in hand only) when the
        messenger is off or the stream cannot be read this tick."""
        if self._backlog is None:
            return None
        try:
            return await self._backlog.stored_requests()
        except Exception as error:  # counted without the backlog; read again next tick
            log.warning("messenger backlog not read", error=repr(error))
            return None

    async def scale_from_zero_once(self) -> tuple[Decision, ...]:
        decisions = scale_from_zero(
            autoscaled_models(self._catalog),
            self._reports.values(),
            self._states,
            now=self._clock(),
        )
        sent, _ = await self._publish(decisions)
        return sent

    async def _publish(
        self, decisions: tuple[Decision, ...]
    ) -> tuple[tuple[Decision, ...], tuple[Decision, ...]]:
        """Publish ``decisions`` (each once, see the module docstring): those sent, and those
        whose publish failed."""
        sent: list[Decision] = []
        failed: list[Decision] = []
        for decision in decisions:
            # A restatement (the replicas as they are: the load started or stopped asking
            # for more than maxReplicas, decision 0172) is decided once per change by the
            # saved state, and may recur at one generation: never deduplicated.
            restated = decision.from_replicas == decision.replicas
            published_at = self._published.get(decision.key)
            retold = published_at is not None and self._clock() - published_at >= timedelta(
                seconds=RETELL_HELD_BACK_SECONDS
            )
            if not restated and published_at is not None and not retold:
                continue
            event = decision_event(decision, window_seconds=self._settings.window_seconds)
            model = decision.model
            uid, generation, before, after = decision.key
            envelope = Envelope.new(
                data=event,
                source=SOURCE,
                time=self._clock(),
                subject=object_subject(namespace=model.namespace, name=model.name),
                correlationid=uid,
                id=derived_event_id(
                    "scale",
                    uid,
                    str(generation),
                    str(before),
                    str(after),
                    *((self._clock().isoformat(),) if restated or retold else ()),
                ),
            )
            try:
                await self._publisher.publish(
                    envelope, scale_subject(namespace=model.namespace, uid=uid)
                )
            except Exception as error:  # decided again at the next tick
                log.warning("scale decision not published", uid=uid, error=str(error))
                failed.append(decision)
                continue
            self._published[decision.key] = self._clock()
            direction = "up" if after > before else "down" if after < before else "same"
            self._metrics.autoscaler_decisions.labels(
                namespace=model.namespace,
                model=model.name,
                cause=decision.cause,
                direction=direction,
            ).inc()
            log.info(
                "scale decided",
                uid=uid,
                model=f"{model.namespace}/{model.name}",
                from_replicas=before,
                replicas=after,
                reason=decision.reason,
            )
            sent.append(decision)
        return tuple(sent), tuple(failed)

    def _forget_superseded(self) -> None:
        """Forget decisions of Model generations that are gone (the set stays small)."""
        current = {(m.uid, m.generation) for m in self._catalog.models()}
        self._published = {
            key: at for key, at in self._published.items() if (key[0], key[1]) in current
        }

    async def _save(self, states: Mapping[str, ScalingState]) -> None:
        for uid, state in states.items():
            if self._states.get(uid) != state:
                await self._state.put(uid, json.dumps(state.to_document()).encode())
        for uid in set(self._states) - set(states):
            await self._state.delete(uid)
        self._states = dict(states)

    def _record_gauges(self, states: Mapping[str, ScalingState]) -> None:
        """The last sample and the average of each autoscaled Model; a Model no longer
        autoscaled (deleted, or its autoscaling disabled) loses its series rather than keep
        its last values."""
        gauged: set[tuple[str, str]] = set()
        for model in self._catalog.models():
            state = states.get(model.uid)
            if state is None or not state.samples:
                continue
            labels = {"namespace": model.namespace, "model": model.name}
            self._metrics.autoscaler_active_requests.labels(**labels).set(state.samples[-1])
            self._metrics.autoscaler_average.labels(**labels).set(state.average)
            gauged.add((model.namespace, model.name))
        for namespace, name in self._gauged - gauged:
            self._metrics.autoscaler_active_requests.remove(namespace, name)
            self._metrics.autoscaler_average.remove(namespace, name)
        self._gauged = gauged
