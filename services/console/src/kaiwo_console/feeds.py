"""What keeps the console's state current: the watcher's observations from the bus (live)
and the recorder's event store (history).

* :func:`observation_reader`: every stored observation of ``KAIWO_OBS`` read in order with a
  :class:`~kaiwo_runtime.stored_reads.StoredReader` (as the gateway reads Models and Pods)
  into the :class:`~kaiwo_console.domain.cluster.ClusterState`. Malformed ones are counted
  and skipped (the planner dead-letters them, the recorder keeps them).
* :class:`HistoryFeed`: the event store's recorded observations of Kueue Workloads, read
  from the last position every ``interval`` seconds and folded into the
  :class:`~kaiwo_console.domain.history.QueueRecords`; and the gateway's load reports and
  autoscaler decisions, into the :class:`~kaiwo_console.domain.model_load.ModelLoads`.
* :func:`timeline`: one workload's recorded events as ``kaiwo events explain`` links them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import structlog
from kaiwo_contracts.events.autoscaling import ActiveRequestsV1, ScaleDecidedV1
from kaiwo_contracts.events.decoding import decode_envelope
from kaiwo_contracts.events.envelope import EnvelopeFormatError
from kaiwo_contracts.events.monitor import UtilizationV1
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.streams import OBSERVED_STREAM
from kaiwo_contracts.events.subjects import ANY_TAIL, ROOT, Family, SubjectError
from kaiwo_eventstore import EventStore, StoredEvent
from kaiwo_eventstore.explain import (
    CausalNode,
    causal_forest,
    describe,
    workload_events,
)
from kaiwo_runtime.stored_reads import ObservationSource, StoredObservation, StoredReader
from pydantic import ValidationError

from kaiwo_console.domain.cluster import KUEUE_WORKLOAD, POD, ClusterState
from kaiwo_console.domain.history import QueueRecords
from kaiwo_console.domain.model_load import ModelLoads, ScaleDecision
from kaiwo_console.domain.nodes import NodeRecords, Reading
from kaiwo_console.domain.pages.workloads import TimelineEntry, UtilizationPoint, WorkloadHistory
from kaiwo_console.metrics import ConsoleMetrics

log = structlog.get_logger("kaiwo.console")

EVERY_OBSERVATION = f"{ROOT}.{Family.OBSERVED.value}.{ANY_TAIL}"
FOLDED_TYPES = (
    ObservedObjectV1.EVENT_TYPE,
    ActiveRequestsV1.EVENT_TYPE,
    ScaleDecidedV1.EVENT_TYPE,
    UtilizationV1.EVENT_TYPE,
)
"""What the history feed reads from the store: Kueue Workloads' observations (the queues'
record), the gateway's load reports and autoscaler decisions (the Models page), and Pods'
observations with the monitor's readings (the GPU nodes page)."""


def observation_reader(
    source: ObservationSource,
    state: ClusterState,
    metrics: ConsoleMetrics,
    *,
    on_change: Callable[[], None],
    resync_seconds: float,
) -> StoredReader:
    def apply(stored: StoredObservation) -> bool:
        try:
            envelope = decode_envelope(
                stored.headers, stored.body, ObservedObjectV1, subject=stored.subject
            )
        except (EnvelopeFormatError, ValidationError, SubjectError) as error:
            metrics.observations.labels(outcome="malformed").inc()
            log.warning("malformed observation skipped", subject=stored.subject, error=str(error))
            return False
        payload: ObservedObjectV1 = envelope.data
        changed = state.apply(kind=payload.kind, event=payload.event_type, obj=payload.object)
        metrics.observations.labels(outcome="applied" if changed else "unchanged").inc()
        return changed

    return StoredReader(
        source=source,
        stream=OBSERVED_STREAM,
        filters=(EVERY_OBSERVATION,),
        apply=apply,
        on_change=on_change,
        resync_seconds=resync_seconds,
    )


@dataclass
class HistoryFeed:
    store: EventStore
    records: QueueRecords
    metrics: ConsoleMetrics
    on_change: Callable[[], None]
    interval: float = 5.0
    page: int = 1000
    position: int = 0
    loads: ModelLoads = field(default_factory=ModelLoads)
    nodes: NodeRecords = field(default_factory=NodeRecords)

    async def catch_up(self) -> None:
        changed = False
        while True:
            events = await self.store.read_by_type(
                list(FOLDED_TYPES), from_position=self.position + 1, limit=self.page
            )
            for event in events:
                self.position = event.global_position
                changed = self._fold(event) or changed
            if len(events) < self.page:
                break
        if changed:
            self.on_change()

    def _fold(self, event: StoredEvent) -> bool:
        """Fold one recorded event; whether it changed anything (malformed ones do not)."""
        try:
            if event.type == ActiveRequestsV1.EVENT_TYPE:
                return self._load(ActiveRequestsV1.model_validate(event.data), event)
            if event.type == ScaleDecidedV1.EVENT_TYPE:
                return self._decision(ScaleDecidedV1.model_validate(event.data), event)
            if event.type == UtilizationV1.EVENT_TYPE:
                return self._reading(UtilizationV1.model_validate(event.data))
            if event.data.get("kind") not in (KUEUE_WORKLOAD, POD):
                return False
            observed = ObservedObjectV1.model_validate(event.data)
        except ValidationError:
            return False
        return self._observed(observed, event)

    def _observed(self, observed: ObservedObjectV1, event: StoredEvent) -> bool:
        if observed.kind == POD:
            self.nodes.pod(event=observed.event_type, obj=observed.object, recorded=event.time)
            return False  # the live state shows the Pods; the readings move the samples
        self.records.apply(event=observed.event_type, obj=observed.object, recorded=event.time)
        self.metrics.recorded.inc()
        return True

    def _load(self, report: ActiveRequestsV1, event: StoredEvent) -> bool:
        self.loads.report(
            gateway=report.gateway,
            time=event.time,
            interval_seconds=report.interval_seconds,
            models={
                (load.model.namespace or "", load.model.name): (
                    load.active_requests,
                    load.waiting_requests,
                )
                for load in report.models
            },
        )
        return True

    def _decision(self, decision: ScaleDecidedV1, event: StoredEvent) -> bool:
        self.loads.decided(
            (decision.model.namespace or "", decision.model.name),
            ScaleDecision(
                time=event.time,
                from_replicas=decision.from_replicas,
                replicas=decision.replicas,
                cause=decision.cause,
                average_active_requests=decision.average_active_requests,
                reason=decision.reason,
            ),
        )
        return True

    def _reading(self, reading: UtilizationV1) -> bool:
        if not reading.workload.uid:
            return False
        below = [s for s in (reading.underutilized_since, reading.idle_since) if s is not None]
        self.nodes.reading(
            reading.workload.uid,
            Reading(
                at=reading.window_end,
                ratio=reading.utilization_ratio,
                below_since=min(below) if below else None,
                namespace=reading.workload.namespace or "",
            ),
        )
        return True

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.interval)
            if stop.is_set():
                return
            try:
                await self.catch_up()
            except Exception as error:  # the next round tries again
                log.warning("reading the event store failed", error=str(error))


async def timeline(store: EventStore, uid: str) -> WorkloadHistory:
    """The recorded events of the workload ``uid`` (its stream and what correlates with it)
    as a causal tree, flattened depth-first: what ``kaiwo events explain`` prints; and the
    monitor's utilization readings among them. The uid comes from the live state, so no
    search of every recorded observation is needed."""
    if not uid:
        return WorkloadHistory()
    events = await workload_events(store, uid)
    entries: list[TimelineEntry] = []
    for root in causal_forest(events):
        _flatten(root, 0, uid, entries)
    return WorkloadHistory(tuple(entries), utilization_points(events))


def utilization_points(events: Sequence[StoredEvent]) -> tuple[UtilizationPoint, ...]:
    """The monitor's ``UtilizationV1`` readings, oldest first (a malformed one is skipped)."""
    points = []
    for event in events:
        if event.type != UtilizationV1.EVENT_TYPE:
            continue
        try:
            reading = UtilizationV1.model_validate(event.data)
        except ValidationError:
            continue
        points.append(
            UtilizationPoint(
                time=reading.window_end,
                ratio=reading.utilization_ratio,
                threshold=reading.low_utilization_threshold_ratio,
            )
        )
    return tuple(sorted(points, key=lambda p: p.time))


def _flatten(node: CausalNode, depth: int, uid: str, into: list[TimelineEntry]) -> None:
    event = node.event
    phase = ""
    if event.type == ObservedObjectV1.EVENT_TYPE and event.data.get("uid") == uid:
        status = (event.data.get("object") or {}).get("status") or {}
        phase = str(status.get("status") or "NEW")
    into.append(
        TimelineEntry(
            depth=depth,
            time=event.time,
            kind=event.type.removeprefix("ai.silogen.kaiwo.").split(".")[0],
            text=describe(event),
            phase=phase,
        )
    )
    for child in node.effects:
        _flatten(child, depth + 1, uid, into)
