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

from kaiwo_contracts.events.consumers import (
    DEAD_LETTER_RELAY,
    PLANNER_FINDINGS_CONSUMER,
    PLANNER_SCALE_CONSUMER,
    ConsumerSpec,
    consumer_specs,
)
from kaiwo_contracts.events.partitions import SubjectTransform, partition_transform, uid_partition
from kaiwo_contracts.events.stream_names import (
    DEAD_LETTER_STREAM,
    GATEWAY_STREAM,
    MAX_DELIVERIES_ADVISORY,
    MONITOR_STREAM,
    OBSERVED_STREAM,
    PLAN_STREAM,
    PUBLIC_STREAM,
    RESULT_STREAM,
)
from kaiwo_contracts.events.subjects import CLUSTER_SCOPE, Family, family_filter, live_subject

DAY = 24 * 3600.0

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


@dataclass(frozen=True, slots=True)
class Republish:
    """JetStream's RePublish: each stored message whose subject matches ``source`` is
    published again on ``destination``, with the stream, its stored subject and its
    sequence in ``Nats-*`` headers."""

    source: str
    destination: str


def live_republish(stored: str) -> Republish:
    """A stream's republishing of what it stores under ``stored`` to its live subjects
    (decision 0287)."""
    return Republish(source=stored, destination=live_subject(stored))


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
    republish: Republish | None = None
    """Where the stream publishes again each message it stored (its live subjects)."""

    def __post_init__(self) -> None:
        if not 0 < self.duplicate_window_seconds <= self.max_age_seconds:
            msg = f"{self.name}: duplicate window must be > 0 and <= max_age"
            raise ValueError(msg)


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
            republish=live_republish(family_filter(family)),
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
            republish=live_republish(family_filter(Family.GATEWAY)),
        ),
        StreamSpec(
            name=DEAD_LETTER_STREAM,
            subjects=(family_filter(Family.DEAD_LETTER), f"{MAX_DELIVERIES_ADVISORY}.>"),
            description="Dead letters with their reason, and max-deliveries advisories",
            max_age_seconds=max(30 * DAY, max_age_seconds),
            duplicate_window_seconds=duplicate_window_seconds,
            replicas=replicas,
            max_bytes=limits[DEAD_LETTER_STREAM],
            republish=live_republish(family_filter(Family.DEAD_LETTER)),
        ),
        StreamSpec(
            name=PUBLIC_STREAM,
            subjects=(family_filter(Family.PUBLIC),),
            description="Public workload events for subscribers",
            max_age_seconds=max(PUBLIC_MAX_AGE_SECONDS, max_age_seconds),
            duplicate_window_seconds=max(PUBLIC_DUPLICATE_WINDOW_SECONDS, duplicate_window_seconds),
            replicas=replicas,
            max_bytes=limits[PUBLIC_STREAM],
            republish=live_republish(family_filter(Family.PUBLIC)),
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
    "Republish",
    "StreamSpec",
    "SubjectTransform",
    "bus_topology",
    "consumer_specs",
    "live_republish",
    "partition_transform",
    "stream_max_bytes",
    "stream_specs",
    "uid_partition",
]
