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
   (the planner's resync sends one while the child is missing) looks again.
   **Desired objects**, in the plan's order. An object whose manifest hash equals the one last
   applied is left alone, unless the plan lists it in ``absent`` (the planner saw it missing,
   e.g. deleted by hand): then it is *created*, and one that exists after all (the plan was
   made before its creation was observed) is left as it is, so a late plan never overwrites
   what others changed since (Kueue unsuspending a Job); or in ``drifted`` (the planner saw
   it without what the plan asks, e.g. a field edited by hand): then it is applied again.
   A ``create_only`` plan's objects are only ever created (the default KaiwoConfig and
   KaiwoQueueConfig, which are the user's once they exist), by a server-side apply that owns
   none of the fields the CRD's defaults fill in. Everything else is applied with
   server-side apply, field manager
   ``kaiwo``, forced: the executor is the one owner of the fields it sets. A manifest that
   sets ``spec.suspend: true`` (a child created suspended for Kueue) is applied under
   ``kaiwo-create`` instead, so the later applies, which leave ``suspend`` to Kueue, never
   remove it (``kaiwo_contracts.plans.CREATE_SUSPENDED_FIELD_MANAGER``). Nodes are the
   exception: see :mod:`kaiwo_executor.node_merge` (merge patch, taints merged with the
   node's own). **Shared objects** (``Plan.shared``: a Model cache's volume) are created
   when missing and otherwise left alone.
3. **Status** through the status subresource (server-side apply, field manager
   ``kaiwo-status``), only when it differs from the status last written for the owner, and
   with the owner's planned ``resourceVersion`` as a precondition: a plan made from an older
   version of the owner does not overwrite the status of a newer one (a Conflict skips the
   write; the planner plans the newer version as well, its resourceVersion being in the plan).
4. **Scale** (``Plan.scale``: a Model the autoscaler scales) through the owner's scale
   subresource: the owner is read, left alone when its replicas already are the wanted ones
   or are no longer those the decision started from (someone scaled it meanwhile; the next
   decision starts from theirs), else JSON-patched, testing the replicas it read in the same
   request (a Model without ``spec.replicas`` has none to test: the field is added). After
   the status, whose write is conditional on the owner's planned resourceVersion, which the
   scale moves on.
5. **Events**, once per plan and reason. The Event's name is derived from the owner's uid,
   the plan fingerprint and the reason, and it is created with a plain create: after a crash
   the retry finds it (AlreadyExists) and stops. (``KubernetesPort.create_event`` names
   Events by time and counts repeats, which is right for a recorder but would double an
   Event on redelivery.) A plan is identified by its fingerprint here, not its event id, so
   the same decision re-published under a new id (``absent`` changed, a planner restart)
   does not repeat its Events either.
6. **Prune**: for each prune rule, list that kind carrying the plan's ``prune_selector``
   labels (in the owner's namespace when the kind is namespaced and the owner is) and delete
   each one not desired, with its uid as a precondition and background propagation. Never
   without a selector (an empty one would match every object of the kind). Skipped when the
   desired set, rules and selector equal those of the last complete prune: only a new plan
   can make a child undesired, so listing again would find nothing to do.
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
   goes.
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
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

import structlog
from kaiwo_contracts.confinement import CONFINEMENTS
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.results import ActionOutcome, ActionOutcomeKind, Operation
from kaiwo_contracts.plans import (
    CREATE_SUSPENDED_FIELD_MANAGER,
    OPERATOR_FIELD_MANAGER,
    STATUS_FIELD_MANAGER,
    EventIntent,
    FinalizerRelease,
    ObjectRef,
    Plan,
    PreemptIntent,
    PruneRule,
    ScaleIntent,
    created_suspended,
    without_admission_gate,
)
from kaiwo_kube import (
    AlreadyExists,
    Conflict,
    Invalid,
    KubeError,
    KubernetesPort,
    NotFound,
    ResourceType,
)
from kaiwo_kube.events import event_manifest
from kaiwo_kube.resources import NODE, known_type

from kaiwo_executor.api_retries import (
    Jitter,
    RetriesExhausted,
    RetryPolicy,
    Sleep,
    call_with_retries,
)
from kaiwo_executor.apply_refusals import Refusal, with_refusals
from kaiwo_executor.child_ownership import (
    NAME_CONFLICT,
    NameConflict,
    controlled_by,
    name_conflict,
    wanted_controller,
    with_name_conflicts,
    withheld_by,
)
from kaiwo_executor.execution_memo import (
    ExecutionMemo,
    OwnerMemo,
    content_hash,
    manifest_key,
    object_key,
    ref_key,
)
from kaiwo_executor.metrics import ExecutorMetrics
from kaiwo_executor.node_merge import node_patch
from kaiwo_executor.owner_metadata import label_changes, merged_finalizers

FIELD_MANAGER = OPERATOR_FIELD_MANAGER
STALE_STATUS = "the owner changed since the plan was made; the plan of its newer version writes it"
COMPONENT = "kaiwo-executor"
EVENT_API_VERSION = "v1"

T = TypeVar("T")
log = structlog.get_logger("kaiwo.executor")


@runtime_checkable
class KindResolver(Protocol):
    """Finds a kind the catalogue does not know (the kubernetes_asyncio adapter can)."""

    async def resolve(self, api_version: str, kind: str) -> ResourceType: ...


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


@dataclass(frozen=True, slots=True)
class _Failure:
    """A call that did not succeed: its action outcome, and whether to retry the plan."""

    outcome: ActionOutcome
    exhausted: bool
    message: str
    api_reason: str = ""
    """The API server's reason for a final refusal (``Invalid``, ``Forbidden``...)."""
    api_message: str = ""
    """The API server's own message for a final refusal."""


@dataclass(slots=True)
class _Run:
    """The state of one plan being carried out."""

    plan: Plan
    fingerprint: str
    memo: OwnerMemo
    absent: frozenset[str]
    drifted: frozenset[str]
    desired_keys: frozenset[str]
    first_touch: bool = False
    """No executor ever acted for this owner: no child of ours can exist yet."""
    recreate: set[str] = field(default_factory=set)
    """Keys named ``absent`` whose manifest was applied before unchanged: create only."""
    replacing: frozenset[str] = frozenset()
    """Keys of desired objects the plan also deletes (``Plan.delete``): the old object goes
    first, the new one is created, never applied over the old (decision 0048)."""
    refusals: list[Refusal] = field(default_factory=list)
    """Desired objects the API server refused to apply for good (``ApplyRefused``)."""
    conflicts: list[NameConflict] = field(default_factory=list)
    """Objects holding a name the plan wants without being the owner's (never adopted)."""
    unread: set[str] = field(default_factory=set)
    """Keys whose name could not be checked (the read failed): not written this time."""
    actions: list[ActionOutcome] = field(default_factory=list)
    must_retry: bool = False


def manifest_ref(manifest: dict[str, Any]) -> ObjectRef:
    metadata = manifest.get("metadata") or {}
    return ObjectRef(
        api_version=str(manifest.get("apiVersion", "")),
        kind=str(manifest.get("kind", "")),
        name=str(metadata.get("name", "")),
        namespace=metadata.get("namespace") or None,
        uid=metadata.get("uid") or None,
    )


def event_name(owner: ObjectRef, *, fingerprint: str, reason: str, about: str = "") -> str:
    """The deterministic name of the Event a plan records (``<owner>.<16 hex digits>``)."""
    seed = "\x1f".join((owner.uid or ref_key(owner), fingerprint, reason, about))
    return f"{owner.name[:236]}.{hashlib.sha256(seed.encode()).hexdigest()[:16]}"


def label_selector(labels: dict[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def _is_node(manifest: dict[str, Any]) -> bool:
    return (manifest.get("apiVersion"), manifest.get("kind")) == (NODE.api_version, NODE.kind)


def _is_owners(
    metadata: dict[str, Any], *, selector: dict[str, str], owner_uid: str | None
) -> bool:
    """Whether a child found by name is the owner's: its inventory labels and controller."""
    labels = metadata.get("labels") or {}
    if not selector or any(labels.get(k) != v for k, v in selector.items()):
        return False
    return not owner_uid or controlled_by(metadata, owner_uid)


def _reason_of(error: KubeError) -> str:
    message = " ".join(error.message.split()) or f"the API server answered {error.code}"
    return f"{error.reason}: {message}" if error.reason else message


def _http_status(code: int) -> int | None:
    return code if 100 <= code <= 599 else None


class PlanExecutor:
    """Carries out plans with the Kubernetes port; see the module docstring."""

    def __init__(
        self,
        kube: KubernetesPort,
        memo: ExecutionMemo,
        *,
        clock: Callable[[], datetime],
        retry: RetryPolicy | None = None,
        metrics: ExecutorMetrics | None = None,
        sleep: Sleep = asyncio.sleep,
        jitter: Jitter = random.random,
    ) -> None:
        self._kube = kube
        self._memo = memo
        self._clock = clock
        self._retry = retry or RetryPolicy()
        self._metrics = metrics or ExecutorMetrics()
        self._sleep = sleep
        self._jitter = jitter

    # ------------------------------------------------------------------ the plan

    async def execute(
        self, decision: PlanDecidedV1, *, plan_id: str, sequence: int = 0
    ) -> Execution:
        """Carry out ``decision`` (whose event id is ``plan_id``, stored at ``sequence`` of
        the plan stream) and save what was done.

        What was done, and the plan id, are saved by :meth:`remember` once the result is
        published (a plan that must be retried is saved at once): a crash in between repeats
        the execution (server-side apply: no change), never loses the result.
        A plan superseded by a later plan of its owner is skipped (see the memo).
        """
        plan = decision.plan
        memo = await self._memo.load(plan.owner)
        if memo.executed(plan_id):
            return Execution(plan_id=plan_id, owner=plan.owner, skipped=True, memo=memo)
        if memo.superseded(sequence=sequence, planned_at=decision.planned_at):
            return Execution(
                plan_id=plan_id, owner=plan.owner, skipped=True, superseded=True, memo=memo
            )
        memo.start_plan(sequence=sequence, planned_at=decision.planned_at)
        first_touch = not memo.stored
        if first_touch:
            # Recorded before any write, so "no record" keeps meaning "nothing of ours exists".
            await self._memo.save(plan.owner, memo)
        run = _Run(
            plan=plan,
            fingerprint=decision.fingerprint,
            memo=memo,
            absent=frozenset(ref_key(ref) for ref in decision.absent),
            drifted=frozenset(ref_key(ref) for ref in decision.drifted),
            desired_keys=frozenset(manifest_key(manifest) for manifest in plan.desired),
            first_touch=first_touch,
            replacing=frozenset(ref_key(target) for target in plan.delete),
        )
        await self._delete_children(run)
        await self._check_names(run)
        for manifest in plan.desired:
            await self._apply_desired(run, manifest)
        for manifest in plan.shared:
            await self._share(run, manifest)
        kept = run.desired_keys | {manifest_key(m) for m in plan.shared}
        memo.objects = {k: v for k, v in memo.objects.items() if k in kept}
        if plan.status is not None:
            since = run.memo.name_conflict_since or self._clock()
            status = with_name_conflicts(plan.status, run.conflicts, since=since)
            await self._write_status(run, with_refusals(status, run.refusals, now=self._clock()))
        if plan.scale is not None:
            await self._scale(run, plan.scale)
        for intent in plan.events:
            await self._emit(run, intent)
        await self._prune(run)
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

    async def _last_steps(self, run: _Run) -> None:
        """Steps 7 to 9: the owner's own metadata, the preemption, the owner's deletion."""
        plan = run.plan
        if plan.finalizers is not None or plan.owner_labels is not None:
            await self._set_owner_metadata(run)
        if plan.preempt is not None:
            await self._preempt(run, plan.preempt)
        if plan.delete_owner:
            await self._delete_owner(run)

    async def remember(self, execution: Execution) -> None:
        """Record that the plan was carried out and its result published."""
        if execution.skipped:
            return
        execution.memo.remember_plan(execution.plan_id)
        await self._memo.save(execution.owner, execution.memo)

    # ------------------------------------------------------------------ steps

    async def _check_names(self, run: _Run) -> None:
        """Never adopt (step 2 of the module docstring): find the plan's objects whose name
        is taken by an object its owner does not control, and tell the owner."""
        for manifest in run.plan.desired:
            if not self._name_unproven(run, manifest):
                continue
            key, target = manifest_key(manifest), manifest_ref(manifest)
            found = await self._guarded(functools.partial(self._live, manifest), "apply", target)
            if isinstance(found, _Failure):
                await self._fail(run, found, warning_reason="ApplyFailed")
                run.unread.add(key)
                continue
            conflict = name_conflict(manifest, found[0])
            if conflict is not None:
                run.conflicts.append(conflict)
                run.memo.objects.pop(key, None)
        run.memo.name_conflict_since = (
            (run.memo.name_conflict_since or self._clock()) if run.conflicts else None
        )
        for conflict in run.conflicts:
            await self._tell_name_conflict(run, conflict)

    def _name_unproven(self, run: _Run, manifest: dict[str, Any]) -> bool:
        """Whether the object is about to be written while nothing says it is the owner's:
        this executor never applied it, or the planner saw it missing or changed since."""
        if wanted_controller(manifest) is None or _is_node(manifest) or run.plan.create_only:
            return False
        key = manifest_key(manifest)
        if key in run.absent or key in run.drifted:
            return True
        return key not in run.memo.objects

    async def _live(self, manifest: dict[str, Any]) -> dict[str, Any] | None:
        metadata = manifest.get("metadata") or {}
        resource = await self._resource(str(manifest.get("apiVersion")), str(manifest.get("kind")))
        try:
            return await self._kube.get(
                resource, str(metadata.get("name", "")), namespace=metadata.get("namespace")
            )
        except NotFound:
            return None

    async def _tell_name_conflict(self, run: _Run, conflict: NameConflict) -> None:
        target = conflict.target
        self._count(target, "name-conflict")
        run.actions.append(
            ActionOutcome(
                operation="apply",
                target=target,
                outcome="failed",
                reason=f"{NAME_CONFLICT}: {conflict.message}",
            )
        )
        log.warning("name taken by an object the owner does not control", target=target.display())
        # Named after the object that holds the name, not the plan: a plan that changes for
        # another reason while the conflict lasts does not repeat the Warning.
        await self._create_event(
            run,
            name=event_name(
                run.plan.owner,
                fingerprint=target.uid or "",
                reason=NAME_CONFLICT,
                about=ref_key(target),
            ),
            event_type="Warning",
            reason=NAME_CONFLICT,
            message=conflict.message,
        )

    async def _apply_desired(self, run: _Run, manifest: dict[str, Any]) -> None:
        key, target = manifest_key(manifest), manifest_ref(manifest)
        if key in run.unread:
            return  # its read failed: reported, and not written blind
        if any(ref_key(conflict.target) == key for conflict in run.conflicts):
            return  # reported by _check_names
        held = withheld_by(manifest, run.conflicts)
        if held is not None:
            why = f"withheld while {held.target.display()} is not this owner's"
            self._record(run, "apply", target, "unchanged", reason=why)
            return
        if key in run.replacing:
            await self._create_replacement(run, manifest)
            return
        digest = content_hash(without_admission_gate(manifest))
        if run.memo.objects.get(key) == digest and key not in run.drifted:
            if key not in run.absent:
                self._metrics.writes_skipped.labels(kind=target.kind).inc()
                self._record(run, "apply", target, "unchanged")
                return
            run.recreate.add(key)
        run.memo.objects.pop(key, None)
        started = time.perf_counter()
        if _is_node(manifest):
            result = await self._guarded(lambda: self._patch_node(manifest), "apply", target)
        elif run.plan.create_only:
            result = await self._guarded(lambda: self._create_only(manifest), "apply", target)
        elif key in run.recreate:
            # Applied before and unchanged: the planner saw it missing, perhaps only because
            # it planned before observing the creation. Create it, never apply it again: a
            # stale plan must not overwrite what others changed since (Kueue's suspend).
            result = await self._guarded(lambda: self._recreate(manifest), "apply", target)
        else:
            result = await self._guarded(lambda: self._apply(manifest), "apply", target)
        self._metrics.apply_duration.labels(kind=target.kind).observe(time.perf_counter() - started)
        if isinstance(result, _Failure):
            self._note_refusal(run, result)
            await self._fail(run, result, warning_reason="ApplyFailed")
            return
        outcome, attempts = result
        run.memo.objects[key] = digest
        reason = "the node no longer exists" if outcome == "gone" else None
        self._record(
            run,
            "apply",
            target,
            "unchanged" if outcome in ("unchanged", "gone") else "applied",
            reason=reason,
            attempts=attempts,
        )

    async def _create_replacement(self, run: _Run, manifest: dict[str, Any]) -> None:
        """Create the object that replaces one the plan deleted (step 1). When the old one is
        still there (a finalizer holds it), nothing is remembered: a later plan, made once the
        old object is gone, creates it."""
        key, target = manifest_key(manifest), manifest_ref(manifest)
        run.memo.objects.pop(key, None)
        result = await self._guarded(lambda: self._recreate(manifest), "apply", target)
        if isinstance(result, _Failure):
            self._note_refusal(run, result)
            await self._fail(run, result, warning_reason="ApplyFailed")
            return
        outcome, attempts = result
        if outcome == "unchanged":
            waiting = "the object it replaces is still being deleted; created once it is gone"
            self._record(run, "apply", target, "unchanged", reason=waiting, attempts=attempts)
            return
        run.memo.objects[key] = content_hash(without_admission_gate(manifest))
        self._record(run, "apply", target, "applied", reason="replaced", attempts=attempts)

    @staticmethod
    def _note_refusal(run: _Run, failure: _Failure) -> None:
        if not failure.exhausted:
            run.refusals.append(
                Refusal(
                    target=failure.outcome.target,
                    reason=failure.api_reason,
                    message=failure.api_message or failure.message,
                )
            )

    async def _share(self, run: _Run, manifest: dict[str, Any]) -> None:
        """Create a shared object when missing; never update it (others use it too)."""
        key, target = manifest_key(manifest), manifest_ref(manifest)
        digest = content_hash(manifest)
        if run.memo.objects.get(key) == digest and key not in run.absent:
            self._record(run, "apply", target, "unchanged")
            return
        result = await self._guarded(lambda: self._recreate(manifest), "apply", target)
        if isinstance(result, _Failure):
            await self._fail(run, result, warning_reason="ApplyFailed")
            return
        outcome, attempts = result
        run.memo.objects[key] = digest
        recorded: ActionOutcomeKind = "applied" if outcome == "applied" else "unchanged"
        self._record(run, "apply", target, recorded, attempts=attempts)

    async def _delete_child(self, run: _Run, target: ObjectRef) -> None:
        """Delete one child the plan names, if it is still the owner's (inventory labels)."""
        selector = run.plan.prune_selector

        async def delete() -> str:
            resource = await self._resource(target.api_version, target.kind)
            try:
                live = await self._kube.get(resource, target.name, namespace=target.namespace)
            except NotFound:
                return "gone"
            metadata = live.get("metadata") or {}
            if metadata.get("uid") != target.uid:
                return "replaced"
            if not _is_owners(metadata, selector=selector, owner_uid=run.plan.owner.uid):
                return "foreign"
            if metadata.get("deletionTimestamp"):
                return "gone"
            try:
                await self._kube.delete(
                    resource,
                    target.name,
                    namespace=target.namespace,
                    propagation="Background",
                    uid=target.uid,
                )
            except NotFound:
                return "gone"
            return "deleted"

        result = await self._guarded(delete, "delete", target)
        if isinstance(result, _Failure):
            await self._fail(run, result, warning_reason="DeleteFailed")
            return
        outcome, attempts = result
        reasons = {
            "gone": "already deleted",
            "replaced": "replaced by a new object of the same name; left to the next plan",
            "foreign": "not the owner's (its inventory labels or controller differ); left alone",
        }
        self._record(
            run,
            "delete",
            target,
            "deleted" if outcome == "deleted" else "unchanged",
            reason=reasons.get(outcome),
            attempts=attempts,
        )

    async def _delete_children(self, run: _Run) -> None:
        """Step 1: the plan's explicit deletions, then the finalizers it releases."""
        for target in run.plan.delete:
            await self._delete_child(run, target)
        for release in run.plan.release_finalizers:
            await self._release_finalizers(run, release)

    async def _release_finalizers(self, run: _Run, release: FinalizerRelease) -> None:
        """Take the named finalizers off a child the plan deleted, so its deletion completes;
        only from the owner's own object of that uid, and only once it is being deleted."""
        target = release.target

        async def take_off() -> str:
            resource = await self._resource(target.api_version, target.kind)
            try:
                live = await self._kube.get(resource, target.name, namespace=target.namespace)
            except NotFound:
                return "gone"
            metadata = live.get("metadata") or {}
            if metadata.get("uid") != target.uid:
                return "gone"
            owner_uid = run.plan.owner.uid
            if not _is_owners(metadata, selector=run.plan.prune_selector, owner_uid=owner_uid):
                return "foreign"
            current = list(metadata.get("finalizers") or [])
            kept = [f for f in current if f not in release.finalizers]
            if not metadata.get("deletionTimestamp") or kept == current:
                return "unchanged"
            # The resourceVersion makes it a compare-and-swap: a finalizer added meanwhile
            # is not lost (Conflict, retried from a fresh read).
            patch = {"finalizers": kept, "resourceVersion": metadata.get("resourceVersion")}
            await self._kube.merge_patch(
                resource,
                target.name,
                {"metadata": patch},
                namespace=target.namespace,
                field_manager=FIELD_MANAGER,
            )
            return "released"

        result = await self._guarded(take_off, "delete", target)
        if isinstance(result, _Failure):
            await self._fail(run, result, warning_reason="DeleteFailed")
            return
        outcome, attempts = result
        reasons = {
            "gone": "already deleted",
            "foreign": "not the owner's (its inventory labels or controller differ); left alone",
            "unchanged": "no finalizer to release",
            "released": "released " + ", ".join(release.finalizers),
        }
        self._record(
            run,
            "delete",
            target,
            "deleted" if outcome == "released" else "unchanged",
            reason=reasons[outcome],
            attempts=attempts,
        )

    async def _set_owner_metadata(self, run: _Run) -> None:
        """The operator's finalizers and labels on the owner, as the plan names them."""
        plan = run.plan
        owner = plan.owner
        confinement = CONFINEMENTS.get((owner.api_version, owner.kind))
        if confinement is None:
            return

        async def patch() -> str:
            resource = await self._resource(owner.api_version, owner.kind)
            try:
                live = await self._kube.get(resource, owner.name, namespace=owner.namespace)
            except NotFound:
                return "gone"
            metadata = live.get("metadata") or {}
            if metadata.get("uid") != owner.uid:
                return "gone"
            # The resourceVersion makes the patch a compare-and-swap: a finalizer or label
            # another controller or the user added meanwhile is not lost (Conflict, retry).
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
                return "unchanged"
            body["resourceVersion"] = metadata.get("resourceVersion")
            await self._kube.merge_patch(
                resource,
                owner.name,
                {"metadata": body},
                namespace=owner.namespace,
                field_manager=FIELD_MANAGER,
            )
            return "applied"

        result = await self._guarded(patch, "apply", owner)
        if isinstance(result, _Failure):
            await self._fail(run, result, warning_reason="FinalizerUpdateFailed")
            return
        outcome, attempts = result
        recorded: ActionOutcomeKind = "applied" if outcome == "applied" else "unchanged"
        reason = "the owner no longer exists" if outcome == "gone" else "owner metadata"
        self._record(run, "apply", owner, recorded, reason=reason, attempts=attempts)

    async def _apply(self, manifest: dict[str, Any]) -> str:
        resource = known_type(str(manifest.get("apiVersion")), str(manifest.get("kind")))
        manager = CREATE_SUSPENDED_FIELD_MANAGER if created_suspended(manifest) else FIELD_MANAGER
        await self._kube.apply(manifest, field_manager=manager, force=True, resource=resource)
        return "applied"

    async def _create_only(self, manifest: dict[str, Any]) -> str:
        """Create ``manifest`` unless it exists, which is then left as it is.

        Created by server-side apply, not by POST: a POST's field manager owns every field the
        API server fills in from the CRD's defaults (a KaiwoConfig's whole spec), so the user's
        own apply of any of them would conflict with the operator; an apply owns only what it
        sends (the empty spec). Not forced: should the object appear between the read and the
        apply, a field the user set otherwise is a conflict (retried, then found existing),
        never overwritten.
        """
        metadata = manifest.get("metadata") or {}
        resource = await self._resource(str(manifest.get("apiVersion")), str(manifest.get("kind")))
        try:
            await self._kube.get(
                resource, str(metadata.get("name", "")), namespace=metadata.get("namespace")
            )
        except NotFound:
            await self._kube.apply(
                manifest, field_manager=FIELD_MANAGER, force=False, resource=resource
            )
            return "applied"
        return "unchanged"

    async def _recreate(self, manifest: dict[str, Any]) -> str:
        try:
            await self._kube.create(manifest, field_manager=FIELD_MANAGER)
        except AlreadyExists:
            return "unchanged"
        return "applied"

    async def _patch_node(self, intent: dict[str, Any]) -> str:
        name = str((intent.get("metadata") or {}).get("name", ""))
        try:
            live = await self._kube.get(NODE, name)
        except NotFound:
            return "gone"  # the planner will stop asking once it sees the node deleted
        patch = node_patch(intent, live)
        if patch is None:
            return "unchanged"
        await self._kube.merge_patch(NODE, name, patch, field_manager=FIELD_MANAGER)
        return "applied"

    async def _write_status(self, run: _Run, status: dict[str, Any]) -> None:
        owner = run.plan.owner
        digest = content_hash(status)
        if run.memo.status == digest:
            self._record(run, "status", owner, "unchanged")
            return

        async def write() -> str:
            resource = await self._resource(owner.api_version, owner.kind)
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
                return "gone"
            except Conflict as error:
                if isinstance(error, AlreadyExists):
                    raise
                return "stale"
            return "applied"

        result = await self._guarded(write, "status", owner)
        if isinstance(result, _Failure):
            await self._fail(run, result, warning_reason="StatusUpdateFailed")
            return
        outcome, attempts = result
        if outcome == "gone":
            self._record(run, "status", owner, "unchanged", reason="the owner no longer exists")
            return
        if outcome == "stale":
            # Planned from an older version of the owner: writing it would undo newer writes.
            # The planner plans the newer version too (its resourceVersion is in the plan).
            self._record(run, "status", owner, "unchanged", reason=STALE_STATUS)
            return
        run.memo.status = digest
        self._record(run, "status", owner, "applied", attempts=attempts)

    async def _preempt(self, run: _Run, intent: PreemptIntent) -> None:
        if intent.action == "delete":
            await self._delete(run, intent.target, operation="preempt")
            return
        scale = ScaleIntent(
            target=intent.target, replicas=0, from_replicas=intent.from_replicas or 0
        )
        await self._scale(run, scale, operation="preempt")

    async def _scale(
        self, run: _Run, intent: ScaleIntent, *, operation: Operation = "scale"
    ) -> None:
        target = intent.target

        async def scale() -> str:
            resource = await self._resource(target.api_version, target.kind)
            try:
                live = await self._kube.get(resource, target.name, namespace=target.namespace)
            except NotFound:
                return "gone"
            if (live.get("metadata") or {}).get("uid") != target.uid:
                return "gone"
            current = (live.get("spec") or {}).get("replicas")
            if (current or 0) == intent.replicas:
                return "unchanged"
            if (current or 0) != intent.from_replicas:
                return "moved"
            try:
                await self._set_replicas(
                    resource, target, current=current, replicas=intent.replicas, operation=operation
                )
            except Invalid:
                # The test of the replicas failed: they changed since they were read.
                again = await self._kube.get(resource, target.name, namespace=target.namespace)
                if (again.get("spec") or {}).get("replicas") != current:
                    return "moved"
                raise
            return "applied"

        result = await self._guarded(scale, operation, target)
        if isinstance(result, _Failure):
            await self._fail(run, result, warning_reason="ScaleFailed")
            return
        outcome, attempts = result
        reasons = {
            "gone": "the owner no longer exists",
            "unchanged": f"already at {intent.replicas} replicas",
            "moved": (
                f"no longer at the {intent.from_replicas} replicas the decision started from; "
                "left to the next decision"
            ),
            "applied": f"replicas {intent.from_replicas} -> {intent.replicas}",
        }
        self._record(
            run,
            operation,
            target,
            "applied" if outcome == "applied" else "unchanged",
            reason=reasons[outcome],
            attempts=attempts,
        )

    async def _set_replicas(
        self,
        resource: ResourceType,
        target: ObjectRef,
        *,
        current: int | None,
        replicas: int,
        operation: Operation,
    ) -> None:
        """Set the replicas, holding only while they are ``current`` (Invalid otherwise)."""
        if operation != "preempt":
            await self._kube.patch_scale(
                resource,
                target.name,
                replicas=replicas,
                expected_replicas=current,
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

    async def _emit(self, run: _Run, intent: EventIntent) -> None:
        owner = run.plan.owner
        name = event_name(owner, fingerprint=run.fingerprint, reason=intent.reason)
        await self._create_event(
            run, name=name, event_type=intent.type, reason=intent.reason, message=intent.message
        )

    async def _create_event(
        self,
        run: _Run,
        *,
        name: str,
        event_type: Literal["Normal", "Warning"],
        reason: str,
        message: str,
    ) -> bool:
        """Create the Event once; False when creating it failed."""
        owner = run.plan.owner
        manifest = event_manifest(
            involved={
                "apiVersion": owner.api_version,
                "kind": owner.kind,
                "metadata": {
                    key: value
                    for key, value in (
                        ("name", owner.name),
                        ("namespace", owner.namespace),
                        ("uid", owner.uid),
                    )
                    if value
                },
            },
            event_type=event_type,
            reason=reason,
            message=message,
            component=COMPONENT,
            now=self._clock(),
        )
        manifest["metadata"]["name"] = name
        target = ObjectRef(
            api_version=EVENT_API_VERSION,
            kind="Event",
            name=name,
            namespace=manifest["metadata"]["namespace"],
        )
        if run.memo.event_done(fingerprint=run.fingerprint, name=name):
            self._record(run, "event", target, "unchanged")
            return True

        async def create() -> str:
            try:
                await self._kube.create(manifest, field_manager=FIELD_MANAGER)
            except AlreadyExists:
                return "unchanged"  # created before a crash or by an earlier delivery
            return "applied"

        result = await self._guarded(create, "event", target)
        if isinstance(result, _Failure):
            self._count(target, "failed")
            run.actions.append(result.outcome)
            run.must_retry = run.must_retry or result.exhausted
            return False
        outcome, attempts = result
        run.memo.remember_event(fingerprint=run.fingerprint, name=name)
        recorded: ActionOutcomeKind = "unchanged" if outcome == "unchanged" else "applied"
        self._record(run, "event", target, recorded, attempts=attempts)
        return True

    async def _prune(self, run: _Run) -> None:
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
        if run.first_touch:
            # Only what this plan applied carries the owner's labels: nothing to list.
            run.memo.pruned_for = inventory
            return
        complete = True
        for rule in plan.prune:
            complete = await self._prune_kind(run, rule) and complete
        run.memo.pruned_for = inventory if complete else None

    async def _prune_kind(self, run: _Run, rule: PruneRule) -> bool:
        """Delete the undesired children of one kind; False when something failed."""
        owner = run.plan.owner
        namespace = owner.namespace if rule.namespaced else None
        # A failed list is reported against the kind as a whole ("Job/team-a/*").
        kind_ref = ObjectRef(
            api_version=rule.api_version, kind=rule.kind, name="*", namespace=namespace
        )

        async def children() -> list[dict[str, Any]]:
            try:
                resource = await self._resource(rule.api_version, rule.kind)
                listed = await self._kube.list(
                    resource,
                    namespace=namespace,
                    label_selector=label_selector(run.plan.prune_selector),
                )
            except NotFound:
                return []  # the kind is not served (its API is not installed): nothing to prune
            return listed.items

        found = await self._guarded(children, "delete", kind_ref)
        if isinstance(found, _Failure):
            await self._fail(run, found, warning_reason="PruneFailed")
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
            complete = await self._delete(run, target, operation="delete") and complete
        return complete

    async def _delete_owner(self, run: _Run) -> None:
        if await self._delete(run, run.plan.owner, operation="delete-owner"):
            run.memo.forget_effects()

    async def _delete(self, run: _Run, target: ObjectRef, *, operation: Operation) -> bool:
        """Delete ``target`` (uid precondition, background); False when it failed."""

        async def delete() -> str:
            resource = await self._resource(target.api_version, target.kind)
            try:
                await self._kube.delete(
                    resource,
                    target.name,
                    namespace=target.namespace,
                    propagation="Background",
                    uid=target.uid,
                )
            except NotFound:
                return "gone"
            except Conflict:
                # A failed uid precondition: the object was replaced by a new one of the
                # same name, which the next plan judges. Any other conflict is retried.
                if await self._replaced(resource, target):
                    return "replaced"
                raise
            return "deleted"

        result = await self._guarded(delete, operation, target)
        if isinstance(result, _Failure):
            await self._fail(run, result, warning_reason="DeleteFailed")
            return False
        outcome, attempts = result
        reasons = {
            "gone": "already deleted",
            "replaced": "replaced by a new object of the same name; left to the next plan",
        }
        self._record(
            run,
            operation,
            target,
            "deleted" if outcome == "deleted" else "unchanged",
            reason=reasons.get(outcome),
            attempts=attempts,
        )
        return True

    async def _replaced(self, resource: ResourceType, target: ObjectRef) -> bool:
        if target.uid is None:
            return False
        try:
            live = await self._kube.get(resource, target.name, namespace=target.namespace)
        except NotFound:
            return True
        return (live.get("metadata") or {}).get("uid") != target.uid

    # ------------------------------------------------------------------ plumbing

    async def _resource(self, api_version: str, kind: str) -> ResourceType:
        known = known_type(api_version, kind)
        if known is not None:
            return known
        if isinstance(self._kube, KindResolver):
            return await self._kube.resolve(api_version, kind)
        raise NotFound(f"the executor does not know the kind {kind} in {api_version}", code=404)

    async def _guarded(
        self, call: Callable[[], Awaitable[T]], operation: Operation, target: ObjectRef
    ) -> tuple[T, int] | _Failure:
        """``call`` with retries: its value and attempts, or the failure as an outcome."""
        try:
            done = await call_with_retries(
                call,
                policy=self._retry,
                sleep=self._sleep,
                jitter=self._jitter,
                on_retry=self._count_retry,
            )
        except RetriesExhausted as exhausted:
            error = exhausted.error
            reason = f"gave up after {exhausted.attempts} attempts: {_reason_of(error)}"
            return _Failure(
                ActionOutcome(
                    operation=operation,
                    target=target,
                    outcome="failed",
                    reason=reason,
                    http_status=_http_status(error.code),
                    attempts=exhausted.attempts,
                ),
                exhausted=True,
                message=reason,
            )
        except KubeError as error:
            return _Failure(
                ActionOutcome(
                    operation=operation,
                    target=target,
                    outcome="failed",
                    reason=_reason_of(error),
                    http_status=_http_status(error.code),
                ),
                exhausted=False,
                message=_reason_of(error),
                api_reason=error.reason,
                api_message=error.message or f"the API server answered {error.code}",
            )
        return done.value, done.attempts

    async def _fail(self, run: _Run, failure: _Failure, *, warning_reason: str) -> None:
        """Record a failed action; for a final refusal, tell people with a Warning Event."""
        outcome = failure.outcome
        self._count(outcome.target, "failed")
        run.actions.append(outcome)
        log.warning(
            "action failed",
            operation=outcome.operation,
            target=outcome.target.display(),
            reason=outcome.reason,
            retry_plan=failure.exhausted,
        )
        if failure.exhausted:
            run.must_retry = True
            return
        about = f"{outcome.operation}:{ref_key(outcome.target)}"
        await self._create_event(
            run,
            name=event_name(
                run.plan.owner, fingerprint=run.fingerprint, reason=warning_reason, about=about
            ),
            event_type="Warning",
            reason=warning_reason,
            message=f"{outcome.operation} {outcome.target.display()} failed: {failure.message}",
        )

    def _record(
        self,
        run: _Run,
        operation: Operation,
        target: ObjectRef,
        outcome: ActionOutcomeKind,
        *,
        reason: str | None = None,
        attempts: int = 1,
    ) -> None:
        self._count(target, outcome)
        run.actions.append(
            ActionOutcome(
                operation=operation,
                target=target,
                outcome=outcome,
                reason=reason,
                attempts=attempts,
            )
        )

    def _count(self, target: ObjectRef, outcome: str) -> None:
        self._metrics.actions.labels(kind=target.kind, outcome=outcome).inc()

    def _count_retry(self, code: int) -> None:
        self._metrics.api_retries.labels(code=str(code)).inc()
