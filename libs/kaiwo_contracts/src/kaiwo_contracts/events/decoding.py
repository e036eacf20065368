"""Reading a message off the bus: the one way every consumer turns headers and bytes into an
envelope, and every way that can fail into one error.

The planner, the executor, the recorder and ``kaiwo events tail`` all decode here, so a
message is poison for all of them or for none, and "poison" has one meaning: the function
raised :class:`~kaiwo_contracts.events.envelope.EnvelopeFormatError` (its ``failure`` says
why). Nothing else escapes, whatever the bytes: decoding does no I/O, so a failure is always
the message's fault and retrying it cannot help.

Beyond the envelope and the payload models, a message must be on a subject that fits it: the
subject's family is the type's (``ai.silogen.kaiwo.<family>.…`` on ``kaiwo.<family>.…``)
and, for the operator's own payloads, its kind, scope and uid tokens are the payload's
(consumers order and partition by the subject, so a plan filed under another owner's uid
would escape its owner's ordering).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from pydantic import BaseModel

from kaiwo_contracts.events.autoscaling import ActiveRequestsV1, ScaleDecidedV1
from kaiwo_contracts.events.envelope import (
    CE_HEADER_PREFIX,
    DecodeFailure,
    Envelope,
    EnvelopeFormatError,
    EventPayload,
    RawPayload,
    envelope_class,
    parse_body,
)
from kaiwo_contracts.events.monitor import PreemptionDecidedV1, UnderutilizedV1, UtilizationV1
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.public import PreemptionV1, WorkloadEventV1, WorkloadEventV2
from kaiwo_contracts.events.results import ApplyResultV1, PlanRefusedV1
from kaiwo_contracts.events.subjects import (
    PUBLIC_WORKLOAD,
    ROOT,
    Family,
    ParsedSubject,
    SubjectError,
    kind_token,
    parse_subject,
)

T = TypeVar("T", bound=BaseModel)

PAYLOAD_TYPES: dict[str, type[EventPayload]] = {
    payload.EVENT_TYPE: payload
    for payload in (
        ObservedObjectV1,
        PlanDecidedV1,
        ApplyResultV1,
        PlanRefusedV1,
        UtilizationV1,
        UnderutilizedV1,
        PreemptionDecidedV1,
        WorkloadEventV1,
        WorkloadEventV2,
        PreemptionV1,
        ActiveRequestsV1,
        ScaleDecidedV1,
    )
}
"""CloudEvents ``type`` -> payload model, for consumers that read several types."""

_MONITOR_TOPICS: dict[type[BaseModel], str] = {
    UtilizationV1: "utilization",
    UnderutilizedV1: "underutilized",
    PreemptionDecidedV1: "preemption",
}


@dataclass(frozen=True, slots=True)
class DecodedEvent:
    """An envelope of any type, and its body as parsed (what a recorder keeps verbatim)."""

    envelope: Envelope[Any]
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Route:
    """The subject tokens a payload must travel under (None: not checked)."""

    kind: str | None
    namespace: str | None
    uid: str | None
    qualifier: str | None = None


def decode_envelope(
    headers: Mapping[str, str] | None,
    body: bytes,
    payload: type[T],
    *,
    subject: str | None = None,
) -> Envelope[T]:
    """The envelope of a message that must carry ``payload`` (and, given the NATS
    ``subject``, travel on a subject that fits it); :class:`EnvelopeFormatError` otherwise."""
    envelope = cast("type[Envelope[T]]", envelope_class(payload)).from_nats(headers, body)
    if subject is not None:
        check_subject(subject, envelope)
    return envelope


def decode_event(
    headers: Mapping[str, str] | None, body: bytes, *, subject: str | None = None
) -> DecodedEvent:
    """The envelope of a message of any type: validated with its payload model when the type
    is one of :data:`PAYLOAD_TYPES`, else kept as :class:`RawPayload` (a newer producer's
    type is not poison for an older reader); :class:`EnvelopeFormatError` otherwise."""
    data = parse_body(body)
    declared = _header(headers, f"{CE_HEADER_PREFIX}type")
    payload = PAYLOAD_TYPES.get(declared or "", RawPayload)
    envelope = envelope_class(payload).from_nats_data(headers, data)
    if subject is not None:
        check_subject(subject, envelope)
    return DecodedEvent(envelope=envelope, body=data)


def check_subject(subject: str, envelope: Envelope[Any]) -> None:
    """Raise :class:`EnvelopeFormatError` (``wrong-subject``) unless ``subject`` fits the
    envelope. Subjects outside ``kaiwo.`` (foreign producers, tests) and dead letters (which
    keep the original's headers on a subject of their own) are not checked."""
    if subject != ROOT and not subject.startswith(f"{ROOT}."):
        return
    try:
        parsed = parse_subject(subject)
    except SubjectError as error:
        raise _wrong_subject(str(error)) from error
    if parsed.family is Family.DEAD_LETTER:
        return
    family = envelope.type.split(".")[3]
    if family != parsed.family.value:
        raise _wrong_subject(
            f"a {family} event ({envelope.type}) on a {parsed.family.value} subject {subject!r}"
        )
    route = _route(envelope)
    if route is not None:
        _compare(parsed, route, subject=subject)


def _route(envelope: Envelope[Any]) -> _Route | None:
    data = envelope.data
    try:
        if isinstance(data, ObservedObjectV1):
            return _Route(kind=kind_token(data.kind), namespace=data.namespace, uid=data.uid)
        if isinstance(data, PlanDecidedV1):
            owner = data.plan.owner
            return _Route(
                kind=kind_token(owner.kind),
                namespace=owner.namespace,
                uid=owner.uid or envelope.correlationid,
            )
        if isinstance(data, ApplyResultV1):
            return _Route(
                kind=kind_token(data.owner.kind),
                namespace=data.owner.namespace,
                uid=data.owner.uid or envelope.correlationid,
                qualifier=data.outcome,
            )
        if isinstance(data, PlanRefusedV1):
            return _Route(
                kind=kind_token(data.owner.kind),
                namespace=data.owner.namespace,
                uid=data.owner.uid or envelope.correlationid,
                qualifier="refused",
            )
        if isinstance(data, WorkloadEventV1 | WorkloadEventV2 | PreemptionV1):
            workload = data.victim if isinstance(data, PreemptionV1) else data.workload
            return _Route(
                kind=kind_token(workload.kind),
                namespace=workload.namespace,
                uid=workload.uid,
                qualifier=PUBLIC_WORKLOAD,
            )
    except SubjectError as error:  # a kind that cannot be a token has no subject to match
        raise _wrong_subject(str(error)) from error
    return _finding_route(envelope)


def _finding_route(envelope: Envelope[Any]) -> _Route | None:
    """The route of the monitor's and the gateway's events (no kind token)."""
    data = envelope.data
    if isinstance(data, ActiveRequestsV1):
        return _Route(kind=None, namespace=None, uid=data.gateway, qualifier="load")
    if isinstance(data, ScaleDecidedV1):
        return _Route(
            kind=None,
            namespace=data.model.namespace,
            uid=data.model.uid or envelope.correlationid,
            qualifier="scale",
        )
    if isinstance(data, UtilizationV1 | UnderutilizedV1 | PreemptionDecidedV1):
        return _Route(
            kind=None,
            namespace=data.workload.namespace,
            uid=data.workload.uid or envelope.correlationid,
            qualifier=_MONITOR_TOPICS[type(data)],
        )
    return None


def _compare(parsed: ParsedSubject, route: _Route, *, subject: str) -> None:
    wanted = {
        "kind": route.kind,
        "namespace": route.namespace,
        "uid": route.uid,
        "qualifier": route.qualifier,
    }
    found = {
        "kind": parsed.kind,
        "namespace": parsed.namespace,
        "uid": parsed.uid,
        "qualifier": parsed.qualifier,
    }
    for part, expected in wanted.items():
        if part == "kind" and expected is None:
            continue
        if part == "qualifier" and expected is None:
            continue
        if found[part] != expected:
            raise _wrong_subject(
                f"the subject's {part} is {found[part]!r}, the payload's {expected!r} ({subject})"
            )


def _wrong_subject(detail: str) -> EnvelopeFormatError:
    return EnvelopeFormatError(detail[:1024], failure=DecodeFailure.WRONG_SUBJECT)


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    found = None
    for key, value in (headers or {}).items():
        if str(key).lower() == name:
            found = value  # the last one wins, as the envelope reads them
    return found if isinstance(found, str) else None


__all__ = [
    "PAYLOAD_TYPES",
    "DecodedEvent",
    "check_subject",
    "decode_envelope",
    "decode_event",
]
