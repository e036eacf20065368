"""Objects as the API server returns them (timestamps, status) validate cleanly."""

from __future__ import annotations

import pytest
from kaiwo_contracts.validation import Problem, validate_manifest

STAMPED = {
    "metadata": {"name": "a", "namespace": "team-a", "creationTimestamp": "2026-01-01T00:00:00Z"},
}


@pytest.mark.parametrize(
    ("api_version", "kind", "extra"),
    [
        (
            "kaiwo.silogen.ai/v1alpha1",
            "KaiwoJob",
            {"status": {"startTime": "2026-01-01T00:01:00Z"}},
        ),
        ("kaiwo.silogen.ai/v1alpha1", "KaiwoService", {}),
        ("kaiwo.silogen.ai/v1alpha1", "KaiwoQueueConfig", {}),
        ("config.kaiwo.silogen.ai/v1alpha1", "KaiwoConfig", {}),
        ("kubeai.org/v1", "Model", {"spec": {"url": "hf://org/m", "engine": "VLLM"}}),
    ],
)
def test_timestamps_from_the_api_server_are_accepted(
    api_version: str, kind: str, extra: dict[str, object]
) -> None:
    document = {"apiVersion": api_version, "kind": kind, **STAMPED, **extra}
    assert validate_manifest(document) == []


def test_a_malformed_timestamp_is_still_named() -> None:
    document = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": "a", "creationTimestamp": "yesterday"},
    }
    assert validate_manifest(document) == [
        Problem(
            "metadata.creationTimestamp", "must be a date and time such as 2025-01-31T12:00:00Z"
        )
    ]
