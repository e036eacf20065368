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
import json
import re
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar, Final, Generic, Literal, Self, TypeVar, cast

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

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


class EnvelopeFormatError(ValueError):
    """The headers or JSON do not form a valid envelope (a poison message, never retried)."""


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

    id: str = Field(min_length=1, max_length=256)
    source: str = Field(pattern=_SOURCE_PATTERN)
    specversion: Literal["1.0"] = SPEC_VERSION
    type: str = Field(pattern=_TYPE_PATTERN)
    subject: str | None = Field(default=None, min_length=1)
    time: AwareDatetime
    datacontenttype: Literal["application/json"] = JSON_CONTENT_TYPE
    correlationid: str = Field(min_length=1)
    causationid: str | None = Field(default=None, min_length=1)
    traceparent: str | None = Field(default=None, pattern=_TRACEPARENT_PATTERN)
    data: T

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
        body = canonical_json(self.data.model_dump(mode="json", by_alias=True)).encode()
        return headers, body

    @classmethod
    def from_nats(cls, headers: Mapping[str, str] | None, body: bytes) -> Self:
        """Parse a binary-mode message; raise :class:`EnvelopeFormatError` when it is invalid.

        Header names are matched case-insensitively (NATS keeps the case the publisher used).
        """
        try:
            data = json.loads(body)
        except ValueError as error:  # json.JSONDecodeError is a ValueError
            raise EnvelopeFormatError(_describe(error)) from error
        return cls.from_nats_data(headers, data)

    @classmethod
    def from_nats_data(cls, headers: Mapping[str, str] | None, data: Any) -> Self:
        """:meth:`from_nats` for a body already parsed: for a consumer that keeps the JSON
        as it came (the recorder stores it) and so must not parse it twice."""
        lowered = {key.lower(): value for key, value in (headers or {}).items()}
        attributes: dict[str, Any] = {
            name: lowered[f"{CE_HEADER_PREFIX}{name}"]
            for name in _HEADER_ATTRIBUTES
            if f"{CE_HEADER_PREFIX}{name}" in lowered
        }
        attributes["datacontenttype"] = lowered.get(CONTENT_TYPE_HEADER, JSON_CONTENT_TYPE)
        attributes["data"] = data
        try:
            return cls.model_validate(attributes)
        except ValueError as error:  # ValidationError is a ValueError
            raise EnvelopeFormatError(_describe(error)) from error

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
        try:
            document = json.loads(value) if isinstance(value, str | bytes) else dict(value)
            return cls.model_validate(document)
        except ValueError as error:
            raise EnvelopeFormatError(_describe(error)) from error


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


def _describe(error: ValueError) -> str:
    return re.sub(r"\s+", " ", str(error)).strip()
