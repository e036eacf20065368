"""The identities of those outside the operator: ``kaiwo events tail`` (the ``cli`` key),
the subscriber of the public workload events, external readers and the messenger's tenants.
None may publish an event, and none may touch the operator's consumers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kaiwo_contracts.events.identity_names import (
    ADMIN,
    CLI,
    CONSOLE,
    EVENT_STREAMS,
    GATEWAY,
    OPERATOR_CONSUMER_PREFIXES,
    SERVICES,
    SUBSCRIBER,
)
from kaiwo_contracts.events.messenger import (
    IDENTITY_LIMIT,
    REQUEST_STREAM,
    RESPONSE_STREAM,
    NotATenantError,
    TenantSubjects,
    checked_namespace,
)
from kaiwo_contracts.events.permission_blocks import (
    EVERYTHING,
    JS_ACK,
    JS_FLOW_CONTROL,
    Identity,
    Permissions,
    api,
    checked_name,
    inbox_prefix,
    stored_reads,
    unique,
)
from kaiwo_contracts.events.streams import PUBLIC_STREAM
from kaiwo_contracts.events.subjects import (
    ROOT,
    Family,
    family_filter,
    live_subject,
    public_namespace_filter,
)

NAMESPACE_SUBSCRIBER_PREFIX = f"{SUBSCRIBER}-"
"""``subscriber-<namespace>``: the key (and durable consumer) of a tool limited to one
namespace's public workload events (decision 0164)."""

CLI_SUBJECTS: tuple[str, ...] = tuple(
    live_subject(family_filter(family))
    for family in (Family.PUBLIC, Family.RESULT, Family.MONITOR, Family.GATEWAY)
)
"""What ``kaiwo events tail`` follows with the ``cli`` key: the families that carry no
object. Observations and plans carry whole objects of every namespace (pod templates with
literal ``env`` values), dead letters the bodies of either; the CLI does not need them to
follow workloads, and the key is the one handed to people (decision 0039).

Every key handed out subscribes to live subjects only (``kaiwo.live.>``, where the streams
republish what they store, decision 0287), never to a subject a stream stores: a push
consumer delivers only to a subject someone subscribed to literally, so no key, alone or
with another, can have a consumer copy one stream's messages into another."""


LIVE_EVENTS = live_subject(f"{ROOT}.{EVERYTHING}")
"""Every live event (``kaiwo.live.>``): what a reader, and ``kaiwo events tail --internal``
with its key, subscribes to."""


def tenant_identity(namespace: str) -> Identity:
    """One tenant of the messenger: sends requests for the Models of ``namespace`` and reads
    their answers, live (``.live``, where the stream republishes them) or through one durable
    consumer named after the key (created, read and deleted by itself, filtered to its own
    answers: the server checks the filter in the API subject against the consumer's). It
    reads no stream by sequence (that would reach other tenants' answers), no event, and no
    subject of another tenant."""
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
            subscribe=(tenant.live_responses, f"{inbox_prefix(own)}.{EVERYTHING}"),
        ),
        streams=(REQUEST_STREAM, RESPONSE_STREAM),
        consumers=(own,),
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


def public_consumer_rights(consumer: str) -> tuple[str, ...]:
    """Every subject that creates, reads, settles or deletes ``consumer`` on
    ``KAIWO_PUBLIC``: what the ``subscriber`` key is denied for a consumer another key owns."""
    return (
        *_consumer_subjects(PUBLIC_STREAM, consumer),
        f"{JS_FLOW_CONTROL}.{PUBLIC_STREAM}.{consumer}.{EVERYTHING}",
    )


def _consumer_subjects(stream: str, consumer: str) -> tuple[str, ...]:
    """The subjects that create, read, acknowledge and delete ``consumer`` on ``stream``."""
    return (
        api("CONSUMER", "CREATE", stream, consumer),
        api("CONSUMER", "CREATE", stream, consumer, EVERYTHING),
        api("CONSUMER", "DURABLE", "CREATE", stream, consumer),
        api("CONSUMER", "INFO", stream, consumer),
        api("CONSUMER", "DELETE", stream, consumer),
        api("CONSUMER", "MSG", "NEXT", stream, consumer),
        f"{JS_ACK}.{stream}.{consumer}.{EVERYTHING}",
    )


def subscriber_identity(*, others_consumers: Iterable[str] = ()) -> Identity:
    """Tools outside the operator: the public workload events and nothing else.

    No operator consumer reads ``KAIWO_PUBLIC``, so this identity may create, read and delete
    consumers of any name on it (ephemeral and ordered ones included), which a reader of the
    internal streams may not. It publishes no event and reads no other stream or subject.

    ``others_consumers`` are the consumers another key owns there (a namespace key's
    ``subscriber-<ns>``, decision 0259). A consumer name is one subject token, so the
    wildcard that grants any name cannot leave them out: the server's ``deny`` of each
    subject that names one does. And the create subject that names no consumer
    (``CONSUMER.CREATE.KAIWO_PUBLIC``, nats-py's ordered and push consumers) takes the name
    from the request's body, where the server then updates that consumer (its filter, its
    ``inactive_threshold``: measured on nats-server 2.15.1), so while others own consumers
    this key is not granted it; consumers it names in the subject it keeps.
    """
    stream = PUBLIC_STREAM
    owned = sorted(set(others_consumers))
    unnamed_create = () if owned else (api("CONSUMER", "CREATE", stream),)
    return Identity(
        name=SUBSCRIBER,
        description="external subscriber: reads the public workload events only",
        permissions=Permissions(
            publish=(
                api("INFO"),
                api("STREAM", "INFO", stream),
                *unnamed_create,
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
                live_subject(family_filter(Family.PUBLIC)),
                f"{inbox_prefix(SUBSCRIBER)}.{EVERYTHING}",
            ),
            publish_denied=unique(*(public_consumer_rights(name) for name in owned)),
        ),
        streams=(stream,),
    )


def issued_together(identities: Sequence[Identity]) -> tuple[Identity, ...]:
    """``identities`` as one server configuration admits them: the ``subscriber`` key among
    them denied every consumer another of them owns on ``KAIWO_PUBLIC`` (the consumers of the
    keys that read that stream only: ``subscriber-<ns>``, decision 0259). Every
    configuration is rendered through this, so a namespace key added later (``kaiwo nats
    credentials --keep``) withholds its consumer as soon as the server reads it."""
    owned = tuple(
        consumer
        for identity in identities
        if identity.name != SUBSCRIBER and identity.streams == (PUBLIC_STREAM,)
        for consumer in identity.consumers
    )
    return tuple(
        subscriber_identity(others_consumers=owned) if identity.name == SUBSCRIBER else identity
        for identity in identities
    )


def namespace_subscriber_name(namespace: str) -> str:
    """``subscriber-<namespace>``; a ValueError names a namespace that is not a DNS label or
    is too long for a key name."""
    name = f"{NAMESPACE_SUBSCRIBER_PREFIX}{checked_namespace(namespace)}"
    if len(name) > IDENTITY_LIMIT:
        raise NotATenantError(
            f"namespace {namespace!r} is too long for a subscriber key "
            f"(at most {IDENTITY_LIMIT - len(NAMESPACE_SUBSCRIBER_PREFIX)} characters)"
        )
    return name


def namespace_subscriber_identity(namespace: str) -> Identity:
    """A tool that may follow one namespace's workloads: their public events live, and the
    ones it missed through one durable pull consumer named after the key, filtered to the
    namespace (decision 0164).

    Everything that could reach another namespace's events is left out: the server checks
    the filter carried in the consumer's create subject
    (``$JS.API.CONSUMER.CREATE.<stream>.<name>.<filter>``) against the consumer's, so the
    key can only make consumers of its namespace; it reads, acknowledges and deletes its own
    consumer only (a consumer of another name may be another tool's, filtered wider); no
    stored read by sequence, no stream info (which lists the subjects, uids included), no
    ephemeral or ordered consumer (their create subject carries no filter to check)."""
    own = namespace_subscriber_name(namespace)
    events = public_namespace_filter(checked_namespace(namespace))
    stream = PUBLIC_STREAM
    return Identity(
        name=own,
        description=f"external subscriber: reads the public workload events of {namespace} only",
        permissions=Permissions(
            publish=(
                api("INFO"),
                api("CONSUMER", "CREATE", stream, own, events),
                api("CONSUMER", "INFO", stream, own),
                api("CONSUMER", "DELETE", stream, own),
                api("CONSUMER", "MSG", "NEXT", stream, own),
                f"{JS_ACK}.{stream}.{own}.{EVERYTHING}",
            ),
            subscribe=(live_subject(events), f"{inbox_prefix(own)}.{EVERYTHING}"),
        ),
        streams=(stream,),
        consumers=(own,),
    )


def reader_identity(name: str, *, streams: Iterable[str] = EVENT_STREAMS) -> Identity:
    """An external subscriber: every event live (as the streams republish it,
    :data:`LIVE_EVENTS`), and durable pull consumers *named* ``name`` on ``streams`` (created,
    read and deleted by itself). It publishes no event.

    Consumers are granted by name because a subject wildcard matches whole tokens only: a
    right to create consumers of any name would let it reconfigure or drain the operator's.
    """
    operator_names = (ADMIN, CLI, CONSOLE, GATEWAY, SUBSCRIBER, *SERVICES)
    if name in operator_names or name.startswith(OPERATOR_CONSUMER_PREFIXES):
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
                *_consumer_subjects(stream, own),
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
            subscribe=(LIVE_EVENTS, f"{inbox_prefix(own)}.{EVERYTHING}"),
        ),
        streams=chosen,
        consumers=(own,),
    )
