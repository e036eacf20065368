"""The one envelope every message travels in, with CloudEvents 1.0 attribute names.

On NATS the envelope uses the CloudEvents *binary* mode: each attribute is a ``ce-<name>``
header, ``datacontenttype`` is the ``content-type`` header and the body is the JSON of
``data`` alone, so a subscriber that only wants the payload reads the body. ``Nats-Msg-Id``
always carries ``id`` so JetStream drops a re-published copy inside the duplicate window.
The *structured* mode (the whole event as one JSON object) is what exports and webhooks use.

Ids. ``id`` is any non-empty string; CloudEvents requires ``source`` + ``id`` to be unique.
Most events get a random UUID. Where a second publication of the *same fact* must collapse
into one message, the id is derived from the fact (see :func:`observed_event_id`,
:func:`plan_event_id`, :func:`derived_event_id`), so two watcher replicas, or a planner that
re-publishes after a crash, produce the same ``Nats-Msg-Id``.

Nothing here reads a clock: ``time`` is always passed in.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar, Final, Generic, Literal, Self, TypeVar, cast

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from kaiwo_contracts.events.event_ids import (
    EVENT_ID_NAMESPACE,
    SOURCE_PREFIX,
    TYPE_PREFIX,
    derived_event_id,
    event_type,
    object_subject,
    observed_event_id,
    plan_event_id,
    service_source,
)
from kaiwo_contracts.events.message_body import (
    MAX_JSON_DEPTH,
    MAX_JSON_INTEGER,
    MAX_MESSAGE_BYTES,
    DecodeFailure,
    EnvelopeFormatError,
    body_json,
    describe,
    parse_body,
    parse_json,
)
from kaiwo_contracts.plans import canonical_json

__all__ = [
    "CE_HEADER_PREFIX",
    "CONTENT_TYPE_HEADER",
    "EARLIEST_TIME",
    "EVENT_ID_NAMESPACE",
    "JSON_CONTENT_TYPE",
    "LATEST_TIME",
    "MAX_JSON_DEPTH",
    "MAX_JSON_INTEGER",
    "MAX_MESSAGE_BYTES",
    "NATS_MSG_ID_HEADER",
    "SOURCE_PREFIX",
    "SPEC_VERSION",
    "STRUCTURED_CONTENT_TYPE",
    "TYPE_PREFIX",
    "DecodeFailure",
    "Envelope",
    "EnvelopeFormatError",
    "EventPayload",
    "RawPayload",
    "WireModel",
    "body_json",
    "derived_event_id",
    "envelope_class",
    "event_type",
    "object_subject",
    "observed_event_id",
    "parse_body",
    "parse_json",
    "plan_event_id",
    "service_source",
]


SPEC_VERSION: Final = "1.0"
JSON_CONTENT_TYPE: Final = "application/json"
STRUCTURED_CONTENT_TYPE = "application/cloudevents+json"
NATS_MSG_ID_HEADER = "Nats-Msg-Id"
CONTENT_TYPE_HEADER = "content-type"
CE_HEADER_PREFIX = "ce-"

_TYPE_PATTERN = r"^ai\.silogen\.kaiwo\.[a-z][a-z0-9-]*\.[a-z][a-z0-9-]*\.v[1-9][0-9]*$"
_SOURCE_PATTERN = r"^/kaiwo/[a-z][a-z0-9-]*$"
_TRACEPARENT_PATTERN = r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"
# Attributes travel as NATS header values, where a control character (CR, LF) would end the
# header or forge another one.
_HEADER_TEXT_PATTERN = r"^[^\x00-\x1f\x7f]+$"

EARLIEST_TIME: Final = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_TIME: Final = datetime(9000, 1, 1, tzinfo=UTC)
"""An event's ``time`` lies in [EARLIEST_TIME, LATEST_TIME): consumers compute with it (the
planner plans with it as ``now``), and a time at the end of what ``datetime`` holds
(9999-12-31T23:59:59-14:00) overflows at the first addition or conversion to UTC."""
# Header order of the optional and required attributes; data travels in the body.
_HEADER_ATTRIBUTES = (
    "id",
    "source",
    "specversion",
    "type",
    "subject",
    "time",
    "correlationid",
    "causationid",
    "traceparent",
)

T = TypeVar("T", bound=BaseModel)
U = TypeVar("U", bound=BaseModel)


class Envelope(BaseModel, Generic[T]):
    """One event: CloudEvents attributes, correlation/causation, and a typed ``data``.

    ``correlationid`` is the uid of the workload the event is about (every event caused by
    one workload shares it); ``causationid`` is the ``id`` of the event that caused this one
    (None for facts observed in the cluster, which have no cause inside the system).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=256, pattern=_HEADER_TEXT_PATTERN)
    source: str = Field(pattern=_SOURCE_PATTERN)
    specversion: Literal["1.0"] = SPEC_VERSION
    type: str = Field(pattern=_TYPE_PATTERN)
    subject: str | None = Field(
        default=None, min_length=1, max_length=512, pattern=_HEADER_TEXT_PATTERN
    )
    time: AwareDatetime
    datacontenttype: Literal["application/json"] = JSON_CONTENT_TYPE
    correlationid: str = Field(min_length=1, max_length=256, pattern=_HEADER_TEXT_PATTERN)
    causationid: str | None = Field(
        default=None, min_length=1, max_length=256, pattern=_HEADER_TEXT_PATTERN
    )
    traceparent: str | None = Field(default=None, pattern=_TRACEPARENT_PATTERN)
    data: T

    @field_validator("time")
    @classmethod
    def _time_in_range(cls, value: datetime) -> datetime:
        try:
            inside = EARLIEST_TIME <= value.astimezone(UTC) < LATEST_TIME
        except OverflowError:
            inside = False
        if not inside:
            msg = f"must lie between {EARLIEST_TIME.year} and {LATEST_TIME.year} (UTC)"
            raise ValueError(msg)
        return value

    @model_validator(mode="after")
    def _type_matches_payload(self) -> Self:
        expected = getattr(type(self.data), "EVENT_TYPE", None)
        if expected is not None and expected != self.type:
            msg = f"type {self.type!r} does not match the payload's event type {expected!r}"
            raise ValueError(msg)
        return self

    # ------------------------------------------------------------------ construction

    @classmethod
    def new(
        cls,
        *,
        data: T,
        source: str,
        time: datetime,
        correlationid: str,
        subject: str | None = None,
        causationid: str | None = None,
        traceparent: str | None = None,
        id: str | None = None,
    ) -> Envelope[T]:
        """An envelope for ``data``; ``type`` comes from the payload's ``EVENT_TYPE``."""
        parametrized = cast("type[Envelope[T]]", envelope_class(type(data)))
        return parametrized(
            id=id or str(uuid.uuid4()),
            source=source,
            type=_event_type_of(data),
            subject=subject,
            time=time,
            correlationid=correlationid,
            causationid=causationid,
            traceparent=traceparent,
            data=data,
        )

    def caused(
        self,
        *,
        data: U,
        source: str,
        time: datetime,
        subject: str | None = None,
        id: str | None = None,
    ) -> Envelope[U]:
        """A child event: same correlation and trace, ``causationid`` = this event's id."""
        return Envelope.new(
            data=data,
            source=source,
            time=time,
            subject=subject if subject is not None else self.subject,
            correlationid=self.correlationid,
            causationid=self.id,
            traceparent=self.traceparent,
            id=id,
        )

    # ------------------------------------------------------------------ binary mode (NATS)

    def to_nats(self) -> tuple[dict[str, str], bytes]:
        """Headers (``ce-*``, ``content-type``, ``Nats-Msg-Id``) and the JSON body of ``data``."""
        attributes = self.model_dump(mode="json", exclude={"data", "datacontenttype"})
        headers = {
            f"{CE_HEADER_PREFIX}{name}": str(attributes[name])
            for name in _HEADER_ATTRIBUTES
            if attributes.get(name) is not None
        }
        headers[CONTENT_TYPE_HEADER] = self.datacontenttype
        headers[NATS_MSG_ID_HEADER] = self.id
        return headers, body_json(self.data.model_dump(mode="json", by_alias=True))

    @classmethod
    def from_nats(cls, headers: Mapping[str, str] | None, body: bytes) -> Self:
        """Parse a binary-mode message; raise :class:`EnvelopeFormatError` when it is invalid,
        and nothing else, whatever the bytes (see :func:`parse_body`).

        Header names are matched case-insensitively (NATS keeps the case the publisher used).
        """
        return cls.from_nats_data(headers, parse_body(body))

    @classmethod
    def from_nats_data(cls, headers: Mapping[str, str] | None, data: Any) -> Self:
        """:meth:`from_nats` for a body already parsed with :func:`parse_body`: for a
        consumer that keeps the JSON as it came (the recorder stores it) and so must not
        parse it twice."""
        try:
            lowered = {str(key).lower(): value for key, value in (headers or {}).items()}
            attributes: dict[str, Any] = {
                name: lowered[f"{CE_HEADER_PREFIX}{name}"]
                for name in _HEADER_ATTRIBUTES
                if f"{CE_HEADER_PREFIX}{name}" in lowered
            }
            attributes["datacontenttype"] = lowered.get(CONTENT_TYPE_HEADER, JSON_CONTENT_TYPE)
            attributes["data"] = data
            _check_type(cls, attributes.get("type"))
            return cls.model_validate(attributes)
        except EnvelopeFormatError:
            raise
        except ValidationError as error:
            raise EnvelopeFormatError(
                _summarise(error), failure=_validation_failure(error)
            ) from error
        except Exception as error:  # decoding is pure: any failure is the message's fault
            raise EnvelopeFormatError(
                f"{type(error).__name__}: {describe(error)}",
                failure=DecodeFailure.INVALID_ENVELOPE,
            ) from error

    # ------------------------------------------------------------------ structured mode

    def to_structured(self) -> dict[str, Any]:
        """The whole event as one JSON object (``application/cloudevents+json``)."""
        body = self.model_dump(mode="json", by_alias=True)
        # Absent optional attributes are left out (CloudEvents has no null attributes).
        return {key: value for key, value in body.items() if value is not None}

    def to_structured_json(self) -> str:
        return canonical_json(self.to_structured())

    @classmethod
    def from_structured(cls, value: Mapping[str, Any] | str | bytes) -> Self:
        document = parse_body(value) if isinstance(value, str | bytes) else dict(value)
        try:
            return cls.model_validate(document)
        except ValidationError as error:
            raise EnvelopeFormatError(
                _summarise(error), failure=_validation_failure(error)
            ) from error


@functools.cache
def envelope_class(payload: type[BaseModel]) -> type[Envelope[Any]]:
    """``Envelope[payload]``, kept: pydantic holds parametrized classes only weakly, and
    building one again (after the last envelope of that type was freed) costs far more than
    the envelope itself."""
    return Envelope[payload]  # type: ignore[valid-type]


class RawPayload(BaseModel):
    """Any payload, kept verbatim: for consumers that record or forward without reading."""

    model_config = ConfigDict(extra="allow", frozen=True)


class WireModel(BaseModel):
    """Base of payloads and their parts: camelCase on the wire, strict, frozen."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        frozen=True,
    )


class EventPayload(WireModel):
    """Base of every payload: a :class:`WireModel` that names its CloudEvents ``type``."""

    EVENT_TYPE: ClassVar[str]


def _event_type_of(data: BaseModel) -> str:
    found = getattr(type(data), "EVENT_TYPE", None)
    if not isinstance(found, str):
        msg = f"{type(data).__name__} has no EVENT_TYPE; payloads derive from EventPayload"
        raise TypeError(msg)
    return found


def _check_type(envelope: type[BaseModel], given: object) -> None:
    """A ``type`` other than the payload model's is a message meant for someone else."""
    payload = envelope.model_fields["data"].annotation
    expected = getattr(payload, "EVENT_TYPE", None)
    if isinstance(expected, str) and isinstance(given, str) and given != expected:
        raise EnvelopeFormatError(
            f"type {given[:256]!r} does not match the payload's event type {expected!r}",
            failure=DecodeFailure.WRONG_TYPE,
        )


def _validation_failure(error: ValidationError) -> DecodeFailure:
    in_data = all(detail["loc"][:1] == ("data",) for detail in error.errors())
    return DecodeFailure.INVALID_PAYLOAD if in_data else DecodeFailure.INVALID_ENVELOPE


_SHOWN_PROBLEMS = 3


def _summarise(error: ValidationError) -> str:
    """The first problems as ``<field>: <message>``, without pydantic's links and inputs
    (an input may be the whole hostile body)."""
    details = error.errors(include_url=False, include_input=False, include_context=False)
    shown = [
        f"{'.'.join(str(step) for step in detail['loc']) or 'envelope'}: {detail['msg']}"
        for detail in details[:_SHOWN_PROBLEMS]
    ]
    more = len(details) - _SHOWN_PROBLEMS
    return describe("; ".join(shown) + (f"; and {more} more" if more > 0 else ""))
