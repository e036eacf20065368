"""Hypothesis strategies built from the served kinds' models, through their CRD schemas.

:func:`manifests` walks the structural schema the CRD generator derives from a model
(:func:`~kaiwo_contracts.crds.schema.structural_schema`: types, required fields, enums,
patterns, bounds, lengths, int-or-string quantities, open objects) and draws the manifest a
user could write of that kind. Free text comes from a small vocabulary of words the models
give meaning to (URL schemes, vendors, engines, quantities) mixed with arbitrary text, so
both the models' accepting and refusing branches are reached.

:func:`hostile` then damages a manifest: a value anywhere in it replaced by one of the wrong
type, one at the edges of what JSON, YAML or Python can hold, a field that does not exist, a
deep or wide tree. What the CLI reads from YAML can be any of these.

Three things are kept tame here, because another branch (``hostilespec``) is changing how
the models treat them; each place says what to widen once it merges.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Any

from hypothesis import strategies as st
from kaiwo_contracts.crds.schema import crd_info, structural_schema
from pydantic import BaseModel

MAX_LIST = 2
MAX_MAP = 2

Schema = dict[str, Any]

# -------------------------------------------------------------------- scalars

# Words the models and the planner read meaning into; the rest of free text is arbitrary.
VOCABULARY = (
    "",
    "a",
    "kaiwo",
    "team-a",
    "amd",
    "nvidia",
    "AMD",
    "mi300x",
    "VLLM",
    "OLlama",
    "Infinity",
    "default",
    "hf://org/model",
    "s3://bucket/path",
    "gs://bucket/path",
    "oss://bucket/path",
    "pvc://claim/path",
    "ollama://qwen2:0.5b",
    "/data/file",
    "rocm/vllm:latest",
    "python:3.12",
    "1",
    "16Gi",
    "500m",
    "30m",
    "main.py",
    "kaiwo/nodepool",
    "app.kubernetes.io/name",
)
_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"
# Built from characters, not from a regex: drawing from a regex costs ten times as much.
dns_labels = st.sampled_from(_ALNUM) | st.builds(
    lambda first, middle, last: first + middle + last,
    st.sampled_from(_ALNUM),
    st.text(alphabet=_ALNUM + "-", max_size=8),
    st.sampled_from(_ALNUM),
)
words = st.sampled_from(VOCABULARY) | dns_labels | st.text(max_size=12)

# Mostly Kubernetes quantities; also text outside the grammar (1e100Gi, NaN, -10Gi, 1.5.5Gi)
# and numbers beyond int64, which validation refuses and planning reports (decision 0022).
quantities = (
    st.integers(min_value=0, max_value=64)
    | st.sampled_from(
        ["0", "1", "2", "8", "500m", "1500m", "16Gi", "64Gi", "1Ti", "100M", "2k", "0.5", "1e3"]
    )
    | st.sampled_from(
        ["1e100Gi", "NaN", "-10Gi", "1.5.5Gi", "1e308", "99999999999999999999Ei", "", " 1"]
    )
    | st.integers(min_value=2**63 - 2, max_value=10**30)
    | st.integers(min_value=-(2**63) - 2, max_value=-1)
)
# Durations of any length: 99999999999999h overflows Go's int64 nanoseconds.
durations = st.from_regex(r"\A([0-9]{1,4}(s|m|h)){1,3}\Z") | st.from_regex(
    r"\A([0-9]{1,20}(s|m|h)){1,3}\Z"
)
SAFE_INTEGER = 2**31 - 1

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | words
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(words, children, max_size=3),
    max_leaves=8,
)
timestamps = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
).map(lambda moment: moment.strftime("%Y-%m-%dT%H:%M:%SZ"))


_STARTS_WITH = re.compile(r"""startsWith\((?:"([^"]*)"|'([^']*)')\)""")


def _prefixes(schema: Schema) -> list[str]:
    """The prefixes the field's CEL rules ask for (``self.startsWith("hf://")``)."""
    rules = " ".join(rule.get("rule", "") for rule in schema.get("x-kubernetes-validations", ()))
    return list(dict.fromkeys(double or single for double, single in _STARTS_WITH.findall(rules)))


def _string(schema: Schema) -> st.SearchStrategy[Any]:
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    prefixes = _prefixes(schema)
    if prefixes:
        suffixes = st.sampled_from(["org/model", "bucket/path", "qwen2:0.5b", "a"]) | dns_labels
        ruled = st.builds(lambda prefix, rest: prefix + rest, st.sampled_from(prefixes), suffixes)
        # Mostly what the rule asks for: a refused url stops a Model before its planning.
        return st.integers(min_value=0, max_value=5).flatmap(lambda n: words if n == 5 else ruled)
    pattern = schema.get("pattern")
    shortest = schema.get("minLength", 0)
    longest = schema.get("maxLength", 40)
    if pattern == r"^([0-9]+(s|m|h))+$":
        return durations
    if schema.get("format") == "date-time":
        return timestamps
    if pattern is not None:
        drawn = st.from_regex(pattern.replace("^", r"\A", 1).replace("$", r"\Z"), fullmatch=True)
        return drawn.filter(lambda text: shortest <= len(text) <= longest)
    return words.filter(lambda text: shortest <= len(text) <= longest)


def _integer(schema: Schema) -> st.SearchStrategy[int]:
    low = schema.get("minimum", -3)
    high = schema.get("maximum", SAFE_INTEGER)
    # Mostly small: counts become lists of Pods and node pools.
    small = st.integers(min_value=max(low, -3), max_value=min(high, max(low, -3) + 12))
    return small | st.sampled_from(sorted({low, min(high, SAFE_INTEGER)}))


# -------------------------------------------------------------------- the walk


def schema_values(  # noqa: PLR0911 - one return per schema type
    schema: Schema, *, depth: int = 0
) -> st.SearchStrategy[Any]:
    """Values that the structural schema ``schema`` describes."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if schema.get("x-kubernetes-int-or-string"):
        return quantities
    kind = schema.get("type")
    if kind == "object":
        return _object(schema, depth=depth)
    if kind == "array":
        return st.lists(
            schema_values(schema.get("items", {}), depth=depth + 1),
            min_size=schema.get("minItems", 0),
            max_size=max(
                schema.get("minItems", 0), min(schema.get("maxItems", MAX_LIST), MAX_LIST)
            ),
        )
    if kind == "string":
        return _string(schema)
    if kind == "integer":
        return _integer(schema)
    if kind == "number":
        return st.floats(
            min_value=schema.get("minimum", -1e6),
            max_value=schema.get("maximum", 1e6),
            allow_nan=False,
        )
    if kind == "boolean":
        return st.booleans()
    return json_values  # a node with only x-kubernetes-preserve-unknown-fields


def _object(schema: Schema, *, depth: int) -> st.SearchStrategy[Any]:
    properties: dict[str, Schema] = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    if not properties and isinstance(extra, dict):
        return st.dictionaries(
            words.filter(bool), schema_values(extra, depth=depth + 1), max_size=MAX_MAP
        )
    if not properties:
        return st.dictionaries(words, json_values, max_size=MAX_MAP)
    required = set(schema.get("required", ()))
    fields = {name: schema_values(child, depth=depth + 1) for name, child in properties.items()}
    return st.fixed_dictionaries(
        {name: value for name, value in fields.items() if name in required},
        optional={name: value for name, value in fields.items() if name not in required},
    )


# -------------------------------------------------------------------- manifests

# Names up to 253 characters: longer than 63 they no longer fit a label value as they are.
long_names = st.builds(
    lambda first, rest, size: (first + rest * 253)[:size].rstrip("-.") or first,
    st.sampled_from(_ALNUM),
    st.sampled_from(["x", "a-", "ab.", "0"]),
    st.integers(min_value=64, max_value=253),
)
names = dns_labels | st.sampled_from(["x" * 40, "a-" * 31 + "b", "x" * 63]) | long_names
uids = st.uuids().map(str)


def metadata(*, namespaced: bool, name: st.SearchStrategy[str] = names) -> st.SearchStrategy[Any]:
    """The metadata the API server hands back for an object of a namespaced (or not) kind."""
    required: dict[str, st.SearchStrategy[Any]] = {
        "name": name,
        "uid": uids,
        "resourceVersion": st.integers(min_value=1, max_value=10**6).map(str),
        "generation": st.integers(min_value=1, max_value=50),
        "creationTimestamp": timestamps,
    }
    if namespaced:
        required["namespace"] = st.sampled_from(["team-a", "team-b", "vision"])
    return st.fixed_dictionaries(
        required,
        optional={
            "labels": st.dictionaries(
                st.sampled_from(["kaiwo.silogen.ai/user", "app", "kueue.x-k8s.io/queue-name"]),
                dns_labels,
                max_size=MAX_MAP,
            ),
            "annotations": st.dictionaries(words.filter(bool), words, max_size=MAX_MAP),
        },
    )


def manifests(
    model: type[BaseModel], *, name: st.SearchStrategy[str] = names
) -> st.SearchStrategy[dict[str, Any]]:
    """Manifests of the served kind ``model``, drawn from its CRD schema, as the API server
    hands them back (metadata with uid, resourceVersion and generation)."""
    info = crd_info(model)
    schema = structural_schema(model)
    body = {
        key: schema_values(child)
        for key, child in schema["properties"].items()
        if key in ("spec", "status")
    }
    required = {key: value for key, value in body.items() if key in schema.get("required", ())}
    optional = {key: value for key, value in body.items() if key not in required}
    return st.fixed_dictionaries(
        {
            "apiVersion": st.just(info.api_version),
            "kind": st.just(info.kind),
            "metadata": metadata(namespaced=info.scope == "Namespaced", name=name),
            **required,
        },
        optional=optional,
    )


# -------------------------------------------------------------------- damage

# Values YAML (safe_load) or a careless generator can put anywhere in a document.
HOSTILE_SCALARS = (
    None,
    True,
    0,
    -1,
    2**31,
    2**63,
    2**64,
    -(2**63) - 1,
    10**400,
    1.5,
    -0.0,
    1e308,
    float("inf"),
    float("-inf"),
    float("nan"),
    "",
    " ",
    "\x00",
    "\ud800",
    "é" * 3,
    "x" * 5000,
    "1e100Gi",
    "NaN",
    "-10Gi",
    "1.5.5Gi",
    "99999999999999h",
    b"\xff\x00",
    date(2025, 1, 31),
    datetime(2025, 1, 31, 12, 0, tzinfo=UTC),
    frozenset({1}),
)
hostile_values = st.sampled_from(HOSTILE_SCALARS) | st.recursive(
    st.sampled_from(HOSTILE_SCALARS) | json_scalars,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["", "a", "spec", 1, None, 2.5, True, "metadata"]) | words,
            children,
            max_size=3,
        )
    ),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replaced(value[head], rest, new)}
    copied = list(value)
    copied[head] = _replaced(copied[head], rest, new)
    return copied


def _added(value: Any, path: tuple[Any, ...], key: Any, new: Any) -> Any:
    if not path:
        return {**value, key: new} if isinstance(value, dict) else value
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _added(value[head], rest, key, new)}
    copied = list(value)
    copied[head] = _added(copied[head], rest, key, new)
    return copied


@st.composite
def hostile(
    draw: st.DrawFn,
    document: dict[str, Any],
    *,
    rounds: int = 3,
    values: st.SearchStrategy[Any] = hostile_values,
) -> Any:
    """``document`` damaged one to ``rounds`` times (replaced, added, removed, nested)."""
    damaged: Any = document
    for _ in range(draw(st.integers(min_value=1, max_value=rounds))):
        paths = _paths(damaged)
        path = draw(st.sampled_from(paths))
        how = draw(st.sampled_from(["replace", "add", "remove", "nest", "wrong-type"]))
        if how == "replace":
            damaged = _replaced(damaged, path, draw(values))
        elif how == "add":
            key = draw(st.sampled_from(["zz", "", 1, None, "spec", "apiVersion"]) | words)
            damaged = _added(damaged, path, key, draw(values))
        elif how == "remove" and path:
            parent = path[:-1]
            container = _get(damaged, parent)
            if isinstance(container, dict):
                rest = {k: v for k, v in container.items() if k != path[-1]}
                damaged = _replaced(damaged, parent, rest)
        elif how == "nest":
            # Deeper than the CLI's YAML limit (MAX_DEPTH, 100) and still within what json and
            # yaml take without hitting Python's recursion limit.
            deep = draw(st.integers(min_value=0, max_value=9)) == 0  # deep ones cost the most
            depth = draw(st.integers(95, 140) if deep else st.integers(1, 60))
            inner = _get(damaged, path)
            for _ in range(depth):
                inner = draw(st.sampled_from([[inner], {"a": inner}]))
            damaged = _replaced(damaged, path, inner)
        else:
            inner = _get(damaged, path)
            flipped = (
                [inner]
                if isinstance(inner, dict)
                else {"value": inner}
                if isinstance(inner, list)
                else str(inner)
            )
            damaged = _replaced(damaged, path, flipped)
    return damaged


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value
