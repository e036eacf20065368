"""Planning rounds: owners planned one by one, each plan published when it is news.

A round (:meth:`OwnerRounds.plan_round`) plans the owners it is given in order, then any
others their plans ask for (``also_replan``), each at most once. For one owner:

1. skip it when another replica's partition holds it, forget it when it is gone;
2. plan it with the pure planner, as it is with the status its last plan set assumed until
   that status comes back (:mod:`~kaiwo_planner.domain.status.planned_status`), and with
   the preemptions for idleness or duration published and not observed yet
   (``PlanDecidedV1.preempting``);
3. arm its timer, and publish its plan when
   :func:`~kaiwo_planner.domain.publication.publication` says the plan is news.

The round reads the loop's projection, owner records and planning context through
:class:`PlanningState` at every owner: adopting a snapshot replaces them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Final, Protocol

import structlog
from kaiwo_contracts.plans import ObjectRef, Plan
from kaiwo_runtime.logging import bound_context

from kaiwo_planner.domain.planning import PlanningResult
from kaiwo_planner.domain.publication import publication
from kaiwo_planner.domain.scheduling.idle_preemption_inputs import preemption_unobserved
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.state.projection import Projection
from kaiwo_planner.domain.status.planned_status import owner_with_status, status_to_assume
from kaiwo_planner.domain.status.public_events import PublicEvent
from kaiwo_planner.domain.undone_effects import undone_effects
from kaiwo_planner.inputs import resolve
from kaiwo_planner.metrics import PlannerMetrics
from kaiwo_planner.owner_key import OwnerKey
from kaiwo_planner.owner_records import OwnerRecords
from kaiwo_planner.publisher import PlanPublisher, Release, Sequences, Trigger

log = structlog.get_logger("kaiwo.planner")

CHILD_GONE_GRACE: Final = timedelta(seconds=5)
"""How long a plan waits that would make something missing, when a child's deletion caused
its round.

Deleting a workload deletes it at once and its children after it (garbage collection), but
the two kinds are watched apart: the child's deletion can reach the planner first. Published
at once, such a plan would re-create the child, which the executor must refuse (the owner is
gone) and dead-letter; after the grace the owner's own deletion has come in and nothing is
planned. A child deleted by hand is re-created once the grace has passed. A plan that makes
nothing missing (a queue the KaiwoQueueConfig pruned went, a pod of a running Job) goes out
at once (decision 0181)."""


class PlanFunction(Protocol):
    """The pure planner (:func:`kaiwo_planner.domain.planning.plan_object`)."""

    def __call__(
        self, *, owner: Mapping[str, Any], context: PlanningContext, now: datetime
    ) -> PlanningResult: ...


class PlanningState(Protocol):
    """What a round reads and keeps: the projection, the owner records and the context."""

    @property
    def projection(self) -> Projection: ...

    @property
    def records(self) -> OwnerRecords: ...

    def context(self) -> PlanningContext: ...


@dataclass(frozen=True, slots=True)
class Unfinished:
    """An observation applied whose owners were not all published (a publish failed)."""

    sequence: int
    owners: tuple[ObjectRef, ...]
    announcements: tuple[PublicEvent, ...] = ()
    """Public events of the observation not yet published."""


class OwnerRounds:
    """Plans owners in rounds and publishes their news.

    ``unfinished`` is the observation whose owners are not all published yet: a redelivery
    of it plans just those (and announces its public events again).
    """

    def __init__(
        self,
        *,
        state: PlanningState,
        plan_fn: PlanFunction,
        publisher: PlanPublisher,
        metrics: PlannerMetrics,
        holds: Callable[[str], bool],
    ) -> None:
        self._state = state
        self._plan_fn = plan_fn
        self._publisher = publisher
        self._metrics = metrics
        self._holds = holds
        self.unfinished: Unfinished | None = None
        self._preempting: frozenset[str] = frozenset()
        """Owners whose preemption (for idleness or duration) was published and not observed yet
        (:func:`~kaiwo_planner.domain.scheduling.idle_preemption_inputs.
        preemption_unobserved`): every decision counts their GPUs as being freed. Frozen,
        and replaced when it changes (rarely), so no plan copies it."""

    async def plan_round(
        self, owners: tuple[ObjectRef, ...], why: Trigger, *, sequence: int | None = None
    ) -> None:
        """Plan ``owners`` in order, then any others their plans ask for, each at most once.

        With a ``sequence``, the owners still to plan are remembered until the round ends,
        so a redelivery of that observation after a failed publish plans just those.
        """
        queue = list(owners)
        seen = {ref.uid for ref in owners}
        index = 0
        while index < len(queue):
            if sequence is not None:
                self.unfinished = Unfinished(sequence=sequence, owners=tuple(queue[index:]))
            # Every line logged while one owner is planned names it, whatever observation,
            # timer or resync started the round (bound there to the observed object's uid).
            with bound_context({"owner_uid": queue[index].uid}):
                also = await self._plan_owner(queue[index], why)
            for ref in also:
                if ref.uid not in seen:
                    seen.add(ref.uid)
                    queue.append(ref)
            index += 1
        self.unfinished = None

    def _no_longer_preempting(self, uid: str) -> None:
        # Replaced only when it holds ``uid``: this runs for nearly every owner planned.
        if uid in self._preempting:
            self._preempting -= {uid}

    async def _plan_owner(self, ref: ObjectRef, why: Trigger) -> tuple[ObjectRef, ...]:
        """Plan one owner and publish the plan if it is news; returns the others to plan."""
        uid = ref.uid or ""
        projection, records = self._state.projection, self._state.records
        if not self._holds(uid):  # another replica's partition: it plans this owner
            return ()
        owner = projection.by_uid(uid) if uid else None
        if owner is None:  # deleted, or never seen: its children go with it (owner refs)
            records.gone(uid)
            self._no_longer_preempting(uid)
            return ()
        key = OwnerKey.of_uid(uid)
        record = records.get(key)
        assumed = status_to_assume(owner, record.status if record is not None else None)
        if assumed is None:
            self._no_longer_preempting(uid)  # its status, as planned, has been observed
            if record is not None and record.status is not None:
                # The write came back: hold the projection's equal copy, not a second one.
                record = replace(record, status=owner.get("status"))
                records.put(key, record)
        preempting = self._preempting
        outcome = self._plan(ref, owner_with_status(owner, assumed), preempting, now=why.now)
        if outcome is None:
            return ()
        records.set_timer(uid, outcome.replan_at, now=why.now)
        also = tuple(
            found
            for found in (resolve(projection, r) for r in outcome.also_replan)
            if found is not None
        )
        plan = outcome.plan
        if plan is None:
            self._metrics.plans.labels(ref.kind, "no_plan").inc()
            return also
        absent = projection.missing((*plan.desired, *plan.shared))
        if absent and why.child_gone:
            # A child went, and the plan would make something missing: its owner may be
            # going too, its deletion still on its way, so the plan waits (a deleted owner
            # gets none).
            records.no_later_than(uid, why.now + CHILD_GONE_GRACE)
            self._metrics.plans.labels(ref.kind, "deferred").inc()
            return also
        decided = publication(
            plan=plan,
            owner=owner,
            last=record,
            absent=absent,
            drifted=projection.drifted(plan.desired, ours_too=why.reapply_gaps),
            reapply_gaps=why.reapply_gaps,
            undone=self._undone(plan, owner) if why.reapply_gaps else (),
        )
        if decided.publish:
            release = Release(
                ref=ref,
                plan=plan,
                absent=decided.absent,
                drifted=decided.drifted,
                assumed=assumed,
                preempting=preempting,
                fingerprint=decided.plan_fingerprint,
            )
            await self._publisher.publish_plan(release, why, Sequences.of(projection))
            if preemption_unobserved(plan, owner):
                self._preempting |= {uid}
        records.put(key, decided.record)
        self._metrics.plans.labels(ref.kind, "published" if decided.publish else "unchanged").inc()
        return also

    def _undone(self, plan: Plan, owner: Mapping[str, Any]) -> tuple[str, ...]:
        """The plan's effects the observed cluster does not show but its children and status
        (decisions 0250 and 0263): looked for at a resync only, which is when a plan the
        executor gave up on is published again."""
        projection = self._state.projection
        cluster = projection.cluster_state()
        undone = undone_effects(
            plan,
            owner,
            children=cluster.children_of(plan.owner.uid or "") if plan.owner.uid else (),
            by_uid=projection.by_uid,
        )
        if undone:
            log.info("plan published again for effects not shown", effects=list(undone))
        return undone

    def _plan(
        self,
        ref: ObjectRef,
        owner: Mapping[str, Any],
        preempting: frozenset[str],
        *,
        now: datetime,
    ) -> PlanningResult | None:
        """The pure planner's result; None when it raised (logged and counted: the other
        owners are still planned)."""
        started = time.perf_counter()
        context = self._state.context().with_preempting(preempting)
        try:
            return self._plan_fn(owner=owner, context=context, now=now)
        except Exception:
            log.exception("planning failed", owner=ref.display())
            self._metrics.plans.labels(ref.kind, "error").inc()
            return None
        finally:
            self._metrics.plan_duration.observe(time.perf_counter() - started)
