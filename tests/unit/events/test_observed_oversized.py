"""The oversized marker of an observation: in the payload and in the reduced object, alike."""

from __future__ import annotations

import pytest
from kaiwo_contracts.events.observed import (
    ObservedObjectV1,
    OversizedObject,
    oversized_marker,
    reduced_object,
)
from pydantic import ValidationError

MARKER = OversizedObject(size_bytes=1_153_433, limit_bytes=1_048_576)
WHOLE = {
    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoJob",
    "metadata": {
        "name": "big",
        "namespace": "team-a",
        "uid": "u1",
        "resourceVersion": "7",
        "generation": 2,
        "labels": {"team": "vision"},
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
        "managedFields": [{"manager": "kubectl"}],
        "ownerReferences": [{"kind": "Thing", "name": "t", "uid": "t1"}],
    },
    "spec": {"entrypoint": "echo ..."},
    "status": {"status": "RUNNING"},
}


def payload(obj: dict[str, object], oversized: OversizedObject | None) -> ObservedObjectV1:
    return ObservedObjectV1(
        kind="KaiwoJob",
        api_version="kaiwo.silogen.ai/v1alpha1",
        namespace="team-a",
        name="big",
        uid="u1",
        resource_version="7",
        event_type="MODIFIED",
        object=obj,
        oversized=oversized,
    )


def test_a_reduced_object_keeps_identity_routing_and_status_and_carries_the_marker() -> None:
    assert reduced_object(WHOLE, oversized=MARKER) == {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {
            "name": "big",
            "namespace": "team-a",
            "uid": "u1",
            "resourceVersion": "7",
            "generation": 2,
            "labels": {"team": "vision"},
            "ownerReferences": [{"kind": "Thing", "name": "t", "uid": "t1"}],
        },
        "status": {"status": "RUNNING"},
        "kaiwoOversized": {"sizeBytes": 1_153_433, "limitBytes": 1_048_576},
    }
    assert reduced_object(WHOLE, oversized=MARKER, minimal=True) == {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {
            "name": "big",
            "namespace": "team-a",
            "uid": "u1",
            "resourceVersion": "7",
            "generation": 2,
        },
        "kaiwoOversized": {"sizeBytes": 1_153_433, "limitBytes": 1_048_576},
    }


def test_the_marker_is_read_back_from_the_object_alone() -> None:
    assert oversized_marker(reduced_object(WHOLE, oversized=MARKER)) == MARKER
    assert oversized_marker(WHOLE) is None
    assert oversized_marker({"kaiwoOversized": {"sizeBytes": "many"}}) is None


def test_the_payload_and_the_object_must_agree_on_the_marker() -> None:
    reduced = reduced_object(WHOLE, oversized=MARKER)

    assert payload(reduced, MARKER).oversized == MARKER
    with pytest.raises(ValidationError, match="must equal oversized"):
        payload(reduced, None)  # a marker smuggled into a whole object
    with pytest.raises(ValidationError, match="must equal oversized"):
        payload(WHOLE, MARKER)  # a whole object claimed to be reduced


def test_an_ordinary_observation_has_no_oversized_field_on_the_wire() -> None:
    assert "oversized" not in payload(WHOLE, None).model_dump(mode="json")
    assert payload(reduced_object(WHOLE, oversized=MARKER), MARKER).model_dump(mode="json")[
        "oversized"
    ] == {"sizeBytes": 1_153_433, "limitBytes": 1_048_576}
