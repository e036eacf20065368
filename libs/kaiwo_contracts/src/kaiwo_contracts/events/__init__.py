"""Event contracts: the envelope, the payloads, subjects and JetStream topology (no I/O).

The public workload events (:mod:`kaiwo_contracts.events.public`) are documented for
subscribers in ``docs/events.md`` and ``docs/asyncapi.yaml``; the internal streams in
``docs/bus-internals.md``.
"""

from kaiwo_contracts.events.autoscaling import ActiveRequestsV1, ModelLoad, ScaleDecidedV1
from kaiwo_contracts.events.decoding import (
    PAYLOAD_TYPES,
    DecodedEvent,
    decode_envelope,
    decode_event,
)
from kaiwo_contracts.events.envelope import (
    EVENT_ID_NAMESPACE,
    MAX_MESSAGE_BYTES,
    NATS_MSG_ID_HEADER,
    DecodeFailure,
    Envelope,
    EnvelopeFormatError,
    EventPayload,
    RawPayload,
    WireModel,
    derived_event_id,
    event_type,
    object_subject,
    observed_event_id,
    parse_body,
    plan_event_id,
    service_source,
)
from kaiwo_contracts.events.monitor import PreemptionDecidedV1, UnderutilizedV1, UtilizationV1
from kaiwo_contracts.events.observed import ObservedObjectV1, WatchEventType
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.public import (
    PreemptionV1,
    WorkloadEventV1,
    WorkloadEventV2,
    WorkloadRef,
    WorkloadTransition,
)
from kaiwo_contracts.events.results import ActionOutcome, ApplyResultV1, PlanRefusedV1

__all__ = [
    "EVENT_ID_NAMESPACE",
    "MAX_MESSAGE_BYTES",
    "NATS_MSG_ID_HEADER",
    "PAYLOAD_TYPES",
    "ActionOutcome",
    "ActiveRequestsV1",
    "ApplyResultV1",
    "DecodeFailure",
    "DecodedEvent",
    "Envelope",
    "EnvelopeFormatError",
    "EventPayload",
    "ModelLoad",
    "ObservedObjectV1",
    "PlanDecidedV1",
    "PlanRefusedV1",
    "PreemptionDecidedV1",
    "PreemptionV1",
    "RawPayload",
    "ScaleDecidedV1",
    "UnderutilizedV1",
    "UtilizationV1",
    "WatchEventType",
    "WireModel",
    "WorkloadEventV1",
    "WorkloadEventV2",
    "WorkloadRef",
    "WorkloadTransition",
    "decode_envelope",
    "decode_event",
    "derived_event_id",
    "event_type",
    "object_subject",
    "observed_event_id",
    "parse_body",
    "plan_event_id",
    "service_source",
]
