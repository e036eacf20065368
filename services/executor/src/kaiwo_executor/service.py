"""The executor service: plans in from ``executor-plan``, API calls out, results published.

For each ``PlanDecidedV1`` delivery:

* an envelope or payload that cannot be read (the one decoder,
  :meth:`~kaiwo_runtime.bus.Delivery.envelope`, says so) is dead-lettered at once, never
  retried;
* admission's reads are retried as API calls are (below); when they run out of retries the
  plan is delivered again after the consumer's backoff, and dead-lettered on the last;
* a plan that admission refuses (:mod:`~kaiwo_executor.plan_admission`: its owner does not
  exist with its uid, a source it was made from is not what the API server holds, or it
  writes or prunes outside its owner's confinement) is dead-lettered with the reasons,
  counted, told on its owner as a Warning Event ``PlanRefused``, and published as a
  ``PlanRefusedV1`` on ``kaiwo.res.refused.…`` naming the objects that differed: the watcher
  observes them again, so the planner plans from what the API server holds (decision 0038).
  Nothing of it is applied. Except when the owner was deleted while its plan was on its way
  (this executor read it or carried out a plan of it before, or the watcher observed it):
  then the plan is dropped, without a dead letter, and only the refusal is published;
* a plan made from an older version of its owner or a configuration object (*stale*: the
  planner plans the newer version as well) is acknowledged without an API write or a result;
* the plan is carried out by :class:`~kaiwo_executor.apply_plan.PlanExecutor`; a plan already
  carried out (redelivery after a crash), or superseded by a later plan of its owner (a retry
  that came back after it), is acknowledged without an API call or a result;
* plans of different owners are carried out concurrently (``executor-plan`` is
  ``ordered_by_uid``), those of one owner in stream order;
* an :class:`~kaiwo_contracts.events.results.ApplyResultV1` is published on
  ``kaiwo.res.<applied|failed>.<kind>.<scope>.<uid>``, caused by the plan envelope (same
  correlation id, ``causationid`` = the plan's id). Its id is derived from the plan's id, so a
  result re-published after a crash is dropped by JetStream as a duplicate;
* when an API call ran out of retries on a retryable error (the API server is overloaded or
  down), no result is published and :class:`~kaiwo_runtime.bus.RetryLater` has JetStream
  deliver the plan again after the consumer's backoff; what succeeded is in the memo, so the
  next delivery only repeats what failed. On the last allowed delivery the result is
  published as ``failed`` and the plan goes to the dead-letter subject.

The plan id is remembered only after its result is published, so every carried-out plan has
exactly one result.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Iterable
from datetime import datetime

import structlog
from kaiwo_contracts.events.envelope import (
    Envelope,
    derived_event_id,
    service_source,
)
from kaiwo_contracts.events.partitions import stored_subject
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.results import ApplyResultV1, PlanRefusedV1
from kaiwo_contracts.events.streams import OBSERVED_STREAM, BusTopology, ConsumerSpec
from kaiwo_contracts.events.subjects import observed_subject, result_subject
from kaiwo_contracts.plans import ObjectRef, Plan
from kaiwo_kube import KubeError
from kaiwo_runtime.bus import Bus, BusError, Delivery, PoisonMessage, RetryLater
from kaiwo_runtime.kv import KeyValue
from kaiwo_runtime.logging import bind_event, bound_context
from kaiwo_runtime.settlement import run_consumer

from kaiwo_executor.api_retries import (
    Jitter,
    RetriedReads,
    RetriesExhausted,
    RetryPolicy,
    Sleep,
)
from kaiwo_executor.apply_plan import Execution, PlanExecutor
from kaiwo_executor.cluster_port import ExecutorCluster
from kaiwo_executor.execution_memo import ExecutionMemo
from kaiwo_executor.guarded_calls import COMPONENT, involved_object
from kaiwo_executor.metrics import ExecutorMetrics
from kaiwo_executor.plan_admission import Admission, PlanAdmission

SERVICE = "executor"
SOURCE = service_source(SERVICE)
PLAN_CONSUMER = "executor-plan"
BUCKET = "kaiwo-executor"

log = structlog.get_logger("kaiwo.executor")


def executor_consumers(topology: BusTopology) -> tuple[ConsumerSpec, ...]:
    """The plan consumers: ``executor-plan``, or one per partition in partition order."""
    return tuple(
        spec
        for spec in topology.consumers
        if spec.durable_name == PLAN_CONSUMER or spec.durable_name.startswith(f"{PLAN_CONSUMER}-p")
    )


def partition_consumer(topology: BusTopology, partition: int) -> ConsumerSpec:
    """The plan consumer of one partition (``executor-plan-p<partition>``)."""
    return topology.consumer(f"{PLAN_CONSUMER}-p{partition}")


def result_id(plan_id: str) -> str:
    """The id of a plan's result: the same plan always gets the same result id."""
    return derived_event_id("result", plan_id)


class ExecutorService:
    """Consumes plans, carries them out, publishes their results."""

    def __init__(
        self,
        bus: Bus,
        kube: ExecutorCluster,
        kv: KeyValue,
        clock: Callable[[], datetime],
        *,
        metrics: ExecutorMetrics | None = None,
        retry: RetryPolicy | None = None,
        consumers: Iterable[ConsumerSpec] | None = None,
        sleep: Sleep = asyncio.sleep,
        jitter: Jitter = random.random,
        # A stop is noticed between pulls: a pull waits at most this long for a plan.
        poll_timeout: float = 1.0,
    ) -> None:
        self.bus = bus
        self.clock = clock
        self.metrics = metrics or ExecutorMetrics()
        self.executor = PlanExecutor(
            kube,
            ExecutionMemo(kv),
            clock=clock,
            retry=retry,
            metrics=self.metrics,
            sleep=sleep,
            jitter=jitter,
        )
        self.consumers = (
            tuple(consumers) if consumers is not None else executor_consumers(bus.topology)
        )
        if not self.consumers:
            raise ValueError("the bus topology has no executor-plan consumer")
        self._max_deliver = {spec.durable_name: spec.max_deliver for spec in self.consumers}
        self._kube = kube
        self.admission = PlanAdmission(
            RetriedReads(
                kube,
                policy=retry or RetryPolicy(),
                sleep=sleep,
                jitter=jitter,
                on_retry=self._count_read_retry,
            )
        )
        self._poll_timeout = poll_timeout

    async def run(self, stop: asyncio.Event) -> None:
        """Process every plan consumer until ``stop`` is set."""
        async with asyncio.TaskGroup() as group:
            for spec in self.consumers:
                group.create_task(
                    run_consumer(
                        self.bus, spec, self.handle, stop=stop, poll_timeout=self._poll_timeout
                    )
                )

    def partition_work(self) -> PartitionConsumers:
        """Reads the consumers of the partitions this replica holds, one task each."""
        return PartitionConsumers(self)

    async def run_partition(self, spec: ConsumerSpec, stop: asyncio.Event) -> None:
        """Process one partition's consumer until ``stop`` (the batch in hand is finished)."""
        await run_consumer(self.bus, spec, self.handle, stop=stop, poll_timeout=self._poll_timeout)

    async def step(self, *, wait_seconds: float = 0.0) -> int:
        """Pull once from each consumer and handle what came; how many messages (tests)."""
        handled = 0
        for spec in self.consumers:
            handled += await self.bus.process(spec, self.handle, wait_seconds=wait_seconds)
        return handled

    async def handle(self, delivery: Delivery) -> None:
        """Carry out one delivered plan (see the module docstring)."""
        envelope = delivery.envelope(PlanDecidedV1)  # EnvelopeFormatError: dead-lettered
        owner = envelope.data.plan.owner
        context = {
            "uid": owner.uid,
            "kind": owner.kind,
            "namespace": owner.namespace,
            "name": owner.name,
        }
        with bind_event(envelope), bound_context(context):
            await self._carry_out(envelope, delivery)

    def _count_read_retry(self, code: int) -> None:
        self.metrics.api_retries.labels(code=str(code)).inc()

    async def _carry_out(self, envelope: Envelope[PlanDecidedV1], delivery: Delivery) -> None:
        try:
            admission = await self.admission.check(envelope.data.plan)
        except RetriesExhausted as exhausted:
            # Nothing was written: JetStream delivers the plan again after its backoff, and
            # the last delivery dead-letters it with this reason.
            self.metrics.plan_handled("retry")
            raise RetryLater(
                f"the API server kept failing the plan's admission reads: {exhausted}"
            ) from exhausted
        for check in admission.mismatched:
            verdict = "refused" if check.verdict == "differs" else "stale"
            self.metrics.source_mismatches.labels(
                source_kind=check.source.ref.kind, verdict=verdict
            ).inc()
        if admission.refusals and await self._deleted_meanwhile(envelope.data.plan, admission):
            # Deleted while the plan was on its way: nothing to carry out and nothing to
            # alarm anyone with (no dead letter); the watcher still observes it again.
            self.metrics.plan_handled("owner_deleted")
            log.info("plan for an owner deleted meanwhile; dropped")
            await self._publish_refusal(envelope, admission)
            return
        if admission.refusals:
            raise await self._refuse(envelope, admission)
        if admission.stale:
            self.metrics.plan_handled("stale")
            log.info("plan made from an older version; dropped", sources=list(admission.stale))
            return
        execution = await self.executor.execute(
            envelope.data,
            plan_id=envelope.id,
            sequence=delivery.stream_sequence,
            owner_created_at=admission.owner_created_at,
        )
        if execution.superseded:
            self.metrics.plan_handled("superseded")
            log.info("plan superseded by a later plan of its owner", attempt=delivery.attempt)
            return
        if execution.skipped:
            self.metrics.plan_handled("skipped")
            log.info("plan already carried out", attempt=delivery.attempt)
            return
        last_delivery = delivery.attempt >= self._max_deliver.get(delivery.consumer, 1)
        if execution.must_retry and not last_delivery:
            self.metrics.plan_handled("retry")
            raise RetryLater(_retry_reason(execution))
        result = await self._publish_result(envelope, execution)
        self.metrics.plan_handled(result.outcome)
        if execution.must_retry:
            # The last delivery: the failed result is out; the plan goes to the dead letters.
            raise RetryLater(_retry_reason(execution))
        await self.executor.remember(execution)
        log.info(
            "plan carried out",
            outcome=result.outcome,
            actions=len(result.actions),
            failures=len(result.failures),
        )

    async def _deleted_meanwhile(self, plan: Plan, admission: Admission) -> bool:
        """The owner is gone, and it existed with the plan's uid: this process read it before,
        this executor carried out plans for that uid (its memo, which survives restarts, was
        written only for owners admission found), or the watcher observed it (only the
        watcher's key publishes observations). Anything else is a claim about an object that
        never was, and is refused."""
        if admission.owner_deleted:
            return True
        if not admission.owner_absent or not plan.owner.uid:
            return False
        return await self.executor.carried_out_for(plan.owner) or await self._observed(plan.owner)

    async def _observed(self, owner: ObjectRef) -> bool:
        """Whether ``KAIWO_OBS`` holds an observation of ``owner``'s uid: a plan made from
        it, for an owner deleted before any plan of it was carried out, is no forgery. One
        stored read, only when an owner is missing."""
        uid = owner.uid or ""
        subject = observed_subject(kind=owner.kind, namespace=owner.namespace, uid=uid)
        stored = stored_subject(subject, uid=uid, partitions=self.bus.topology.partitions)
        try:
            return await self.bus.read_next_stored(OBSERVED_STREAM, 1, subjects=stored) is not None
        except BusError as error:
            log.warning("could not read the owner's observations", error=str(error))
            return False

    async def _refuse(
        self, envelope: Envelope[PlanDecidedV1], admission: Admission
    ) -> PoisonMessage:
        """Count, log and tell the refusal (on the owner, when it exists) and publish it; the
        error returned, once raised by the caller, dead-letters the plan."""
        plan = envelope.data.plan
        owner = plan.owner
        self.metrics.plans_refused.labels(owner_kind=owner.kind).inc()
        reason = "; ".join(admission.refusals)
        log.warning(
            "plan refused",
            reasons=list(admission.refusals),
            reobserve=[ref.display() for ref in admission.reobserve],
        )
        if admission.owner_found:
            await self._tell_refusal(owner, reason)
        await self._publish_refusal(envelope, admission)
        return PoisonMessage(f"plan refused: {reason}")

    async def _tell_refusal(self, owner: ObjectRef, reason: str) -> None:
        """A Warning Event ``PlanRefused`` on the owner (best effort: the refusal stands)."""
        with contextlib.suppress(KubeError):
            await self._kube.create_event(
                involved=involved_object(owner),
                type="Warning",
                reason="PlanRefused",
                message=f"A plan for this object was refused and not applied: {reason}"[:1024],
                component=COMPONENT,
                now=self.clock(),
            )

    async def _publish_refusal(
        self, envelope: Envelope[PlanDecidedV1], admission: Admission
    ) -> None:
        """``PlanRefusedV1`` on ``kaiwo.res.refused.…``: for the record, and for the watcher,
        which observes ``reobserve`` again. Its id is derived from the plan's: a redelivered
        plan refused again is one event."""
        owner = envelope.data.plan.owner
        refusal = PlanRefusedV1(
            plan_id=envelope.id,
            plan_fingerprint=envelope.data.fingerprint,
            owner=owner,
            reasons=tuple(reason[:1024] for reason in admission.refusals[:64]),
            reobserve=admission.reobserve[:16],
        )
        published = envelope.caused(
            data=refusal,
            source=SOURCE,
            time=self.clock(),
            id=derived_event_id("refused", envelope.id),
        )
        subject = result_subject(
            outcome="refused",
            kind=owner.kind,
            namespace=owner.namespace,
            uid=owner.uid or envelope.correlationid,
        )
        await self.bus.publish(published, subject)

    async def _publish_result(
        self, envelope: Envelope[PlanDecidedV1], execution: Execution
    ) -> ApplyResultV1:
        owner = envelope.data.plan.owner
        result = ApplyResultV1.summarise(
            plan_id=envelope.id,
            plan_fingerprint=envelope.data.fingerprint,
            owner=owner,
            actions=execution.actions,
        )
        published = envelope.caused(
            data=result, source=SOURCE, time=self.clock(), id=result_id(envelope.id)
        )
        subject = result_subject(
            outcome=result.outcome,
            kind=owner.kind,
            namespace=owner.namespace,
            uid=owner.uid or envelope.correlationid,
        )
        await self.bus.publish(published, subject)
        return result


class PartitionConsumers:
    """The executor's :class:`~kaiwo_runtime.partition_leases.PartitionWork`: a partition
    gained starts a task on its consumer; one released is stopped after the plans in hand
    are carried out (and acknowledged), so its next holder starts after them."""

    def __init__(self, service: ExecutorService) -> None:
        self._service = service
        self._running: dict[int, tuple[asyncio.Event, asyncio.Task[None]]] = {}

    @property
    def partitions(self) -> frozenset[int]:
        return frozenset(self._running)

    async def gained(self, partition: int) -> None:
        spec = partition_consumer(self._service.bus.topology, partition)
        stop = asyncio.Event()
        task = asyncio.create_task(self._service.run_partition(spec, stop))
        self._running[partition] = (stop, task)

    async def released(self, partition: int) -> None:
        found = self._running.pop(partition, None)
        if found is None:
            return
        stop, task = found
        stop.set()
        await task


def _retry_reason(execution: Execution) -> str:
    failed = "; ".join(
        f"{action.operation} {action.target.display()}: {action.reason}"
        for action in execution.failed
    )
    return f"the API server kept failing: {failed}"
