"""Hypothesis strategies built from the pydantic models of the bus contracts.

:func:`wire_values` walks a model's fields (annotation and constraints: lengths, patterns,
bounds, literals, nested models, optional fields) and draws the JSON a producer would put on
the wire, by alias. :func:`payloads` and :func:`envelopes` validate those values with the
models themselves, after the few repairs that cross-field rules need (a plan's fingerprint,
a result's outcome, the oversized marker), so every value they give is one the operator could
publish.
"""

from __future__ import annotations

import enum
import types
import typing
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import annotated_types
from hypothesis import strategies as st
from kaiwo_contracts.events import Envelope, EventPayload
from kaiwo_contracts.events.envelope import MAX_JSON_INTEGER, envelope_class
from kaiwo_contracts.events.observed import OVERSIZED_KEY, ObservedObjectV1
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.results import ApplyResultV1
from kaiwo_contracts.plans import Plan
from pydantic import AwareDatetime, BaseModel, ValidationError
from pydantic.fields import FieldInfo

EARLIEST = datetime(1970, 1, 2)  # the envelope takes times from 1970 UTC on, whatever the zone
LATEST = datetime(2200, 1, 1)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(MAX_JSON_INTEGER - 1), max_value=MAX_JSON_INTEGER - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=5)

# Whole-minute offsets: what RFC 3339 can write.
zones = st.integers(min_value=-(14 * 60 - 1), max_value=14 * 60 - 1).map(
    lambda minutes: timezone(timedelta(minutes=minutes)) if minutes else UTC
)
aware_datetimes = st.datetimes(min_value=EARLIEST, max_value=LATEST, timezones=zones)


def wire_values(model: type[BaseModel]) -> st.SearchStrategy[dict[str, Any]]:
    """Field values of ``model`` under their wire names (required ones always, the others
    sometimes), each within the field's declared constraints."""
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for name, info in model.model_fields.items():
        key = info.alias or name
        (required if info.is_required() else optional)[key] = _field(info)
    return st.fixed_dictionaries(required, optional=optional)


def _field(info: FieldInfo) -> st.SearchStrategy[Any]:
    return _annotation(info.annotation, info.metadata)


def _annotation(  # noqa: PLR0911 - one return per kind of annotation
    annotation: Any, metadata: list[Any]
) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if annotation is Any:
        return json_values
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(_annotation(argument, metadata) for argument in arguments))
    if annotation is type(None):
        return st.none()
    if origin is typing.Literal:
        return st.sampled_from(arguments)
    if origin is tuple and len(arguments) == 2 and arguments[1] is Ellipsis:
        return st.lists(_annotation(arguments[0], []), max_size=3)
    if origin is dict:
        return st.dictionaries(st.text(max_size=8), _annotation(arguments[1], []), max_size=4)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return st.sampled_from([member.value for member in annotation])
    if annotation is AwareDatetime:
        return aware_datetimes.map(lambda moment: moment.isoformat())
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return wire_values(annotation)
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return st.integers(**_bounds(metadata, default=(-(2**63), 2**63 - 1)))
    if annotation is float:
        return st.floats(allow_nan=False, allow_infinity=False, **_bounds(metadata))
    if annotation is str:
        return _text(metadata)
    raise NotImplementedError(f"no strategy for {annotation!r}")


def _bounds(metadata: list[Any], default: tuple[Any, Any] = (None, None)) -> dict[str, Any]:
    low, high = default
    for constraint in metadata:
        if isinstance(constraint, annotated_types.Ge):
            low = constraint.ge
        elif isinstance(constraint, annotated_types.Le):
            high = constraint.le
    return {"min_value": low, "max_value": high}


def _text(metadata: list[Any]) -> st.SearchStrategy[str]:
    shortest, longest, pattern = 0, 40, None
    for constraint in metadata:
        if isinstance(constraint, annotated_types.MinLen):
            shortest = constraint.min_length
        elif isinstance(constraint, annotated_types.MaxLen):
            longest = min(longest, constraint.max_length)
        elif getattr(constraint, "pattern", None):
            pattern = constraint.pattern
    if pattern is None:
        return st.text(min_size=shortest, max_size=longest)
    return st.from_regex(pattern, fullmatch=True).filter(
        lambda text: shortest <= len(text) <= longest
    )


# ------------------------------------------------------------------- valid payloads


def _repaired(model: type[BaseModel], values: dict[str, Any]) -> dict[str, Any]:
    """What the cross-field rules need (the generic walk cannot know them)."""
    repaired = dict(values)
    if model is ObservedObjectV1:
        obj = dict(repaired["object"])
        obj.pop(OVERSIZED_KEY, None)
        if repaired.get("oversized") is not None:
            obj[OVERSIZED_KEY] = repaired["oversized"]
        repaired["object"] = obj
    elif model is PlanDecidedV1:
        repaired["fingerprint"] = Plan.model_validate(repaired["plan"]).fingerprint()
        repaired["absent"] = []
    elif model is ApplyResultV1:
        actions = [
            {**action, "reason": action.get("reason") or "failed"}
            if action["outcome"] == "failed"
            else action
            for action in repaired.get("actions", [])
        ]
        repaired["actions"] = actions
        failed = any(action["outcome"] == "failed" for action in actions)
        repaired["outcome"] = "failed" if failed else "applied"
    return repaired


def payloads(model: type[EventPayload]) -> st.SearchStrategy[EventPayload]:
    """Valid payloads of ``model``."""
    return (
        wire_values(model)
        .map(lambda values: _validated(model, _repaired(model, values)))
        .filter(lambda payload: payload is not None)
    )


def _validated(model: type[BaseModel], values: dict[str, Any]) -> Any:
    try:
        return model.model_validate(values)
    except ValidationError:  # a value the walk cannot steer clear of; rare (see the filter)
        return None


def envelopes(model: type[EventPayload]) -> st.SearchStrategy[Envelope[Any]]:
    """Valid envelopes carrying a valid ``model`` payload."""
    attributes = {
        name: _field(info)
        for name, info in Envelope.model_fields.items()
        if name not in ("data", "type", "specversion", "datacontenttype")
    }
    optional = {name for name, info in Envelope.model_fields.items() if not info.is_required()}
    return st.builds(
        lambda values, data: envelope_class(model).model_validate(
            {**values, "type": model.EVENT_TYPE, "data": data}
        ),
        st.fixed_dictionaries(
            {name: s for name, s in attributes.items() if name not in optional},
            optional={name: s for name, s in attributes.items() if name in optional},
        ),
        payloads(model),
    )
