"""A plan's fingerprint: what makes two plans the same decision."""

from __future__ import annotations

from kaiwo_contracts.plans import ObjectRef, Plan

OWNER = ObjectRef(
    api_version="kaiwo.silogen.ai/v1alpha1", kind="KaiwoJob", name="t", namespace="a", uid="u"
)


def test_the_fingerprint_ignores_the_observed_resource_version_only() -> None:
    base = Plan(owner=OWNER, status={"status": "RUNNING"})

    assert (
        base.fingerprint()
        == base.model_copy(update={"observed_resource_version": "9"}).fingerprint()
    )
    assert base.fingerprint() != base.model_copy(update={"observed_generation": 2}).fingerprint()
    assert base.fingerprint() != base.model_copy(update={"delete_owner": True}).fingerprint()
