"""X-Label-Selector: the kubectl -l grammar, and clear refusals."""

from __future__ import annotations

import pytest
from kaiwo_gateway.domain.selectors import SelectorError, parse_selectors

LABELS = {"tenant": "a", "tier": "gold"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("tenant=a", True),
        ("tenant==a", True),
        ("tenant!=a", False),
        ("missing!=a", True),
        ("tenant in (a, b)", True),
        ("tenant notin (a,b)", False),
        ("tier", True),
        ("!tier", False),
        ("!missing", True),
        ("tenant=a,tier=silver", False),
        ("tenant in (a,b),tier", True),
        ("", True),
    ],
)
def test_requirements_match_as_kubectl_does(selector: str, matches: bool) -> None:
    assert parse_selectors([selector]).matches(LABELS) is matches


def test_several_headers_are_anded() -> None:
    assert not parse_selectors(["tenant=a", "tier=silver"]).matches(LABELS)


@pytest.mark.parametrize("selector", ["tenant=(a)", "tenant in ()", "=a", "a b"])
def test_a_selector_that_does_not_parse_names_the_requirement(selector: str) -> None:
    with pytest.raises(SelectorError, match="label selector"):
        parse_selectors([selector])
