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
import math
import re
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar, Final, Generic, Literal, Self, TypeVar, cast

import orjson
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
from pydantic_core import from_json

from kaiwo_contracts.plans import Plan, canonical_json

SPEC_VERSION: Final = "1.0"
JSON_CONTENT_TYPE: Final = "application/json"
STRUCTURED_CONTENT_TYPE = "application/cloudevents+json"
TYPE_PREFIX = "ai.silogen.kaiwo"
SOURCE_PREFIX = "/kaiwo/"

NATS_MSG_ID_HEADER = "Nats-Msg-Id"
CONTENT_TYPE_HEADER = "content-type"
CE_HEADER_PREFIX = "ce-"

EVENT_ID_NAMESPACE = uuid.UUID("6b1f3f2e-6c2d-5b7e-9a51-0c4b8e7d2a11")
"""UUIDv5 namespace of every derived event id (fixed forever: changing it changes ids)."""

_TYPE_PATTERN = r"^ai\.silogen\.kaiwo\.[a-z][a-z0-9-]*\.[a-z][a-z0-9-]*\.v[1-9][0-9]*$"
_SOURCE_PATTERN = r"^/kaiwo/[a-z][a-z0-9-]*$"
_TRACEPARENT_PATTERN = r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"
# Attributes travel as NATS header values, where a control character (CR, LF) would end the
# header or forge another one.
_HEADER_TEXT_PATTERN = r"^[^\x00-\x1f\x7f]+$"

MAX_MESSAGE_BYTES: Final = 1024 * 1024
"""The largest message, headers and body together, the operator publishes or accepts: NATS'
default ``max_payload``. A server may be configured to allow more; the operator does not rely
on it, so every consumer accepts whatever a producer of ours may send."""
MAX_JSON_DEPTH: Final = 201
"""How many levels a body may nest, the outermost object included: the limit of
pydantic-core's parser, which refuses deeper input with an error instead of exhausting the
interpreter's stack as ``json.loads`` does."""
MAX_JSON_INTEGER: Final = 2**64
"""Integers in a body must lie strictly between minus and plus this: the API server's widest
integers are 64-bit; larger ones overflow ``float()`` and quantity arithmetic downstream."""
EARLIEST_TIME: Final = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_TIME: Final = datetime(9000, 1, 1, tzinfo=UTC)
"""An event's ``time`` lies in [EARLIEST_TIME, LATEST_TIME): consumers compute with it (the
planner plans with it as ``now``), and a time at the end of what ``datetime`` holds
(9999-12-31T23:59:59-14:00) overflows at the first addition or conversion to UTC."""
# A number token with 20 or more digits, or an exponent of 3 or more digits: the only numbers
# that can be out of range. Most bodies have none, so most are never walked.
_MAYBE_OUT_OF_RANGE = re.compile(rb"(?:^|[:,\[])[ \t\r\n]*-?(?:\d{20}|[\d.]+[eE][+-]?\d{3})")

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


class DecodeFailure(StrEnum):
    """Why a message could not be decoded (the first word of every decode error)."""

    TOO_LARGE = "too-large"
    NOT_JSON = "not-json"
    TOO_DEEP = "too-deep"
    NUMBER_OUT_OF_RANGE = "number-out-of-range"
    NOT_AN_OBJECT = "not-an-object"
    INVALID_ENVELOPE = "invalid-envelope"
    WRONG_TYPE = "wrong-type"
    INVALID_PAYLOAD = "invalid-payload"
    WRONG_SUBJECT = "wrong-subject"


class EnvelopeFormatError(ValueError):
    """The headers or body do not form a valid envelope: a poison message, never retried.

    The one error decoding raises, whatever went wrong (malformed JSON, nesting too deep, a
    number out of range, an attribute or payload the models refuse, a subject that does not
    match the payload); ``failure`` says which, and the message starts with it.
    """

    def __init__(
        self, detail: str, *, failure: DecodeFailure = DecodeFailure.INVALID_ENVELOPE
    ) -> None:
        super().__init__(f"{failure.value}: {detail}")
        self.failure = failure
        self.detail = detail


def body_json(value: Any) -> bytes:
    """A message body: JSON with sorted keys and no insignificant whitespace.

    orjson writes it in a third of the standard library's time (a body is encoded for every
    message published); what orjson refuses (integers beyond 64 bits, strings with a lone
    surrogate) goes to :func:`~kaiwo_contracts.plans.canonical_json`, which takes the
    integers and raises for the surrogates as before. Floats below 1e-4 are written
    ``0.00001`` where :func:`~kaiwo_contracts.plans.canonical_json` writes ``1e-05``: the
    same number to every reader. Hashes never use this (fingerprints stay on
    :func:`~kaiwo_contracts.plans.canonical_json`).
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError
        return canonical_json(value).encode()


def parse_body(body: bytes | str) -> dict[str, Any]:
    """A message body as one JSON object, or :class:`EnvelopeFormatError` (see
    :func:`parse_json`)."""
    value = parse_json(body)
    if not isinstance(value, dict):
        raise EnvelopeFormatError(
            f"the body is a JSON {_json_kind(value)}, not an object",
            failure=DecodeFailure.NOT_AN_OBJECT,
        )
    return value


def parse_json(body: bytes | str) -> Any:
    """Any JSON value, or :class:`EnvelopeFormatError`.

    Bounded on every axis that a hostile body could stretch: size (:data:`MAX_MESSAGE_BYTES`),
    nesting (:data:`MAX_JSON_DEPTH`), numbers (no NaN or infinity, integers within
    :data:`MAX_JSON_INTEGER`), and strict UTF-8 (no lone surrogates), so whatever it returns
    can be serialised again and walked recursively without surprises.
    """
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else bytes(body)
    if len(raw) > MAX_MESSAGE_BYTES:
        raise EnvelopeFormatError(
            f"the body has {len(raw)} bytes, more than {MAX_MESSAGE_BYTES}",
            failure=DecodeFailure.TOO_LARGE,
        )
    try:
        value = from_json(raw, allow_inf_nan=False)
    except ValueError as error:
        detail = _describe(error)
        if "recursion limit" in detail:
            raise EnvelopeFormatError(
                f"nested deeper than {MAX_JSON_DEPTH} levels ({detail})",
                failure=DecodeFailure.TOO_DEEP,
            ) from error
        if "number out of range" in detail:
            raise EnvelopeFormatError(detail, failure=DecodeFailure.NUMBER_OUT_OF_RANGE) from error
        raise EnvelopeFormatError(detail, failure=DecodeFailure.NOT_JSON) from error
    if _MAYBE_OUT_OF_RANGE.search(raw):
        _check_numbers(value)
    return value


def _check_numbers(value: Any) -> None:
    # Iterative: the depth is bounded already, but a stack of our own costs nothing extra.
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise EnvelopeFormatError(
                "a number is too large for a 64-bit float",
                failure=DecodeFailure.NUMBER_OUT_OF_RANGE,
            )
        elif (
            isinstance(item, int)
            and not isinstance(item, bool)
            and not -MAX_JSON_INTEGER < item < MAX_JSON_INTEGER
        ):
            raise EnvelopeFormatError(
                f"an integer of {len(str(abs(item)))} digits is outside the 64-bit range",
                failure=DecodeFailure.NUMBER_OUT_OF_RANGE,
            )


def _json_kind(value: Any) -> str:
    names = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def event_type(family: str, event: str, version: int = 1) -> str:
    """``ai.silogen.kaiwo.<family>.<event>.v<version>``, the CloudEvents ``type``."""
    return f"{TYPE_PREFIX}.{family}.{event}.v{version}"


def service_source(service: str) -> str:
    """``/kaiwo/<service>``, the CloudEvents ``source`` of everything a service publishes."""
    return f"{SOURCE_PREFIX}{service}"


def object_subject(*, namespace: str | None, name: str) -> str:
    """The CloudEvents ``subject``: ``<namespace>/<name>``, or ``<name>`` when cluster-scoped."""
    return f"{namespace}/{name}" if namespace else name


def derived_event_id(*parts: str) -> str:
    """A UUID (v5) determined by ``parts``: the same parts always give the same id."""
    return str(uuid.uuid5(EVENT_ID_NAMESPACE, "\x1f".join(parts)))


def observed_event_id(*, uid: str, resource_version: str) -> str:
    """``<uid>:<resourceVersion>``: one observation of one object version is one event.

    Two watcher replicas (or a relist) observing the same version publish the same id, so
    JetStream keeps one copy and the event store one row.
    """
    return f"{uid}:{resource_version}"


def plan_event_id(*, plan: Plan, causation_id: str, fingerprint: str | None = None) -> str:
    """The id of a plan decision: owner uid + plan fingerprint + the event that caused it.

    A planner that re-processes the same cause (redelivery after a crash, a second replica)
    republishes an identical plan under the same id, which JetStream drops. The cause is part
    of the id on purpose: a plan that goes A -> B -> A within the duplicate window is a new
    decision and must not be dropped as a copy of the first A. ``fingerprint``, when given,
    must be ``plan.fingerprint()`` (saves hashing the plan again).
    """
    owner = plan.owner.uid or plan.owner.display()
    return derived_event_id("plan", owner, fingerprint or plan.fingerprint(), causation_id)


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
                f"{type(error).__name__}: {_describe(error)}",
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
    return _describe("; ".join(shown) + (f"; and {more} more" if more > 0 else ""))


def _describe(error: BaseException | str) -> str:
    return re.sub(r"\s+", " ", str(error)).strip()[:1024]
