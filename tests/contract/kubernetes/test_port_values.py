"""The port's value objects: resource paths, the catalogue, error mapping and Event manifests."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from kaiwo_kube.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Invalid,
    KubeError,
    NotFound,
    ResourceExpired,
    Retryable,
    error_from_status,
)
from kaiwo_kube.events import event_manifest
from kaiwo_kube.resources import (
    JOB,
    KAIWO_QUEUE_CONFIG,
    KUBEAI_MODEL,
    NAMESPACE,
    POD,
    ResourceType,
    known_type,
)


@pytest.mark.parametrize(
    ("resource", "namespace", "name", "subresource", "expected"),
    [
        (POD, "ns", None, None, "/api/v1/namespaces/ns/pods"),
        (POD, None, None, None, "/api/v1/pods"),
        (POD, "ns", "p", "status", "/api/v1/namespaces/ns/pods/p/status"),
        (NAMESPACE, None, "ns", None, "/api/v1/namespaces/ns"),
        (JOB, "ns", "j", None, "/apis/batch/v1/namespaces/ns/jobs/j"),
        (
            KAIWO_QUEUE_CONFIG,
            "ignored",
            "kaiwo",
            None,
            "/apis/kaiwo.silogen.ai/v1alpha1/kaiwoqueueconfigs/kaiwo",
        ),
        (KUBEAI_MODEL, "ns", "m", "scale", "/apis/kubeai.org/v1/namespaces/ns/models/m/scale"),
    ],
)
def test_resource_paths(
    resource: ResourceType,
    namespace: str | None,
    name: str | None,
    subresource: str | None,
    expected: str,
) -> None:
    assert resource.path(namespace=namespace, name=name, subresource=subresource) == expected


def test_catalogue_lookup() -> None:
    assert known_type("batch/v1", "Job") == JOB
    assert known_type("v1", "Namespace") == NAMESPACE
    assert known_type("example.com/v1", "Thing") is None


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [
        (400, "BadRequest", BadRequest),
        (404, "NotFound", NotFound),
        (409, "AlreadyExists", AlreadyExists),
        (409, "Conflict", Conflict),
        (410, "Expired", ResourceExpired),
        (422, "Invalid", Invalid),
        (429, "TooManyRequests", Retryable),
        (503, "ServiceUnavailable", Retryable),
        (403, "Forbidden", KubeError),
    ],
)
def test_errors_are_typed_by_code_and_reason(
    code: int, reason: str, expected: type[KubeError]
) -> None:
    error = error_from_status(code=code, status={"reason": reason, "message": "m", "code": code})
    assert type(error) is expected
    assert (error.code, error.reason, error.message) == (code, reason, "m")


def test_retry_after_comes_from_the_status_or_the_header() -> None:
    from_status = error_from_status(
        code=429, status={"details": {"retryAfterSeconds": 3}}, retry_after_header="9"
    )
    from_header = error_from_status(code=503, status={}, retry_after_header="9")
    assert isinstance(from_status, Retryable)
    assert isinstance(from_header, Retryable)
    assert (from_status.retry_after, from_header.retry_after) == (3.0, 9.0)


def test_event_manifest_references_the_involved_object() -> None:
    involved = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": "train", "namespace": "team", "uid": "u-1", "resourceVersion": "7"},
    }
    event = event_manifest(
        involved=involved,
        event_type="Normal",
        reason="Created",
        message="made a Job",
        component="kaiwo-executor",
        now=datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
    )
    assert event["metadata"]["namespace"] == "team"
    assert event["metadata"]["name"].startswith("train.")
    assert len(event["metadata"]["name"]) == len("train.") + 16
    assert event["involvedObject"] == {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "name": "train",
        "namespace": "team",
        "uid": "u-1",
        "resourceVersion": "7",
    }
    assert (event["type"], event["reason"], event["message"]) == ("Normal", "Created", "made a Job")
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2025-01-02T03:04:05Z"
    assert event["source"] == {"component": "kaiwo-executor"}


def test_events_about_cluster_scoped_objects_go_to_default() -> None:
    event = event_manifest(
        involved={"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u"}},
        event_type="Warning",
        reason="Cordoned",
        message="m",
        component="kaiwo",
        now=datetime(2025, 1, 1, tzinfo=UTC),
    )
    assert event["metadata"]["namespace"] == "default"
    assert "namespace" not in event["involvedObject"]
