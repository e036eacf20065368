"""The ``ApplyRefused`` condition the executor adds to a status (pure); expected by hand."""

from __future__ import annotations

from datetime import UTC, datetime

from kaiwo_contracts.plans import ObjectRef
from kaiwo_executor.apply_refusals import Refusal, with_refusals

NOW = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)
READY = {"type": "Ready", "status": "False", "reason": "KueueObjectsPending", "message": "m"}


def refusal(name: str, *, reason: str = "Invalid") -> Refusal:
    return Refusal(
        target=ObjectRef(api_version="kueue.x-k8s.io/v1beta1", kind="ResourceFlavor", name=name),
        reason=reason,
        message=f'ResourceFlavor.kueue.x-k8s.io "{name}" is invalid: spec: Invalid value: '
        '"object": at least one nodeLabel is required when topology is set',
    )


def test_a_refusal_becomes_a_condition_naming_the_object_and_quoting_the_server() -> None:
    status = with_refusals({"status": "PENDING", "conditions": [READY]}, [refusal("gpu")], now=NOW)
    assert status == {
        "status": "PENDING",
        "conditions": [
            READY,
            {
                "type": "ApplyRefused",
                "status": "True",
                "lastTransitionTime": "2026-01-01T12:00:30Z",
                "reason": "Invalid",
                "message": "the API server refused: ResourceFlavor gpu: "
                'ResourceFlavor.kueue.x-k8s.io "gpu" is invalid: spec: Invalid value: "object": '
                "at least one nodeLabel is "
                "required when topology is set",
            },
        ],
    }


def test_the_condition_keeps_its_time_while_it_holds_and_goes_without_refusals() -> None:
    earlier = with_refusals({"status": "PENDING"}, [refusal("gpu")], now=NOW)
    later = with_refusals(earlier, [refusal("gpu"), refusal("cpu")], now=NOW.replace(hour=13))
    [condition] = later["conditions"]
    assert condition["lastTransitionTime"] == "2026-01-01T12:00:30Z"
    assert condition["message"].count("ResourceFlavor.kueue.x-k8s.io") == 2
    assert with_refusals(later, [], now=NOW) == {"status": "PENDING", "conditions": []}
    assert with_refusals({"status": "READY"}, [], now=NOW) == {"status": "READY"}


def test_a_reason_a_condition_cannot_carry_is_replaced_and_more_are_counted() -> None:
    refusals = [refusal(f"f{n}", reason="" if n == 0 else "Forbidden") for n in range(5)]
    [condition] = with_refusals({}, refusals, now=NOW)["conditions"]
    assert condition["reason"] == "Refused"
    assert condition["message"].endswith("; and 2 more")
