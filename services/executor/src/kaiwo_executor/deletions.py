"""The deletions of :mod:`kaiwo_executor.apply_plan`: the plan's explicit deletions and the
finalizers it releases (step 1), the prune (step 6), and deleting a preempted workload or the
owner (steps 8 and 9). Every delete carries the object's uid as a precondition and propagates
in the background, but a Job the plan names (``Plan.delete``) in the foreground; NotFound
means the object is gone already, which is what was wanted."""

from __future__ import annotations

from typing import Any

from kaiwo_contracts.confinement.objects import is_owners
from kaiwo_contracts.events.results import Operation
from kaiwo_contracts.plans import FinalizerRelease, ObjectRef, PruneRule
from kaiwo_kube import Conflict, NotFound, PropagationPolicy, ResourceType

from kaiwo_executor.child_ownership import controlled_by
from kaiwo_executor.execution_memo import content_hash, object_key
from kaiwo_executor.guarded_calls import Failure, GuardedCalls
from kaiwo_executor.plan_run import PlanRun, label_selector
from kaiwo_executor.step_outcomes import StepOutcome


class Deletions:
    """Deletes what the plan no longer wants, only when it is still the owner's."""

    def __init__(self, calls: GuardedCalls) -> None:
        self._calls = calls
        self._kube = calls.kube

    async def delete_children(self, run: PlanRun) -> None:
        """Step 1: the plan's explicit deletions, then the finalizers it releases."""
        for target in run.plan.delete:
            await self._delete_child(run, target)
        for release in run.plan.release_finalizers:
            await self._release_finalizers(run, release)

    async def prune(self, run: PlanRun) -> None:
        """Step 6: delete the children the plan's prune rules find and it no longer wants."""
        plan = run.plan
        if not plan.prune or not plan.prune_selector:
            return
        inventory = content_hash(
            {
                "desired": sorted(run.desired_keys),
                "prune": [rule.model_dump(mode="json") for rule in plan.prune],
                "selector": plan.prune_selector,
            }
        )
        if run.memo.pruned_for == inventory:
            return
        if run.childless:
            # Only what this plan applied carries the owner's labels: nothing to list. An
            # owner merely unknown to the memo (lost, or started afresh) lists: its children
            # made before are not in it (decision 0215).
            run.memo.pruned_for = inventory
            return
        complete = True
        for rule in plan.prune:
            complete = await self._prune_kind(run, rule) and complete
        run.memo.pruned_for = inventory if complete else None

    async def delete_owner(self, run: PlanRun) -> None:
        """Step 9: the owner itself; what was remembered for it goes with it."""
        if await self.delete(run, run.plan.owner, operation="delete-owner"):
            run.memo.forget_effects()

    async def delete(self, run: PlanRun, target: ObjectRef, *, operation: Operation) -> bool:
        """Delete ``target`` (uid precondition, background); False when it failed."""

        async def delete() -> StepOutcome:
            resource = await self._calls.resource(target.api_version, target.kind)
            try:
                await self._kube.delete(
                    resource,
                    target.name,
                    namespace=target.namespace,
                    propagation="Background",
                    uid=target.uid,
                )
            except NotFound:
                return StepOutcome.ALREADY_DELETED
            except Conflict:
                # A failed uid precondition: the object was replaced by a new one of the
                # same name, which the next plan judges. Any other conflict is retried.
                if await self._replaced(resource, target):
                    return StepOutcome.REPLACED
                raise
            return StepOutcome.DELETED

        result = await self._calls.guarded(delete, operation, target)
        if isinstance(result, Failure):
            await self._calls.fail(run, result, warning_reason="DeleteFailed")
            return False
        outcome, attempts = result
        self._calls.record(run, operation, target, outcome, attempts=attempts)
        return True

    async def _delete_child(self, run: PlanRun, target: ObjectRef) -> None:
        """Delete one child the plan names, if it is still the owner's (inventory labels)."""
        selector = run.plan.prune_selector

        async def delete() -> StepOutcome:
            resource = await self._calls.resource(target.api_version, target.kind)
            try:
                live = await self._kube.get(resource, target.name, namespace=target.namespace)
            except NotFound:
                return StepOutcome.ALREADY_DELETED
            metadata = live.get("metadata") or {}
            if metadata.get("uid") != target.uid:
                return StepOutcome.REPLACED
            if not is_owners(metadata, selector=selector, owner_uid=run.plan.owner.uid):
                return StepOutcome.FOREIGN
            if metadata.get("deletionTimestamp"):
                return StepOutcome.ALREADY_DELETED
            try:
                await self._kube.delete(
                    resource,
                    target.name,
                    namespace=target.namespace,
                    propagation=_explicit_propagation(target),
                    uid=target.uid,
                )
            except NotFound:
                return StepOutcome.ALREADY_DELETED
            return StepOutcome.DELETED

        result = await self._calls.guarded(delete, "delete", target)
        if isinstance(result, Failure):
            await self._calls.fail(run, result, warning_reason="DeleteFailed")
            return
        outcome, attempts = result
        self._calls.record(run, "delete", target, outcome, attempts=attempts)

    async def _release_finalizers(self, run: PlanRun, release: FinalizerRelease) -> None:
        """Take the named finalizers off a child the plan deleted, so its deletion completes;
        only from the owner's own object of that uid, and only once it is being deleted."""
        target = release.target

        async def take_off() -> StepOutcome:
            resource, live = await self._calls.read_same(target)
            if live is None:
                return StepOutcome.ALREADY_DELETED
            metadata = live.get("metadata") or {}
            owner_uid = run.plan.owner.uid
            if not is_owners(metadata, selector=run.plan.prune_selector, owner_uid=owner_uid):
                return StepOutcome.FOREIGN
            current = list(metadata.get("finalizers") or [])
            kept = [f for f in current if f not in release.finalizers]
            if not metadata.get("deletionTimestamp") or kept == current:
                return StepOutcome.NO_FINALIZER
            await self._calls.patch_metadata_unless_changed(
                resource, target, {"finalizers": kept}, read_at=metadata.get("resourceVersion")
            )
            return StepOutcome.RELEASED

        result = await self._calls.guarded(take_off, "delete", target)
        if isinstance(result, Failure):
            await self._calls.fail(run, result, warning_reason="DeleteFailed")
            return
        outcome, attempts = result
        released = "released " + ", ".join(release.finalizers)
        reason = released if outcome is StepOutcome.RELEASED else None
        self._calls.record(run, "delete", target, outcome, reason=reason, attempts=attempts)

    async def _prune_kind(self, run: PlanRun, rule: PruneRule) -> bool:
        """Delete the undesired children of one kind; False when something failed."""
        owner = run.plan.owner
        namespace = owner.namespace if rule.namespaced else None
        # A failed list is reported against the kind as a whole ("Job/team-a/*").
        kind_ref = ObjectRef(
            api_version=rule.api_version, kind=rule.kind, name="*", namespace=namespace
        )

        async def children() -> list[dict[str, Any]]:
            try:
                resource = await self._calls.resource(rule.api_version, rule.kind)
                listed = await self._kube.list(
                    resource,
                    namespace=namespace,
                    label_selector=label_selector(run.plan.prune_selector),
                )
            except NotFound:
                return []  # the kind is not served (its API is not installed): nothing to prune
            return listed.items

        found = await self._calls.guarded(children, "delete", kind_ref)
        if isinstance(found, Failure):
            await self._calls.fail(run, found, warning_reason="PruneFailed")
            return False
        complete = True
        for child in found[0]:
            metadata = child.get("metadata") or {}
            key = object_key(
                api_version=rule.api_version,
                kind=rule.kind,
                namespace=metadata.get("namespace"),
                name=str(metadata.get("name", "")),
            )
            if key in run.desired_keys or metadata.get("deletionTimestamp"):
                continue
            if owner.uid and not controlled_by(metadata, owner.uid):
                continue  # carries the owner's labels, but another owner, or none, controls it
            target = ObjectRef(
                api_version=rule.api_version,
                kind=rule.kind,
                name=str(metadata.get("name", "")),
                namespace=metadata.get("namespace") or None,
                uid=metadata.get("uid") or None,
            )
            complete = await self.delete(run, target, operation="delete") and complete
        return complete

    async def _replaced(self, resource: ResourceType, target: ObjectRef) -> bool:
        if target.uid is None:
            return False
        try:
            live = await self._kube.get(resource, target.name, namespace=target.namespace)
        except NotFound:
            return True
        return (live.get("metadata") or {}).get("uid") != target.uid


def _explicit_propagation(target: ObjectRef) -> PropagationPolicy:
    """A plan names a Job to delete when what comes next must wait for its Pods (a Model's
    eviction after its load, decision 0255): in the foreground, the Job is observed until
    they are gone. The prune's background delete skips it then (it is being deleted)."""
    return (
        "Foreground" if target.kind == "Job" and target.api_version == "batch/v1" else "Background"
    )
