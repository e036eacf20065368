"""ObjectRef: the one reference type, made from a manifest, and its plain key."""

from __future__ import annotations

from kaiwo_contracts.plans import ObjectRef

JOB = {
    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoJob",
    "metadata": {"name": "train", "namespace": "team-a", "uid": "uid-1", "labels": {}},
    "spec": {},
}


def test_a_manifest_gives_its_reference_with_uid() -> None:
    assert ObjectRef.of(JOB) == ObjectRef(
        api_version="kaiwo.silogen.ai/v1alpha1",
        kind="KaiwoJob",
        name="train",
        namespace="team-a",
        uid="uid-1",
    )


def test_a_cluster_scoped_manifest_without_uid_has_neither() -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1"}}
    assert ObjectRef.of(node) == ObjectRef(api_version="v1", kind="Node", name="gpu-1")


def test_metadata_that_is_not_text_counts_as_absent() -> None:
    odd = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": 7, "namespace": ["a"]}}
    assert ObjectRef.of(odd) == ObjectRef(api_version="v1", kind="Pod", name="")
    assert ObjectRef.of({"apiVersion": "v1", "kind": "Pod", "metadata": "x"}) == ObjectRef(
        api_version="v1", kind="Pod", name=""
    )


def test_the_key_is_a_plain_tuple_that_makes_the_same_reference_again() -> None:
    key = ObjectRef.key_of(JOB)
    assert key == ("kaiwo.silogen.ai/v1alpha1", "KaiwoJob", "team-a", "train", "uid-1")
    assert ObjectRef.of(JOB).key() == key
    assert ObjectRef.of_key(key) == ObjectRef.of(JOB)
    node = ObjectRef(api_version="v1", kind="Node", name="gpu-1")
    assert node.key() == ("v1", "Node", "", "gpu-1", "")
    assert ObjectRef.of_key(node.key()) == node


def test_keys_sort_as_references_do() -> None:
    refs = [
        ObjectRef(api_version="v1", kind="Pod", name="b", namespace="x"),
        ObjectRef(api_version="v1", kind="Pod", name="a", namespace="y"),
        ObjectRef(api_version="v1", kind="ConfigMap", name="z", namespace="x"),
    ]
    by_sort_key = sorted(refs, key=ObjectRef.sort_key)
    assert sorted(refs, key=ObjectRef.key) == by_sort_key
    assert [r.name for r in by_sort_key] == ["z", "b", "a"]


def test_references_are_frozen_and_hashable() -> None:
    assert len({ObjectRef.of(JOB), ObjectRef.of_key(ObjectRef.key_of(JOB))}) == 1
