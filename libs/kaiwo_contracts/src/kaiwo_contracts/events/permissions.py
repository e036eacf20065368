"""Who may do what on the bus: one NATS identity per service, the CLI and the administrator.

Every permission set is derived here, from the topology (:mod:`kaiwo_contracts.events.streams`),
and nowhere else: ``kaiwo up``, ``kaiwo nats credentials`` (compose, Kubernetes) and the
tests render the nats-server configuration from :func:`operator_identities`.

=========  =========================================================================
identity   may
=========  =========================================================================
admin      declare streams and consumers (``$JS.API.>``), publish and read any event
watcher    publish ``kaiwo.obs.>``; its bucket ``kaiwo-watcher``; subscribe to the
           executor's refusals ``kaiwo.res.refused.>`` (it observes their sources again)
planner    read its consumers ``planner-obs`` (and stored observations), ``planner-mon``
           (the monitor's utilization findings) and ``planner-scale`` (the autoscaler's
           decisions), publish ``kaiwo.plan.>``,
           the public workload events ``kaiwo.public.>`` and its dead letters; its bucket,
           the ``planner`` lease; read the watcher's bucket (the cluster it records).
           With partitions: no consumer, stored reads of ``KAIWO_OBS``, ``KAIWO_MON`` and
           ``KAIWO_GATEWAY``, the leases ``planner.>``
executor   read ``executor-plan`` (or ``executor-plan-p<k>``), publish ``kaiwo.res.>`` and
           its dead letters; its bucket, the ``executor`` lease (or ``executor.>``)
monitor    publish ``kaiwo.mon.>``; its bucket ``kaiwo-monitor``, the ``monitor`` lease
gateway    read stored observations of Models and Pods (``KAIWO_OBS``, by sequence) and
           subscribe to ``kaiwo.obs.model.>`` and ``kaiwo.obs.pod.>`` (wake-ups); publish
           its load reports and the autoscaler's decisions (``kaiwo.gateway.>``) and
           subscribe to the load reports (``kaiwo.gateway.load.>``); its bucket
           ``kaiwo-autoscaler``, the ``autoscaler`` lease. No consumer: a right to create
           consumers on ``KAIWO_OBS`` would let it reconfigure the planner's.
           The messenger (decision 0049): read ``gateway-messenger`` of ``KAIWO_MSG_REQ``,
           publish every tenant's answers and dead requests (``kaiwo-messenger.*.responses``,
           ``.dead``)
recorder   read its ``recorder-*`` consumers and the dead-letter relay, read stored
           messages of every stream and the watcher's bucket (the cluster it records),
           publish dead letters ``kaiwo.dlq.>`` (the relay turns max-deliveries
           advisories into dead letters) and nothing else
console    read stored observations of every kind (``KAIWO_OBS``, by sequence) and subscribe
           to ``kaiwo.obs.>`` (wake-ups); publishes nothing, no consumer, no bucket
cli        subscribe to what carries no object (``kaiwo events tail``): the public workload
           events, results and refusals, findings and the gateway's reports and decisions;
           not observations, plans or dead letters (whole objects, literal ``env`` values
           included: a reader's key reads those). Publish nothing
subscriber read the public workload events (``kaiwo.public.>``, stream ``KAIWO_PUBLIC``)
           live or through consumers of any name on that stream; nothing else
reader     (:func:`reader_identity`, for external subscribers) subscribe ``kaiwo.>`` and
           read the streams through durable consumers named after itself
tenant-ns  (:func:`tenant_identity`, one per namespace using the messenger) publish
           ``kaiwo-messenger.<ns>.requests``, read ``kaiwo-messenger.<ns>.responses`` live or
           through its own durable consumer ``tenant-<ns>``; nothing else
=========  =========================================================================

Besides the subjects above, an identity that uses JetStream needs its API subjects. They
are granted per object, never ``$JS.API.>``: ``STREAM.INFO`` of the streams it uses,
``CONSUMER.INFO`` and ``CONSUMER.MSG.NEXT`` of its own durable consumers and their ack
subjects ``$JS.ACK.<stream>.<consumer>.>``, and for each key-value bucket it owns the
bucket's stream ``KV_<bucket>`` (create when missing, info, direct and stored reads, the
ordered consumer that lists keys, its flow control) and its keys ``$KV.<bucket>.>``.
Replies arrive on an inbox of the identity's own (``_INBOX.<identity>.>``, see
:func:`inbox_prefix`), so no identity can read the answers meant for another.

Streams and the operator's durable consumers are declared by the administrator only
(``kaiwo up``, ``kaiwo nats provision``); a service with an identity checks they exist.
The key-value buckets are created by the service that owns them, on first use: their
settings (the lease bucket's ttl) belong to the service.
"""

from __future__ import annotations

from collections.abc import Iterable

from kaiwo_contracts.events.messenger import (
    DEAD,
    REQUEST_STREAM,
    RESPONSE_STREAM,
    RESPONSES,
    SUBJECT_ROOT,
    TENANT_PREFIX,
    TenantSubjects,
    messenger_consumer,
)
from kaiwo_contracts.events.permission_blocks import (
    EVERYTHING,
    JS_ACK,
    JS_API,
    JS_FLOW_CONTROL,
    KV_PREFIX,
    Identity,
    Permissions,
    api,
    bucket,
    checked_name,
    consuming,
    inbox_prefix,
    lease_keys,
    reading_bucket,
    service,
    stored_reads,
    stream_info,
    unique,
)
from kaiwo_contracts.events.streams import (
    DEAD_LETTER_RELAY,
    DEAD_LETTER_STREAM,
    GATEWAY_STREAM,
    MONITOR_STREAM,
    OBSERVED_STREAM,
    PLAN_STREAM,
    PUBLIC_STREAM,
    RESULT_STREAM,
    BusTopology,
    ConsumerSpec,
)
from kaiwo_contracts.events.subjects import Family, family_filter

ADMIN = "admin"
WATCHER = "watcher"
PLANNER = "planner"
EXECUTOR = "executor"
MONITOR = "monitor"
RECORDER = "recorder"
CLI = "cli"
GATEWAY = "gateway"
CONSOLE = "console"
SUBSCRIBER = "subscriber"
SERVICES: tuple[str, ...] = (WATCHER, PLANNER, EXECUTOR, MONITOR, RECORDER)
"""The operator's services, each with an identity of its own."""
GATEWAY_OBSERVED_KINDS: tuple[str, ...] = ("model", "pod")
"""The observations the gateway reads (kind tokens)."""

SERVICE_BUCKETS: dict[str, str] = {
    WATCHER: "kaiwo-watcher",
    PLANNER: "kaiwo-planner",
    EXECUTOR: "kaiwo-executor",
    MONITOR: "kaiwo-monitor",
}
"""The key-value bucket each service keeps its state in (the services' defaults)."""
LEASE_BUCKET = "kaiwo-leases"
"""The bucket of the planner's, the executor's, the monitor's and the autoscaler's leases
(``KAIWO_LEASE_BUCKET``)."""
AUTOSCALER_BUCKET = "kaiwo-autoscaler"
"""The autoscaler's moving averages, kept by whichever gateway replica leads it."""
AUTOSCALER_LEASE = "autoscaler"
"""The lease of the gateway replica that runs the autoscaler."""

EVENT_STREAMS: tuple[str, ...] = (
    OBSERVED_STREAM,
    PLAN_STREAM,
    RESULT_STREAM,
    MONITOR_STREAM,
    GATEWAY_STREAM,
    DEAD_LETTER_STREAM,
)
_OPERATOR_CONSUMER_PREFIXES: tuple[str, ...] = (
    *(f"{name}-" for name in (*SERVICES, GATEWAY)),
    "bus-",
    TENANT_PREFIX,
)
REFUSALS = f"kaiwo.{Family.RESULT.value}.refused.{EVERYTHING}"
"""The executor's refusals (``PlanRefusedV1``): the watcher observes their sources again."""


def _consumers(topology: BusTopology, service: str) -> tuple[ConsumerSpec, ...]:
    return tuple(spec for spec in topology.consumers if spec.durable_name.startswith(f"{service}-"))


# --------------------------------------------------------------------------- identities


def admin_identity() -> Identity:
    """Declares streams and consumers; may publish and read any event (repairs, tests)."""
    return Identity(
        name=ADMIN,
        description="administrator: declares streams and consumers, reads and re-publishes",
        permissions=Permissions(
            publish=(
                f"{JS_API}.{EVERYTHING}",
                f"{JS_ACK}.{EVERYTHING}",
                f"{JS_FLOW_CONTROL}.{EVERYTHING}",
                f"{KV_PREFIX}.{EVERYTHING}",
                f"kaiwo.{EVERYTHING}",
            ),
            subscribe=(f"{inbox_prefix(ADMIN)}.{EVERYTHING}", f"kaiwo.{EVERYTHING}"),
        ),
    )


def service_identity(name: str, topology: BusTopology) -> Identity:
    """The identity of one of :data:`SERVICES`."""
    if name == WATCHER:
        return service(
            WATCHER,
            "publishes observations; observes again what a refused plan was made from",
            publish=(
                family_filter(Family.OBSERVED),
                *stream_info((OBSERVED_STREAM,)),
                *bucket(SERVICE_BUCKETS[WATCHER]),
            ),
            streams=(OBSERVED_STREAM,),
            subscribe=(REFUSALS,),
        )
    if name == PLANNER:
        consumers = _consumers(topology, PLANNER)
        return service(
            PLANNER,
            "reads observations, monitor findings and scale decisions, publishes plans and "
            "public workload events",
            publish=(
                family_filter(Family.PLAN),
                family_filter(Family.PUBLIC),
                *stream_info(
                    (OBSERVED_STREAM, PLAN_STREAM, MONITOR_STREAM, GATEWAY_STREAM, PUBLIC_STREAM)
                ),
                *(subject for spec in consumers for subject in consuming(spec)),
                *stored_reads(OBSERVED_STREAM),
                # Active-active replicas read the findings and scale decisions by sequence.
                *(
                    subject
                    for stream in (MONITOR_STREAM, GATEWAY_STREAM)
                    if topology.partitions > 1
                    for subject in stored_reads(stream)
                ),
                *bucket(SERVICE_BUCKETS[PLANNER]),
                *bucket(LEASE_BUCKET, keys=lease_keys(PLANNER, topology.partitions)),
                *reading_bucket(SERVICE_BUCKETS[WATCHER]),
            ),
            streams=(OBSERVED_STREAM, PLAN_STREAM, MONITOR_STREAM, GATEWAY_STREAM, PUBLIC_STREAM),
            consumers=consumers,
        )
    if name == EXECUTOR:
        consumers = _consumers(topology, EXECUTOR)
        return service(
            EXECUTOR,
            "reads plans, publishes results",
            publish=(
                family_filter(Family.RESULT),
                *stream_info((PLAN_STREAM, RESULT_STREAM)),
                *(subject for spec in consumers for subject in consuming(spec)),
                *bucket(SERVICE_BUCKETS[EXECUTOR]),
                *bucket(LEASE_BUCKET, keys=lease_keys(EXECUTOR, topology.partitions)),
            ),
            streams=(PLAN_STREAM, RESULT_STREAM),
            consumers=consumers,
        )
    if name == MONITOR:
        return service(
            MONITOR,
            "publishes monitor findings",
            publish=(
                family_filter(Family.MONITOR),
                *stream_info((MONITOR_STREAM,)),
                *bucket(SERVICE_BUCKETS[MONITOR]),
                *bucket(LEASE_BUCKET, keys=(MONITOR,)),
            ),
            streams=(MONITOR_STREAM,),
        )
    if name == RECORDER:
        consumers = (*_consumers(topology, RECORDER), topology.consumer(DEAD_LETTER_RELAY))
        return service(
            RECORDER,
            "records every stream; publishes dead letters only",
            publish=(
                family_filter(Family.DEAD_LETTER),
                *stream_info(EVENT_STREAMS),
                *(subject for spec in consumers for subject in consuming(spec, dead_letters=False)),
                *(subject for stream in EVENT_STREAMS for subject in stored_reads(stream)),
                *reading_bucket(SERVICE_BUCKETS[WATCHER]),
            ),
            streams=EVENT_STREAMS,
            consumers=consumers,
        )
    if name in (GATEWAY, CONSOLE):
        return gateway_identity() if name == GATEWAY else console_identity()
    raise ValueError(f"{name!r} is not one of the services {', '.join(SERVICES)}")


def gateway_identity() -> Identity:
    """The OpenAI gateway: reads the observations of Models and Pods, reports its load and,
    while it leads the autoscaler, publishes scale decisions."""
    observed = tuple(
        f"kaiwo.{Family.OBSERVED.value}.{kind}.{EVERYTHING}" for kind in GATEWAY_OBSERVED_KINDS
    )
    load_reports = f"kaiwo.{Family.GATEWAY.value}.load.{EVERYTHING}"
    messenger = messenger_consumer()
    return Identity(
        name=GATEWAY,
        description="OpenAI gateway: reads observations of Models and Pods, reports its load, "
        "runs the autoscaler",
        permissions=Permissions(
            publish=(
                family_filter(Family.GATEWAY),
                *stream_info((OBSERVED_STREAM, GATEWAY_STREAM)),
                api("STREAM", "MSG", "GET", OBSERVED_STREAM),
                *bucket(AUTOSCALER_BUCKET),
                *bucket(LEASE_BUCKET, keys=(AUTOSCALER_LEASE,)),
                # The messenger: its requests, and every tenant's answers (decision 0049).
                *stream_info((REQUEST_STREAM, RESPONSE_STREAM)),
                *consuming(messenger, dead_letters=False),
                f"{SUBJECT_ROOT}.*.{RESPONSES}",
                f"{SUBJECT_ROOT}.*.{DEAD}",
            ),
            subscribe=(f"{inbox_prefix(GATEWAY)}.{EVERYTHING}", *observed, load_reports),
        ),
        streams=(OBSERVED_STREAM, GATEWAY_STREAM),
    )


CLI_SUBJECTS: tuple[str, ...] = (
    family_filter(Family.PUBLIC),
    family_filter(Family.RESULT),
    family_filter(Family.MONITOR),
    family_filter(Family.GATEWAY),
)
"""What ``kaiwo events tail`` follows with the ``cli`` key: the families that carry no
object. Observations and plans carry whole objects of every namespace (pod templates with
literal ``env`` values), dead letters the bodies of either; the CLI does not need them to
follow workloads, and the key is the one handed to people (decision 0039)."""


def tenant_identity(namespace: str) -> Identity:
    """One tenant of the messenger: sends requests for the Models of ``namespace`` and reads
    their answers, live or through one durable consumer named after the key (created, read
    and deleted by itself, filtered to its own answers: the server checks the filter in the
    API subject against the consumer's). It reads no stream by sequence (that would reach
    other tenants' answers), no event, and no subject of another tenant."""
    tenant = TenantSubjects(namespace)
    own = tenant.key
    stream = RESPONSE_STREAM
    return Identity(
        name=own,
        description=f"messenger tenant: requests to the Models of {namespace}, their answers",
        permissions=Permissions(
            publish=(
                tenant.requests,
                api("CONSUMER", "CREATE", stream, own, tenant.responses),
                api("CONSUMER", "INFO", stream, own),
                api("CONSUMER", "DELETE", stream, own),
                api("CONSUMER", "MSG", "NEXT", stream, own),
                f"{JS_ACK}.{stream}.{own}.{EVERYTHING}",
            ),
            subscribe=(tenant.responses, f"{inbox_prefix(own)}.{EVERYTHING}"),
        ),
        streams=(REQUEST_STREAM, RESPONSE_STREAM),
        consumers=(own,),
    )


def console_identity() -> Identity:
    """The read-only web console: stored observations of every kind, read by sequence (no
    consumer: a right to create consumers on ``KAIWO_OBS`` would let it reconfigure the
    planner's), with wake-ups; it publishes no event."""
    return Identity(
        name=CONSOLE,
        description="web console: reads observations, publishes nothing",
        permissions=Permissions(
            publish=(
                *stream_info((OBSERVED_STREAM,)),
                api("STREAM", "MSG", "GET", OBSERVED_STREAM),
            ),
            subscribe=(
                f"{inbox_prefix(CONSOLE)}.{EVERYTHING}",
                f"kaiwo.{Family.OBSERVED.value}.{EVERYTHING}",
            ),
        ),
        streams=(OBSERVED_STREAM,),
    )


def cli_identity() -> Identity:
    """``kaiwo events tail``: live events that carry no object (:data:`CLI_SUBJECTS`);
    publishes nothing."""
    return Identity(
        name=CLI,
        description="kaiwo events tail: follows the events that carry no object, publishes nothing",
        permissions=Permissions(
            publish=(), subscribe=(*CLI_SUBJECTS, f"{inbox_prefix(CLI)}.{EVERYTHING}")
        ),
    )


def subscriber_identity() -> Identity:
    """Tools outside the operator: the public workload events and nothing else.

    No operator consumer reads ``KAIWO_PUBLIC``, so this identity may create, read and delete
    consumers of any name on it (ephemeral and ordered ones included), which a reader of the
    internal streams may not. It publishes no event and reads no other stream or subject.
    """
    stream = PUBLIC_STREAM
    return Identity(
        name=SUBSCRIBER,
        description="external subscriber: reads the public workload events only",
        permissions=Permissions(
            publish=(
                api("INFO"),
                api("STREAM", "INFO", stream),
                api("CONSUMER", "CREATE", stream),
                api("CONSUMER", "CREATE", stream, EVERYTHING),
                api("CONSUMER", "DURABLE", "CREATE", stream, EVERYTHING),
                api("CONSUMER", "INFO", stream, EVERYTHING),
                api("CONSUMER", "DELETE", stream, EVERYTHING),
                api("CONSUMER", "MSG", "NEXT", stream, EVERYTHING),
                f"{JS_ACK}.{stream}.{EVERYTHING}",
                f"{JS_FLOW_CONTROL}.{stream}.{EVERYTHING}",
                *stored_reads(stream),
            ),
            subscribe=(
                family_filter(Family.PUBLIC),
                f"{inbox_prefix(SUBSCRIBER)}.{EVERYTHING}",
            ),
        ),
        streams=(stream,),
    )


def reader_identity(name: str, *, streams: Iterable[str] = EVENT_STREAMS) -> Identity:
    """An external subscriber: live events, and durable pull consumers *named* ``name`` on
    ``streams`` (created, read and deleted by itself). It publishes no event.

    Consumers are granted by name because a subject wildcard matches whole tokens only: a
    right to create consumers of any name would let it reconfigure or drain the operator's.
    """
    operator_names = (ADMIN, CLI, GATEWAY, SUBSCRIBER, *SERVICES)
    if name in operator_names or name.startswith(_OPERATOR_CONSUMER_PREFIXES):
        raise ValueError(f"{name!r} is taken by the operator; choose another reader name")
    chosen = tuple(streams)
    unknown = sorted(set(chosen) - set(EVENT_STREAMS))
    if unknown:
        raise ValueError(f"unknown streams {unknown}; choose among {', '.join(EVENT_STREAMS)}")
    own = checked_name(name)
    publish = unique(
        *(
            (
                api("INFO"),
                api("STREAM", "INFO", stream),
                api("CONSUMER", "CREATE", stream, own),
                api("CONSUMER", "CREATE", stream, own, EVERYTHING),
                api("CONSUMER", "DURABLE", "CREATE", stream, own),
                api("CONSUMER", "INFO", stream, own),
                api("CONSUMER", "DELETE", stream, own),
                api("CONSUMER", "MSG", "NEXT", stream, own),
                f"{JS_ACK}.{stream}.{own}.{EVERYTHING}",
                *stored_reads(stream),
            )
            for stream in chosen
        )
    )
    return Identity(
        name=own,
        description="external subscriber: reads events, publishes none",
        permissions=Permissions(
            publish=publish,
            subscribe=(f"kaiwo.{EVERYTHING}", f"{inbox_prefix(own)}.{EVERYTHING}"),
        ),
        streams=chosen,
        consumers=(own,),
    )


def operator_identities(topology: BusTopology) -> tuple[Identity, ...]:
    """Every identity one deployment needs: the administrator, each service, the gateway,
    the CLI and the subscriber of the public workload events."""
    return (
        admin_identity(),
        *(service_identity(name, topology) for name in SERVICES),
        gateway_identity(),
        console_identity(),
        cli_identity(),
        subscriber_identity(),
    )


__all__ = [
    "ADMIN",
    "AUTOSCALER_BUCKET",
    "AUTOSCALER_LEASE",
    "CLI",
    "CLI_SUBJECTS",
    "CONSOLE",
    "EVENT_STREAMS",
    "EXECUTOR",
    "GATEWAY",
    "LEASE_BUCKET",
    "MONITOR",
    "PLANNER",
    "RECORDER",
    "REFUSALS",
    "SERVICES",
    "SERVICE_BUCKETS",
    "SUBSCRIBER",
    "WATCHER",
    "Identity",
    "Permissions",
    "admin_identity",
    "cli_identity",
    "console_identity",
    "gateway_identity",
    "inbox_prefix",
    "lease_keys",
    "operator_identities",
    "reader_identity",
    "service_identity",
    "subscriber_identity",
    "tenant_identity",
]
