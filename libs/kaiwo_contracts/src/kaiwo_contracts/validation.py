"""Check one manifest against the served kinds, with problems a person can act on.

:func:`validate_manifest` parses the manifest as the API server would: JSON types are strict
(``gpus: "4"`` is a string, not a number, and the API server rejects it too), unknown fields
are errors, every default, enum, pattern and bound of the models applies, and the models'
cross-field rules run. Each problem names the field (``spec.storage.data.storageSize``, list
indices as ``[0]``) and says what is wrong in words (``unknown field``, ``must be one of amd,
nvidia``, ``must be a duration such as 30m``) rather than pydantic's wording.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from kaiwo_contracts.crds.meta import (
    DNS_LABEL_PATTERN,
    DNS_SUBDOMAIN_PATTERN,
    EMPTY_OR_DNS_SUBDOMAIN_PATTERN,
)
from kaiwo_contracts.crds.registry import SERVED_KINDS, model_for, served_types
from kaiwo_contracts.crds.schema import crd_info

MAX_NAME_LENGTH = 253
"""A DNS-1123 subdomain, the API server's rule for the names of custom resources."""
MAX_NAMESPACE_LENGTH = 63
"""A namespace's name is a DNS-1123 label."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a manifest: where (a field path, empty for the whole document)
    and what, in words."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def validate_manifest(document: Mapping[str, Any]) -> list[Problem]:
    """Every problem of one manifest (empty when the API server and the operator accept it)."""
    if not isinstance(document, Mapping):
        kind = type(document).__name__
        return [Problem("", f"a manifest must be a mapping of fields, not a {kind}")]
    type_problems = _type_meta_problems(document)
    if type_problems:
        return type_problems
    model = model_for(document["apiVersion"], document["kind"])
    if model is None:
        return [_unknown_type(document["apiVersion"], document["kind"])]
    metadata_problems = _metadata_problems(document, namespaced=_namespaced(model))
    try:
        text = json.dumps(document, default=_yaml_scalar_as_json)
    except (TypeError, ValueError) as error:
        return [*metadata_problems, Problem("", f"holds a value that is not plain data ({error})")]
    try:
        model.model_validate_json(text, strict=True)
    except ValidationError as error:
        return _merged(metadata_problems, _problems(error.errors(), document))
    return metadata_problems


def _namespaced(model: type[Any]) -> bool | None:
    """Whether objects of ``model`` live in a namespace; None for a ``...List``."""
    if model not in SERVED_KINDS:
        return None
    return crd_info(model).scope == "Namespaced"


def _merged(first: list[Problem], second: list[Problem]) -> list[Problem]:
    """``first``, then the problems of ``second`` about other fields."""
    paths = {problem.path for problem in first}
    return [*first, *(problem for problem in second if problem.path not in paths)]


# ------------------------------------------------------------------ metadata names

_SUBDOMAIN = re.compile(DNS_SUBDOMAIN_PATTERN)
_LABEL = re.compile(DNS_LABEL_PATTERN)


def _metadata_problems(document: Mapping[str, Any], *, namespaced: bool | None) -> list[Problem]:
    """The name and namespace against the API server's grammar: a custom resource's name is a
    DNS-1123 subdomain (at most 253 characters), a namespace a DNS-1123 label (at most 63).
    Names become the names and labels of children, path segments and log lines, so nothing
    else passes: no ``/``, no capitals or ``_``, no invisible or right-to-left characters."""
    metadata = document.get("metadata")
    if namespaced is None or not isinstance(metadata, Mapping):
        return []  # a list, or no metadata: the model names what is missing
    problems: list[Problem] = []
    name, generated = metadata.get("name"), metadata.get("generateName")
    if name is None and generated is None:
        problems.append(Problem("metadata.name", "required field is missing"))
    if isinstance(name, str):
        problems += _name_problem("metadata.name", name, _SUBDOMAIN, MAX_NAME_LENGTH, _NAME)
    if isinstance(generated, str):
        # The API server appends five characters and checks the result.
        problems += _name_problem(
            "metadata.generateName", generated + "x", _SUBDOMAIN, MAX_NAME_LENGTH, _NAME
        )
    namespace = metadata.get("namespace")
    # The API server drops a namespace given to a cluster-scoped kind, as kubectl does.
    if namespaced and isinstance(namespace, str):
        problems += _name_problem(
            "metadata.namespace", namespace, _LABEL, MAX_NAMESPACE_LENGTH, _NAMESPACE
        )
    return problems


_NAME = "must be a lowercase RFC 1123 name such as team-a or gpu.pool-1"
_NAMESPACE = "must be a lowercase RFC 1123 label such as team-a"


def _name_problem(
    path: str, value: str, grammar: re.Pattern[str], longest: int, wording: str
) -> list[Problem]:
    if len(value) > longest:
        return [Problem(path, f"must be at most {longest} characters long, not {len(value):,}")]
    if grammar.fullmatch(value):
        return []
    if not value:
        return [Problem(path, "must not be empty")]
    odd = next((c for c in value if not (c.isascii() and c.isprintable())), None)
    if odd is not None:
        what = unicodedata.name(odd, "a control character")
        return [Problem(path, f"{wording}; it holds U+{ord(odd):04X} ({what})")]
    return [Problem(path, f"{wording}, not {value!r}")]


def _type_meta_problems(document: Mapping[str, Any]) -> list[Problem]:
    return [
        Problem(field, "required field is missing" if field not in document else "must be a string")
        for field in ("apiVersion", "kind")
        if not isinstance(document.get(field), str)
    ]


def _unknown_type(api_version: str, kind: str) -> Problem:
    served = served_types()
    kinds_here = [k for version, k in served if version == api_version]
    if kinds_here:
        return Problem(
            "kind", f"unknown kind {kind} in {api_version}; known: {', '.join(kinds_here)}"
        )
    versions = sorted({version for version, k in served if k == kind})
    if versions:
        return Problem(
            "apiVersion", f"{kind} is served as {', '.join(versions)}, not {api_version}"
        )
    listed = ", ".join(f"{version}/{k}" for version, k in served)
    return Problem("apiVersion", f"unknown kind {api_version}/{kind}; served kinds: {listed}")


def _yaml_scalar_as_json(value: Any) -> Any:
    # YAML reads unquoted timestamps as datetime/date; on the wire they are strings.
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} {value!r}")


# ------------------------------------------------------------------ error -> problem


def _problems(errors: Sequence[ErrorDetails], document: Mapping[str, Any]) -> list[Problem]:
    """One problem per field; the errors of a union's branches become one message."""
    by_path: dict[str, list[ErrorDetails]] = {}
    for error in errors:
        by_path.setdefault(_field_path(error, document), []).append(error)
    return [Problem(path, _message(grouped)) for path, grouped in by_path.items()]


_NAMES_ABSENT_FIELD = frozenset({"missing", "cel_rule"})


def _field_path(error: ErrorDetails, document: Mapping[str, Any]) -> str:
    """The error's location in the manifest, without pydantic's union-branch tags.

    A location step is a field when the manifest has it; the last step of a ``missing``
    error, or of a ``cel_rule`` one (a rule that asks for a field, e.g. a download's
    ``storageSize``), is the missing field; anything else (``int``, ``str``,
    ``literal['']``, a model name) names a union branch and is left out.
    """
    current: Any = document
    parts: list[str | int] = []
    location = error["loc"]
    for index, step in enumerate(location):
        last = index == len(location) - 1
        found, child = _child(current, step)
        if found:
            current = child
        elif not (last and error["type"] in _NAMES_ABSENT_FIELD and isinstance(current, Mapping)):
            continue
        parts.append(step)
    return _render_path(parts)


def _child(container: Any, step: str | int) -> tuple[bool, Any]:
    if isinstance(container, Mapping) and step in container:
        return True, container[step]
    if isinstance(container, list) and isinstance(step, int) and 0 <= step < len(container):
        return True, container[step]
    return False, None


def _render_path(parts: Sequence[str | int]) -> str:
    rendered = ""
    for part in parts:
        if isinstance(part, int):
            rendered += f"[{part}]"
        else:
            rendered += f".{part}" if rendered else part
    return rendered


def _message(errors: Sequence[ErrorDetails]) -> str:
    if len(errors) == 1:
        return _describe(errors[0])
    choices = [_choices(error) for error in errors]
    if all(choice is not None for choice in choices):
        values = [value for choice in choices if choice for value in choice]
        return _one_of(list(dict.fromkeys(values)))
    # A value no branch of a union takes: "must be a whole number or a string".
    described = list(dict.fromkeys(_describe(error) for error in errors))
    if all(text.startswith("must be ") for text in described):
        return "must be " + " or ".join(text.removeprefix("must be ") for text in described)
    return " or ".join(described)


_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'|(-?\d+(?:\.\d+)?)")


def _choices(error: ErrorDetails) -> list[str] | None:
    if error["type"] not in {"literal_error", "enum"}:
        return None
    expected = str((error.get("ctx") or {}).get("expected", ""))
    return [quoted if number == "" else number for quoted, number in _QUOTED.findall(expected)]


def _one_of(values: Sequence[str]) -> str:
    shown = [value if value else '""' for value in values]
    if len(shown) == 1:
        return f"must be {shown[0]}"
    return f"must be one of {', '.join(shown)}"


# Patterns whose meaning is better said in words than shown.
_PATTERN_MEANINGS = {
    r"^([0-9]+(s|m|h))+$": "must be a duration such as 30m, 1h or 1h30m",
    r"^[a-z0-9-]+$": "must contain only lowercase letters, digits and '-'",
    DNS_SUBDOMAIN_PATTERN: "must be a lowercase RFC 1123 name such as team-a or gpu.pool-1",
    DNS_LABEL_PATTERN: "must be a lowercase RFC 1123 label such as team-a",
    EMPTY_OR_DNS_SUBDOMAIN_PATTERN: (
        "must be empty or a lowercase RFC 1123 name such as team-a or gpu.pool-1"
    ),
}

_FIXED_MESSAGES = {
    "missing": "required field is missing",
    "extra_forbidden": "unknown field",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "dict_type": "must be a mapping of keys to values",
    "model_type": "must be a mapping of fields",
    "model_attributes_type": "must be a mapping of fields",
    "list_type": "must be a list",
    "datetime_type": "must be a date and time such as 2025-01-31T12:00:00Z",
    "datetime_parsing": "must be a date and time such as 2025-01-31T12:00:00Z",
    "datetime_from_date_parsing": "must be a date and time such as 2025-01-31T12:00:00Z",
    "none_required": "must be left out",
}


def _bounded(template: str, key: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda ctx: template.format(ctx.get(key))


def _sized(ctx: Mapping[str, Any], *, bound: str, word: str) -> str:
    unit = "entries" if ctx.get("field_type") == "Dictionary" else "items"
    return f"must have {word} {ctx.get(bound)} {unit}"


def _string_size(ctx: Mapping[str, Any], *, bound: str, word: str) -> str:
    if bound == "min_length" and ctx.get(bound) == 1:
        return "must not be empty"
    return f"must be {word} {ctx.get(bound)} characters long"


def _pattern(ctx: Mapping[str, Any]) -> str:
    pattern = str(ctx.get("pattern", ""))
    return _PATTERN_MEANINGS.get(pattern, f"must match the pattern {pattern}")


_CONTEXT_MESSAGES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "greater_than_equal": _bounded("must be at least {}", "ge"),
    "greater_than": _bounded("must be greater than {}", "gt"),
    "less_than_equal": _bounded("must be at most {}", "le"),
    "less_than": _bounded("must be less than {}", "lt"),
    "multiple_of": _bounded("must be a multiple of {}", "multiple_of"),
    "too_short": lambda ctx: _sized(ctx, bound="min_length", word="at least"),
    "too_long": lambda ctx: _sized(ctx, bound="max_length", word="at most"),
    "string_too_short": lambda ctx: _string_size(ctx, bound="min_length", word="at least"),
    "string_too_long": lambda ctx: _string_size(ctx, bound="max_length", word="at most"),
    "string_pattern_mismatch": _pattern,
}


def _describe(error: ErrorDetails) -> str:
    kind = error["type"]
    if kind in _FIXED_MESSAGES:
        return _FIXED_MESSAGES[kind]
    if kind in _CONTEXT_MESSAGES:
        return _CONTEXT_MESSAGES[kind](error.get("ctx") or {})
    choices = _choices(error)
    if choices is not None:
        return _one_of(choices)
    message = error["msg"]
    # Messages of the models' own rules are already written for people.
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    return message
