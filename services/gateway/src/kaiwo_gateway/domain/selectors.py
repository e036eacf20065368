"""Kubernetes label selectors, as ``X-Label-Selector`` headers carry them (tenancy).

The grammar of ``kubectl -l``: comma-separated requirements, each ``key``, ``!key``,
``key=value``, ``key==value``, ``key!=value``, ``key in (a,b)`` or ``key notin (a,b)``.
Several headers are ANDed, as upstream. A selector that does not parse is refused with the
requirement at fault (the gateway answers 400).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

Operator = Literal["exists", "not-exists", "equals", "not-equals", "in", "notin"]

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET = re.compile(rf"^(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)$")
_EQUALITY = re.compile(rf"^(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_VALUE})$")
_EXISTS = re.compile(rf"^(?P<negated>!?)\s*(?P<key>{_KEY})$")
_VALUE_ONLY = re.compile(rf"^{_VALUE}$")


class SelectorError(ValueError):
    """A label selector that does not parse; the message names the requirement."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "exists":
            return present
        if self.operator == "not-exists":
            return not present
        value = labels.get(self.key)
        if self.operator in ("equals", "in"):
            return value in self.values
        return value not in self.values  # not-equals, notin: a missing label matches


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """Every requirement must hold; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(requirement.matches(labels) for requirement in self.requirements)


def parse_selectors(texts: Iterable[str]) -> LabelSelector:
    """One selector from every header given (ANDed)."""
    requirements: list[Requirement] = []
    for text in texts:
        requirements.extend(_requirements(text))
    return LabelSelector(tuple(requirements))


def _requirements(text: str) -> list[Requirement]:
    return [_requirement(part.strip()) for part in _split_outside_parentheses(text) if part.strip()]


def _split_outside_parentheses(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _requirement(text: str) -> Requirement:
    matched = _SET.match(text)
    if matched:
        values = frozenset(value.strip() for value in matched["values"].split(","))
        if not values or not all(value and _VALUE_ONLY.match(value) for value in values):
            raise SelectorError(f"label selector {text!r}: the set must list valid label values")
        operator: Operator = "in" if matched["op"] == "in" else "notin"
        return Requirement(key=matched["key"], operator=operator, values=values)
    matched = _EQUALITY.match(text)
    if matched:
        operator = "not-equals" if matched["op"] == "!=" else "equals"
        return Requirement(
            key=matched["key"], operator=operator, values=frozenset({matched["value"]})
        )
    matched = _EXISTS.match(text)
    if matched:
        operator = "not-exists" if matched["negated"] else "exists"
        return Requirement(key=matched["key"], operator=operator)
    raise SelectorError(f"label selector {text!r} is not a requirement kubectl -l accepts")
