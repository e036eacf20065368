"""Carrying out one plan against the API server: the executor's core (ports injected).

The executor never decides what should exist; it makes the cluster match the plan, in this
order, and reports one :class:`~kaiwo_contracts.events.results.ActionOutcome` per action:

1. **Skip** the whole plan when its id is among the plans already carried out for the owner
   (the memo in the ``kaiwo-executor`` bucket survives restarts): a redelivery costs nothing.
   Then the plan's **explicit deletions** (``Plan.delete``: the Pods a Model's rollout
   replaces), first, as upstream KubeAI deletes before it creates (a freed GPU serves the
   new Pod): each is read, deleted only when it still carries the owner's inventory labels,
   and with its uid as a precondition. A desired object the plan also deletes replaces it
   (a Kueue object whose change its CRD refuses in place, decision 0048): it is *created*
   after the delete, never applied over the old one; while the old one is still there (a
   finalizer holds it) nothing is remembered, and a later plan creates it. The finalizers a
   plan releases (``Plan.release_finalizers``: Kueue's on such an object) are taken off
   right after the deletions, with the object's resourceVersion as a precondition.
2. **Never adopt** (:mod:`kaiwo_executor.child_ownership`): each desired object about to be
   written that this executor has not applied before (or that the plan names ``absent`` or
   ``drifted``) and that names a controller is read first. One that exists and is not
   controlled by the plan's owner is left as it is; so are the plan's objects that could use
   it by name (those of its namespace; every object, for a cluster-scoped one). The action is
   ``failed`` (reason ``NameConflict``), a Warning Event ``NameConflict`` names the object,
   and the status written in step 4 carries the condition ``NameConflict``, which goes once
   no object of the plan conflicts. Nothing of it is remembered as applied: the next plan
   (the planner's resync sends one while the child is missing) looks again. When only one
   object of the plan is to be checked, and the plan does not name it drifted or replace
   it, the check is an apply that only creates (decision 0105): written at once if the name
   is free, read as above if it is taken.
   **Desired objects**, in the plan's order. An object whose manifest hash equals the one last
   applied is left alone, unless the plan lists it in ``absent`` (the planner saw it missing,
   e.g. deleted by hand): then it is *created*, and one that exists after all (the plan was
   made before its creation was observed) is left as it is, so a late plan never overwrites
   what others changed since (Kueue unsuspending a Job), but for the labels of the manifest
   it lacks, which a merge patch puts back on the owner's object (someone removed
   ``app.kubernetes.io/managed-by``, and the watcher no longer saw it, decision 0139); or in
   ``drifted`` (the planner saw
   it without what the plan asks, e.g. a field edited by hand): then it is applied again.
   A ``create_only`` plan's objects are only ever created (the default KaiwoConfig and
   KaiwoQueueConfig, which are the user's once they exist), by a server-side apply that owns
   none of the fields the CRD's defaults fill in. Everything else is applied with
   server-side apply, field manager
   ``kaiwo``, forced: the executor is the one owner of the fields it sets. A manifest that
   sets ``spec.suspend: true`` (a child created suspended for Kueue) is applied under
   ``kaiwo-create`` instead, so the later applies, which leave ``suspend`` to Kueue, never
   remove it (``kaiwo_contracts.plans.CREATE_SUSPENDED_FIELD_MANAGER``), and not forced:
   once Kueue owns ``suspend``, the conflict makes it applied without ``suspend`` under
   ``kaiwo`` (decision 0085). Nodes are the
   exception: see :mod:`kaiwo_executor.node_merge` (merge patch, taints merged with the
   node's own). **Shared objects** (``Plan.shared``: a Model cache's volume) are created
   when missing and otherwise left alone; one that exists without the operator's label
   (someone else's, which the watcher never sees) is a name conflict like the above, found
   before anything is written, until the owner's plans created or used it (decision 0208).
3. **Status** through the status subresource (server-side apply, field manager
   ``kaiwo-status``), only when it differs from the status last written for the owner, and
   with the owner's planned ``resourceVersion`` as a precondition: a plan made from an older
   version of the owner does not overwrite the status of a newer one (a Conflict skips the
   write; the planner plans the newer version as well, its resourceVersion being in the plan).
4. **Scale** (``Plan.scale``: a Model the autoscaler scales) through the owner's scale
   subresource: the owner is read, left alone when its replicas already are the wanted ones
   or are no longer those the decision started from (someone scaled it meanwhile; the next
   decision starts from theirs), or when its generation is no longer the plan's (its spec
   changed since the decision: ``autoscalingDisabled`` set, bounds edited; decision 0172),
   else JSON-patched, testing the replicas and the resourceVersion it read in the same
   request (a Model without ``spec.replicas`` has no replicas to test: the field is added),
   so an edit between the read and the patch refuses it; one that moved only the
   resourceVersion (a status write) is tried again from a fresh read. After the status,
   whose write is conditional on the owner's planned resourceVersion, which the scale moves
   on.
5. **Events**, once per plan and reason. The Event's name is derived from the owner's uid,
   the plan fingerprint and the reason, and it is created with a plain create: after a crash
   the retry finds it (AlreadyExists) and stops. (``ExecutorCluster.create_event`` names
   Events by time and counts repeats, which is right for a recorder but would double an
   Event on redelivery.) A plan is identified by its fingerprint here, not its event id, so
   the same decision re-published under a new id (``absent`` changed, a planner restart)
   does not repeat its Events either.
6. **Prune**: for each prune rule, list that kind carrying the plan's ``prune_selector``
   labels (in the owner's namespace when the kind is namespaced and the owner is) and delete
   each one not desired, with its uid as a precondition and background propagation. Never
   without a selector (an empty one would match every object of the kind). Skipped when the
   desired set, rules and selector equal those of the last complete prune: only a new plan
   can make a child undesired, so listing again would find nothing to do. Skipped too for
   the first plan of a *new* owner: one the memo has no record of, which the API server
   created after the memo began to record owners (:meth:`ExecutionMemo.owner_is_new`, from
   the ``creationTimestamp`` plan admission read). Any other owner without a record (the
   bucket was lost or started afresh, and the children it made before are unknown) lists
   and prunes at its first plan, once (decision 0215).
7. **Finalizers and labels** of the owner, when the plan names them (``Plan.finalizers``,
   ``Plan.owner_labels``): the owner is read and merge-patched once, with its
   resourceVersion as a precondition, adding the plan's and removing the other finalizers
   and labels the owner kind's confinement calls the operator's; other controllers'
   finalizers and the user's labels are kept. Last, so that a Model whose finalizer goes has
   had its status and Events written first.
8. **Preempt** (``Plan.preempt``: a GpuWorkload's plan, GPU idle preemption of a workload no
   Kaiwo kind owns): delete the workload (uid precondition, background propagation), or set
   its ``spec.replicas`` to 0 by a JSON patch of the object itself, its uid and the replicas
   read as tests (not the scale subresource: the admission policy must see the object's
   opt-in annotations). After the status, so the GpuWorkload says why before its workload
   goes, and only when that status was written: one planned from an older record is not,
   and the plan of the newer record preempts.
9. **Delete the owner** when the plan says so (uid precondition, background propagation).

Failures. 409 Conflict, 429, 5xx and lost connections are retried per call with exponential
backoff and jitter (:mod:`kaiwo_executor.api_retries`). When the attempts run out the action
is ``failed`` and :attr:`Execution.must_retry` is set: the caller lets JetStream redeliver the
plan, and the memo makes the redelivery cheap. Any other refusal (422 Invalid, 400, 403, a
kind the server does not serve) is final for this plan: the action is ``failed`` with the
API's message, a Warning Event on the owner names the object and reason, and the executor
carries on with the other objects, so one bad manifest never blocks the rest. A refused apply
also shows in the status the plan writes, as the condition ``ApplyRefused`` quoting the API
server (:mod:`kaiwo_executor.apply_refusals`). NotFound while
pruning or deleting means the object is already gone, which is what was wanted.

Where it is. This module orders the steps; :mod:`kaiwo_executor.desired_objects` (step 2),
:mod:`kaiwo_executor.deletions` (steps 1, 6, 8, 9) and :mod:`kaiwo_executor.owner_writes`
(steps 3, 4, 5, 7) carry them out through :class:`~kaiwo_executor.guarded_calls.GuardedCalls`
(retries, the outcomes recorded, the Events). Every step ends in a
:class:`~kaiwo_executor.step_outcomes.StepOutcome`, reported by the one table in
:mod:`kaiwo_executor.step_outcomes`.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.results import ActionOutcome
from kaiwo_contracts.plans import ObjectRef, Plan, PreemptIntent
from kaiwo_contracts.replica_writes import to_zero

from kaiwo_executor.api_retries import Jitter, RetryPolicy, Sleep
from kaiwo_executor.apply_refusals import with_refusals
from kaiwo_executor.child_ownership import with_name_conflicts
from kaiwo_executor.cluster_port import ExecutorCluster
from kaiwo_executor.deletions import Deletions
from kaiwo_executor.desired_objects import DesiredObjects
from kaiwo_executor.execution_memo import ExecutionMemo, OwnerMemo, manifest_key, ref_key
from kaiwo_executor.guarded_calls import GuardedCalls
from kaiwo_executor.metrics import ExecutorMetrics
from kaiwo_executor.owner_writes import OwnerWrites
from kaiwo_executor.plan_run import PlanRun
from kaiwo_executor.step_outcomes import StepOutcome


@dataclass(frozen=True, slots=True)
class Execution:
    """What carrying out one plan did."""

    plan_id: str
    owner: ObjectRef
    skipped: bool
    superseded: bool = False
    """Skipped because a later plan of the owner was started already."""
    actions: tuple[ActionOutcome, ...] = ()
    must_retry: bool = False
    """An action ran out of retries on a retryable error: have the plan delivered again."""
    memo: OwnerMemo = field(default_factory=OwnerMemo, repr=False, compare=False)

    @property
    def failed(self) -> tuple[ActionOutcome, ...]:
        return tuple(action for action in self.actions if action.outcome == "failed")


class PlanExecutor:
    """Carries out plans with the Kubernetes port; see the module docstring."""

    def __init__(
        self,
        kube: ExecutorCluster,
        memo: ExecutionMemo,
        *,
        clock: Callable[[], datetime],
        retry: RetryPolicy | None = None,
        metrics: ExecutorMetrics | None = None,
        sleep: Sleep = asyncio.sleep,
        jitter: Jitter = random.random,
    ) -> None:
        self._memo = memo
        self._clock = clock
        calls = GuardedCalls(
            kube, clock=clock, retry=retry, metrics=metrics, sleep=sleep, jitter=jitter
        )
        self._calls = calls
        self._desired = DesiredObjects(calls)
        self._deletions = Deletions(calls)
        self._owner = OwnerWrites(calls)

    async def start(self) -> None:
        """Record when the memo's bucket began to record owners, if it holds no such time: at
        the process's start, so the owners created from then on are known new."""
        await self._memo.since(now=self._clock())

    async def carried_out_for(self, owner: ObjectRef) -> bool:
        """Whether this executor has a record for ``owner``'s uid (it carried out a plan)."""
        return bool(owner.uid) and (await self._memo.load(owner)).stored

    async def execute(
        self,
        decision: PlanDecidedV1,
        *,
        plan_id: str,
        sequence: int = 0,
        owner_created_at: datetime | None = None,
    ) -> Execution:
        """Carry out ``decision`` (whose event id is ``plan_id``, stored at ``sequence`` of
        the plan stream) and save what was done. ``owner_created_at`` is the owner's
        ``creationTimestamp`` as admission read it (None: unknown, and an owner the memo has
        no record of lists its children to prune).

        What was done, and the plan id, are saved by :meth:`remember` once the result is
        published (a plan that must be retried is saved at once): a crash in between repeats
        the execution (server-side apply: no change), never loses the result.
        A plan superseded by a later plan of its owner is skipped (see the memo).
        """
        plan = decision.plan
        fresh = OwnerMemo()
        fresh.start_plan(sequence=sequence, planned_at=decision.planned_at)
        # Recorded before any write, so "no record" keeps meaning "nothing of ours exists".
        memo, first_touch = await self._memo.claim(plan.owner, fresh)
        if memo.executed(plan_id):
            return Execution(plan_id=plan_id, owner=plan.owner, skipped=True, memo=memo)
        if memo.superseded(sequence=sequence, planned_at=decision.planned_at):
            return Execution(
                plan_id=plan_id, owner=plan.owner, skipped=True, superseded=True, memo=memo
            )
        memo.start_plan(sequence=sequence, planned_at=decision.planned_at)
        run = PlanRun(
            plan=plan,
            fingerprint=decision.fingerprint,
            memo=memo,
            absent=frozenset(ref_key(ref) for ref in decision.absent),
            drifted=frozenset(ref_key(ref) for ref in decision.drifted),
            desired_keys=frozenset(manifest_key(manifest) for manifest in plan.desired),
            childless=first_touch and await self._known_new(plan, owner_created_at),
            replacing=frozenset(ref_key(target) for target in plan.delete),
        )
        await self._deletions.delete_children(run)
        await self._write_desired(run)
        await self._owner_steps(run)
        await self._deletions.prune(run)
        await self._last_steps(run)
        if run.must_retry:
            # The next delivery repeats only what failed. A plan that went through is saved
            # once, with its id, by remember(): one bucket write per plan instead of two.
            await self._memo.save(plan.owner, memo)
        return Execution(
            plan_id=plan_id,
            owner=plan.owner,
            skipped=False,
            actions=tuple(run.actions),
            must_retry=run.must_retry,
            memo=memo,
        )

    async def _known_new(self, plan: Plan, created_at: datetime | None) -> bool:
        """Whether ``plan``'s owner, of which the memo had no record, is new: none of our
        children can exist for it. Asked only of a plan that prunes."""
        if created_at is None or not plan.prune or not plan.prune_selector:
            return False
        return await self._memo.owner_is_new(created_at, now=self._clock())

    async def remember(self, execution: Execution) -> None:
        """Record that the plan was carried out and its result published."""
        if execution.skipped:
            return
        execution.memo.remember_plan(execution.plan_id)
        await self._memo.save(execution.owner, execution.memo)

    async def _write_desired(self, run: PlanRun) -> None:
        """Step 2: never adopt, then the desired and shared objects; the memo forgets the
        objects the plan no longer has."""
        plan = run.plan
        await self._desired.check_names(run)
        for manifest in plan.desired:
            await self._desired.apply(run, manifest)
        for manifest in plan.shared:
            await self._desired.share(run, manifest)
        kept = run.desired_keys | {manifest_key(m) for m in plan.shared}
        run.memo.objects = {k: v for k, v in run.memo.objects.items() if k in kept}

    async def _owner_steps(self, run: PlanRun) -> None:
        """Steps 3 to 5: the status (with the name conflicts and refusals found on the way),
        the scale, the Events."""
        plan = run.plan
        if plan.status is not None:
            since = run.memo.name_conflict_since or self._clock()
            status = with_name_conflicts(plan.status, run.conflicts, since=since)
            refused = with_refusals(status, run.refusals, now=self._clock())
            await self._owner.write_status(run, refused)
        if plan.scale is not None:
            await self._owner.scale(run, plan.scale)
        for intent in plan.events:
            await self._owner.emit(run, intent)

    async def _last_steps(self, run: PlanRun) -> None:
        """Steps 7 to 9: the owner's own metadata, the preemption, the owner's deletion."""
        plan = run.plan
        if plan.finalizers is not None or plan.owner_labels is not None:
            await self._owner.set_metadata(run)
        if plan.preempt is not None:
            await self._preempt(run, plan.preempt)
        if plan.delete_owner:
            await self._deletions.delete_owner(run)

    async def _preempt(self, run: PlanRun, intent: PreemptIntent) -> None:
        """Step 8: delete the preempted workload, or scale it to zero; not before the status
        saying why is written. A status planned from an older record is not written, and the
        workload going without it would leave the record saying Idle: the planner would take
        the freed GPUs for a deletion by someone else and preempt another workload for the
        same demand. The plan of the record's newer version preempts."""
        if run.status_unwritten:
            self._calls.record(run, "preempt", intent.target, StepOutcome.STATUS_FIRST)
            return
        if intent.action == "delete":
            await self._deletions.delete(run, intent.target, operation="preempt")
            return
        await self._owner.scale(run, to_zero(intent), operation="preempt")
