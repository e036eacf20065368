"""Custom resources through the store: every write path prunes and defaults by the CRD schema."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_kubefake.custom_resources import served
from kaiwo_kubefake.errors import ApiError
from kaiwo_kubefake.kinds import ResourceKind
from kaiwo_kubefake.patching import JSON_PATCH, MERGE_PATCH
from kaiwo_kubefake.storage import ObjectStore

NOON = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
GROUP = "example.com"
SPEC_SCHEMA = {
    "type": "object",
    "properties": {
        "image": {"type": "string"},
        "replicas": {"type": "integer", "default": 1},
        "ports": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "protocol": {"type": "string", "default": "TCP"},
                },
            },
        },
    },
}
STATUS_SCHEMA = {"type": "object", "properties": {"phase": {"type": "string", "default": "New"}}}


def crd(versions: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": f"widgets.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [
                {
                    "name": name,
                    "served": True,
                    "storage": index == 0,
                    "subresources": {"status": {}},
                    **({"schema": {"openAPIV3Schema": schema}} if schema is not None else {}),
                }
                for index, (name, schema) in enumerate(versions.items())
            ],
        },
    }


WIDGET_SCHEMA = {"type": "object", "properties": {"spec": SPEC_SCHEMA, "status": STATUS_SCHEMA}}


def store_with(versions: dict[str, Any]) -> tuple[ObjectStore, dict[str, ResourceKind]]:
    store = ObjectStore(clock=lambda: NOON)
    store.register_crd(crd(versions))
    kinds = {}
    for version in versions:
        found = store.kinds.lookup(group=GROUP, version=version, plural="widgets")
        assert found is not None
        kinds[version] = found
    return store, kinds


@pytest.fixture
def widgets() -> tuple[ObjectStore, ResourceKind]:
    store, kinds = store_with({"v1": WIDGET_SCHEMA})
    return store, kinds["v1"]


def widget(spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": spec,
        **extra,
    }


def owned_spec_fields(obj: dict[str, Any]) -> dict[str, Any]:
    (entry,) = obj["metadata"]["managedFields"]
    fields: dict[str, Any] = entry["fieldsV1"]["f:spec"]
    return fields


def test_create_prunes_defaults_and_the_creator_owns_the_result(
    widgets: tuple[ObjectStore, ResourceKind],
) -> None:
    store, kind = widgets
    created = store.create(
        kind, namespace="default", body=widget({"image": "a", "junk": 1}, junk=2)
    )
    assert created["spec"] == {"image": "a", "replicas": 1}
    assert "junk" not in created
    # As on the real server: an update's manager owns the defaults, not the pruned fields.
    assert owned_spec_fields(created) == {"f:image": {}, "f:replicas": {}}


def test_patches_and_replace_are_pruned_and_defaulted(
    widgets: tuple[ObjectStore, ResourceKind],
) -> None:
    store, kind = widgets
    created = store.create(kind, namespace="default", body=widget({"replicas": 2}))
    merged = store.patch(
        kind,
        namespace="default",
        name="w",
        content_type=MERGE_PATCH,
        body={"spec": {"replicas": None, "ports": [{"name": "a", "junk": 1}]}},
        manager="m",
    )
    assert merged["spec"] == {"replicas": 1, "ports": [{"name": "a", "protocol": "TCP"}]}
    patched = store.patch(
        kind,
        namespace="default",
        name="w",
        content_type=JSON_PATCH,
        body=[{"op": "add", "path": "/spec/ports/-", "value": {"name": "b"}}],
        manager="m",
    )
    assert patched["spec"]["ports"] == [
        {"name": "a", "protocol": "TCP"},
        {"name": "b", "protocol": "TCP"},
    ]
    replaced = store.replace(
        kind, namespace="default", name="w", body=widget({"image": "z"}), manager="m"
    )
    assert replaced["spec"] == {"image": "z", "replicas": 1}
    assert replaced["metadata"]["uid"] == created["metadata"]["uid"]


def test_a_write_that_only_omits_defaults_or_adds_unknown_fields_changes_nothing(
    widgets: tuple[ObjectStore, ResourceKind],
) -> None:
    store, kind = widgets
    created = store.create(kind, namespace="default", body=widget({"image": "a"}))
    again = store.replace(
        kind, namespace="default", name="w", body=widget({"image": "a", "unknown": 1})
    )
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

    def apply() -> dict[str, Any]:
        return store.patch(
            kind,
            namespace="default",
            name="w",
            content_type="application/apply-patch+yaml",
            body=widget({"image": "a"}),
            manager="applier",
        )

    first = apply()  # a new manager: its managedFields entry is a change
    assert apply()["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert first["spec"] == {"image": "a", "replicas": 1}


def test_apply_of_an_undeclared_field_is_a_500_naming_it(
    widgets: tuple[ObjectStore, ResourceKind],
) -> None:
    store, kind = widgets
    with pytest.raises(ApiError) as raised:
        store.patch(
            kind,
            namespace="default",
            name="w",
            content_type="application/apply-patch+yaml",
            body=widget({"image": "a", "junk": 1, "ports": [{"x": 1}]}),
            manager="m",
        )
    assert raised.value.code == 500
    assert raised.value.message == (
        f"failed to create typed patch object (default/w; {GROUP}/v1, Kind=Widget): errors:\n"
        "  .spec.junk: field not declared in schema\n"
        "  .spec.ports[0].x: field not declared in schema"
    )
    assert "reason" not in raised.value.status()
    assert store.find(kind, namespace="default", name="w") is None


def test_a_null_list_item_is_invalid_with_the_api_servers_cause(
    widgets: tuple[ObjectStore, ResourceKind],
) -> None:
    store, kind = widgets
    with pytest.raises(ApiError) as raised:
        store.create(kind, namespace="default", body=widget({"ports": [None, None]}))
    assert raised.value.code == 422
    assert raised.value.message == (
        f'Widget.{GROUP} "w" is invalid: ['
        'spec.ports[0]: Invalid value: "null": spec.ports[0] in body must be of type object: '
        '"null", '
        'spec.ports[1]: Invalid value: "null": spec.ports[1] in body must be of type object: '
        '"null"]'
    )


def test_status_writes_and_put_are_pruned_and_defaulted(
    widgets: tuple[ObjectStore, ResourceKind],
) -> None:
    store, kind = widgets
    store.create(kind, namespace="default", body=widget({}))
    status = store.patch(
        kind,
        namespace="default",
        name="w",
        content_type=MERGE_PATCH,
        body={"status": {"junk": 1}},
        manager="m",
        subresource="status",
    )
    assert status["status"] == {"phase": "New"}
    put = store.put(kind, widget({"junk": 1}, status={"phase": "Done", "junk": 2}))
    assert (put["spec"], put["status"]) == ({"replicas": 1}, {"phase": "Done"})


def test_kinds_without_a_schema_or_with_an_open_one_keep_every_field() -> None:
    open_schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    for schema in (None, open_schema):
        store, kinds = store_with({"v1": schema})
        body = widget({"junk": 1}, junk=2)
        body["metadata"]["labels"] = {}
        created = store.create(kinds["v1"], namespace="default", body=body)
        assert (created["spec"], created["junk"]) == ({"junk": 1}, 2)
        assert created["metadata"]["labels"] == {}


def test_a_write_through_another_version_is_stored_as_the_storage_version_keeps_it() -> None:
    def version(**spec: Any) -> dict[str, Any]:
        return {"type": "object", "properties": {"spec": {"type": "object", "properties": spec}}}

    store, kinds = store_with(
        {
            "v1": version(mode={"type": "string", "default": "one"}, legacy={"type": "string"}),
            "v2": version(mode={"type": "string", "default": "two"}, extra={"type": "string"}),
        }
    )
    body = {**widget({"extra": "x", "legacy": "y"}), "apiVersion": f"{GROUP}/v2"}
    created = store.create(kinds["v2"], namespace="default", body=body)
    # v2 prunes legacy and defaults mode; storing it as v1 prunes extra.
    assert created["spec"] == {"mode": "two"}
    through_v1 = store.create(
        kinds["v1"],
        namespace="default",
        body={**widget({"legacy": "y"}), "metadata": {"name": "w1", "namespace": "default"}},
    )
    assert through_v1["spec"] == {"mode": "one", "legacy": "y"}
    # Read through v2: pruned by v2's schema, not defaulted by it.
    assert served(kinds["v2"], through_v1)["spec"] == {"mode": "one"}
    assert served(kinds["v1"], through_v1)["spec"] == {"mode": "one", "legacy": "y"}


def test_a_changed_schema_reaches_stored_objects_without_a_new_version() -> None:
    store, kinds = store_with({"v1": WIDGET_SCHEMA})
    created = store.create(kinds["v1"], namespace="default", body=widget({"image": "a"}))
    changed_spec = {
        "type": "object",
        "properties": {"size": {"type": "string", "default": "small"}, "replicas": {}},
    }
    store.register_crd(crd({"v1": {"type": "object", "properties": {"spec": changed_spec}}}))
    after = store.get(kinds["v1"], namespace="default", name="w")
    assert after["spec"] == {"size": "small", "replicas": 1}
    assert after["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
