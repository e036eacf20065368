"""The messenger's bus: requests to Models through JetStream, answers back (decision 0049).

Subjects (one pair per tenant; a tenant is a Kubernetes namespace, and a request may use
only the Models of its own namespace; the Model is named in the request's body, as KubeAI's
messenger does)::

    kaiwo-messenger.<namespace>.requests    a tenant's requests (stream KAIWO_MSG_REQ)
    kaiwo-messenger.<namespace>.responses   the answers to them (stream KAIWO_MSG_RES)
    kaiwo-messenger.<namespace>.dead        requests given up on, with the reason (ditto)
    kaiwo-messenger.<namespace>.live        the answers again, as KAIWO_MSG_RES stored them
                                            (republished there: no stream stores it)

The root is not ``kaiwo.``: everything under ``kaiwo.>`` is read by ``kaiwo events tail``,
the recorder and external readers, and prompts and answers are the tenants' own.

``KAIWO_MSG_REQ`` is a work queue (a request is gone once answered); the gateway's durable
consumer ``gateway-messenger`` reads it, acknowledging a request only after its answer is
stored in ``KAIWO_MSG_RES``. ``KAIWO_MSG_RES`` keeps answers like the other streams (by age
and bytes), so a batch client can read them after the fact, through a durable consumer of its
own named after its key (:func:`tenant_identity`).

A tenant key may publish to its own requests subject, read its own answers (live on
``.live``, or through its consumer of ``.responses``) and nothing else: no other tenant's
subjects, no stream read by sequence (that would reach every tenant's messages), no event of
the operator. It subscribes to no subject a stream stores: a push consumer delivers to any
subject someone subscribes to exactly, so a key that could would let another key's consumer
store copies of its messages as this tenant's answers (decision 0287).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kaiwo_contracts.events.streams import (
    DAY,
    MIB,
    BusTopology,
    ConsumerSpec,
    Republish,
    StreamSpec,
)

SUBJECT_ROOT = "kaiwo-messenger"
REQUESTS = "requests"
RESPONSES = "responses"
DEAD = "dead"
LIVE_RESPONSES = "live"
"""``kaiwo-messenger.<namespace>.live``: where ``KAIWO_MSG_RES`` republishes each answer."""
REQUEST_STREAM = "KAIWO_MSG_REQ"
RESPONSE_STREAM = "KAIWO_MSG_RES"
MESSENGER_CONSUMER = "gateway-messenger"
REQUESTS_FILTER = f"{SUBJECT_ROOT}.*.{REQUESTS}"
"""Every tenant's requests subject."""
TENANT_PREFIX = "tenant-"
"""Tenant keys are named ``tenant-<namespace>``."""

REQUEST_MAX_BYTES = 1024 * MIB
RESPONSE_MAX_BYTES = 1024 * MIB
MESSENGER_MAX_AGE_SECONDS = 7 * DAY
MESSENGER_DUPLICATE_WINDOW_SECONDS = 600.0
"""A request published again under the same ``Nats-Msg-Id`` within this window is stored once
(a batch client resending after a lost acknowledgement); an answer stored again for the
same request (redelivered after its answer was stored but before the ack) likewise."""
MESSENGER_BACKOFF_SECONDS: tuple[float, ...] = (30.0, 30.0, 60.0, 120.0)
"""Ack waits of deliveries 1..4 (and the delays of retries). The handler keeps a request it
is working on alive with progress acks, so a long generation is not redelivered."""
MESSENGER_MAX_DELIVER = 5
MESSENGER_MAX_ACK_PENDING = 1024
"""Requests handed out to all gateway replicas at once (each takes at most its handlers)."""

_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
IDENTITY_LIMIT = 63
"""The longest name of a key (and of a consumer named after it) that a namespace name may make."""


class NotATenantError(ValueError):
    """A subject or name that belongs to no tenant."""


def _checked_namespace(namespace: str) -> str:
    if not _NAMESPACE.fullmatch(namespace):
        raise NotATenantError(f"{namespace!r} is not a namespace name (a DNS label)")
    return namespace


def checked_namespace(namespace: str) -> str:
    """``namespace`` if it is a namespace name (a DNS label); NotATenantError (a ValueError)
    otherwise."""
    return _checked_namespace(namespace)


def request_subject(namespace: str) -> str:
    return f"{SUBJECT_ROOT}.{_checked_namespace(namespace)}.{REQUESTS}"


def response_subject(namespace: str) -> str:
    return f"{SUBJECT_ROOT}.{_checked_namespace(namespace)}.{RESPONSES}"


def live_response_subject(namespace: str) -> str:
    return f"{SUBJECT_ROOT}.{_checked_namespace(namespace)}.{LIVE_RESPONSES}"


def dead_subject(namespace: str) -> str:
    return f"{SUBJECT_ROOT}.{_checked_namespace(namespace)}.{DEAD}"


def tenant_of(subject: str) -> str:
    """The namespace whose requests subject ``subject`` is."""
    root, _, rest = subject.partition(".")
    namespace, _, kind = rest.partition(".")
    if root != SUBJECT_ROOT or kind != REQUESTS:
        raise NotATenantError(f"{subject!r} is not a messenger requests subject")
    return _checked_namespace(namespace)


def tenant_key_name(namespace: str) -> str:
    """``tenant-<namespace>``: the NATS user (and durable consumer) of one tenant."""
    name = f"{TENANT_PREFIX}{_checked_namespace(namespace)}"
    if len(name) > IDENTITY_LIMIT:
        raise NotATenantError(
            f"namespace {namespace!r} is too long for a tenant key "
            f"(at most {IDENTITY_LIMIT - len(TENANT_PREFIX)} characters)"
        )
    return name


@dataclass(frozen=True, slots=True)
class TenantSubjects:
    """What one tenant's key may use."""

    namespace: str

    @property
    def key(self) -> str:
        return tenant_key_name(self.namespace)

    @property
    def requests(self) -> str:
        return request_subject(self.namespace)

    @property
    def responses(self) -> str:
        return response_subject(self.namespace)

    @property
    def live_responses(self) -> str:
        return live_response_subject(self.namespace)


def messenger_streams(
    *,
    replicas: int = 1,
    max_age_seconds: float = MESSENGER_MAX_AGE_SECONDS,
    request_max_bytes: int = REQUEST_MAX_BYTES,
    response_max_bytes: int = RESPONSE_MAX_BYTES,
) -> tuple[StreamSpec, ...]:
    return (
        StreamSpec(
            name=REQUEST_STREAM,
            subjects=(REQUESTS_FILTER,),
            description="Messenger: requests to Models, one subject per tenant namespace",
            max_age_seconds=max_age_seconds,
            duplicate_window_seconds=MESSENGER_DUPLICATE_WINDOW_SECONDS,
            retention="workqueue",
            replicas=replicas,
            max_bytes=request_max_bytes,
        ),
        StreamSpec(
            name=RESPONSE_STREAM,
            subjects=(f"{SUBJECT_ROOT}.*.{RESPONSES}", f"{SUBJECT_ROOT}.*.{DEAD}"),
            description="Messenger: answers to the requests, and the requests given up on",
            max_age_seconds=max_age_seconds,
            duplicate_window_seconds=MESSENGER_DUPLICATE_WINDOW_SECONDS,
            replicas=replicas,
            max_bytes=response_max_bytes,
            republish=Republish(
                source=f"{SUBJECT_ROOT}.*.{RESPONSES}",
                destination=f"{SUBJECT_ROOT}.{{{{wildcard(1)}}}}.{LIVE_RESPONSES}",
            ),
        ),
    )


def messenger_consumer() -> ConsumerSpec:
    return ConsumerSpec(
        durable_name=MESSENGER_CONSUMER,
        stream=REQUEST_STREAM,
        filter_subjects=(REQUESTS_FILTER,),
        description="Gateway messenger: requests to Models, answered on the responses subject",
        max_deliver=MESSENGER_MAX_DELIVER,
        backoff_seconds=MESSENGER_BACKOFF_SECONDS,
        max_ack_pending=MESSENGER_MAX_ACK_PENDING,
    )


def messenger_topology(*, replicas: int = 1) -> BusTopology:
    """The messenger's streams and consumer (declared by the administrator, like the rest)."""
    return BusTopology(
        partitions=1,
        streams=messenger_streams(replicas=replicas),
        consumers=(messenger_consumer(),),
    )


__all__ = [
    "DEAD",
    "IDENTITY_LIMIT",
    "MESSENGER_CONSUMER",
    "REQUESTS",
    "REQUESTS_FILTER",
    "REQUEST_STREAM",
    "RESPONSES",
    "RESPONSE_STREAM",
    "SUBJECT_ROOT",
    "TENANT_PREFIX",
    "NotATenantError",
    "TenantSubjects",
    "checked_namespace",
    "dead_subject",
    "live_response_subject",
    "messenger_consumer",
    "messenger_streams",
    "messenger_topology",
    "request_subject",
    "response_subject",
    "tenant_key_name",
    "tenant_of",
]
