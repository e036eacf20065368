"""Label and field selectors, parsed and matched as the API server does.

Label selectors: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x,y)``, ``a``, ``!a``,
joined by commas (all must hold). ``!=`` and ``notin`` also match objects without the label.
Field selectors: ``path=value``, ``path==value``, ``path!=value`` over the fields each kind
supports (``metadata.name`` and ``metadata.namespace`` everywhere, plus a few per kind).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kaiwo_kubefake.errors import bad_request

Operator = Literal["=", "!=", "in", "notin", "exists", "!exists"]

_SET_REQUIREMENT = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s*\(([^)]*)\)\s*$")
_EQUALITY = re.compile(r"^\s*([^\s!=(),]+)\s*(==|=|!=)\s*([^\s,()!=]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*$")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator == "exists":
            return present
        if self.operator == "!exists":
            return not present
        if self.operator in ("=", "in"):
            return present and value in self.values
        return not present or value not in self.values


def _split_requirements(text: str) -> list[str]:
    """Split on commas that are not inside a parenthesised value set."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise bad_request(f"unable to parse requirement: unbalanced ')' in {text!r}")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth:
        raise bad_request(f"unable to parse requirement: unbalanced '(' in {text!r}")
    parts.append("".join(current))
    return parts


def _parse_requirement(text: str) -> Requirement:
    if match := _SET_REQUIREMENT.match(text):
        key, word, raw_values = match.groups()
        values = frozenset(v.strip() for v in raw_values.split(",") if v.strip())
        return Requirement(key=key, operator="in" if word == "in" else "notin", values=values)
    if match := _EQUALITY.match(text):
        key, symbol, value = match.groups()
        return Requirement(
            key=key, operator="!=" if symbol == "!=" else "=", values=frozenset({value})
        )
    if match := _EXISTS.match(text):
        negated, key = match.groups()
        return Requirement(key=key, operator="!exists" if negated else "exists")
    raise bad_request(f"unable to parse requirement: {text.strip()!r}")


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> LabelSelector:
        if not text or not text.strip():
            return cls()
        return cls(tuple(_parse_requirement(part) for part in _split_requirements(text)))

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        return all(requirement.matches(labels or {}) for requirement in self.requirements)


# Fields the real API server accepts in field selectors, per (group, plural).
_KIND_FIELDS: dict[tuple[str, str], frozenset[str]] = {
    ("", "pods"): frozenset({"spec.nodeName", "spec.schedulerName", "status.phase"}),
    ("", "events"): frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "reason",
            "type",
            "source",
        }
    ),
    ("", "nodes"): frozenset({"spec.unschedulable"}),
    ("", "namespaces"): frozenset({"status.phase"}),
}
_COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    path: str
    equal: bool
    value: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (_field_value(obj, self.path) == self.value) == self.equal


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


@dataclass(frozen=True, slots=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    @classmethod
    def parse(cls, text: str | None, *, kind_key: tuple[str, str]) -> FieldSelector:
        if not text or not text.strip():
            return cls()
        allowed = _COMMON_FIELDS | _KIND_FIELDS.get(kind_key, frozenset())
        requirements = []
        for part in text.split(","):
            match = _EQUALITY.match(part)
            if not match:
                raise bad_request(f"invalid field selector: {part.strip()!r}")
            path, symbol, value = match.groups()
            if path not in allowed:
                raise bad_request(f'field label not supported: "{path}"')
            requirements.append(FieldRequirement(path=path, equal=symbol != "!=", value=value))
        return cls(tuple(requirements))

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(requirement.matches(obj) for requirement in self.requirements)
