"""An owner's record is keyed by its uid, or by the kind of a default singleton the cluster
lacks; the snapshot keeps the keys it always had."""

from __future__ import annotations

from kaiwo_planner.owner_key import OwnerKey


def test_a_default_singleton_is_written_and_published_under_its_stand_in() -> None:
    key = OwnerKey.default("KaiwoQueueConfig")
    assert key.to_document() == "default/KaiwoQueueConfig"
    assert key.subject_uid == "default-kaiwoqueueconfig"
    assert OwnerKey.from_document("default/KaiwoQueueConfig") == key
    assert key != OwnerKey.of_uid("default-kaiwoqueueconfig")


def test_an_owner_with_a_uid_is_keyed_by_the_uid_alone() -> None:
    key = OwnerKey.of_uid("uid-train")
    assert key.to_document() == "uid-train"
    assert key.subject_uid == "uid-train"
    assert not key.is_default
    assert OwnerKey.from_document("uid-train") == key
