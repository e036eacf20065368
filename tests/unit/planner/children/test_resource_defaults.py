"""Resource defaults never leave a limit below its request (the API server rejects such pods)."""

from __future__ import annotations

from typing import Any

from kaiwo_planner.domain.children.resources import (
    Resources,
    fill_resources,
    main_container_defaults,
)


def defaults(
    user_resources: dict[str, Any] | None, *, gpus: int = 0, generated: bool = True
) -> Resources:
    return main_container_defaults(
        user_resources=user_resources,
        gpus_per_replica=gpus,
        gpu_key="amd.com/gpu",
        generated_template=generated,
    )


def test_a_container_request_above_the_default_limit_raises_that_limit() -> None:
    # The qwen-chat example: the user's Deployment asks for 8 CPUs and 64Gi, no limits.
    container = {"requests": {"cpu": "8", "memory": "64Gi"}}
    filled = fill_resources(container, defaults(None, gpus=1, generated=False))
    assert filled == {
        "requests": {"cpu": "8", "memory": "64Gi", "amd.com/gpu": "1"},
        "limits": {"cpu": "8", "memory": "64Gi", "amd.com/gpu": "1"},
    }


def test_a_spec_limit_below_the_base_request_lowers_the_request() -> None:
    assert defaults({"limits": {"memory": "1Gi"}}) == {
        "requests": {"cpu": "2", "memory": "1Gi"},
        "limits": {"cpu": "2", "memory": "1Gi"},
    }


def test_a_spec_request_above_the_base_limit_raises_the_limit() -> None:
    assert defaults({"requests": {"cpu": "8", "memory": "500Mi"}}) == {
        "requests": {"cpu": "8", "memory": "500Mi"},
        "limits": {"cpu": "8", "memory": "16Gi"},
    }


def test_a_container_limit_below_a_filled_request_lowers_the_request() -> None:
    container = {"limits": {"cpu": "500m"}}
    assert fill_resources(container, defaults(None)) == {
        "limits": {"cpu": "500m", "memory": "16Gi"},
        "requests": {"cpu": "500m", "memory": "16Gi"},
    }


def test_a_pair_the_user_gave_both_halves_of_stays_as_written() -> None:
    container = {"requests": {"cpu": "4"}, "limits": {"cpu": "2"}}
    assert fill_resources(container, defaults(None)) == {
        "requests": {"cpu": "4", "memory": "16Gi"},
        "limits": {"cpu": "2", "memory": "16Gi"},
    }


def test_quantities_compare_by_value_not_by_text() -> None:
    container = {"requests": {"cpu": "1500m", "memory": "0.5Gi"}}
    assert fill_resources(container, defaults(None)) == {
        "requests": {"cpu": "1500m", "memory": "0.5Gi"},
        "limits": {"cpu": "2", "memory": "16Gi"},
    }
