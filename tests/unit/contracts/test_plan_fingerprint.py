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


def test_fields_added_later_stay_out_of_the_json_while_unused() -> None:
    # Plans recorded before delete, shared and finalizers existed keep their bytes.
    plain = Plan(owner=OWNER).model_dump(mode="json")
    assert not {"createOnly", "delete", "shared", "finalizers"} & set(plain)
    pod = ObjectRef(api_version="v1", kind="Pod", name="p", namespace="a", uid="p-1")
    used = Plan(owner=OWNER, delete=(pod,), shared=({"kind": "X"},), finalizers=())
    dumped = used.model_dump(mode="json")
    assert dumped["delete"] == [pod.model_dump(mode="json")]
    assert dumped["shared"] == [{"kind": "X"}]
    assert dumped["finalizers"] == []
    assert Plan.model_validate(dumped) == used
    assert used.fingerprint() != used.model_copy(update={"finalizers": None}).fingerprint()
