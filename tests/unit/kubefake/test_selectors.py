"""Label and field selector parsing and matching in the Kubernetes fake."""

from __future__ import annotations

import pytest
from kaiwo_kubefake.errors import ApiError
from kaiwo_kubefake.selectors import FieldSelector, LabelSelector, Requirement


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("app=web", (Requirement("app", "=", frozenset({"web"})),)),
        ("app==web", (Requirement("app", "=", frozenset({"web"})),)),
        ("app != web", (Requirement("app", "!=", frozenset({"web"})),)),
        ("tier in (a, b)", (Requirement("tier", "in", frozenset({"a", "b"})),)),
        ("tier notin (a)", (Requirement("tier", "notin", frozenset({"a"})),)),
        ("gpu", (Requirement("gpu", "exists"),)),
        ("!gpu", (Requirement("gpu", "!exists"),)),
        (
            "kaiwo.silogen.ai/owner=x,env in (prod,dev),!legacy",
            (
                Requirement("kaiwo.silogen.ai/owner", "=", frozenset({"x"})),
                Requirement("env", "in", frozenset({"prod", "dev"})),
                Requirement("legacy", "!exists"),
            ),
        ),
        ("", ()),
    ],
)
def test_label_selector_parsing(text: str, expected: tuple[Requirement, ...]) -> None:
    assert LabelSelector.parse(text).requirements == expected


@pytest.mark.parametrize(
    ("text", "labels", "matches"),
    [
        ("app=web", {"app": "web"}, True),
        ("app=web", {"app": "db"}, False),
        ("app=web", {}, False),
        ("app!=web", {}, True),
        ("app!=web", {"app": "web"}, False),
        ("env in (prod,dev)", {"env": "dev"}, True),
        ("env in (prod,dev)", {}, False),
        ("env notin (prod)", {}, True),
        ("env notin (prod)", {"env": "prod"}, False),
        ("gpu", {"gpu": ""}, True),
        ("!gpu", {"gpu": ""}, False),
        ("app=web,!gpu", {"app": "web"}, True),
        ("", {}, True),
    ],
)
def test_label_selector_matching(text: str, labels: dict[str, str], matches: bool) -> None:
    assert LabelSelector.parse(text).matches(labels) is matches


@pytest.mark.parametrize("text", ["env in (a", "env in a)", "a=b=c", "in in in"])
def test_malformed_label_selectors_are_bad_requests(text: str) -> None:
    with pytest.raises(ApiError) as raised:
        LabelSelector.parse(text)
    assert raised.value.code == 400


def test_field_selector_matches_name_and_namespace() -> None:
    selector = FieldSelector.parse(
        "metadata.name=a,metadata.namespace!=kube-system", kind_key=("", "configmaps")
    )
    assert selector.matches({"metadata": {"name": "a", "namespace": "default"}})
    assert not selector.matches({"metadata": {"name": "a", "namespace": "kube-system"}})
    assert not selector.matches({"metadata": {"name": "b", "namespace": "default"}})


def test_field_selector_knows_per_kind_fields() -> None:
    pods = FieldSelector.parse("status.phase=Running", kind_key=("", "pods"))
    assert pods.matches({"metadata": {"name": "p"}, "status": {"phase": "Running"}})
    with pytest.raises(ApiError) as raised:
        FieldSelector.parse("status.phase=Running", kind_key=("", "configmaps"))
    assert raised.value.code == 400
    assert raised.value.message == 'field label not supported: "status.phase"'
