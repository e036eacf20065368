"""Long names give valid labels and child names; references across namespaces are ignored.

Expected values are written by hand: ``a`` * 54 + ``-`` + the first 8 hex digits of the
SHA-256 of the whole value (``ffe054fe`` for ``a`` * 64, worked out with ``sha256sum``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_planner.domain.children.naming import bounded_label, main_child_name
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.projection import Projection

from tests.planning_calls import planned

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LONG_NAME = "a" * 64
LONG_NAME_LABEL = "a" * 54 + "-ffe054fe"


def test_a_short_valid_value_is_kept() -> None:
    assert bounded_label("train-llama") == "train-llama"
    assert bounded_label("a" * 63) == "a" * 63
    assert bounded_label("a--b") == "a--b"


def test_a_long_value_is_cut_and_hashed_deterministically() -> None:
    assert bounded_label(LONG_NAME) == LONG_NAME_LABEL
    assert main_child_name(LONG_NAME) == LONG_NAME_LABEL
    assert bounded_label("a" * 64) == bounded_label("a" * 64)


def test_two_long_values_sharing_a_prefix_stay_distinct() -> None:
    one, other = "x" * 100 + "-one", "x" * 100 + "-two"
    assert bounded_label(one) != bounded_label(other)
    assert len(bounded_label(one)) == len(bounded_label(other)) == 63


def test_a_user_is_cleaned_as_before_and_bounded() -> None:
    assert bounded_label("Test@AMD.com", keep_valid=False) == "test-amd.com"
    long_user = "someone." * 20 + "@amd.com"
    label = bounded_label(long_user, keep_valid=False)
    assert len(label) == 63 and LABEL_VALUE.match(label)


def workload(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "ml-team", "uid": "owner-uid", "generation": 1},
        "spec": {"image": "busybox", "user": "someone." * 20 + "@amd.com", **spec},
    }


def cluster(*objects: dict[str, Any]) -> ClusterState:
    """A cluster with the default queue ``kaiwo`` (every namespace may use it)."""
    quota = [{"name": "cpu", "nominalQuota": 256}]
    queues = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo", "uid": "kqc-uid", "generation": 1},
        "spec": {
            "resourceFlavors": [{"name": "cpu"}],
            "clusterQueues": [
                {
                    "name": "kaiwo",
                    "spec": {
                        "resourceGroups": [
                            {
                                "coveredResources": ["cpu"],
                                "flavors": [{"name": "cpu", "resources": quota}],
                            }
                        ]
                    },
                }
            ],
        },
    }
    return ClusterState.from_wire(objects=[queues, *objects], namespaces=["ml-team", "vision"])


def labels_in(tree: Any) -> list[tuple[str, str]]:
    """Every (key, value) under a ``labels``, ``matchLabels`` or ``selector`` map."""
    found: list[tuple[str, str]] = []
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key in {"labels", "matchLabels", "selector"} and isinstance(value, dict):
                found += [(k, v) for k, v in value.items() if isinstance(v, str)]
            found += labels_in(value)
    elif isinstance(tree, list):
        for item in tree:
            found += labels_in(item)
    return found


@pytest.mark.parametrize(
    ("kind", "length", "spec"),
    [
        ("KaiwoJob", 64, {}),
        ("KaiwoJob", 253, {"storage": {"storageEnabled": True, "data": {"storageSize": "1Gi"}}}),
        ("KaiwoService", 120, {}),
        ("KaiwoJob", 200, {"ray": True}),
        ("KaiwoService", 253, {"ray": True}),
    ],
)
def test_every_child_of_a_long_named_workload_has_valid_names_and_labels(
    kind: str, length: int, spec: dict[str, Any]
) -> None:
    name = ("long-name-" * 30)[: length - 1] + "z"
    plan = planned(owner=workload(kind, name, **spec), cluster=cluster(), now=NOW)

    assert plan is not None and plan.desired
    for child in plan.desired:
        child_name = child["metadata"]["name"]
        assert len(child_name) <= 63 and DNS_LABEL.match(child_name), child_name
        for key, value in labels_in(child):
            assert len(value) <= 63 and LABEL_VALUE.match(value), (key, value)
    assert plan.desired[0]["metadata"]["labels"]["kaiwo.silogen.ai/name"] == bounded_label(name)


def test_a_deployment_selector_matches_its_pod_labels_for_a_long_name() -> None:
    plan = planned(owner=workload("KaiwoService", LONG_NAME), cluster=cluster(), now=NOW)
    assert plan is not None
    [deployment] = [c for c in plan.desired if c["kind"] == "Deployment"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector["app"] == pod_labels["app"] == LONG_NAME_LABEL
    assert deployment["metadata"]["name"] == LONG_NAME_LABEL


# ------------------------------------------------------------------ cross-namespace owners


def owner() -> dict[str, Any]:
    job = workload("KaiwoJob", "train")
    job["metadata"]["resourceVersion"] = "10"
    job["status"] = {"status": "RUNNING", "observedGeneration": 1}
    return job


def forged_failed_job() -> dict[str, Any]:
    """A Job in ``vision`` that names the KaiwoJob of ``ml-team`` as its owner, failed."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "vision",
            "uid": "forged-job",
            "resourceVersion": "11",
            "ownerReferences": [
                {
                    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
                    "kind": "KaiwoJob",
                    "name": "train",
                    "uid": "owner-uid",
                    "controller": True,
                }
            ],
        },
        "status": {"failed": 1, "conditions": [{"type": "Failed", "status": "True"}]},
    }


def test_a_child_in_another_namespace_does_not_count_as_the_owners() -> None:
    alone = cluster(owner())
    forged = cluster(owner(), forged_failed_job())

    assert forged.children_of("owner-uid") == ()
    assert planned(owner=owner(), cluster=forged, now=NOW) == planned(
        owner=owner(), cluster=alone, now=NOW
    )


def observed(obj: dict[str, Any], sequence: int) -> ObservedObjectV1:
    meta = obj["metadata"]
    return ObservedObjectV1(
        kind=obj["kind"],
        api_version=obj["apiVersion"],
        namespace=meta["namespace"],
        name=meta["name"],
        uid=meta["uid"],
        resource_version=meta["resourceVersion"],
        event_type="ADDED",
        object=obj,
    )


def test_the_projection_ignores_a_reference_across_namespaces() -> None:
    projection = Projection()
    projection.apply(observed(forged_failed_job(), 1), sequence=1)
    projection.apply(observed(owner(), 2), sequence=2)

    state = projection.cluster_state()

    assert state.children_of("owner-uid") == ()
    plan = planned(owner=owner(), cluster=state, now=NOW)
    assert plan is not None and plan.status is not None
    assert plan.status["status"] != "FAILED"


# ------------------------------------------------------------------ overflow


def valid_condition(plan: Any) -> dict[str, Any]:
    assert plan is not None and plan.status is not None
    found: dict[str, Any] = next(c for c in plan.status["conditions"] if c["type"] == "Valid")
    return found


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"duration": "99999999999999h"},
            "spec.duration: must be at most 2562047h (the longest duration Go holds), "
            "got '99999999999999h'",
        ),
        ({"replicas": 2**63}, "spec.replicas: must be at most 2147483647"),
        ({"gpus": 2**63 - 1}, "spec.gpus: must be at most 2147483647"),
        (
            {"storage": {"storageEnabled": True, "data": {"storageSize": "1e100"}}},
            "spec.storage.data.storageSize: must be at most 9223372036854775807 (2**63 - 1, "
            "the largest Kubernetes quantity), got '1e100'",
        ),
    ],
)
def test_a_value_that_would_overflow_gives_valid_false_and_a_warning(
    spec: dict[str, Any], message: str
) -> None:
    plan = planned(owner=workload("KaiwoJob", "huge", **spec), cluster=cluster(), now=NOW)

    valid = valid_condition(plan)
    expected = f"The spec is invalid, nothing was changed: {message}"
    assert (valid["status"], valid["reason"], valid["message"]) == (
        "False",
        "InvalidSpec",
        expected,
    )
    assert plan is not None and plan.desired == ()
    assert [(e.type, e.reason, e.message) for e in plan.events] == [
        ("Warning", "InvalidSpec", expected)
    ]


def test_a_deadline_past_the_last_representable_date_is_reported_not_raised() -> None:
    job = workload("KaiwoJob", "late", duration="2h")
    job["status"] = {"status": "RUNNING", "startTime": "9999-12-31T23:00:00Z"}

    plan = planned(owner=job, cluster=cluster(), now=NOW)

    valid = valid_condition(plan)
    assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec")
    assert valid["message"].startswith(
        "The spec is invalid, nothing was changed: spec: a value is too large to plan with ("
    )
