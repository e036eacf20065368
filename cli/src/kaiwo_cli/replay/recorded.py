"""Reading what was recorded: each event's stream and sequence, observations, monitor findings
and autoscaler decisions in stream order, and plans in the order they were published."""

from __future__ import annotations

from collections.abc import (
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import Final, TypeVar

from kaiwo_contracts.events import ObservedObjectV1, PlanDecidedV1
from kaiwo_contracts.events.autoscaling import ScaleDecidedV1
from kaiwo_contracts.events.monitor import UtilizationV1
from kaiwo_contracts.events.plans import FINGERPRINT_CHECKED_BY_READER
from kaiwo_eventstore import StoredEvent
from kaiwo_planner.domain.state.scale_request import ScaleRequest
from kaiwo_planner.domain.state.workload_finding import WorkloadFinding
from pydantic import ValidationError

OBSERVED_TYPE: Final = ObservedObjectV1.EVENT_TYPE


PLAN_TYPE: Final = PlanDecidedV1.EVENT_TYPE


NATS_STREAM_KEY: Final = "natsStream"


NATS_SEQUENCE_KEY: Final = "natsSequence"
"""Metadata keys the recorder writes (``kaiwo_recorder.records``); a test keeps them equal."""


OBSERVED_STREAM: Final = "KAIWO_OBS"


FINDING_TYPE: Final = UtilizationV1.EVENT_TYPE


MONITOR_STREAM: Final = "KAIWO_MON"


SCALE_TYPE: Final = ScaleDecidedV1.EVENT_TYPE


GATEWAY_STREAM: Final = "KAIWO_GATEWAY"


class StreamsRecreatedError(ValueError):
    """Two recorded events of one input share a stream sequence: the NATS stream was made
    again (its sequences start at 1 again) while the store kept the older lifetime's events.

    A plan names only the sequences it read, not which lifetime of the stream they were
    in, so replay cannot tell which observations a plan was made from: it refuses (the CLI
    exits 2), never judging a plan against another lifetime's objects (decision 0231)."""

    def __init__(self, stream: str, sequence: int) -> None:
        super().__init__(
            f"{stream} sequence {sequence} is recorded twice, for two different events: the "
            f"NATS stream {stream} was made again (NATS lost its streams) and this store holds "
            "more than one lifetime of it. A plan's sequences do not say which lifetime they "
            "were read in, so replay cannot tell which observations a plan was made from; "
            "replay a store recorded since the streams were made again"
        )
        self.stream = stream
        self.sequence = sequence


@dataclass(frozen=True, slots=True)
class _Observation:
    sequence: int
    payload: ObservedObjectV1


def observations_in_stream_order(events: Iterable[StoredEvent]) -> list[_Observation]:
    """Recorded observations of ``KAIWO_OBS`` with a readable payload, by stream sequence.

    Raises :class:`StreamsRecreatedError` when two observations share a sequence."""
    found: dict[int, _Observation] = {}
    seen: set[int] = set()
    for event in events:
        sequence = _obs_sequence_of(event)
        if event.type != OBSERVED_TYPE or sequence is None:
            continue
        if sequence in seen:
            # The store keeps one row per event id, so a second row is another message.
            raise StreamsRecreatedError(OBSERVED_STREAM, sequence)
        seen.add(sequence)
        try:
            found[sequence] = _Observation(sequence, ObservedObjectV1.model_validate(event.data))
        except ValidationError:
            continue  # the recorder would have stored it as malformed; nothing to apply
    return [found[sequence] for sequence in sorted(found)]


_Read = TypeVar("_Read")


def findings_in_stream_order(events: Iterable[StoredEvent]) -> list[tuple[int, WorkloadFinding]]:
    """Recorded monitor findings of ``KAIWO_MON`` with a readable payload, by stream sequence."""

    def read(event: StoredEvent) -> WorkloadFinding | None:
        reading = UtilizationV1.model_validate(event.data)
        return WorkloadFinding.of(reading, at=event.time) if reading.workload.uid else None

    return _in_stream_order(events, stream=MONITOR_STREAM, event_type=FINDING_TYPE, read=read)


def scale_requests_in_stream_order(
    events: Iterable[StoredEvent],
) -> list[tuple[int, ScaleRequest]]:
    """Recorded autoscaler decisions of ``KAIWO_GATEWAY`` with a readable payload, by stream
    sequence."""

    def read(event: StoredEvent) -> ScaleRequest | None:
        decision = ScaleDecidedV1.model_validate(event.data)
        return ScaleRequest.of(decision, at=event.time) if decision.model.uid else None

    return _in_stream_order(events, stream=GATEWAY_STREAM, event_type=SCALE_TYPE, read=read)


def _in_stream_order(
    events: Iterable[StoredEvent],
    *,
    stream: str,
    event_type: str,
    read: Callable[[StoredEvent], _Read | None],
) -> list[tuple[int, _Read]]:
    """What ``read`` makes of each recorded event of ``event_type`` in ``stream`` (once per
    stream sequence; unreadable payloads and None skipped), by stream sequence.

    Raises :class:`StreamsRecreatedError` when two events share a sequence."""
    found: dict[int, _Read] = {}
    seen: set[int] = set()
    for event in events:
        sequence = _sequence_in(event, stream)
        if event.type != event_type or sequence is None:
            continue
        if sequence in seen:
            raise StreamsRecreatedError(stream, sequence)
        seen.add(sequence)
        try:
            value = read(event)
        except ValidationError:
            continue
        if value is not None:
            found[sequence] = value
    return [(sequence, found[sequence]) for sequence in sorted(found)]


PlanOrder = tuple[int, int, int, int]
"""Where a plan stands in the order its planner published it (:func:`plan_order`)."""


def plan_order(event: StoredEvent) -> PlanOrder:
    """The order replay judges plans in: by ``obsSequence``, which orders the plans of every
    planner replica (each reads the whole of ``KAIWO_OBS`` in order); then by
    ``monSequence``, ``scaleSequence`` and recording position, the order one planner
    published them in (its sequences only move forward). Another replica reads ``KAIWO_MON``
    and ``KAIWO_GATEWAY`` on its own: its plan may come before another's with higher
    sequences of those (each plan is judged as of its own, decision 0220)."""
    data = event.data
    try:
        return (
            int(data.get("obsSequence") or 0),
            int(data.get("monSequence") or 0),
            int(data.get("scaleSequence") or 0),
            event.global_position,
        )
    except (TypeError, ValueError):  # unparsable: judged (and skipped) in recorded order
        return (0, 0, 0, event.global_position)


def decided_plan(event: StoredEvent) -> PlanDecidedV1 | None:
    """The recorded decision, its fingerprint not checked yet: :func:`judge_plan` checks it,
    and a plan that is never judged (another workload's) is never hashed."""
    try:
        return PlanDecidedV1.model_validate(
            event.data, context={FINGERPRINT_CHECKED_BY_READER: True}
        )
    except ValidationError:
        return None


def _obs_sequence_of(event: StoredEvent) -> int | None:
    return _sequence_in(event, OBSERVED_STREAM)


def _sequence_in(event: StoredEvent, stream: str) -> int | None:
    metadata = event.metadata
    if metadata.get(NATS_STREAM_KEY) != stream:
        return None
    sequence = metadata.get(NATS_SEQUENCE_KEY)
    return sequence if isinstance(sequence, int) and sequence > 0 else None


def observation_of(
    event: StoredEvent,
) -> tuple[int, Callable[[], ObservedObjectV1 | None]] | None:
    """The observation's stream sequence, and how to read its payload (only when applied:
    an observation past the last plan is never validated)."""
    sequence = _obs_sequence_of(event)
    if sequence is None:
        return None

    def payload() -> ObservedObjectV1 | None:
        try:
            return ObservedObjectV1.model_validate(event.data)
        except ValidationError:  # the recorder would have stored it as malformed
            return None

    return sequence, payload


def finding_of(
    event: StoredEvent,
) -> tuple[int, Callable[[], WorkloadFinding | None]] | None:
    sequence = _sequence_in(event, MONITOR_STREAM)
    if sequence is None:
        return None

    def finding() -> WorkloadFinding | None:
        try:
            reading = UtilizationV1.model_validate(event.data)
        except ValidationError:
            return None
        return WorkloadFinding.of(reading, at=event.time) if reading.workload.uid else None

    return sequence, finding


def scale_request_of(
    event: StoredEvent,
) -> tuple[int, Callable[[], ScaleRequest | None]] | None:
    sequence = _sequence_in(event, GATEWAY_STREAM)
    if sequence is None:
        return None

    def request() -> ScaleRequest | None:
        try:
            decision = ScaleDecidedV1.model_validate(event.data)
        except ValidationError:
            return None
        return ScaleRequest.of(decision, at=event.time) if decision.model.uid else None

    return sequence, request


def owner_uid_of(event: StoredEvent) -> str | None:
    owner = (event.data.get("plan") or {}).get("owner") or {}
    uid = owner.get("uid") if isinstance(owner, Mapping) else None
    return uid if isinstance(uid, str) else event.correlation_id


@dataclass(frozen=True, slots=True)
class Span:
    """The plans recorded at store positions from ``start`` up to ``end`` (excluded; None: to
    the last): the part of a replay one process judges (:func:`spans_from`). Each plan is still
    judged against the whole cluster as recorded: the process takes in every observation up
    to its plans, those before its first plan each object's once."""

    start: int
    end: int | None = None

    def __post_init__(self) -> None:
        if self.start < 1 or (self.end is not None and self.end <= self.start):
            msg = f"span {self.start} to {self.end}: positions start at 1 and end after the start"
            raise ValueError(msg)


FAST_FORWARD_SHARE: Final = 0.15
"""What a plan before a replay process's span costs it, against one in its span: the
observations up to it are read, decoded and validated, each object filed once, and the plan
is not read (``bench/replay.py``'s store: 0.14)."""


def span_shares(count: int, *, before_share: float = FAST_FORWARD_SHARE) -> list[float]:
    """Where each of ``count`` spans of the recorded plans starts, as a share of the plans,
    so that each costs about the same: its plans, and ``before_share`` of each plan before
    it. So the later spans are shorter: with share *a*, span *k* starting at *b(k)* and of
    length *L(k)*, every *L(k) + a b(k)* is the same, so *b(k)* is proportional to
    *1 - (1 - a)^k*."""
    if count < 1:
        raise ValueError(f"{count} spans: there must be at least one")
    if before_share <= 0:
        return [index / count for index in range(count)]
    keep = 1.0 - before_share
    return [(1.0 - keep**index) / (1.0 - keep**count) for index in range(count)]


def spans_from(starts: Sequence[int]) -> list[Span]:
    """Consecutive spans, the first from position 1, the others from ``starts`` (plans'
    positions), the last to the end. Spans that would be empty are left out."""
    boundaries = sorted({1, *starts})
    return [
        Span(start, boundaries[index + 1] if index + 1 < len(boundaries) else None)
        for index, start in enumerate(boundaries)
    ]
