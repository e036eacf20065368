"""HTTP answers of the API server become the port's typed errors (bodies as kube-apiserver
v1.36 sends them)."""

from __future__ import annotations

from kaiwo_kube.errors import AlreadyExists, Conflict, Invalid, Retryable, error_from_status


def test_an_apply_of_an_undeclared_field_is_invalid_not_worth_retrying() -> None:
    status = {
        "kind": "Status",
        "status": "Failure",
        "message": "failed to create typed patch object (team-a/train; "
        "kaiwo.silogen.ai/v1alpha1, Kind=KaiwoJob): .spec.x: field not declared in schema",
        "code": 500,
    }
    error = error_from_status(code=500, status=status)
    assert type(error) is Invalid
    assert error.message.endswith(".spec.x: field not declared in schema")


def test_other_server_errors_and_throttling_are_retryable() -> None:
    assert type(error_from_status(code=500, status={"message": "etcdserver: timeout"})) is Retryable
    throttled = error_from_status(
        code=429, status={"details": {"retryAfterSeconds": 3}}, retry_after_header=None
    )
    assert isinstance(throttled, Retryable)
    assert throttled.retry_after == 3.0


def test_conflicts_and_already_exists_are_told_apart() -> None:
    assert type(error_from_status(code=409, status={"reason": "AlreadyExists"})) is AlreadyExists
    assert type(error_from_status(code=409, status={"reason": "Conflict"})) is Conflict
