"""Steps 2 of :mod:`kaiwo_executor.apply_plan`: never adopt, then write the desired objects
(server-side apply, create only, recreate, the Node merge patch) and the shared ones."""

from __future__ import annotations

import functools
import time
from typing import Any

import structlog
from kaiwo_contracts.events.results import ActionOutcome
from kaiwo_contracts.plans import (
    CREATE_SUSPENDED_FIELD_MANAGER,
    ObjectRef,
    created_suspended,
    without_admission_gate,
)
from kaiwo_kube import Conflict, NotFound
from kaiwo_kube.resources import NODE, ResourceType, known_type

from kaiwo_executor.child_ownership import (
    LOOKED_AGAIN_ANNOTATION,
    NAME_CONFLICT,
    PREVIOUS_RUN_REMOVING,
    NameConflict,
    controlled_by,
    kept_by_kueue,
    name_conflict,
    unseen_shared,
    wanted_controller,
    withheld_by,
)
from kaiwo_executor.creation_metadata import creation_metadata_release
from kaiwo_executor.execution_memo import content_hash, manifest_key, ref_key
from kaiwo_executor.guarded_calls import FIELD_MANAGER, Failure, GuardedCalls, event_name
from kaiwo_executor.node_merge import node_patch
from kaiwo_executor.plan_run import PlanRun, is_node
from kaiwo_executor.step_outcomes import StepOutcome

REPLACED_STILL_THERE = "the object it replaces is still being deleted; created once it is gone"

log = structlog.get_logger("kaiwo.executor")


class DesiredObjects:
    """Writes the plan's desired and shared objects, never over an object its owner does not
    control."""

    def __init__(self, calls: GuardedCalls) -> None:
        self._calls = calls
        self._kube = calls.kube

    async def check_names(self, run: PlanRun) -> None:
        """Never adopt (step 2 of the module docstring): find the plan's objects whose name
        is taken by an object its owner does not control, and tell the owner.

        A plan with one such object that it wants created (not ``drifted``, not replaced)
        checks it by an apply that only creates: no read, and no moment between the read and
        the write in which someone else's object could appear and be adopted. An object of
        that name that exists already is read as before (and, if the owner's, written as
        before). With two or more, each is read first: a conflict found on the last must
        withhold the others unwritten."""
        # First: a shared volume found unusable withholds the objects that would mount it,
        # so none of them may be created by the shortcut below.
        for manifest in run.plan.shared:
            await self._check_unseen_shared(run, manifest)
        unproven = [manifest for manifest in run.plan.desired if _name_unproven(run, manifest)]
        if (
            not run.conflicts
            and len(unproven) == 1
            and _to_be_created(run, unproven[0])
            and await self._created_first(run, unproven[0])
        ):
            unproven = []
        for manifest in unproven:
            found = await self._read_for_check(run, manifest)
            if found is None:
                continue
            conflict = name_conflict(manifest, found[0])
            if conflict is not None:
                run.conflicts.append(conflict)
                run.memo.objects.pop(manifest_key(manifest), None)
                if kept_by_kueue(conflict, found[0]):
                    await self._look_again(manifest, conflict.target)
        run.memo.name_conflict_since = (
            (run.memo.name_conflict_since or self._calls.clock()) if run.conflicts else None
        )
        for conflict in run.conflicts:
            await self._tell_name_conflict(run, conflict)

    async def _check_unseen_shared(self, run: PlanRun, manifest: dict[str, Any]) -> None:
        """A shared object that exists unlabelled is a conflict (:func:`unseen_shared`): the
        plan's objects of its namespace, which would mount it, are withheld with it.

        Read until this owner's plans have created or found it usable (the memo holds it
        then), and whenever the planner names it absent again. Not only when named absent:
        a plan names a gap only the first time it is seen, so the owner's next plan (its
        status, its finalizer) would otherwise create the load Job over someone else's claim
        (found on the real stack)."""
        key = manifest_key(manifest)
        if run.memo.objects.get(key) == content_hash(manifest) and key not in run.absent:
            return
        found = await self._read_for_check(run, manifest)
        if found is None:
            return
        conflict = unseen_shared(found[0])
        if conflict is not None:
            run.conflicts.append(conflict)
            run.memo.objects.pop(key, None)

    async def _read_for_check(
        self, run: PlanRun, manifest: dict[str, Any]
    ) -> tuple[dict[str, Any] | None] | None:
        """The live object of ``manifest`` (boxed: None inside when it does not exist), or
        None when it could not be read: reported, and left unwritten (``run.unread``)."""
        found = await self._calls.guarded(
            functools.partial(self._live, manifest), "apply", ObjectRef.of(manifest)
        )
        if isinstance(found, Failure):
            await self._calls.fail(run, found, warning_reason="ApplyFailed")
            run.unread.add(manifest_key(manifest))
            return None
        return (found[0],)

    async def apply(self, run: PlanRun, manifest: dict[str, Any]) -> None:
        """Write one desired object, unless it is unchanged since the last apply."""
        key, target = manifest_key(manifest), ObjectRef.of(manifest)
        if self._settled_by_check(run, manifest):
            return
        if key in run.replacing:
            await self._create_replacement(run, manifest)
            return
        digest = content_hash(without_admission_gate(manifest))
        if run.memo.objects.get(key) == digest and key not in run.drifted:
            if key not in run.absent:
                self._calls.metrics.writes_skipped.labels(kind=target.kind).inc()
                self._calls.record(run, "apply", target, StepOutcome.UNCHANGED)
                return
            run.recreate.add(key)
        run.memo.objects.pop(key, None)
        started = time.perf_counter()
        result = await self._calls.guarded(lambda: self._write(run, manifest), "apply", target)
        self._calls.metrics.apply_duration.labels(kind=target.kind).observe(
            time.perf_counter() - started
        )
        if isinstance(result, Failure):
            await self._refused(run, result)
            return
        outcome, attempts = result
        run.memo.objects[key] = digest
        self._calls.record(run, "apply", target, outcome, attempts=attempts)

    def _settled_by_check(self, run: PlanRun, manifest: dict[str, Any]) -> bool:
        """Whether the check of names (``check_names``) settled this object already: created
        it, failed to check it, found its name taken, or withholds it for another's."""
        key, target = manifest_key(manifest), ObjectRef.of(manifest)
        if key in run.created_first:
            run.memo.objects[key] = content_hash(without_admission_gate(manifest))
            self._calls.record(
                run, "apply", target, StepOutcome.APPLIED, attempts=run.created_first[key]
            )
            return True
        if _reported_by_check(run, key):
            return True  # reported by check_names, and not written blind
        held = withheld_by(manifest, run.conflicts)
        if held is not None:
            why = (
                f"withheld while the previous run's {held.target.display()} is being removed"
                if held.previous_run
                else f"withheld while {held.target.display()} is not this owner's"
            )
            self._calls.record(run, "apply", target, StepOutcome.UNCHANGED, reason=why)
            return True
        return False

    async def share(self, run: PlanRun, manifest: dict[str, Any]) -> None:
        """Create a shared object when missing; never update it (others use it too)."""
        key, target = manifest_key(manifest), ObjectRef.of(manifest)
        if _reported_by_check(run, key):
            return  # reported by check_names, and not written blind
        digest = content_hash(manifest)
        if run.memo.objects.get(key) == digest and key not in run.absent:
            self._calls.record(run, "apply", target, StepOutcome.UNCHANGED)
            return
        result = await self._calls.guarded(lambda: self._recreate(manifest), "apply", target)
        if isinstance(result, Failure):
            await self._calls.fail(run, result, warning_reason="ApplyFailed")
            return
        outcome, attempts = result
        run.memo.objects[key] = digest
        self._calls.record(run, "apply", target, outcome, attempts=attempts)

    async def _write(self, run: PlanRun, manifest: dict[str, Any]) -> StepOutcome:
        if is_node(manifest):
            return await self._patch_node(manifest)
        if run.plan.create_only:
            return await self._create_only(manifest)
        if manifest_key(manifest) in run.recreate:
            # Applied before and unchanged: the planner saw it missing, perhaps only because
            # it planned before observing the creation. Create it, never apply it again: a
            # stale plan must not overwrite what others changed since (Kueue's suspend).
            outcome = await self._recreate(manifest)
            if outcome is StepOutcome.UNCHANGED:
                return await self._relabel_unseen(manifest)
            return outcome
        return await self._apply(manifest)

    async def _relabel_unseen(self, manifest: dict[str, Any]) -> StepOutcome:
        """Put back the labels of ours that someone removed from an object the planner saw
        missing but that exists, the owner's (decision 0139).

        The watcher observes children by ``app.kubernetes.io/managed-by=kaiwo``: without it a
        child is deleted to the planner, which named it absent again on every resync while
        this executor found it there and left it so; a KaiwoService's phase followed "no
        Deployment", and a Deployment deleted after that was made again only at the next
        resync. Only the missing label keys are written, by a merge patch: the rest of a late
        plan's manifest must still not overwrite what others changed since (Kueue's
        ``suspend``), and a label of someone else's stays.
        """
        controller = wanted_controller(manifest)
        live = await self._live(manifest)
        if (
            controller is None
            or live is None
            or not controlled_by(live.get("metadata"), controller)
        ):
            return StepOutcome.UNCHANGED
        metadata = manifest.get("metadata") or {}
        present = (live.get("metadata") or {}).get("labels") or {}
        missing = {
            key: value
            for key, value in (metadata.get("labels") or {}).items()
            if key not in present
        }
        if not missing:
            return StepOutcome.UNCHANGED
        resource = await self._calls.resource(
            str(manifest.get("apiVersion")), str(manifest.get("kind"))
        )
        await self._kube.merge_patch(
            resource,
            str(metadata.get("name", "")),
            {"metadata": {"labels": missing}},
            namespace=metadata.get("namespace"),
            field_manager=FIELD_MANAGER,
        )
        return StepOutcome.APPLIED

    async def _create_replacement(self, run: PlanRun, manifest: dict[str, Any]) -> None:
        """Create the object that replaces one the plan deleted (step 1). When the old one is
        still there (a finalizer holds it), nothing is remembered: a later plan, made once the
        old object is gone, creates it."""
        key, target = manifest_key(manifest), ObjectRef.of(manifest)
        run.memo.objects.pop(key, None)
        result = await self._calls.guarded(lambda: self._recreate(manifest), "apply", target)
        if isinstance(result, Failure):
            await self._refused(run, result)
            return
        outcome, attempts = result
        if outcome is StepOutcome.UNCHANGED:
            self._calls.record(
                run, "apply", target, outcome, reason=REPLACED_STILL_THERE, attempts=attempts
            )
            return
        run.memo.objects[key] = content_hash(without_admission_gate(manifest))
        self._calls.record(run, "apply", target, outcome, reason="replaced", attempts=attempts)

    async def _refused(self, run: PlanRun, failure: Failure) -> None:
        """A failed apply: shown in the status as ``ApplyRefused`` when it is final."""
        refusal = failure.refusal()
        if refusal is not None:
            run.refusals.append(refusal)
        await self._calls.fail(run, failure, warning_reason="ApplyFailed")

    async def _created_first(self, run: PlanRun, manifest: dict[str, Any]) -> bool:
        """Whether an apply that only creates settled ``manifest``: it wrote it, or failed
        as any apply of it would have (reported as such, not written again this time). One
        that found the name taken leaves the object to be read and written the usual way."""
        key = manifest_key(manifest)
        started = time.perf_counter()
        result = await self._calls.guarded(
            functools.partial(self._create_if_absent, manifest), "apply", ObjectRef.of(manifest)
        )
        if isinstance(result, Failure):
            await self._refused(run, result)
            run.unread.add(key)
            return True
        created, attempts = result
        if not created:
            return False
        self._calls.metrics.apply_duration.labels(kind=str(manifest.get("kind"))).observe(
            time.perf_counter() - started
        )
        run.created_first[key] = attempts
        return True

    async def _create_if_absent(self, manifest: dict[str, Any]) -> bool:
        resource = known_type(str(manifest.get("apiVersion")), str(manifest.get("kind")))
        field_manager, force = _creating_apply(manifest)
        try:
            await self._kube.apply(
                manifest,
                field_manager=field_manager,
                force=force,
                resource=resource,
                if_absent=True,
            )
        except Conflict:
            return False  # the name is taken: whose object it is, the read says
        return True

    async def _live(self, manifest: dict[str, Any]) -> dict[str, Any] | None:
        metadata = manifest.get("metadata") or {}
        resource = await self._calls.resource(
            str(manifest.get("apiVersion")), str(manifest.get("kind"))
        )
        try:
            return await self._kube.get(
                resource, str(metadata.get("name", "")), namespace=metadata.get("namespace")
            )
        except NotFound:
            return None

    async def _look_again(self, manifest: dict[str, Any], target: ObjectRef) -> None:
        """Touch a previous run's Kueue object still being removed, so that Kueue looks at
        it again (:func:`~kaiwo_executor.child_ownership.kept_by_kueue`). The planner hands
        the plan over again while it waits (``kaiwo_planner.domain.queues.previous_run``);
        a touch that fails is tried then."""
        resource = await self._calls.resource(
            str(manifest.get("apiVersion")), str(manifest.get("kind"))
        )
        touch = {
            "metadata": {"annotations": {LOOKED_AGAIN_ANNOTATION: self._calls.clock().isoformat()}}
        }
        result = await self._calls.guarded(
            lambda: self._kube.merge_patch(
                resource,
                target.name,
                touch,
                namespace=target.namespace,
                field_manager=FIELD_MANAGER,
            ),
            "apply",
            target,
        )
        if isinstance(result, Failure):
            log.warning(
                "previous run's object not touched", target=target.display(), reason=result.message
            )
        else:
            log.info("previous run's object touched for Kueue", target=target.display())

    async def _tell_name_conflict(self, run: PlanRun, conflict: NameConflict) -> None:
        """Another's object holds the name: a failed apply and a Warning. An earlier
        incarnation's object (decision 0165): nothing failed and nobody must act (the garbage
        collector removes it, and its deletion plans the owner again), so it is waited for
        and told with a Normal Event."""
        target = conflict.target
        previous = conflict.previous_run
        reason = PREVIOUS_RUN_REMOVING if previous else NAME_CONFLICT
        self._calls.count(target, "previous-run" if previous else "name-conflict")
        run.actions.append(
            ActionOutcome(
                operation="apply",
                target=target,
                outcome="unchanged" if previous else "failed",
                reason=f"{reason}: {conflict.message}",
            )
        )
        if previous:
            log.info("waiting for the previous run's object to go", target=target.display())
        else:
            log.warning(
                "name taken by an object the owner does not control", target=target.display()
            )
        # Named after the object that holds the name, not the plan: a plan that changes for
        # another reason while the conflict lasts does not repeat the Event.
        await self._calls.create_event(
            run,
            name=event_name(
                run.plan.owner,
                fingerprint=target.uid or "",
                reason=reason,
                about=ref_key(target),
            ),
            event_type="Normal" if previous else "Warning",
            reason=reason,
            message=conflict.message,
        )

    async def _apply(self, manifest: dict[str, Any]) -> StepOutcome:
        resource = known_type(str(manifest.get("apiVersion")), str(manifest.get("kind")))
        field_manager, force = _creating_apply(manifest)
        if not force:
            # Created suspended (see _creating_apply). A plan made while the child was
            # missing and carried out again after Kueue admitted it (its executor died before
            # remembering the child) must not suspend it anew: its Pod would go and the
            # workload would wait for an admission it already had. The conflict says so, and
            # the rest of the manifest is applied as a later plan would.
            try:
                await self._kube.apply(
                    manifest, field_manager=field_manager, force=False, resource=resource
                )
                return StepOutcome.APPLIED
            except Conflict:
                manifest = without_admission_gate(manifest)
        applied = await self._kube.apply(
            manifest, field_manager=FIELD_MANAGER, force=True, resource=resource
        )
        await self._release_creation_metadata(applied, manifest, resource)
        return StepOutcome.APPLIED

    async def _release_creation_metadata(
        self, applied: dict[str, Any], manifest: dict[str, Any], resource: ResourceType | None
    ) -> None:
        """Give up the labels and annotations the child was created with that its owner no
        longer has (:mod:`kaiwo_executor.creation_metadata`). Not forced: should the spec
        have changed since the update (Kueue admitted the child meanwhile), the conflict
        changes nothing, and the release is made once more from the object as it is then."""
        for attempt in range(2):
            release = creation_metadata_release(applied, manifest)
            if release is None:
                return
            try:
                await self._kube.apply(
                    release,
                    field_manager=CREATE_SUSPENDED_FIELD_MANAGER,
                    force=False,
                    resource=resource,
                )
                return
            except Conflict:
                if attempt:
                    target = ObjectRef.of(manifest).display()
                    log.info("creation labels kept until the next update", target=target)
                    return
            applied = await self._live(manifest) or {}

    async def _create_only(self, manifest: dict[str, Any]) -> StepOutcome:
        """Create ``manifest`` unless it exists, which is then left as it is.

        Created by server-side apply, not by POST: a POST's field manager owns every field the
        API server fills in from the CRD's defaults (a KaiwoConfig's whole spec), so the user's
        own apply of any of them would conflict with the operator; an apply owns only what it
        sends (the empty spec). Not forced: should the object appear between the read and the
        apply, a field the user set otherwise is a conflict (retried, then found existing),
        never overwritten.
        """
        metadata = manifest.get("metadata") or {}
        resource = await self._calls.resource(
            str(manifest.get("apiVersion")), str(manifest.get("kind"))
        )
        try:
            await self._kube.get(
                resource, str(metadata.get("name", "")), namespace=metadata.get("namespace")
            )
        except NotFound:
            await self._kube.apply(
                manifest, field_manager=FIELD_MANAGER, force=False, resource=resource
            )
            return StepOutcome.APPLIED
        return StepOutcome.UNCHANGED

    async def _recreate(self, manifest: dict[str, Any]) -> StepOutcome:
        """Create ``manifest`` unless an object holds its name, which is then left as it is.

        By the apply that only creates (decision 0105), under the manager and force a new
        child's creation has, never by POST: a POST's fields belong to the manager's
        ``Update`` entry, which a later apply under the same name neither reads nor clears,
        so a field the owner stopped setting stayed on the child made again for good
        (decision 0225)."""
        if await self._create_if_absent(manifest):
            return StepOutcome.APPLIED
        return StepOutcome.UNCHANGED

    async def _patch_node(self, intent: dict[str, Any]) -> StepOutcome:
        name = str((intent.get("metadata") or {}).get("name", ""))
        try:
            live = await self._kube.get(NODE, name)
        except NotFound:
            return StepOutcome.NODE_GONE  # the planner stops asking once it sees it deleted
        patch = node_patch(intent, live, manager=FIELD_MANAGER)
        if patch is None:
            return StepOutcome.UNCHANGED
        await self._kube.merge_patch(NODE, name, patch, field_manager=FIELD_MANAGER)
        return StepOutcome.APPLIED


def _creating_apply(manifest: dict[str, Any]) -> tuple[str, bool]:
    """The field manager and force of an apply that may create ``manifest``. A child created
    suspended for Kueue: under the manager that leaves ``suspend`` to Kueue once it exists,
    and not forced, since ``suspend`` is the creation's only until Kueue takes it over.
    Anything else: under the operator's own manager, forced."""
    if created_suspended(manifest):
        return CREATE_SUSPENDED_FIELD_MANAGER, False
    return FIELD_MANAGER, True


def _reported_by_check(run: PlanRun, key: str) -> bool:
    """Whether ``check_names`` could not read the object of ``key`` or found its name taken."""
    return key in run.unread or any(ref_key(c.target) == key for c in run.conflicts)


def _to_be_created(run: PlanRun, manifest: dict[str, Any]) -> bool:
    """Whether creating the object is what the plan asks for when its name is free: it is
    new to this executor or the planner saw it missing (``absent``), not changed
    (``drifted``: applied again over the one there) nor replaced (created after a delete)."""
    key = manifest_key(manifest)
    return key not in run.drifted and key not in run.replacing


def _name_unproven(run: PlanRun, manifest: dict[str, Any]) -> bool:
    """Whether the object is about to be written while nothing says it is the owner's:
    this executor never applied it, or the planner saw it missing or changed since."""
    if wanted_controller(manifest) is None or is_node(manifest) or run.plan.create_only:
        return False
    key = manifest_key(manifest)
    if key in run.absent or key in run.drifted:
        return True
    return key not in run.memo.objects
