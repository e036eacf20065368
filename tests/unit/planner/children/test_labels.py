"""Labels, names and the owner reference every child carries."""

from __future__ import annotations

import pytest
from kaiwo_planner.domain.children.labels import (
    inherited_labels,
    queue_labels,
    topology_annotations,
)
from kaiwo_planner.domain.children.naming import child_name, rfc1123_label
from kaiwo_planner.domain.children.ownership import child_metadata
from kaiwo_planner.domain.state.workload_identity import WorkloadIdentity

IDENTITY = WorkloadIdentity(
    api_version="kaiwo.silogen.ai/v1alpha1",
    kind="KaiwoService",
    name="svc",
    namespace="ns",
    uid="u-9",
    workload_type="service",
    user="Test@AMD.com",
    labels={
        "team": "a",
        "kueue.x-k8s.io/queue-name": "q",
        "kaiwo.silogen.ai/managed": "true",
        "kaiwo.silogen.ai/name": "spoof",
    },
)


@pytest.mark.parametrize(
    ("value", "label"),
    [
        ("test@amd.com", "test-amd.com"),
        ("Jane Doe <jane@x.org>", "jane-doe-jane-x.org"),
        ("--a..b--", "a-b"),
        ("", ""),
        ("x" * 70 + "@y", "x" * 63),
    ],
)
def test_rfc1123_label(value, label):
    assert rfc1123_label(value) == label


def test_child_names_keep_the_suffix_and_stay_distinct_when_too_long():
    assert child_name("train", "data") == "train-data"
    long_a = "a" * 60 + "-one"
    long_b = "a" * 60 + "-two"
    name_a, name_b = child_name(long_a, "data"), child_name(long_b, "data")
    assert name_a != name_b
    assert len(name_a) == 63
    assert name_a.startswith("a" * 49 + "-")  # 63 - len("-") * 2 - 8 (hash) - len("data")
    assert name_a.endswith("-data")


def test_inherited_labels_fill_missing_keys_and_system_labels_win():
    assert inherited_labels({"team": "b", "tier": "x"}, IDENTITY) == {
        "team": "b",
        "tier": "x",
        "kaiwo.silogen.ai/managed": "true",
        "kaiwo.silogen.ai/name": "svc",
        "kaiwo.silogen.ai/user": "test-amd.com",
        "kaiwo.silogen.ai/type": "service",
        "kaiwo.silogen.ai/run-id": "u-9",
    }


def test_queue_labels_name_the_priority_class_only_when_set():
    assert queue_labels("q", "") == {"kueue.x-k8s.io/queue-name": "q"}
    assert queue_labels("q", "high") == {
        "kueue.x-k8s.io/queue-name": "q",
        "kueue.x-k8s.io/priority-class": "high",
    }


def test_a_required_topology_wins_over_a_preferred_one():
    assert topology_annotations(required_topology="rack", preferred_topology="block") == {
        "kueue.x-k8s.io/podset-required-topology": "rack"
    }
    assert topology_annotations(required_topology="", preferred_topology="block") == {
        "kueue.x-k8s.io/podset-preferred-topology": "block"
    }
    assert topology_annotations(required_topology=None, preferred_topology=None) == {}


def test_child_metadata_carries_inventory_labels_and_the_controller_reference():
    metadata = child_metadata(
        IDENTITY,
        name="svc-x",
        labels={"app.kubernetes.io/managed-by": "someone-else", "a": "b"},
    )

    assert metadata == {
        "name": "svc-x",
        "namespace": "ns",
        "labels": {
            "a": "b",
            "app.kubernetes.io/managed-by": "kaiwo",
            "kaiwo.silogen.ai/owner-uid": "u-9",
        },
        "ownerReferences": [
            {
                "apiVersion": "kaiwo.silogen.ai/v1alpha1",
                "kind": "KaiwoService",
                "name": "svc",
                "uid": "u-9",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
