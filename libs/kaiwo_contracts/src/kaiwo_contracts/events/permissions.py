"""Who may do what on the bus: one NATS identity per service, the CLI and the administrator.

Every permission set is derived here (those outside the operator's in
:mod:`kaiwo_contracts.events.outside_identities`), from the topology
(:mod:`kaiwo_contracts.events.streams`), and nowhere else: ``kaiwo up``, ``kaiwo nats
credentials`` (compose, Kubernetes) and the tests render the nats-server configuration from
:func:`operator_identities`.

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
           its dead letters; its bucket, the ``executor`` lease (or ``executor.>``); read
           stored observations (``KAIWO_OBS``, plain get: whether the watcher observed the
           missing owner of a plan, told from a forged plan's ghost)
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
           live or through consumers of any name on that stream but another key's
           (``subscriber-<ns>``, :func:`issued_together`, decision 0259); nothing else
subscriber-ns (:func:`namespace_subscriber_identity`, one per namespace asked for) read
           ``kaiwo.public.workload.<ns>.>`` live or through its own durable consumer
           ``subscriber-<ns>``, created with that filter; nothing else (decision 0164)
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
bucket's stream ``KV_<bucket>`` (create when missing, info, direct and stored reads, which
list the keys too) and its keys ``$KV.<bucket>.>``.
Replies arrive on an inbox of the identity's own (``_INBOX.<identity>.>``, see
:func:`inbox_prefix`), so no identity can read the answers meant for another.

Streams and the operator's durable consumers are declared by the administrator only
(``kaiwo up``, ``kaiwo nats provision``); a service with an identity checks they exist.
The key-value buckets are created by the service that owns them, on first use: their
settings (the lease bucket's ttl) belong to the service.
"""

from __future__ import annotations

from kaiwo_contracts.events.identity_names import (
    ADMIN,
    AUTOSCALER_BUCKET,
    AUTOSCALER_LEASE,
    CLI,
    CONSOLE,
    EVENT_STREAMS,
    EXECUTOR,
    GATEWAY,
    GATEWAY_OBSERVED_KINDS,
    LEASE_BUCKET,
    MONITOR,
    PLANNER,
    RECORDER,
    REFUSALS,
    SERVICE_BUCKETS,
    SERVICES,
    SUBSCRIBER,
    WATCHER,
)
from kaiwo_contracts.events.messenger import (
    DEAD,
    REQUEST_STREAM,
    RESPONSE_STREAM,
    RESPONSES,
    SUBJECT_ROOT,
    messenger_consumer,
)
from kaiwo_contracts.events.outside_identities import (
    CLI_SUBJECTS,
    LIVE_EVENTS,
    cli_identity,
    issued_together,
    namespace_subscriber_identity,
    namespace_subscriber_name,
    reader_identity,
    subscriber_identity,
    tenant_identity,
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
    consuming,
    inbox_prefix,
    lease_keys,
    reading_bucket,
    service,
    stored_reads,
    stream_info,
)
from kaiwo_contracts.events.streams import (
    DEAD_LETTER_RELAY,
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
                api("STREAM", "MSG", "GET", OBSERVED_STREAM),
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
    "LIVE_EVENTS",
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
    "issued_together",
    "lease_keys",
    "namespace_subscriber_identity",
    "namespace_subscriber_name",
    "operator_identities",
    "reader_identity",
    "service_identity",
    "subscriber_identity",
    "tenant_identity",
]
