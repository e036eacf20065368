"""JSON Patch (RFC 6902) as ``modelServerPods.jsonPatches`` applies it: the RFC's own
examples (appendix A), and what a configured patch does to a Model's Pods."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_planner.domain.models.json_patch import JsonPatchError, apply_patches

from tests.unit.planner.models.building import condition, model, models_config, only, plan_for


@pytest.mark.parametrize(
    ("document", "patch", "result"),
    [
        (
            {"foo": "bar"},
            [{"op": "add", "path": "/baz", "value": "qux"}],
            {"baz": "qux", "foo": "bar"},
        ),
        (
            {"foo": ["bar", "baz"]},
            [{"op": "add", "path": "/foo/1", "value": "qux"}],
            {"foo": ["bar", "qux", "baz"]},
        ),
        ({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),
        (
            {"foo": ["bar", "qux", "baz"]},
            [{"op": "remove", "path": "/foo/1"}],
            {"foo": ["bar", "baz"]},
        ),
        (
            {"baz": "qux", "foo": "bar"},
            [{"op": "replace", "path": "/baz", "value": "boo"}],
            {"baz": "boo", "foo": "bar"},
        ),
        (
            {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
            [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
            {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}},
        ),
        (
            {"foo": ["all", "grass", "cows", "eat"]},
            [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
            {"foo": ["all", "cows", "eat", "grass"]},
        ),
        (
            {"baz": "qux", "foo": ["a", 2, "c"]},
            [
                {"op": "test", "path": "/baz", "value": "qux"},
                {"op": "test", "path": "/foo/1", "value": 2},
            ],
            {"baz": "qux", "foo": ["a", 2, "c"]},
        ),
        (
            {"foo": "bar"},
            [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
            {"foo": "bar", "child": {"grandchild": {}}},
        ),
        (
            {"foo": ["bar"]},
            [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
            {"foo": ["bar", ["abc", "def"]]},
        ),
        ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}], {"/": 9, "~1": 10}),
        ({"a": 1}, [{"op": "copy", "from": "/a", "path": "/b"}], {"a": 1, "b": 1}),
    ],
    ids=["A1", "A2", "A3", "A4", "A5", "A6", "A7", "A8", "A10", "A16", "A14", "copy"],
)
def test_the_rfcs_examples(document: Any, patch: list[dict[str, Any]], result: Any) -> None:
    assert apply_patches(document, patch) == result


@pytest.mark.parametrize(
    ("document", "patch", "message"),
    [
        ({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}], "does not hold"),
        ({"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}], "no member 'baz'"),
        ({"foo": []}, [{"op": "remove", "path": "/foo/0"}], "out of range"),
        ({"foo": "bar"}, [{"op": "remove", "path": "/nothing"}], "no member"),
        ({}, [{"op": "add", "path": "foo", "value": 1}], "not a JSON Pointer"),
        ({}, [{"op": "add", "path": "/foo"}], "no value"),
    ],
)
def test_a_patch_that_cannot_apply_says_which_and_why(
    document: Any, patch: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(JsonPatchError, match=message) as raised:
        apply_patches(document, patch)
    assert str(raised.value).startswith("jsonPatches[0]")


def test_the_document_given_is_not_changed() -> None:
    document = {"a": {"b": [1]}}
    apply_patches(document, [{"op": "add", "path": "/a/b/-", "value": 2}])
    assert document == {"a": {"b": [1]}}


SPEC = {"url": "hf://o/m", "engine": "VLLM", "replicas": 1}


def test_configured_patches_shape_every_pod_and_roll_them() -> None:
    plain = only(plan_for(model(SPEC)), "Pod")
    config = models_config(
        """\
modelServerPods:
  jsonPatches:
    - {op: add, path: /spec/priorityClassName, value: kubeai-model-server}
    - {op: add, path: /metadata/labels/team, value: ml}
    - {op: remove, path: /spec/containers/0/livenessProbe}
"""
    )

    patched = only(plan_for(model(SPEC), config), "Pod")

    assert patched["spec"]["priorityClassName"] == "kubeai-model-server"
    assert patched["metadata"]["labels"]["team"] == "ml"
    assert "livenessProbe" not in patched["spec"]["containers"][0]
    assert patched["metadata"]["labels"]["pod-hash"] != plain["metadata"]["labels"]["pod-hash"]
    assert patched["metadata"]["name"].startswith("model-llm-")


def test_a_patch_that_cannot_apply_stops_the_model_and_says_so() -> None:
    config = models_config(
        "modelServerPods:\n  jsonPatches:\n    - {op: remove, path: /spec/hostNetwork}\n"
    )

    plan = plan_for(model(SPEC), config)

    configured = condition(plan, "Configured")
    assert configured is not None
    assert (configured["reason"], configured["message"]) == (
        "InvalidJSONPatch",
        "jsonPatches[0] (remove): no member 'hostNetwork'",
    )
    assert plan.desired == ()
