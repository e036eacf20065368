"""JetStream streams and durable consumers, as plain data (the bus adapter creates them).

Streams (one per subject family, ``limits`` retention so every consumer and the recorder
read the same log; file storage; an explicit duplicate window because the server silently
substitutes 2 minutes for 0):

============= ====================== =========================================
stream        subjects               holds
============= ====================== =========================================
KAIWO_OBS     ``kaiwo.obs.>``        observed objects (watcher)
KAIWO_PLAN    ``kaiwo.plan.>``       plan decisions (planner)
KAIWO_RES     ``kaiwo.res.>``        apply results (executor)
KAIWO_MON     ``kaiwo.mon.>``        utilization and preemption (monitor)
KAIWO_GATEWAY ``kaiwo.gateway.>``    load reports and scale decisions (gateway)
KAIWO_DLQ     ``kaiwo.dlq.>`` and    dead letters, and the server's max-deliveries
              max-deliveries         advisories (so none is lost while no relay runs)
              advisories
KAIWO_PUBLIC  ``kaiwo.public.>``     public workload events for subscribers (planner)
============= ====================== =========================================

``KAIWO_PUBLIC`` is read by subscribers outside the operator only: no operator consumer,
no partitions, no recorder (every public event is derived from observations the event store
keeps). It keeps :data:`PUBLIC_MAX_AGE_SECONDS` and :data:`PUBLIC_DUPLICATE_WINDOW_SECONDS`
of its own: a subscriber may be away longer than a service, and a planner restarted from an
older snapshot derives the same events again under the same ids.

Every stream has a byte limit as well as an age limit (``max_bytes``,
:data:`DEFAULT_STREAM_MAX_BYTES`, configurable per stream): JetStream then discards the oldest
messages when a stream is full, instead of filling the disk under a flood. A consumer that
had not read them by then never will; the recorder notices such a gap and reports it.

Consumers are durable pull consumers named ``<service>-<purpose>`` with explicit ack, a
finite ``max_deliver`` and a ``backoff`` list (the server uses ``backoff[0]`` as the ack
wait and the following entries for later ack timeouts; the bus uses the same list as the
delay of a ``nak``).

How long one message can hold up a consumer that handles one at a time
(:attr:`ConsumerSpec.poison_bound_seconds`): a message that cannot be decoded is
dead-lettered on its first delivery; one whose handler always fails is retried after
``retry_delay(1)``, ..., ``retry_delay(max_deliver - 1)`` and dead-lettered on delivery
``max_deliver``: with the defaults 5 + 15 + 60 + 180 = 260 s, plus the handler's own time
on each of the 5 deliveries (decision 0005).

Ordering and partitions. JetStream delivers a consumer's messages in stream order, but a
message that is nak'ed or times out is redelivered *after* messages that followed it unless
at most one message is in flight. The planner and the executor need per-object order, so
the planner's consumer has ``max_ack_pending=1``. The executor's has more in flight and is
``ordered_by_uid``: it carries out plans of different owners concurrently, those of one owner
in order, and skips a redelivered plan that a later plan of its owner superseded (plans are
whole desired states). To run several active replicas without giving up per-object order,
set ``partitions`` > 1: the workload streams then store every subject with one more token,
``{{partition(n, <uid token>)}}``, so all events of one uid land in one partition, and the
executor gets one consumer per partition (``executor-plan-p3``), read by whichever replica
holds that partition's lease (``executor.p3``, :mod:`kaiwo_runtime.partition_leases`).
The planner then has no consumer at all: every planner replica reads the whole of
``KAIWO_OBS`` (and the findings and scale decisions) by stream sequence, so each keeps the
whole cluster in its projection, and plans only the owners of the partitions it holds
(``planner.p3``; decision 0030). A durable consumer shared by active planners would hand
each one a part of the messages.
Changing ``partitions`` on a live system re-partitions only new messages; drain first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from kaiwo_contracts.events.subjects import (
    CLUSTER_SCOPE,
    Family,
    dead_letter_subject,
    family_filter,
    subscription_filter,
    uid_token,
)

OBSERVED_STREAM = "KAIWO_OBS"
PLAN_STREAM = "KAIWO_PLAN"
RESULT_STREAM = "KAIWO_RES"
MONITOR_STREAM = "KAIWO_MON"
GATEWAY_STREAM = "KAIWO_GATEWAY"
DEAD_LETTER_STREAM = "KAIWO_DLQ"
PUBLIC_STREAM = "KAIWO_PUBLIC"

MAX_DELIVERIES_ADVISORY = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"
"""Prefix of the advisory the server publishes when a message runs out of deliveries;
the full subject is ``<prefix>.<stream>.<consumer>``."""

DEAD_LETTER_RELAY = "bus-deadletter-relay"
PLANNER_FINDINGS_CONSUMER = "planner-mon"
PLANNER_SCALE_CONSUMER = "planner-scale"

DAY = 24 * 3600.0

DEFAULT_BACKOFF_SECONDS: tuple[float, ...] = (5.0, 15.0, 60.0, 180.0)
DEFAULT_MAX_DELIVER = 5
"""One delivery per backoff entry, plus the first: the last retry waits ``backoff[-1]`` once,
so an always-failing message blocks its consumer for ``sum(backoff)`` = 260 s."""
DEFAULT_DUPLICATE_WINDOW_SECONDS = 120.0

MIB = 1024 * 1024
DEFAULT_STREAM_MAX_BYTES: dict[str, int] = {
    OBSERVED_STREAM: 2048 * MIB,
    PLAN_STREAM: 1024 * MIB,
    RESULT_STREAM: 512 * MIB,
    MONITOR_STREAM: 256 * MIB,
    GATEWAY_STREAM: 256 * MIB,
    DEAD_LETTER_STREAM: 256 * MIB,
    PUBLIC_STREAM: 256 * MIB,
}
"""Bytes each stream may hold before JetStream discards its oldest messages (4.5 GiB in all).
Sized for a week of a busy cluster (observations ~1-5 KB, plans ~5-20 KB); JetStream
reserves the sum against its storage limit at creation, so the sum must fit the disk."""
PUBLIC_MAX_AGE_SECONDS = 30 * DAY
"""How long public workload events are kept (longer if the other streams keep longer)."""
PUBLIC_DUPLICATE_WINDOW_SECONDS = 3600.0
"""Copies of a public event (same ``Nats-Msg-Id``) published within this window are dropped:
longer than the planner's snapshot interval, so events re-derived after a restart are."""
EXECUTOR_PLANS_IN_FLIGHT = 16
"""Plans of different owners the executor carries out at once (API calls overlap)."""

# Token index (wildcard number, from 1) of the uid in each partitioned family's source filter.
_PARTITION_SOURCES: dict[Family, tuple[str, int]] = {
    Family.OBSERVED: ("kaiwo.obs.*.*.*", 3),
    Family.PLAN: ("kaiwo.plan.*.*.*", 3),
    Family.RESULT: ("kaiwo.res.*.*.*.*", 4),
    Family.MONITOR: ("kaiwo.mon.*.*.*", 3),
}


@dataclass(frozen=True, slots=True)
class SubjectTransform:
    source: str
    destination: str


@dataclass(frozen=True, slots=True)
class StreamSpec:
    name: str
    subjects: tuple[str, ...]
    description: str
    max_age_seconds: float
    duplicate_window_seconds: float = DEFAULT_DUPLICATE_WINDOW_SECONDS
    retention: Literal["limits", "interest", "workqueue"] = "limits"
    storage: Literal["file", "memory"] = "file"
    replicas: int = 1
    max_bytes: int = -1
    subject_transform: SubjectTransform | None = None

    def __post_init__(self) -> None:
        if not 0 < self.duplicate_window_seconds <= self.max_age_seconds:
            msg = f"{self.name}: duplicate window must be > 0 and <= max_age"
            raise ValueError(msg)


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

    def __post_init__(self) -> None:
        if self.max_deliver < 1:
            raise ValueError(f"{self.durable_name}: max_deliver must be finite and >= 1")
        if self.backoff_seconds and self.max_deliver <= len(self.backoff_seconds):
            # The server refuses a backoff list at least as long as max_deliver.
            raise ValueError(f"{self.durable_name}: max_deliver must exceed len(backoff)")
        if any(ch in self.durable_name for ch in ".*>/\\ \t"):
            raise ValueError(f"{self.durable_name!r} is not a valid consumer name")

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


@dataclass(frozen=True, slots=True)
class BusTopology:
    """Every stream and durable consumer of one deployment."""

    partitions: int
    streams: tuple[StreamSpec, ...]
    consumers: tuple[ConsumerSpec, ...] = field(default=())

    def stream(self, name: str) -> StreamSpec:
        return next(spec for spec in self.streams if spec.name == name)

    def consumer(self, durable_name: str) -> ConsumerSpec:
        return next(spec for spec in self.consumers if spec.durable_name == durable_name)


def fnv1a_32(data: bytes) -> int:
    """32-bit FNV-1a, the hash JetStream's ``partition()`` transform uses."""
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def uid_partition(uid: str, partitions: int) -> int:
    """The partition JetStream stores events of ``uid`` in (``{{partition(n, uid)}}``)."""
    return fnv1a_32(uid_token(uid).encode()) % partitions


def partition_transform(family: Family, partitions: int) -> SubjectTransform | None:
    """The stream transform that appends the uid's partition, or None for one partition."""
    if partitions <= 1:
        return None
    source, uid_index = _PARTITION_SOURCES[family]
    wildcards = source.count("*")
    kept = ".".join(f"{{{{wildcard({index})}}}}" for index in range(1, wildcards + 1))
    prefix = source.split(".*", 1)[0]
    return SubjectTransform(
        source=source,
        destination=f"{prefix}.{kept}.{{{{partition({partitions},{uid_index})}}}}",
    )


def stream_specs(
    *,
    partitions: int = 1,
    replicas: int = 1,
    max_age_seconds: float = 7 * DAY,
    duplicate_window_seconds: float = DEFAULT_DUPLICATE_WINDOW_SECONDS,
    max_bytes: Mapping[str, int] | None = None,
) -> tuple[StreamSpec, ...]:
    """The streams; ``max_bytes`` overrides :data:`DEFAULT_STREAM_MAX_BYTES` per stream name
    (-1: no byte limit)."""
    if partitions < 1:
        raise ValueError("partitions must be >= 1")
    limits = stream_max_bytes(max_bytes)

    def workload_stream(name: str, family: Family, description: str) -> StreamSpec:
        return StreamSpec(
            name=name,
            subjects=(family_filter(family),),
            description=description,
            max_age_seconds=max_age_seconds,
            duplicate_window_seconds=duplicate_window_seconds,
            replicas=replicas,
            max_bytes=limits[name],
            subject_transform=partition_transform(family, partitions),
        )

    return (
        workload_stream(OBSERVED_STREAM, Family.OBSERVED, "Objects observed in the cluster"),
        workload_stream(PLAN_STREAM, Family.PLAN, "Plans decided by the planner"),
        workload_stream(RESULT_STREAM, Family.RESULT, "Results of applying plans"),
        workload_stream(MONITOR_STREAM, Family.MONITOR, "GPU utilization and preemption"),
        # Not partitioned (like the findings of KAIWO_MON that the planner reads with one
        # consumer): a load report belongs to a gateway replica, not to a workload.
        StreamSpec(
            name=GATEWAY_STREAM,
            subjects=(family_filter(Family.GATEWAY),),
            description="Gateway load reports and the autoscaler's scale decisions",
            max_age_seconds=max_age_seconds,
            duplicate_window_seconds=duplicate_window_seconds,
            replicas=replicas,
            max_bytes=limits[GATEWAY_STREAM],
        ),
        StreamSpec(
            name=DEAD_LETTER_STREAM,
            subjects=(family_filter(Family.DEAD_LETTER), f"{MAX_DELIVERIES_ADVISORY}.>"),
            description="Dead letters with their reason, and max-deliveries advisories",
            max_age_seconds=max(30 * DAY, max_age_seconds),
            duplicate_window_seconds=duplicate_window_seconds,
            replicas=replicas,
            max_bytes=limits[DEAD_LETTER_STREAM],
        ),
        StreamSpec(
            name=PUBLIC_STREAM,
            subjects=(family_filter(Family.PUBLIC),),
            description="Public workload events for subscribers",
            max_age_seconds=max(PUBLIC_MAX_AGE_SECONDS, max_age_seconds),
            duplicate_window_seconds=max(PUBLIC_DUPLICATE_WINDOW_SECONDS, duplicate_window_seconds),
            replicas=replicas,
            max_bytes=limits[PUBLIC_STREAM],
        ),
    )


def stream_max_bytes(overrides: Mapping[str, int] | None = None) -> dict[str, int]:
    """:data:`DEFAULT_STREAM_MAX_BYTES` with ``overrides``; refuses unknown stream names and
    limits that are neither -1 (none) nor large enough for one message."""
    limits = dict(DEFAULT_STREAM_MAX_BYTES)
    for name, limit in (overrides or {}).items():
        if name not in limits:
            known = ", ".join(limits)
            raise ValueError(f"no stream {name!r} to limit (the streams are {known})")
        if limit != -1 and limit < MIB:
            raise ValueError(f"{name}: max_bytes must be -1 or at least {MIB} (one message)")
        limits[name] = limit
    return limits


def _partitioned(
    *,
    service: str,
    purpose: str,
    stream: str,
    family: Family,
    partitions: int,
    description: str,
    in_flight: int = 1,
) -> tuple[ConsumerSpec, ...]:
    """One consumer, or one per partition; ``in_flight`` > 1 orders by uid (see above)."""
    if partitions <= 1:
        return (
            ConsumerSpec(
                durable_name=f"{service}-{purpose}",
                stream=stream,
                filter_subjects=(family_filter(family),),
                description=description,
                max_ack_pending=in_flight,
                ordered_by_uid=in_flight > 1,
            ),
        )
    return tuple(
        ConsumerSpec(
            durable_name=f"{service}-{purpose}-p{partition}",
            stream=stream,
            filter_subjects=(subscription_filter(family, partition=partition),),
            description=f"{description} (partition {partition})",
            max_ack_pending=in_flight,
            ordered_by_uid=in_flight > 1,
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
            _partitioned(
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
        *_partitioned(
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


def bus_topology(
    *,
    partitions: int = 1,
    replicas: int = 1,
    max_age_seconds: float = 7 * DAY,
    duplicate_window_seconds: float = DEFAULT_DUPLICATE_WINDOW_SECONDS,
    max_bytes: Mapping[str, int] | None = None,
) -> BusTopology:
    return BusTopology(
        partitions=partitions,
        streams=stream_specs(
            partitions=partitions,
            replicas=replicas,
            max_age_seconds=max_age_seconds,
            duplicate_window_seconds=duplicate_window_seconds,
            max_bytes=max_bytes,
        ),
        consumers=consumer_specs(partitions=partitions),
    )


__all__ = [
    "CLUSTER_SCOPE",
    "DEAD_LETTER_RELAY",
    "DEAD_LETTER_STREAM",
    "DEFAULT_STREAM_MAX_BYTES",
    "GATEWAY_STREAM",
    "MAX_DELIVERIES_ADVISORY",
    "MONITOR_STREAM",
    "OBSERVED_STREAM",
    "PLANNER_FINDINGS_CONSUMER",
    "PLANNER_SCALE_CONSUMER",
    "PLAN_STREAM",
    "PUBLIC_DUPLICATE_WINDOW_SECONDS",
    "PUBLIC_MAX_AGE_SECONDS",
    "PUBLIC_STREAM",
    "RESULT_STREAM",
    "BusTopology",
    "ConsumerSpec",
    "StreamSpec",
    "SubjectTransform",
    "bus_topology",
    "consumer_specs",
    "partition_transform",
    "stream_max_bytes",
    "stream_specs",
    "uid_partition",
]
