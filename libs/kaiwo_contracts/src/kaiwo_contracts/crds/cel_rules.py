"""CEL rules of the CRDs (KubeAI's, and Kaiwo's storage rules), checked twice: as
``x-kubernetes-validations`` in the schema (what the API server enforces) and as pydantic checks
(so ``kaiwo validate`` and the planner catch the same mistakes, each error located at the field
it is about).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

CEL_VALIDATIONS = "x-kubernetes-validations"

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RuleViolation:
    """A broken validation rule: the field it is about (wire path) and the API's message."""

    field: str
    message: str


@dataclass(frozen=True)
class CelRule(Generic[T]):
    """A CEL rule the API server evaluates, with the Python predicate that mirrors it."""

    rule: str
    message: str
    field: str
    """Wire path, relative to the object the rule sits on, of the field an error names."""
    holds: Callable[[T], bool]
    reported_at_field: bool = False
    """The API server names ``field`` in its error (``fieldPath``), not the object the rule
    sits on; off for KubeAI's rules, whose CRD is upstream's."""

    def schema_entry(self) -> dict[str, Any]:
        entry = {"rule": self.rule, "message": self.message}
        if self.reported_at_field:
            entry["fieldPath"] = f".{self.field}"
        return entry


@dataclass(frozen=True)
class TransitionRule(Generic[T]):
    """A CEL rule comparing an update (``self``) with the stored object (``oldSelf``)."""

    rule: str
    message: str
    field: str
    holds: Callable[[T, T], bool]

    def schema_entry(self) -> dict[str, Any]:
        return {"rule": self.rule, "message": self.message}


def starts_with_any(value: str, prefixes: tuple[str, ...]) -> bool:
    return value.startswith(prefixes)


def cel_starts_with_any(subject: str, prefixes: tuple[str, ...]) -> str:
    return " || ".join(f'{subject}.startsWith("{prefix}")' for prefix in prefixes)


def quoted_list(prefixes: tuple[str, ...]) -> str:
    quoted = [f'"{prefix}"' for prefix in prefixes]
    return ", ".join(quoted[:-1]) + f", or {quoted[-1]}"


def raise_violations(title: str, violations: list[tuple[str, str, Any]]) -> None:
    """Raise one pydantic error per violation, each located at its own field."""
    if not violations:
        return
    raise ValidationError.from_exception_data(
        title,
        [
            InitErrorDetails(
                type=PydanticCustomError("cel_rule", message),
                loc=tuple(int(part) if part.isdigit() else part for part in field.split(".")),
                input=value,
            )
            for field, message, value in violations
        ],
    )


def raise_broken_rules(title: str, rules: Iterable[CelRule[Any]], model: object) -> None:
    """The CEL rules a CRD carries, checked by its model too: one error per rule ``model``
    breaks, each at the rule's field."""
    raise_violations(
        title, [(rule.field, rule.message, None) for rule in rules if not rule.holds(model)]
    )


def checked(rule: CelRule[str], value: str) -> str:
    if not rule.holds(value):
        raise PydanticCustomError("cel_rule", rule.message)
    return value
