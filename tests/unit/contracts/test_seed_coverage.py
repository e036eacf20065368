"""Every field of the API reference (the seeds) is modelled, with its default and validations.

The seeds come in three renderings of the same kind of reference:

* markdown (crd-ref-docs): ``#### Type`` then ``| `field` _type_ | description | default |
  validation |`` rows, and ``| Field | Description |`` tables of enum values;
* plain text: a ``Type`` line, then ``Field Description Default Validation`` and one line per
  field, ``name type description default validation``, descriptions possibly wrapped;
* a rendered web page: ``Type¶`` headings and rows broken over lines, ``name type |`` first.

Each field is checked against the *generated CRD schema* of the model class with the seed type's
name (found by walking the fields of the served kinds), because that schema is what the API
server enforces. Seed types without a model class fail too.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kaiwo_contracts.crds.registry import LIST_KINDS, SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definition, structural_schema
from pydantic import BaseModel

SEEDS = Path(__file__).resolve().parents[2] / "fixtures" / "api-reference"
"""The project's copy of the API reference (see its README): every clone has it."""

# ---------------------------------------------------------------- what a seed says


@dataclass(frozen=True)
class SeedField:
    name: str
    type: str
    default: str | None
    validations: Mapping[str, str]


@dataclass
class SeedType:
    name: str
    source: str
    fields: list[SeedField] = field(default_factory=list)


@dataclass(frozen=True)
class Seeds:
    types: list[SeedType]
    enums: dict[str, list[str]]


_VALIDATION_KEYS = (
    "Enum|Pattern|Minimum|Maximum|ExclusiveMinimum|ExclusiveMaximum|MinLength|MaxLength|"
    "MinItems|MaxItems|MinProperties|MaxProperties|Required|Optional|Format|MultipleOf"
)
_VALIDATION_PAIR = re.compile(rf"(?:^|\s)({_VALIDATION_KEYS}): ")
_SEED_TYPE = (
    r"(?:string|integer|boolean|float|int32|int64|object \(keys:string, values:string\)|"
    r"[A-Z][A-Za-z0-9]*)(?: array)?"
)


def _parse_validations(text: str) -> dict[str, str]:
    """``MaxLength: 63 Pattern: ^[a-z]+$ Required: {}`` -> {MaxLength: 63, Pattern: ..., ...}."""
    text = text.replace("<br />", " ").replace("\\|", "|").strip()
    pieces = _VALIDATION_PAIR.split(text)
    if pieces[0].strip():
        raise ValueError(f"unparsed validation text {pieces[0]!r}")
    return {
        key: value.strip().strip("`").strip()
        for key, value in zip(pieces[1::2], pieces[2::2], strict=True)
    }


def _normalise_default(text: str) -> str | None:
    text = text.replace("\\{", "{").replace("\\}", "}").strip()
    if re.fullmatch(r"\{\s*\}", text):
        return "{}"
    return text or None


# -- markdown


def _markdown_cells(row: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]]


def parse_markdown(text: str, source: str) -> Seeds:
    types: list[SeedType] = []
    enums: dict[str, list[str]] = {}
    heading = ""
    table: str | None = None
    for line in text.splitlines():
        if match := re.fullmatch(r"#### (\w+)", line):
            heading, table = match.group(1), None
        elif line.startswith("| Field | Description | Default | Validation |"):
            table = "fields"
            types.append(SeedType(heading, source))
        elif line.startswith("| Field | Description |"):
            table = "enum"
            enums[heading] = []
        elif not line.startswith("|"):
            table = None
        elif table == "fields" and line.startswith("| `"):
            name_type, _, default, validation = _markdown_cells(line)
            match = re.fullmatch(r"`([^`]+)` _(.+)_", name_type)
            assert match, line
            seed_type = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", match.group(2))
            types[-1].fields.append(
                SeedField(
                    match.group(1),
                    seed_type,
                    _normalise_default(default),
                    _parse_validations(validation),
                )
            )
        elif table == "enum" and line.startswith("| `"):
            value = re.match(r"\| `([^`]*)`", line)
            assert value, line
            enums[heading].append(value.group(1))
    return Seeds(types, enums)


# -- plain text


_PLAIN_FIELD = re.compile(rf"([a-z][A-Za-z0-9]*) ({_SEED_TYPE})(?: (.*))?")


def _plain_default_and_validations(text: str) -> tuple[str | None, dict[str, str]]:
    """Split ``description [default] [validations]`` of the plain rendering.

    Validations start at the first ``Key: ``. The default is the last word before them, unless
    that word ends the description's sentence (``.``); ``{ }`` is the empty-object default.
    """
    match = _VALIDATION_PAIR.search(text)
    validations = _parse_validations(text[match.start() :]) if match else {}
    before = (text[: match.start()] if match else text).rstrip()
    if before.endswith("{ }"):
        return "{}", validations
    words = before.split()
    if not words or words[-1].endswith("."):
        return None, validations
    return words[-1], validations


def parse_plain(text: str, source: str) -> Seeds:
    types: list[SeedType] = []
    heading = ""
    rows: list[list[str]] | None = None
    for line in [*text.splitlines(), ""]:
        if rows is not None and line.strip():
            if match := _PLAIN_FIELD.fullmatch(line):
                rows.append([match.group(1), match.group(2), match.group(3) or ""])
            else:
                rows[-1][2] += "\n" + line
            continue
        if rows is not None:
            types.append(_plain_type(heading, rows, source))
            rows = None
        if line == "Field Description Default Validation":
            rows = []
        elif re.fullmatch(r"[A-Z][A-Za-z0-9]*", line):
            heading = line
    return Seeds(types, {})


def _plain_type(name: str, rows: list[list[str]], source: str) -> SeedType:
    seed_type = SeedType(name, source)
    for field_name, type_text, rest in rows:
        default, validations = _plain_default_and_validations(rest)
        seed_type.fields.append(SeedField(field_name, type_text, default, validations))
    return seed_type


# -- rendered web page


_WEB_FIELD = re.compile(rf"([a-z][A-Za-z0-9]*) ({_SEED_TYPE}) \|")


def _web_row(field_name: str, type_text: str, continuation: list[str]) -> SeedField:
    cells = [cell.strip() for cell in " | ".join(continuation).split("|")]
    default: str | None = None
    validations: dict[str, str] = {}
    for cell in cells:
        if not cell:
            continue
        if _VALIDATION_PAIR.match(cell):
            validations |= _parse_validations(cell)
        elif default is None and (" " not in cell or re.fullmatch(r"\{\s*\}", cell)):
            default = _normalise_default(cell)
    return SeedField(field_name, type_text, default, validations)


def parse_web(text: str, source: str) -> Seeds:
    types: list[SeedType] = []
    enums: dict[str, list[str]] = {}
    heading = ""
    in_table = False
    row: tuple[str, str, list[str]] | None = None

    def flush() -> None:
        nonlocal row
        if row is not None:
            types[-1].fields.append(_web_row(*row))
            row = None

    for line in text.splitlines():
        if match := re.fullmatch(r"([A-Z][A-Za-z0-9]*)¶", line):
            flush()
            heading, in_table = match.group(1), False
        elif match := re.fullmatch(r"Validation: - Enum: \[(.*)\]", line):
            enums[heading] = match.group(1).split()
        elif line == "Field | Description | Default | Validation |":
            flush()
            types.append(SeedType(heading, source))
            in_table = True
        elif in_table and (match := _WEB_FIELD.fullmatch(line)):
            flush()
            row = (match.group(1), match.group(2), [])
        elif in_table and row is not None:
            row[2].append(line)
    flush()
    return Seeds(types, enums)


def parse_seed(path: Path) -> Seeds:
    text = path.read_text(encoding="utf-8")
    if "| Field | Description |" in text:
        return parse_markdown(text, path.name)
    if "¶" in text:
        return parse_web(text, path.name)
    return parse_plain(text, path.name)


def _all_seeds() -> list[Seeds]:
    return [parse_seed(path) for path in sorted(SEEDS.glob("*.txt"))]


ALL_SEEDS = _all_seeds()
SEED_ENUMS: dict[str, list[str]] = {
    name: values for seeds in ALL_SEEDS for name, values in seeds.enums.items()
}
SEED_TYPE_NAMES = {seed_type.name for seeds in ALL_SEEDS for seed_type in seeds.types}


def test_the_seeds_are_there() -> None:
    assert sum(len(seeds.types) for seeds in ALL_SEEDS) >= 40


# ---------------------------------------------------------------- the parsers read what is written


def _seed_type(source_prefix: str, name: str) -> SeedType:
    return next(
        seed_type
        for seeds in ALL_SEEDS
        for seed_type in seeds.types
        if seed_type.source.startswith(source_prefix) and seed_type.name == name
    )


def _seed_field(source_prefix: str, type_name: str, field_name: str) -> SeedField:
    return next(f for f in _seed_type(source_prefix, type_name).fields if f.name == field_name)


needs_seeds = pytest.mark.skipif(
    not ALL_SEEDS, reason="seeds missing (see test_the_seeds_are_there)"
)


@needs_seeds
def test_the_markdown_rendering_is_read() -> None:
    assert _seed_field("001", "KaiwoResourceMonitoringConfig", "terminateUnderutilizedAfter") == (
        SeedField("terminateUnderutilizedAfter", "string", "24h", {"Pattern": "^([0-9]+(s|m|h))+$"})
    )
    assert _seed_field("002", "ResourceFlavorSpec", "nodeLabels") == SeedField(
        "nodeLabels", "object (keys:string, values:string)", None, {"MaxProperties": "10"}
    )
    assert _seed_field("002", "KaiwoJobSpec", "storage").type == "StorageSpec"
    assert _seed_field("001", "KaiwoConfigSpec", "ray").default == "{}"
    assert SEED_ENUMS["Status"] == [
        "",
        "PENDING",
        "STARTING",
        "READY",
        "RUNNING",
        "COMPLETE",
        "FAILED",
    ]


@needs_seeds
def test_the_plain_rendering_is_read() -> None:
    monitoring = _seed_type("000", "KaiwoResourceMonitoringConfig")
    assert [f.name for f in monitoring.fields] == [
        "lowUtilizationThreshold",
        "targetNamespaces",
        "profile",
        "terminateUnderutilized",
        "terminateUnderutilizedAfter",
    ]
    assert monitoring.fields[0] == SeedField(
        "lowUtilizationThreshold", "float", "1", {"Minimum": "0"}
    )
    assert monitoring.fields[1].default is None
    assert monitoring.fields[2] == SeedField("profile", "string", "gpu", {"Enum": "[gpu]"})
    assert _seed_field("000", "KaiwoConfigSpec", "defaultClusterQueueCohortName").default == (
        "kaiwo"
    )
    assert _seed_field("000", "KaiwoNodeConfig", "defaultGpuResourceKey").default == "amd.com/gpu"
    assert _seed_field("000", "KaiwoStorageConfig", "defaultStorageClass").default is None


@needs_seeds
def test_the_web_rendering_is_read() -> None:
    assert _seed_field("004", "Adapter", "name") == SeedField(
        "name", "string", None, {"MaxLength": "63", "Pattern": "^[a-z0-9-]+$", "Required": "{}"}
    )
    assert _seed_field("004", "LoadBalancing", "strategy") == SeedField(
        "strategy",
        "LoadBalancingStrategy",
        "LeastLoad",
        {"Enum": "[LeastLoad PrefixHash]", "Optional": "{}"},
    )
    assert _seed_field("004", "PrefixHash", "meanLoadFactor") == SeedField(
        "meanLoadFactor", "integer", "125", {"Minimum": "100", "Optional": "{}"}
    )
    assert _seed_field("004", "ModelSpec", "features").type == "ModelFeature array"
    assert [f.name for f in _seed_type("004", "ModelStatusReplicas").fields] == ["all", "ready"]
    assert SEED_ENUMS["ModelFeature"] == ["TextGeneration", "TextEmbedding", "SpeechToText"]


@needs_seeds
def test_the_two_renderings_of_the_config_api_agree() -> None:
    """Seeds 000 (plain) and 001 (markdown) document the same config types; reading both the
    same way shows the plain-text heuristics are right."""
    plain = {t.name: t for s in ALL_SEEDS for t in s.types if t.source.startswith("000")}
    for name, plain_type in plain.items():
        markdown = _seed_type("001", name)
        documented = {f.name: f for f in markdown.fields}
        for plain_field in plain_type.fields:
            if plain_field.name in {"apiVersion", "kind", "metadata"}:
                continue
            if (name, plain_field.name) == ("KaiwoConfigSpec", "data"):
                # The older rendering's name of `storage`.
                assert documented["storage"].default == plain_field.default
                continue
            assert documented[plain_field.name] == plain_field, (name, plain_field.name)


# ---------------------------------------------------------------- the models match the seeds

# The seeds' types referenced from other projects (Kubernetes, Kueue, KubeRay); only their
# JSON type is checked here.
_EXTERNAL_STRING_TYPES = {"PersistentVolumeAccessMode": "string", "Time": "string"}
_SCALAR_SEED_TYPES = {
    "string": "string",
    "integer": "integer",
    "int32": "integer",
    "int64": "integer",
    "float": "number",
    "boolean": "boolean",
}
_TOP_LEVEL_FIELDS = {"apiVersion", "kind", "metadata"}
# Deliberate, documented departures from a seed: (seed file prefix, type, field) -> why.
ACCEPTED_DEVIATIONS = {
    ("000", "KaiwoConfigSpec", "data"): (
        "the older rendering's name of `storage` (seed 001); kept as a deprecated alias without "
        "a default so that it only counts when a user sets it (KaiwoConfigSpec.effective_storage)"
    ),
    **{
        (seed, "KaiwoStorageConfig", field): (
            "no CRD default: the API server would store it in spec.storage (defaulted to {}), "
            "where it would always win over the deprecated spec.data; the operator applies the "
            "seed's default where both leave it unset (decision 0112)"
        )
        for seed in ("000", "001")
        for field in ("defaultDataMountPath", "defaultHfMountPath")
    },
    ("002", "DataStorageSpec", "mountPath"): (
        "no CRD default, so that KaiwoConfig's defaultDataMountPath (the same /workload unless a "
        "platform team changes it) applies on a cluster, as the seed says it does (decision 0044)"
    ),
    ("002", "HfStorageSpec", "mountPath"): (
        "no CRD default, so that KaiwoConfig's defaultHfMountPath applies (decision 0044)"
    ),
}


def _model_classes() -> dict[str, set[type[BaseModel]]]:
    """Every model class reachable from the served kinds and their lists, by class name
    (base classes included: the seeds document embedded Go structs such as CommonMetaSpec)."""
    found: dict[str, set[type[BaseModel]]] = {}
    pending: list[type[BaseModel]] = [*SERVED_KINDS, *LIST_KINDS.values()]
    while pending:
        model = pending.pop()
        if model in found.get(model.__name__, set()):
            continue
        found.setdefault(model.__name__, set()).add(model)
        pending += [base for base in model.__mro__ if _is_model(base) and base is not model]
        for info in model.model_fields.values():
            pending += list(_models_in(info.annotation))
    return found


def _is_model(candidate: Any) -> bool:
    return (
        isinstance(candidate, type)
        and issubclass(candidate, BaseModel)
        and candidate is not BaseModel
        and candidate.model_fields != {}
    )


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    if _is_model(annotation):
        yield annotation
    for argument in typing.get_args(annotation):
        yield from _models_in(argument)


MODEL_CLASSES = _model_classes()


@dataclass
class Mismatches:
    found: list[str] = field(default_factory=list)

    def add(self, where: str, what: str) -> None:
        self.found.append(f"{where}: {what}")


def _seed_types() -> list[SeedType]:
    return [seed_type for seeds in ALL_SEEDS for seed_type in seeds.types]


@pytest.mark.parametrize(
    "seed_type", _seed_types(), ids=lambda seed_type: f"{seed_type.source[:3]}:{seed_type.name}"
)
def test_every_seed_type_is_modelled_field_by_field(seed_type: SeedType) -> None:
    classes = MODEL_CLASSES.get(seed_type.name)
    assert classes, f"{seed_type.name} ({seed_type.source}) has no model class"
    assert len(classes) == 1, f"{seed_type.name}: several model classes {classes}"
    schema = _crd_schema(next(iter(classes)))
    properties = schema.get("properties", {})
    mismatches = Mismatches()
    for seed_field in seed_type.fields:
        if seed_field.name in _TOP_LEVEL_FIELDS:
            continue
        if (seed_type.source[:3], seed_type.name, seed_field.name) in ACCEPTED_DEVIATIONS:
            continue
        where = f"{seed_type.name}.{seed_field.name}"
        node = properties.get(seed_field.name)
        if node is None:
            mismatches.add(where, "not modelled")
            continue
        _check_type(node, seed_field.type, where, mismatches)
        _check_default(node, seed_field.default, where, mismatches)
        _check_validations(
            node,
            seed_field.validations,
            required=seed_field.name in schema.get("required", ()),
            where=where,
            mismatches=mismatches,
        )
    assert mismatches.found == [], "\n".join(mismatches.found)


def _crd_schema(model: type[BaseModel]) -> Mapping[str, Any]:
    """What the CRD holds for ``model``: the whole root schema for a kind, else its node."""
    if getattr(model, "crd", None) is None:
        return structural_schema(model)
    crd = custom_resource_definition(model)
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def _check_type(node: Mapping[str, Any], seed_type: str, where: str, out: Mismatches) -> None:
    if seed_type.endswith(" array"):
        if node.get("type") != "array":
            out.add(where, f"seed type {seed_type}, model type {_shown_type(node)}")
        else:
            _check_type(node["items"], seed_type.removesuffix(" array"), f"{where}[]", out)
        return
    if seed_type == "object (keys:string, values:string)":
        if node.get("type") != "object" or node.get("additionalProperties") != {"type": "string"}:
            out.add(where, f"seed type {seed_type}, model {_shown_type(node)}")
        return
    expected = _SCALAR_SEED_TYPES.get(seed_type) or _EXTERNAL_STRING_TYPES.get(seed_type)
    if seed_type in SEED_ENUMS:
        expected = "string"
        missing = [v for v in SEED_ENUMS[seed_type] if v not in node.get("enum", ())]
        if missing:
            out.add(where, f"enum type {seed_type}: model enum lacks {missing}")
    if expected is None:
        expected = "object"
    if _shown_type(node) != expected:
        out.add(where, f"seed type {seed_type}, model type {_shown_type(node)}")


def _shown_type(node: Mapping[str, Any]) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "int-or-string"
    if "type" not in node and node.get("x-kubernetes-preserve-unknown-fields"):
        return "any"
    return str(node.get("type"))


def _seed_value(text: str, node: Mapping[str, Any]) -> Any:
    kind = node.get("type")
    if text == "{}":
        return {}
    if kind == "boolean":
        return {"true": True, "false": False}.get(text, text)
    if kind == "integer" and re.fullmatch(r"-?\d+", text):
        return int(text)
    if kind == "number" and re.fullmatch(r"-?\d+(\.\d+)?", text):
        return float(text)
    return text


def _check_default(node: Mapping[str, Any], seed: str | None, where: str, out: Mismatches) -> None:
    has_default = "default" in node
    if seed is None:
        if has_default:
            out.add(where, f"the seed has no default, the model defaults to {node['default']!r}")
        return
    if not has_default:
        out.add(where, f"the seed default is {seed!r}, the model has none")
    elif node["default"] != _seed_value(seed, node):
        out.add(where, f"the seed default is {seed!r}, the model's is {node['default']!r}")


_BOUNDS = {
    "Minimum": "minimum",
    "Maximum": "maximum",
    "MinLength": "minLength",
    "MaxLength": "maxLength",
    "MinItems": "minItems",
    "MaxItems": "maxItems",
    "MinProperties": "minProperties",
    "MaxProperties": "maxProperties",
}


def _check_validations(
    node: Mapping[str, Any],
    validations: Mapping[str, str],
    *,
    required: bool,
    where: str,
    mismatches: Mismatches,
) -> None:
    for key, value in validations.items():
        if key in _BOUNDS:
            actual = node.get(_BOUNDS[key])
            if actual is None or float(actual) != float(value):
                mismatches.add(where, f"{key} {value} in the seed, {actual} in the model")
        elif key == "Pattern":
            if node.get("pattern") != value:
                mismatches.add(
                    where, f"pattern {value} in the seed, {node.get('pattern')} in the model"
                )
        elif key == "Enum":
            target = node["items"] if node.get("type") == "array" else node
            expected = value.strip("[]").split()
            if sorted(target.get("enum", ())) != sorted(expected):
                mismatches.add(
                    where, f"enum {expected} in the seed, {target.get('enum')} in the model"
                )
        elif key == "Required" and not required:
            mismatches.add(where, "required in the seed, optional in the model")
        elif key == "Optional" and required:
            mismatches.add(where, "optional in the seed, required in the model")
        elif key not in {"Required", "Optional"}:
            mismatches.add(where, f"the seed validation {key}: {value} is not checked here")
