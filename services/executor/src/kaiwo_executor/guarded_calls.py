"""What every step of a plan shares: calls against the API server with retries, the record of
their outcomes (``ActionOutcome`` and the ``kaiwo_executor_actions`` counter), the plan's
Events, and the Warning that tells people about a final refusal."""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

import structlog
from kaiwo_contracts.events.results import ActionOutcome, ActionOutcomeKind, Operation
from kaiwo_contracts.plans import OPERATOR_FIELD_MANAGER, ObjectRef
from kaiwo_kube import AlreadyExists, KubeError, NotFound, ResourceType
from kaiwo_kube.events import event_manifest
from kaiwo_kube.resources import known_type

from kaiwo_executor.api_retries import (
    Jitter,
    RetriesExhausted,
    RetryPolicy,
    Sleep,
    call_with_retries,
)
from kaiwo_executor.apply_refusals import NOT_SERVED, Refusal, not_served_message
from kaiwo_executor.cluster_port import ExecutorCluster
from kaiwo_executor.execution_memo import ref_key
from kaiwo_executor.metrics import ExecutorMetrics
from kaiwo_executor.plan_run import PlanRun
from kaiwo_executor.step_outcomes import StepOutcome, kind_of, reason_for

FIELD_MANAGER = OPERATOR_FIELD_MANAGER
COMPONENT = "kaiwo-executor"
EVENT_API_VERSION = "v1"

T = TypeVar("T")
log = structlog.get_logger("kaiwo.executor")

Counted = ActionOutcomeKind | Literal["name-conflict", "previous-run"]
"""The ``outcome`` label values of ``kaiwo_executor_actions``."""


@runtime_checkable
class KindResolver(Protocol):
    """Finds a kind the catalogue does not know (the kubernetes_asyncio adapter can)."""

    async def resolve(self, api_version: str, kind: str) -> ResourceType: ...


@dataclass(frozen=True, slots=True)
class Failure:
    """A call that did not succeed: its action outcome, and whether to retry the plan."""

    outcome: ActionOutcome
    exhausted: bool
    message: str
    api_reason: str = ""
    """The API server's reason for a final refusal (``Invalid``, ``Forbidden``...)."""
    api_message: str = ""
    """The API server's own message for a final refusal."""

    def refusal(self) -> Refusal | None:
        """The refusal a failed apply shows in the plan's status (``ApplyRefused``); None for
        a failure the plan is retried for."""
        if self.exhausted:
            return None
        return Refusal(
            target=self.outcome.target,
            reason=self.api_reason,
            message=self.api_message or self.message,
        )


def event_name(owner: ObjectRef, *, fingerprint: str, reason: str, about: str = "") -> str:
    """The deterministic name of the Event a plan records (``<owner>.<16 hex digits>``)."""
    seed = "\x1f".join((owner.uid or ref_key(owner), fingerprint, reason, about))
    return f"{owner.name[:236]}.{hashlib.sha256(seed.encode()).hexdigest()[:16]}"


def involved_object(owner: ObjectRef) -> dict[str, Any]:
    """``owner`` as the object an Event is about (the fields it has, and only those)."""
    metadata = {
        key: value
        for key, value in (("name", owner.name), ("namespace", owner.namespace), ("uid", owner.uid))
        if value
    }
    return {"apiVersion": owner.api_version, "kind": owner.kind, "metadata": metadata}


def _reason_of(error: KubeError) -> str:
    message = " ".join(error.message.split()) or f"the API server answered {error.code}"
    return f"{error.reason}: {message}" if error.reason else message


_ROUTER_NOT_FOUND = "404 page not found"
"""The plain-text answer of the API server's router to a path no API serves: the group or
version is not installed. A 404 of an API handler is a Status (``namespaces "x" not found``)."""


def _not_served(error: KubeError) -> bool:
    return error.code == 404 and " ".join(error.message.split()) == _ROUTER_NOT_FOUND


def _http_status(code: int) -> int | None:
    return code if 100 <= code <= 599 else None


class GuardedCalls:
    """The plumbing of the steps: the port, retries, the outcomes recorded, the Events."""

    def __init__(
        self,
        kube: ExecutorCluster,
        *,
        clock: Callable[[], datetime],
        retry: RetryPolicy | None = None,
        metrics: ExecutorMetrics | None = None,
        sleep: Sleep = asyncio.sleep,
        jitter: Jitter = random.random,
    ) -> None:
        self.kube = kube
        self.clock = clock
        self.metrics = metrics or ExecutorMetrics()
        self._retry = retry or RetryPolicy()
        self._sleep = sleep
        self._jitter = jitter

    async def resource(self, api_version: str, kind: str) -> ResourceType:
        known = known_type(api_version, kind)
        if known is not None:
            return known
        if isinstance(self.kube, KindResolver):
            return await self.kube.resolve(api_version, kind)
        raise NotFound(f"the executor does not know the kind {kind} in {api_version}", code=404)

    async def read_same(self, target: ObjectRef) -> tuple[ResourceType, dict[str, Any] | None]:
        """``target``'s resource type, and the live object while it is still the one of
        ``target``'s uid (None: gone, or another object of that name stands there now)."""
        resource = await self.resource(target.api_version, target.kind)
        try:
            live = await self.kube.get(resource, target.name, namespace=target.namespace)
        except NotFound:
            return resource, None
        if (live.get("metadata") or {}).get("uid") != target.uid:
            return resource, None
        return resource, live

    async def patch_metadata_unless_changed(
        self,
        resource: ResourceType,
        target: ObjectRef,
        changes: dict[str, Any],
        *,
        read_at: str | None,
    ) -> None:
        """Merge ``changes`` into ``target``'s metadata as a compare-and-swap on the
        resourceVersion it was read at: a finalizer or label another controller or the user
        added meanwhile is not lost (Conflict, retried from a fresh read)."""
        await self.kube.merge_patch(
            resource,
            target.name,
            {"metadata": {**changes, "resourceVersion": read_at}},
            namespace=target.namespace,
            field_manager=FIELD_MANAGER,
        )

    async def guarded(
        self, call: Callable[[], Awaitable[T]], operation: Operation, target: ObjectRef
    ) -> tuple[T, int] | Failure:
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
            return Failure(
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
            if _not_served(error):
                # The router's bare 404 names nothing a user can act on; the component
                # to install does.
                said = not_served_message(target.api_version, target.kind)
                api_reason, api_message = NOT_SERVED, said
            else:
                said = _reason_of(error)
                api_reason = error.reason
                api_message = error.message or f"the API server answered {error.code}"
            return Failure(
                ActionOutcome(
                    operation=operation,
                    target=target,
                    outcome="failed",
                    reason=said,
                    http_status=_http_status(error.code),
                ),
                exhausted=False,
                message=said,
                api_reason=api_reason,
                api_message=api_message,
            )
        return done.value, done.attempts

    def record(
        self,
        run: PlanRun,
        operation: Operation,
        target: ObjectRef,
        outcome: StepOutcome,
        *,
        reason: str | None = None,
        attempts: int = 1,
    ) -> None:
        """Record a step's outcome, with its own ``reason`` or the table's."""
        kind = kind_of(outcome)
        self.count(target, kind)
        run.actions.append(
            ActionOutcome(
                operation=operation,
                target=target,
                outcome=kind,
                reason=reason_for(outcome, reason),
                attempts=attempts,
            )
        )

    async def fail(self, run: PlanRun, failure: Failure, *, warning_reason: str) -> None:
        """Record a failed action; for a final refusal, tell people with a Warning Event."""
        outcome = failure.outcome
        self.count(outcome.target, "failed")
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
        await self.create_event(
            run,
            name=event_name(
                run.plan.owner, fingerprint=run.fingerprint, reason=warning_reason, about=about
            ),
            event_type="Warning",
            reason=warning_reason,
            message=f"{outcome.operation} {outcome.target.display()} failed: {failure.message}",
        )

    async def create_event(
        self,
        run: PlanRun,
        *,
        name: str,
        event_type: Literal["Normal", "Warning"],
        reason: str,
        message: str,
    ) -> bool:
        """Create the Event once; False when creating it failed."""
        owner = run.plan.owner
        manifest = event_manifest(
            involved=involved_object(owner),
            event_type=event_type,
            reason=reason,
            message=message,
            component=COMPONENT,
            now=self.clock(),
        )
        manifest["metadata"]["name"] = name
        target = ObjectRef(
            api_version=EVENT_API_VERSION,
            kind="Event",
            name=name,
            namespace=manifest["metadata"]["namespace"],
        )
        if run.memo.event_done(fingerprint=run.fingerprint, name=name):
            self.record(run, "event", target, StepOutcome.UNCHANGED)
            return True

        async def create() -> StepOutcome:
            try:
                await self.kube.create(manifest, field_manager=FIELD_MANAGER)
            except AlreadyExists:
                return StepOutcome.UNCHANGED  # created before a crash or by an earlier delivery
            return StepOutcome.APPLIED

        result = await self.guarded(create, "event", target)
        if isinstance(result, Failure):
            self.count(target, "failed")
            run.actions.append(result.outcome)
            run.must_retry = run.must_retry or result.exhausted
            return False
        outcome, attempts = result
        run.memo.remember_event(fingerprint=run.fingerprint, name=name)
        self.record(run, "event", target, outcome, attempts=attempts)
        return True

    def count(self, target: ObjectRef, outcome: Counted) -> None:
        self.metrics.actions.labels(kind=target.kind, outcome=outcome).inc()

    def _count_retry(self, code: int) -> None:
        self.metrics.api_retries.labels(code=str(code)).inc()
