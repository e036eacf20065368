"""The fake's subject matching and transforms (the contract suite covers the behaviour)."""

from __future__ import annotations

import pytest
from kaiwo_contracts.events.streams import SubjectTransform
from kaiwo_runtime.memory_jetstream import apply_transform, subject_matches


@pytest.mark.parametrize(
    ("pattern", "subject", "matches"),
    [
        ("kaiwo.obs.>", "kaiwo.obs.node._cluster.u", True),
        ("kaiwo.obs.>", "kaiwo.obs", False),
        ("kaiwo.obs.*.*.*", "kaiwo.obs.node._cluster.u", True),
        ("kaiwo.obs.*.*.*", "kaiwo.obs.node._cluster.u.3", False),
        ("kaiwo.obs.*._cluster.*.*", "kaiwo.obs.node._cluster.u.3", True),
        ("kaiwo.obs.*._cluster.*.*", "kaiwo.obs.pod.ns.u.3", False),
        ("kaiwo.plan.a", "kaiwo.plan.a", True),
    ],
)
def test_subject_matching(pattern: str, subject: str, matches: bool) -> None:
    assert subject_matches(pattern, subject) is matches


def test_transform_keeps_wildcards_and_appends_the_partition() -> None:
    transform = SubjectTransform(
        source="kaiwo.obs.*.*.*",
        destination="kaiwo.obs.{{wildcard(1)}}.{{wildcard(2)}}.{{wildcard(3)}}.{{partition(4,3)}}",
    )

    assert apply_transform(
        transform, "kaiwo.obs.kaiwojob.team-a.0b8f0a52-2a4c-4c38-9a43-1f7d52a1c001"
    ) == ("kaiwo.obs.kaiwojob.team-a.0b8f0a52-2a4c-4c38-9a43-1f7d52a1c001.3")
    assert apply_transform(transform, "kaiwo.obs.other") == "kaiwo.obs.other"
