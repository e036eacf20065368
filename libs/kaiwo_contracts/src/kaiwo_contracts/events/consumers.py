"""The durable pull consumers of the services, the recorder and the dead-letter relay (their
names, filters, redelivery backoff and messages in flight; see
:mod:`kaiwo_contracts.events.streams` for the policy).
"""

from __future__ import annotations

from dataclasses import dataclass

from kaiwo_contracts.events.stream_names import (
    DEAD_LETTER_STREAM,
    GATEWAY_STREAM,
    MAX_DELIVERIES_ADVISORY,
    MONITOR_STREAM,
    OBSERVED_STREAM,
    PLAN_STREAM,
    RESULT_STREAM,
)
from kaiwo_contracts.events.subjects import (
    Family,
    dead_letter_subject,
    family_filter,
    subscription_filter,
)

DEAD_LETTER_RELAY = "bus-deadletter-relay"
PLANNER_FINDINGS_CONSUMER = "planner-mon"
PLANNER_SCALE_CONSUMER = "planner-scale"

DEFAULT_BACKOFF_SECONDS: tuple[float, ...] = (5.0, 15.0, 60.0, 180.0)
DEFAULT_MAX_DELIVER = 5
"""One delivery per backoff entry, plus the first: the last retry waits ``backoff[-1]`` once,
so an always-failing message blocks its consumer for ``sum(backoff)`` = 260 s."""
EXECUTOR_PLANS_IN_FLIGHT = 16
"""Plans of different owners the executor carries out at once (API calls overlap)."""
RETRIES_AWAITED = 1024
"""Messages of a consumer ``ordered_by_uid`` that may wait for a retry (nak'ed, still
unacknowledged through their backoff) besides those it handles: one per owner whose API calls
keep failing, so that many failing owners do not hold up the plans of the others
(decision 0234)."""


@dataclass(frozen=True, slots=True)
class ConsumerSpec:
    """A durable pull consumer with explicit ack."""

    durable_name: str
    stream: str
    filter_subjects: tuple[str, ...]
    description: str
    max_deliver: int = DEFAULT_MAX_DELIVER
    backoff_seconds: tuple[float, ...] = DEFAULT_BACKOFF_SECONDS
    max_ack_pending: int = 1
    ack_wait_seconds: float = 30.0
    """Used only when ``backoff_seconds`` is empty (the server takes ``backoff[0]`` instead)."""
    ordered_by_uid: bool = False
    """Handle the messages of different uids (the subject's uid token) of one fetched batch
    concurrently, each uid's in stream order. A message nak'ed for a retry is redelivered
    after later messages of its uid, so the handler must recognise a superseded one."""
    at_once: int = 0
    """Messages handled, or waiting in their uid's lane, at once (0: ``max_ack_pending``).
    Fewer than ``max_ack_pending`` leaves the server room for messages nak'ed for a retry:
    they stay unacknowledged through their backoff, and would otherwise take every slot
    while their API calls keep failing, so no other message would be delivered."""

    def __post_init__(self) -> None:
        if self.max_deliver < 1:
            raise ValueError(f"{self.durable_name}: max_deliver must be finite and >= 1")
        if self.backoff_seconds and self.max_deliver <= len(self.backoff_seconds):
            # The server refuses a backoff list at least as long as max_deliver.
            raise ValueError(f"{self.durable_name}: max_deliver must exceed len(backoff)")
        if any(ch in self.durable_name for ch in ".*>/\\ \t"):
            raise ValueError(f"{self.durable_name!r} is not a valid consumer name")
        if not 0 <= self.at_once <= self.max_ack_pending:
            raise ValueError(f"{self.durable_name}: at_once must be within max_ack_pending")

    @property
    def handled_at_once(self) -> int:
        """How many messages a consumer loop takes on at once (see :attr:`at_once`)."""
        return self.at_once or self.max_ack_pending

    @property
    def dead_letter_subject(self) -> str:
        return dead_letter_subject(stream=self.stream, consumer=self.durable_name)

    def retry_delay(self, attempt: int) -> float:
        """Delay before delivery ``attempt + 1`` after ``attempt`` failed (1-based)."""
        if not self.backoff_seconds:
            return self.ack_wait_seconds
        return self.backoff_seconds[min(max(attempt, 1), len(self.backoff_seconds)) - 1]

    @property
    def poison_bound_seconds(self) -> float:
        """The longest a message whose handler always fails waits for retries before it is
        dead-lettered (on delivery ``max_deliver``): the consumer's other messages wait as
        long when ``max_ack_pending`` is 1. The handler's own time comes on top."""
        return sum(self.retry_delay(attempt) for attempt in range(1, self.max_deliver))


def partitioned(
    *,
    service: str,
    purpose: str,
    stream: str,
    family: Family,
    partitions: int,
    description: str,
    in_flight: int = 1,
) -> tuple[ConsumerSpec, ...]:
    """One consumer, or one per partition; ``in_flight`` > 1 orders by uid, with room for
    :data:`RETRIES_AWAITED` more unacknowledged (see above). ``in_flight`` 1 keeps one
    message unacknowledged: a message waiting for its retry holds up the next, in order."""
    ordered = in_flight > 1
    unacknowledged = in_flight + RETRIES_AWAITED if ordered else in_flight
    if partitions <= 1:
        return (
            ConsumerSpec(
                durable_name=f"{service}-{purpose}",
                stream=stream,
                filter_subjects=(family_filter(family),),
                description=description,
                max_ack_pending=unacknowledged,
                ordered_by_uid=ordered,
                at_once=in_flight,
            ),
        )
    return tuple(
        ConsumerSpec(
            durable_name=f"{service}-{purpose}-p{partition}",
            stream=stream,
            filter_subjects=(subscription_filter(family, partition=partition),),
            description=f"{description} (partition {partition})",
            max_ack_pending=unacknowledged,
            ordered_by_uid=ordered,
            at_once=in_flight,
        )
        for partition in range(partitions)
    )


def consumer_specs(*, partitions: int = 1) -> tuple[ConsumerSpec, ...]:
    """The durable consumers of the services, the recorder and the dead-letter relay.

    With ``partitions`` > 1 the planner has none: its replicas read the streams by sequence
    (module docstring)."""
    planner = partitions <= 1
    ordered = (
        *(
            partitioned(
                service="planner",
                purpose="obs",
                stream=OBSERVED_STREAM,
                family=Family.OBSERVED,
                partitions=partitions,
                description="Planner input: observed objects, in order per object",
            )
            if planner
            else ()
        ),
        *partitioned(
            service="executor",
            purpose="plan",
            stream=PLAN_STREAM,
            family=Family.PLAN,
            partitions=partitions,
            description="Executor input: plans, in order per owner",
            in_flight=EXECUTOR_PLANS_IN_FLIGHT,
        ),
    )
    # The recorder keeps each message's stream sequence, so it may have many in flight.
    recorders = tuple(
        ConsumerSpec(
            durable_name=f"recorder-{family.value}",
            stream=stream,
            filter_subjects=(family_filter(family),)
            + ((f"{MAX_DELIVERIES_ADVISORY}.>",) if family is Family.DEAD_LETTER else ()),
            description=f"Recorder: every message of {stream} into the event store",
            max_ack_pending=256,
        )
        for family, stream in (
            (Family.OBSERVED, OBSERVED_STREAM),
            (Family.PLAN, PLAN_STREAM),
            (Family.RESULT, RESULT_STREAM),
            (Family.MONITOR, MONITOR_STREAM),
            (Family.GATEWAY, GATEWAY_STREAM),
            (Family.DEAD_LETTER, DEAD_LETTER_STREAM),
        )
    )
    relay = ConsumerSpec(
        durable_name=DEAD_LETTER_RELAY,
        stream=DEAD_LETTER_STREAM,
        filter_subjects=(f"{MAX_DELIVERIES_ADVISORY}.>",),
        description="Turns max-deliveries advisories into dead letters with the message",
        max_ack_pending=16,
    )
    # The planner keeps the latest finding per workload: order does not matter beyond the
    # stream's own, and a finding lost is made good by the monitor's next tick.
    findings = ConsumerSpec(
        durable_name=PLANNER_FINDINGS_CONSUMER,
        stream=MONITOR_STREAM,
        filter_subjects=(f"{family_filter(Family.MONITOR).removesuffix('>')}utilization.>",),
        description="Planner input: the monitor's utilization findings",
        max_ack_pending=64,
    )
    # Likewise the autoscaler's latest decision per Model; the next decision restates it.
    scaling = ConsumerSpec(
        durable_name=PLANNER_SCALE_CONSUMER,
        stream=GATEWAY_STREAM,
        filter_subjects=(f"{family_filter(Family.GATEWAY).removesuffix('>')}scale.>",),
        description="Planner input: the autoscaler's scale decisions",
        max_ack_pending=64,
    )
    return (*ordered, *((findings, scaling) if planner else ()), *recorders, relay)
