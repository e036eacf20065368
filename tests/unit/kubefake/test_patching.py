"""Merge, JSON and strategic merge patches in the Kubernetes fake."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_kubefake.errors import ApiError
from kaiwo_kubefake.patching import json_patch, merge_patch, strategic_merge_patch


# The examples of RFC 7386, appendix A.
@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_follows_rfc_7386(target: Any, patch: Any, expected: Any) -> None:
    assert merge_patch(target, patch) == expected


def test_merge_patch_leaves_the_target_untouched() -> None:
    target = {"spec": {"replicas": 1}}
    merge_patch(target, {"spec": {"replicas": 2}})
    assert target == {"spec": {"replicas": 1}}


def test_strategic_merge_merges_named_lists_by_name() -> None:
    target = {
        "containers": [
            {"name": "main", "image": "a:1", "args": ["x"]},
            {"name": "sidecar", "image": "s:1"},
        ]
    }
    patch = {
        "containers": [
            {"name": "main", "image": "a:2"},
            {"name": "extra", "image": "e:1"},
        ]
    }
    assert strategic_merge_patch(target, patch) == {
        "containers": [
            {"name": "main", "image": "a:2", "args": ["x"]},
            {"name": "sidecar", "image": "s:1"},
            {"name": "extra", "image": "e:1"},
        ]
    }


def test_strategic_merge_honours_delete_and_replace_directives() -> None:
    target = {
        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
        "labels": {"x": "1", "y": "2"},
    }
    patch = {
        "env": [{"name": "A", "$patch": "delete"}],
        "labels": {"$patch": "replace", "z": "3"},
    }
    assert strategic_merge_patch(target, patch) == {
        "env": [{"name": "B", "value": "2"}],
        "labels": {"z": "3"},
    }


def test_strategic_merge_replaces_lists_without_names() -> None:
    target = {"args": ["a", "b"], "tolerations": [{"key": "gpu"}]}
    patch = {"args": ["c"], "tolerations": [{"key": "cpu"}]}
    assert strategic_merge_patch(target, patch) == {"args": ["c"], "tolerations": [{"key": "cpu"}]}


def test_json_patch_operations() -> None:
    target = {"metadata": {"labels": {"a": "1"}}, "spec": {"items": [1, 2]}}
    operations = [
        {"op": "add", "path": "/metadata/labels/b", "value": "2"},
        {"op": "remove", "path": "/metadata/labels/a"},
        {"op": "replace", "path": "/spec/items/0", "value": 9},
        {"op": "add", "path": "/spec/items/-", "value": 3},
        {"op": "test", "path": "/spec/items/1", "value": 2},
    ]
    assert json_patch(target, operations) == {
        "metadata": {"labels": {"b": "2"}},
        "spec": {"items": [9, 2, 3]},
    }


def test_failing_json_patch_is_invalid() -> None:
    with pytest.raises(ApiError) as raised:
        json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": 2}])
    assert raised.value.code == 422
    with pytest.raises(ApiError) as raised:
        json_patch({"a": 1}, [{"op": "remove", "path": "/missing"}])
    assert raised.value.code == 422
