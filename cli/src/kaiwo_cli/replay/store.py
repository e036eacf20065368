"""Replay straight from the event store, streamed: plans read in batches and put in publishing
order, observations, findings and scale decisions read up to each plan's sequences."""

from __future__ import annotations

import gc
import heapq
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Sequence,
)
from typing import Final, Generic, TypeVar

from kaiwo_eventstore import EventStore, StoredEvent, cyclic_gc_paused
from kaiwo_planner.domain.planning import plan_object

from kaiwo_cli.replay.comparison import (
    PlanFunction,
    PlanReplay,
    ReplayReport,
    VerdictSink,
    skipped_verdict,
)
from kaiwo_cli.replay.handed_out import HandedOut
from kaiwo_cli.replay.recorded import (
    FINDING_TYPE,
    GATEWAY_STREAM,
    MONITOR_STREAM,
    OBSERVED_STREAM,
    OBSERVED_TYPE,
    PLAN_TYPE,
    SCALE_TYPE,
    PlanOrder,
    Span,
    StreamsRecreatedError,
    decided_plan,
    finding_of,
    observation_of,
    owner_uid_of,
    plan_order,
    scale_request_of,
)
from kaiwo_cli.replay.replanning import (
    Progress,
    Replayer,
)

READ_BATCH: Final = 2000
"""Events of one type read per round trip."""


FAST_FORWARD_CHUNK: Final = 4096
"""Observations taken in at once, at most: each object's once in a chunk
(:meth:`~kaiwo_planner.domain.state.projection.Projection.fast_forward`). Validated
observations held in memory, so a bound; in ``bench/replay.py``'s store a chunk of 4,096
held 0.37 objects per observation, half the store's 7,509 observations 0.32."""


PLAN_WINDOW: Final = 4096
"""Plans read ahead and put in publishing order before each is judged (see below)."""


async def replay_from_store(
    store: EventStore,
    *,
    workload_uid: str | None = None,
    plan_fn: PlanFunction = plan_object,
    progress: Progress | None = None,
    on_verdict: VerdictSink | None = None,
    keep: Callable[[PlanReplay], bool] | None = None,
    plan_window: int = PLAN_WINDOW,
    batch_size: int = READ_BATCH,
    fresh_contexts: bool = False,
    span: Span | None = None,
) -> ReplayReport:
    """Replay the recorded plans of one workload (every plan when ``workload_uid`` is None),
    or those of one ``span`` of the store (:func:`~kaiwo_cli.replay.processes.replay_in_processes`
    runs one process per span).

    Streamed, in memory that does not grow with the store: the plans, observations, findings
    and scale decisions are each read as a stream of their own type
    (:meth:`~kaiwo_eventstore.EventStore.iter_by_type`, in recording order, in batches), and
    each input is read only as far as the plan being judged needs. No event of another type
    is read or decoded. The observations up to each plan are taken in as a batch, each
    object's once (:meth:`~kaiwo_planner.domain.state.projection.Projection.fast_forward`,
    in chunks of :data:`FAST_FORWARD_CHUNK`): a replay that starts far into the store (a
    span, a workload) files what came before its first plan in a third of the time.
    ``on_verdict`` sees every verdict as it is made; the report keeps those ``keep``
    accepts (all by default) and counts every one.

    Order. The recorder stores each NATS stream through one consumer, in stream order, batch
    by batch. So recording order is stream order, give or take a redelivered batch: each
    input is put in stream-sequence order over what has been read (at least one batch past
    the plan's sequence), and plans in publishing order (:func:`plan_order`: by
    ``obsSequence`` first) over a window of ``plan_window``. Every planner replica reads the
    whole of ``KAIWO_OBS`` in order, so observations are only ever applied forward; an
    observation recorded after the replay has passed its sequence cannot be applied any
    more: it is counted in ``late_observations``; a plan that comes after the replay applied
    observations past its ``obsSequence`` is *skipped*, saying so. Neither happens to a
    store one recorder wrote. Findings and scale decisions are also read forward only, as
    far as the furthest plan needs, but each replica reads them on its own (decision 0030):
    a plan judged after another may have read fewer. So each plan is judged with the
    findings and scale decisions as of its own ``monSequence`` and ``scaleSequence``
    (:class:`~kaiwo_cli.replay.replanning.Replayer`, decision 0220).

    Planning contexts. By default replay carries one planning context from plan to plan,
    as the planner service carries it along its projection (values whose inputs did not
    change are kept), and judges a plan that differs again with a fresh context, whose
    verdict is the one reported: a difference is always one from scratch. Working
    everything out afresh for every plan (``fresh_contexts``, ``--fresh-contexts``) is
    several times slower, and also finds a value the planner service kept when it should
    have worked it out again (it shows as a difference).
    """
    replayer = Replayer(plan_fn, keep=keep, on_verdict=on_verdict, fresh_contexts=fresh_contexts)
    span = span or Span(1)  # the whole store

    def batches(
        event_type: str, from_position: int = 1, correlated: Callable[[str], bool] | None = None
    ) -> AsyncGenerator[Sequence[StoredEvent], None]:
        return store.iter_by_type(
            event_type, from_position, batch_size=batch_size, correlated=correlated
        )

    # Another workload's plans are left in the store, not decoded; another span's, not read.
    plans = batches(PLAN_TYPE, span.start, _plans_of(workload_uid))

    observations = _InStreamOrder(
        batches(OBSERVED_TYPE), read=observation_of, stream=OBSERVED_STREAM
    )
    findings = _InStreamOrder(batches(FINDING_TYPE), read=finding_of, stream=MONITOR_STREAM)
    requests = _InStreamOrder(batches(SCALE_TYPE), read=scale_request_of, stream=GATEWAY_STREAM)
    done = 0
    with cyclic_gc_paused():  # see kaiwo_eventstore.bulk, and _COLLECT_EVERY
        try:
            async for event in _plans_in_order(
                plans,
                window=plan_window,
                owner_uid=workload_uid,
                end=span.end,
            ):
                decided = decided_plan(event)
                if (
                    decided is not None
                    and decided.obs_sequence < replayer.obs_through
                    and not decided.fingerprint_holds()
                ):
                    decided = None  # judged as not parsing, as a plan that failed validation
                if decided is not None and decided.obs_sequence < replayer.obs_through:
                    replayer.record(
                        skipped_verdict(
                            event,
                            f"recorded out of order: the replay had applied observations up "
                            f"to {replayer.obs_through}, past this plan's {decided.obs_sequence}",
                            decided,
                        )
                    )
                else:
                    if decided is not None:
                        async for chunk in observations.chunks_through(
                            decided.obs_sequence, chunk=FAST_FORWARD_CHUNK
                        ):
                            replayer.apply_observations(chunk)
                        replayer.apply_findings(await findings.take_through(decided.mon_sequence))
                        replayer.apply_scale_requests(
                            await requests.take_through(decided.scale_sequence)
                        )
                    replayer.judge(event, decided)
                done += 1
                if done % _COLLECT_EVERY == 0:
                    gc.collect()
                if progress is not None:
                    progress(done, None)
            if span.end is None:
                # A stream made again shows only as a sequence recorded twice, which may lie
                # past the last plan's: the last span (or the whole store) reads to the end,
                # so no replay reports verdicts over a store of two lifetimes (0231).
                for source in (observations, findings, requests):
                    await source.check_rest()
        finally:
            for source in (observations, findings, requests):
                await source.close()
    return replayer.report(late_observations=observations.late)


def _plans_of(workload_uid: str | None) -> Callable[[str], bool] | None:
    """Which plans to decode, by their correlation id: one workload's, or all.

    A plan's correlation id is its owner's uid, or, for a plan whose owner has none yet (a
    GpuWorkload to create), the uid of the object it was planned for, which is what
    :func:`owner_uid_of` falls back to: the planner publishes them so (its tests hold it).
    So the plans this skips are never the workload's; :func:`_plans_in_order` still matches
    each plan it reads by its owner."""
    if workload_uid is None:
        return None
    return lambda correlation_id: correlation_id == workload_uid


_COLLECT_EVERY: Final = 50_000
"""Plans between two collections of cycles. Replay makes none that measurement found (over
23,101 plans, collections every 5,000 freed nothing, and each walked the projection for a
third of a second), so this only bounds what a future cycle could hold."""


_Item = TypeVar("_Item")


class _InStreamOrder(Generic[_Item]):
    """One input of replay, read from the store batch by batch, handed out in stream-sequence
    order up to a bound. Holds only what was read past the last bound (a batch or so).

    Raises :class:`StreamsRecreatedError` on a second event at a sequence: one already
    waiting, or one handed out (an event at a sequence passed over with none is only late).
    The store keeps one row per event id, so a second row at a sequence is another message
    of another lifetime of the stream."""

    def __init__(
        self,
        batches: AsyncGenerator[Sequence[StoredEvent], None],
        *,
        read: Callable[[StoredEvent], tuple[int, Callable[[], _Item | None]] | None],
        stream: str,
    ) -> None:
        self._batches = batches
        self._read = read
        self._stream = stream
        self._handed_out = HandedOut()
        """An event found later at a sequence passed over with none (the stream's other
        types, its gaps) is late, not a second one."""
        self._heap: list[int] = []
        self._pending: dict[int, Callable[[], _Item | None]] = {}
        self._read_through = 0
        self._taken_through = 0
        self._exhausted = False
        self.late = 0

    async def take_through(self, bound: int) -> list[tuple[int, _Item]]:
        """Every item with a sequence up to ``bound`` not handed out yet, in sequence order."""
        while not self._exhausted and self._read_through <= bound:
            await self._read_batch()
        return self._take(bound)

    async def chunks_through(
        self, bound: int, *, chunk: int
    ) -> AsyncIterator[list[tuple[int, _Item]]]:
        """:meth:`take_through` ``bound``, in lists of about ``chunk`` items handed out while
        reading on: no more than a chunk and a batch are held, however far ``bound`` is (a
        replay process's first plan may come after most of the store's observations). An
        item is handed out once a batch has been read past it, as :meth:`take_through` does."""
        while not self._exhausted and self._read_through <= bound:
            passed = min(bound, self._read_through)
            await self._read_batch()
            if len(self._heap) >= chunk:
                yield self._take(passed)
        yield self._take(bound)

    async def check_rest(self) -> None:
        """Read what is left only to find a sequence recorded twice (nothing is decoded)."""
        while not self._exhausted:
            await self._read_batch()
            self._take(self._read_through, decode=False)

    async def _read_batch(self) -> None:
        batch = await anext(self._batches, None)
        if batch is None:
            self._exhausted = True
            return
        for event in batch:
            self._add(event)

    def _take(self, bound: int, *, decode: bool = True) -> list[tuple[int, _Item]]:
        taken: list[tuple[int, _Item]] = []
        while self._heap and self._heap[0] <= bound:
            sequence = heapq.heappop(self._heap)
            self._handed_out.hand_out(sequence)
            payload = self._pending.pop(sequence)
            item = payload() if decode else None
            if item is not None:
                taken.append((sequence, item))
        self._taken_through = max(self._taken_through, bound)
        return taken

    def _add(self, event: StoredEvent) -> None:
        found = self._read(event)
        if found is None:
            return
        sequence, item = found
        self._read_through = max(self._read_through, sequence)
        if sequence <= self._taken_through:
            if self._handed_out.was_handed_out(sequence):
                raise StreamsRecreatedError(self._stream, sequence)
            self.late += 1
        elif sequence not in self._pending:
            self._pending[sequence] = item
            heapq.heappush(self._heap, sequence)
        else:
            raise StreamsRecreatedError(self._stream, sequence)

    async def close(self) -> None:
        await self._batches.aclose()


async def _plans_in_order(
    batches: AsyncGenerator[Sequence[StoredEvent], None],
    *,
    window: int,
    owner_uid: str | None,
    end: int | None = None,
) -> AsyncIterator[StoredEvent]:
    """The recorded plans (of ``owner_uid``, or all; before position ``end``, when given) in
    publishing order over a window."""
    heap: list[tuple[PlanOrder, StoredEvent]] = []
    try:
        async for batch in batches:
            for event in batch:
                if end is not None and event.global_position >= end:
                    break
                if owner_uid is not None and owner_uid_of(event) != owner_uid:
                    continue
                heapq.heappush(heap, (plan_order(event), event))
                if len(heap) > window:
                    yield heapq.heappop(heap)[1]
            else:
                continue
            break  # past the end: the rest of the store is another span's
    finally:
        await batches.aclose()
    while heap:
        yield heapq.heappop(heap)[1]
