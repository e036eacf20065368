"""Structural schemas: parsing, pruning, null dropping, defaulting and the schema checks.

Hand-written schemas and the values a kube-apiserver v1.36 stores for them (the contract suite
tests/contract/kubernetes/test_crd_schema_contract.py shows both servers agree).
"""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_kubefake.schema_defaulting import apply_defaults
from kaiwo_kubefake.schema_pruning import coerce_object_meta, object_meta, prune, prune_nulls
from kaiwo_kubefake.schema_validation import Violation, undeclared_fields, violations
from kaiwo_kubefake.structural_schema import (
    StructuralSchema,
    as_resource_root,
    is_open,
    parse_schema,
)

STRING = {"type": "string"}


def schema_of(**properties: Any) -> StructuralSchema:
    return parse_schema({"type": "object", "properties": properties})


# ---------------------------------------------------------------------- parsing


def test_parse_keeps_what_pruning_and_defaulting_read() -> None:
    parsed = parse_schema(
        {
            "type": "object",
            "description": "dropped",
            "properties": {
                "port": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}]},
                "note": {"type": "string", "nullable": True, "default": "none"},
                "tags": {"type": "array", "items": STRING},
                "labels": {"type": "object", "additionalProperties": STRING},
                "free": {"type": "object", "additionalProperties": True},
                "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "pod": {"type": "object", "x-kubernetes-embedded-resource": True},
                "unset": {"type": "string", "default": None},
            },
        }
    )
    assert parsed.type == "object"
    port, note = parsed.properties["port"], parsed.properties["note"]
    assert (port.int_or_string, port.type_name) == (True, "integer,string")
    assert (note.nullable, note.has_default, note.default()) == (True, True, "none")
    assert parsed.properties["tags"].items == StructuralSchema(type="string")
    labels, free = parsed.properties["labels"], parsed.properties["free"]
    assert (labels.has_additional_properties, labels.additional_properties) == (
        True,
        StructuralSchema(type="string"),
    )
    assert (free.has_additional_properties, free.additional_properties) == (True, None)
    assert parsed.properties["open"].preserve_unknown_fields
    assert parsed.properties["pod"].embedded_resource
    assert not parsed.properties["unset"].has_default  # a null default is no default


def test_each_use_of_a_default_gets_its_own_copy() -> None:
    node = parse_schema({"type": "object", "default": {"a": [1]}})
    first = node.default()
    first["a"].append(2)
    assert node.default() == {"a": [1]}


def test_an_open_root_is_recognised() -> None:
    assert is_open(parse_schema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}))
    assert not is_open(
        parse_schema(
            {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {"spec": {"type": "object"}},
            }
        )
    )
    assert not is_open(schema_of(spec={"type": "object"}))


# ---------------------------------------------------------------------- pruning


def test_prune_drops_undeclared_fields_at_every_depth() -> None:
    schema = schema_of(
        spec={
            "type": "object",
            "properties": {
                "name": STRING,
                "items": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"a": STRING}},
                },
                "byKey": {
                    "type": "object",
                    "additionalProperties": {"type": "object", "properties": {"v": STRING}},
                },
                "empty": {"type": "object"},
            },
        }
    )
    value = {
        "spec": {
            "name": "n",
            "junk": 1,
            "items": [{"a": "1", "b": 2}, {"b": 3}],
            "byKey": {"k": {"v": "x", "w": "y"}},
            "empty": {"anything": 1},
        },
        "junk": {"x": 1},
    }
    assert prune(value, schema) == {
        "spec": {
            "name": "n",
            "items": [{"a": "1"}, {}],
            "byKey": {"k": {"v": "x"}},
            "empty": {},
        }
    }
    assert value["junk"] == {"x": 1}  # the argument is left as it was


def test_prune_keeps_type_and_object_meta_only_where_the_object_is_a_resource() -> None:
    schema = schema_of(
        pod={"type": "object", "x-kubernetes-embedded-resource": True, "properties": {}},
        plain={"type": "object", "properties": {}},
    )
    meta = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    value = {**meta, "pod": {**meta, "spec": {}}, "plain": {**meta}}
    assert prune(value, as_resource_root(schema)) == {**meta, "pod": meta, "plain": {}}
    assert prune(value, schema) == {"pod": meta, "plain": {}}


def test_preserve_unknown_fields_keeps_unknown_fields_and_prunes_declared_ones() -> None:
    schema = schema_of(
        open={
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
            "properties": {"known": {"type": "object", "properties": {"k": STRING}}},
        }
    )
    value = {"open": {"free": {"deep": [1, {"x": None}]}, "known": {"k": "v", "j": 1}}}
    assert prune(value, schema) == {
        "open": {"free": {"deep": [1, {"x": None}]}, "known": {"k": "v"}}
    }


def test_a_list_or_map_without_a_schema_for_its_values_loses_their_fields() -> None:
    schema = schema_of(
        anything={"type": "object", "additionalProperties": True},
        untyped={"type": "array"},
    )
    value = {"anything": {"a": 1, "b": {"c": 2}}, "untyped": [1, {"d": 3}]}
    assert prune(value, schema) == {"anything": {"a": 1, "b": {}}, "untyped": [1, {}]}


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"name": "n", "labels": {}, "annotations": {}, "finalizers": []}, {"name": "n"}),
        ({"name": "", "generation": 0, "creationTimestamp": None}, {}),
        ({"deletionGracePeriodSeconds": 0, "junk": 1}, {"deletionGracePeriodSeconds": 0}),
        (
            {"ownerReferences": [{"kind": "Pod", "name": "p", "uid": "u", "x": 1}]},
            {"ownerReferences": [{"kind": "Pod", "name": "p", "uid": "u"}]},
        ),
        ({"labels": {"a": "b"}, "generation": 2}, {"labels": {"a": "b"}, "generation": 2}),
    ],
)
def test_object_meta_keeps_what_metav1_object_meta_round_trips(
    metadata: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert object_meta(metadata) == expected


def test_object_meta_is_coerced_in_every_embedded_resource() -> None:
    schema = as_resource_root(
        schema_of(
            pods={
                "type": "array",
                "items": {"type": "object", "x-kubernetes-embedded-resource": True},
            }
        )
    )
    value = {
        "metadata": {"name": "root", "junk": 1},
        "pods": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {}, "name": "a"}}],
    }
    assert coerce_object_meta(value, schema) == {
        "metadata": {"name": "root"},
        "pods": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}],
    }


# ---------------------------------------------------------------------- nulls

NULLS_SCHEMA = schema_of(
    plain=STRING,
    nullable={"type": "string", "nullable": True},
    defaulted={"type": "string", "default": "d"},
    untyped={"x-kubernetes-preserve-unknown-fields": True},
    words={"type": "array", "items": STRING},
    byKey={"type": "object", "additionalProperties": STRING},
)
ALL_NULL = {
    "plain": None,
    "nullable": None,
    "defaulted": None,
    "untyped": None,
    "words": [None],
    "byKey": {"k": None},
    "unknown": None,
}


def test_nulls_of_fields_neither_nullable_nor_defaulted_are_dropped() -> None:
    assert prune_nulls(ALL_NULL, NULLS_SCHEMA) == {
        "nullable": None,
        "defaulted": None,  # left for defaulting
        "words": [None],  # list items stay; validation rejects them
        "byKey": {},
        "unknown": None,  # no schema: not this step's business
    }


def test_apply_keeps_the_nulls_of_typed_fields() -> None:
    assert prune_nulls(ALL_NULL, NULLS_SCHEMA, untyped_only=True) == {
        key: value for key, value in ALL_NULL.items() if key != "untyped"
    }


# ---------------------------------------------------------------------- defaulting

DEFAULTS_SCHEMA = schema_of(
    replicas={"type": "integer", "default": 1},
    nested={
        "type": "object",
        "properties": {"inner": {"type": "object", "properties": {"leaf": {"default": "x"}}}},
    },
    policy={
        "type": "object",
        "default": {},
        "properties": {
            "mode": {"type": "string", "default": "Auto"},
            "extra": {"type": "object", "default": {"on": True}},
        },
    },
    ports={
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"protocol": {"type": "string", "default": "TCP"}},
        },
    },
    weights={
        "type": "object",
        "additionalProperties": {"type": "string", "default": "m"},
    },
    note={"type": "string", "nullable": True, "default": "none"},
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({}, {"replicas": 1, "policy": {"mode": "Auto", "extra": {"on": True}}, "note": "none"}),
        (
            {"replicas": 3, "policy": {"mode": "Manual"}, "note": None},
            {"replicas": 3, "policy": {"mode": "Manual", "extra": {"on": True}}, "note": None},
        ),
        (
            {"replicas": None, "policy": None},
            {"replicas": 1, "policy": {"mode": "Auto", "extra": {"on": True}}, "note": "none"},
        ),
    ],
)
def test_defaults_fill_absent_fields_and_non_nullable_nulls(
    value: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert apply_defaults(value, DEFAULTS_SCHEMA) == expected


def test_defaults_fill_only_objects_that_exist() -> None:
    common = {"replicas": 1, "policy": {"mode": "Auto", "extra": {"on": True}}, "note": "none"}
    assert apply_defaults({"nested": {}}, DEFAULTS_SCHEMA) == {"nested": {}, **common}
    assert apply_defaults({"nested": {"inner": {}}}, DEFAULTS_SCHEMA) == {
        "nested": {"inner": {"leaf": "x"}},
        **common,
    }


def test_defaults_fill_list_items_and_map_values() -> None:
    filled = apply_defaults(
        {"ports": [{}, {"protocol": "UDP"}], "weights": {"a": None, "b": "g"}}, DEFAULTS_SCHEMA
    )
    assert filled["ports"] == [{"protocol": "TCP"}, {"protocol": "UDP"}]
    assert filled["weights"] == {"a": "m", "b": "g"}


def test_defaulting_leaves_its_argument_untouched() -> None:
    value: dict[str, Any] = {"ports": [{}]}
    apply_defaults(value, DEFAULTS_SCHEMA)
    assert value == {"ports": [{}]}


# ---------------------------------------------------------------------- checks


def test_violations_name_disallowed_nulls_and_embedded_resources_without_type() -> None:
    schema = schema_of(
        spec={
            "type": "object",
            "properties": {
                "words": {"type": "array", "items": STRING},
                "port": {"x-kubernetes-int-or-string": True},
                "free": {"x-kubernetes-preserve-unknown-fields": True},
                "maybe": {"type": "string", "nullable": True},
                "pod": {"type": "object", "x-kubernetes-embedded-resource": True},
            },
        }
    )
    value = {
        "spec": {
            "words": ["a", None],
            "port": None,
            "free": None,
            "maybe": None,
            "pod": {"metadata": {"name": "p"}},
        }
    }
    assert violations(value, schema) == [
        Violation(
            reason="FieldValueTypeInvalid",
            field="spec.words[1]",
            message='Invalid value: "null": spec.words[1] in body must be of type string: "null"',
        ),
        Violation(
            reason="FieldValueTypeInvalid",
            field="spec.port",
            message='Invalid value: "null": spec.port in body must be of type integer,string: '
            '"null"',
        ),
        Violation(
            reason="FieldValueRequired", field="spec.pod.apiVersion", message="Required value"
        ),
        Violation(reason="FieldValueRequired", field="spec.pod.kind", message="Required value"),
    ]


def test_undeclared_fields_are_those_server_side_apply_cannot_type() -> None:
    schema = parse_schema(
        {
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "items": {
                            "type": "array",
                            "items": {"type": "object", "properties": {"a": STRING}},
                        },
                        "byKey": {"type": "object", "additionalProperties": STRING},
                        "free": {"type": "object"},
                        "open": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                            "properties": {"known": {"type": "object", "properties": {}}},
                        },
                        "pod": {
                            "type": "object",
                            "x-kubernetes-embedded-resource": True,
                            "properties": {"spec": {"type": "object"}},
                        },
                    },
                }
            },
        }
    )
    applied = {
        "apiVersion": "g/v1",
        "kind": "K",
        "metadata": {"name": "n", "labels": {"a": "b"}, "junk": 1},
        "spec": {
            "items": [{"a": "1", "b": 2}],
            "byKey": {"anything": "x"},
            "free": {"anything": {"at": "all"}},
            "open": {"x": 1, "known": {"y": 2}},
            "pod": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"nope": 1},
                "spec": {"a": 1},
                "x": 1,
            },
            "zzz": 1,
        },
        "status": {},
    }
    assert undeclared_fields(applied, schema) == [
        ".metadata.junk",
        ".spec.items[0].b",
        ".spec.pod.metadata.nope",
        ".spec.pod.x",
        ".spec.zzz",
        ".status",
    ]
