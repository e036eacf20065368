"""The writes of :mod:`kaiwo_executor.apply_plan` to the owner and about it: its status (step
3), its scale or a preempted workload's replicas (steps 4 and 8), the plan's Events (step 5),
and the operator's finalizers and labels on it (step 7). Each is conditional on what the plan
was made from (a resourceVersion, a uid, the replicas read), so a late plan never undoes a
newer write."""

from __future__ import annotations

from typing import Any

from kaiwo_contracts.confinement import CONFINEMENTS
from kaiwo_contracts.events.results import Operation
from kaiwo_contracts.plans import STATUS_FIELD_MANAGER, EventIntent, ObjectRef, ScaleIntent
from kaiwo_contracts.replica_writes import (
    ReplicasVerdict,
    replicas_verdict,
    spec_moved,
    writes_unset_replicas,
)
from kaiwo_kube import AlreadyExists, Conflict, Invalid, NotFound, ResourceType

from kaiwo_executor.execution_memo import content_hash
from kaiwo_executor.guarded_calls import FIELD_MANAGER, Failure, GuardedCalls, event_name
from kaiwo_executor.owner_metadata import label_changes, merged_finalizers
from kaiwo_executor.plan_run import PlanRun
from kaiwo_executor.step_outcomes import StepOutcome


class OwnerWrites:
    """Writes the owner's status, scale, Events and metadata as the plan says."""

    def __init__(self, calls: GuardedCalls) -> None:
        self._calls = calls
        self._kube = calls.kube

    async def write_status(self, run: PlanRun, status: dict[str, Any]) -> None:
        """Step 3: the status, unless it equals the one last written for the owner."""
        owner = run.plan.owner
        digest = content_hash(status)
        if run.memo.status == digest:
            self._calls.record(run, "status", owner, StepOutcome.UNCHANGED)
            return

        async def write() -> StepOutcome:
            resource = await self._calls.resource(owner.api_version, owner.kind)
            try:
                await self._kube.patch_status(
                    resource,
                    owner.name,
                    status,
                    namespace=owner.namespace,
                    field_manager=STATUS_FIELD_MANAGER,
                    method="apply",
                    force=True,
                    resource_version=run.plan.observed_resource_version,
                )
            except NotFound:
                return StepOutcome.OWNER_GONE
            except Conflict as error:
                if isinstance(error, AlreadyExists):
                    raise
                # Planned from an older version of the owner: writing it would undo newer
                # writes. The planner plans the newer version too (its resourceVersion is in
                # the plan).
                return StepOutcome.STALE
            return StepOutcome.APPLIED

        result = await self._calls.guarded(write, "status", owner)
        if isinstance(result, Failure):
            run.status_unwritten = True
            await self._calls.fail(run, result, warning_reason="StatusUpdateFailed")
            return
        outcome, attempts = result
        if outcome is not StepOutcome.APPLIED:
            run.status_unwritten = True
            self._calls.record(run, "status", owner, outcome)
            return
        run.memo.status = digest
        self._calls.record(run, "status", owner, outcome, attempts=attempts)

    async def scale(
        self, run: PlanRun, intent: ScaleIntent, *, operation: Operation = "scale"
    ) -> None:
        """Steps 4 and 8: set the replicas, only while they are those the decision read."""
        target = intent.target
        planned = run.plan.observed_generation
        preemption = operation == "preempt"
        fills_unset = writes_unset_replicas(intent, preemption=preemption)

        async def scale() -> StepOutcome:
            resource, live = await self._calls.read_same(target)
            if live is None:
                return StepOutcome.OWNER_GONE
            verdict = replicas_verdict(
                live, intent, preemption=preemption, planned_generation=planned
            )
            if verdict != "to-write":
                return _NOT_WRITTEN[verdict]
            current = (live.get("spec") or {}).get("replicas")
            read_at = (live.get("metadata") or {}).get("resourceVersion")
            try:
                await self._set_replicas(
                    resource,
                    target,
                    current=current,
                    replicas=intent.replicas,
                    operation=operation,
                    read_at=read_at if operation == "scale" else None,
                )
            except Invalid as refusal:
                return await self._refused(
                    refusal,
                    resource,
                    target,
                    current=current,
                    read_at=read_at,
                    planned=planned,
                    operation=operation,
                )
            return StepOutcome.APPLIED

        result = await self._calls.guarded(scale, operation, target)
        if isinstance(result, Failure):
            await self._calls.fail(run, result, warning_reason="ScaleFailed")
            return
        outcome, attempts = result
        reasons = {
            StepOutcome.UNCHANGED: f"already at {intent.replicas} replicas",
            StepOutcome.MOVED: (
                "set by someone else since the plan; left as set"
                if fills_unset
                else f"no longer at the {intent.from_replicas} replicas the decision started "
                "from; left to the next decision"
            ),
            StepOutcome.APPLIED: (
                f"replicas unset -> {intent.replicas}"
                if fills_unset
                else f"replicas {intent.from_replicas} -> {intent.replicas}"
            ),
            StepOutcome.STALE: (
                f"the spec changed since the decision (generation {planned}); "
                "left to the next decision"
            ),
        }
        self._calls.record(
            run, operation, target, outcome, reason=reasons.get(outcome), attempts=attempts
        )

    async def emit(self, run: PlanRun, intent: EventIntent) -> None:
        """Step 5: one of the plan's Events, once per plan and reason."""
        owner = run.plan.owner
        name = event_name(owner, fingerprint=run.fingerprint, reason=intent.reason)
        await self._calls.create_event(
            run, name=name, event_type=intent.type, reason=intent.reason, message=intent.message
        )

    async def set_metadata(self, run: PlanRun) -> None:
        """Step 7: the operator's finalizers and labels on the owner, as the plan names them."""
        plan = run.plan
        owner = plan.owner
        confinement = CONFINEMENTS.get((owner.api_version, owner.kind))
        if confinement is None:
            return

        async def patch() -> StepOutcome:
            resource, live = await self._calls.read_same(owner)
            if live is None:
                return StepOutcome.OWNER_GONE
            metadata = live.get("metadata") or {}
            body: dict[str, Any] = {}
            if plan.finalizers is not None:
                current = list(metadata.get("finalizers") or [])
                merged = merged_finalizers(current, plan.finalizers, managed=confinement.finalizers)
                if merged != current:
                    body["finalizers"] = merged
            if plan.owner_labels is not None:
                changes = label_changes(
                    metadata.get("labels") or {}, plan.owner_labels, owns=confinement.owns_label
                )
                if changes:
                    body["labels"] = changes
            if not body:
                return StepOutcome.UNCHANGED
            await self._calls.patch_metadata_unless_changed(
                resource, owner, body, read_at=metadata.get("resourceVersion")
            )
            return StepOutcome.APPLIED

        result = await self._calls.guarded(patch, "apply", owner)
        if isinstance(result, Failure):
            await self._calls.fail(run, result, warning_reason="FinalizerUpdateFailed")
            return
        outcome, attempts = result
        reason = None if outcome is StepOutcome.OWNER_GONE else "owner metadata"
        self._calls.record(run, "apply", owner, outcome, reason=reason, attempts=attempts)

    async def _refused(
        self,
        refusal: Invalid,
        resource: ResourceType,
        target: ObjectRef,
        *,
        current: int | None,
        read_at: str | None,
        planned: int | None,
        operation: Operation,
    ) -> StepOutcome:
        """Why a scale's test failed: the replicas, or (a scale) the object, changed since it
        was read. Only another field moved (a status write): Conflict, tried again from a
        fresh read. Neither: the refusal stands."""
        again = await self._kube.get(resource, target.name, namespace=target.namespace)
        if (again.get("spec") or {}).get("replicas") != current:
            return StepOutcome.MOVED
        if operation != "scale":
            raise refusal
        if spec_moved(again, planned):
            return StepOutcome.STALE
        if (again.get("metadata") or {}).get("resourceVersion") != read_at:
            raise Conflict(
                "the object changed between its read and the scale", code=409
            ) from refusal
        raise refusal

    async def _set_replicas(
        self,
        resource: ResourceType,
        target: ObjectRef,
        *,
        current: int | None,
        replicas: int,
        operation: Operation,
        read_at: str | None,
    ) -> None:
        """Set the replicas, holding only while they are ``current`` and, given ``read_at``,
        while the object is that version (Invalid otherwise)."""
        if operation != "preempt":
            await self._kube.patch_scale(
                resource,
                target.name,
                replicas=replicas,
                expected_replicas=current,
                read_at=read_at,
                namespace=target.namespace,
                field_manager=FIELD_MANAGER,
            )
            return
        # Preemption patches the object itself, not its scale subresource: the admission
        # policy kaiwo-executor-gpu-preemption must see the whole object (its opt-in
        # annotations, and that nothing else changes), which a Scale does not show. Its uid
        # and the replicas read are the patch's tests.
        await self._kube.json_patch(
            resource,
            target.name,
            [
                {"op": "test", "path": "/metadata/uid", "value": target.uid},
                {"op": "test", "path": "/spec/replicas", "value": current},
                {"op": "replace", "path": "/spec/replicas", "value": replicas},
            ],
            namespace=target.namespace,
            field_manager=FIELD_MANAGER,
        )


_NOT_WRITTEN: dict[ReplicasVerdict, StepOutcome] = {  # why the replicas were left alone
    "done": StepOutcome.UNCHANGED,
    "moved": StepOutcome.MOVED,
    "stale": StepOutcome.STALE,
}
