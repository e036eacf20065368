"""Field ownership (managedFields) and server-side apply merging in the Kubernetes fake."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_kubefake.errors import ApiError
from kaiwo_kubefake.ownership import (
    Owner,
    from_fields_v1,
    read_ownership,
    record_update,
    server_side_apply,
    to_fields_v1,
)

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "ns", "labels": {"app": "web"}},
    "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c"}]}}},
}


def test_fields_v1_encoding_round_trips() -> None:
    paths = {("metadata", "labels", "app"), ("spec", "replicas"), ("spec", "template")}
    encoded = to_fields_v1(paths)
    assert encoded == {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {"f:replicas": {}, "f:template": {}},
    }
    assert from_fields_v1(encoded) == paths


def test_list_item_keys_from_a_real_server_own_the_whole_list() -> None:
    tree: dict[str, Any] = {
        "f:spec": {"f:containers": {'k:{"name":"c"}': {".": {}, "f:image": {}}}}
    }
    assert from_fields_v1(tree) == {("spec", "containers")}


def test_apply_creates_and_records_the_applied_paths() -> None:
    result = server_side_apply(
        live=None,
        applied=DEPLOYMENT,
        manager="kaiwo",
        force=False,
        subresource="",
        status_subresource=True,
    )
    assert result.obj["spec"]["replicas"] == 2
    assert result.ownership == {
        Owner("kaiwo", "Apply"): frozenset(
            {
                ("metadata", "labels", "app"),
                ("spec", "replicas"),
                ("spec", "template", "spec", "containers"),
            }
        )
    }


def _live_owned_by(manager: str) -> dict[str, object]:
    return {
        **DEPLOYMENT,
        "metadata": {
            **DEPLOYMENT["metadata"],  # type: ignore[dict-item]
            "managedFields": [
                {
                    "manager": manager,
                    "operation": "Apply",
                    "fieldsV1": {
                        "f:spec": {"f:replicas": {}},
                        "f:metadata": {"f:labels": {"f:app": {}}},
                    },
                }
            ],
        },
    }


def test_apply_conflicts_with_a_different_value_owned_by_another_manager() -> None:
    live = _live_owned_by("other")
    change = {**DEPLOYMENT, "spec": {"replicas": 5}}
    with pytest.raises(ApiError) as raised:
        server_side_apply(
            live=live,
            applied=change,
            manager="kaiwo",
            force=False,
            subresource="",
            status_subresource=True,
        )
    assert raised.value.code == 409
    assert raised.value.message == (
        'Apply failed with 1 conflict: conflict with "other" using apps/v1: .spec.replicas'
    )


def test_apply_with_the_same_value_shares_ownership() -> None:
    live = _live_owned_by("other")
    same = {**DEPLOYMENT, "spec": {"replicas": 2}}
    result = server_side_apply(
        live=live,
        applied=same,
        manager="kaiwo",
        force=False,
        subresource="",
        status_subresource=True,
    )
    assert result.ownership[Owner("other", "Apply")] == frozenset(
        {("spec", "replicas"), ("metadata", "labels", "app")}
    )
    assert result.ownership[Owner("kaiwo", "Apply")] == frozenset(
        {("spec", "replicas"), ("metadata", "labels", "app")}
    )


def test_forced_apply_takes_the_field_over() -> None:
    live = _live_owned_by("other")
    change = {**DEPLOYMENT, "spec": {"replicas": 5}}
    result = server_side_apply(
        live=live,
        applied=change,
        manager="kaiwo",
        force=True,
        subresource="",
        status_subresource=True,
    )
    assert result.obj["spec"]["replicas"] == 5
    assert result.ownership[Owner("other", "Apply")] == frozenset({("metadata", "labels", "app")})


def test_fields_no_longer_applied_are_removed_with_their_empty_parents() -> None:
    first = server_side_apply(
        live=None,
        applied={**DEPLOYMENT, "metadata": {"name": "web", "labels": {"app": "web"}}},
        manager="kaiwo",
        force=False,
        subresource="",
        status_subresource=True,
    )
    live = {**first.obj, "metadata": {**first.obj["metadata"]}}
    live["metadata"]["managedFields"] = [
        {"manager": "kaiwo", "operation": "Apply", "fieldsV1": to_fields_v1(paths)}
        for paths in first.ownership.values()
    ]
    second = server_side_apply(
        live=live,
        applied={
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"replicas": 2},
        },
        manager="kaiwo",
        force=False,
        subresource="",
        status_subresource=True,
    )
    assert "labels" not in second.obj["metadata"]
    assert second.obj["spec"] == {"replicas": 2}


def test_status_is_not_owned_through_the_main_resource() -> None:
    result = server_side_apply(
        live=None,
        applied={**DEPLOYMENT, "status": {"ready": 1}},
        manager="kaiwo",
        force=False,
        subresource="",
        status_subresource=True,
    )
    assert "status" not in result.obj


def test_an_update_takes_the_changed_fields_without_conflict() -> None:
    live = _live_owned_by("kaiwo")
    updated = {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "replicas": 3}}  # type: ignore[dict-item]
    ownership = record_update(
        old=live, new=updated, manager="kubectl", subresource="", status_subresource=True
    )
    assert ownership == {
        Owner("kaiwo", "Apply"): frozenset({("metadata", "labels", "app")}),
        Owner("kubectl", "Update"): frozenset({("spec", "replicas")}),
    }
    assert read_ownership(live) == {
        Owner("kaiwo", "Apply"): frozenset({("spec", "replicas"), ("metadata", "labels", "app")})
    }
