"""A Model plan's scale, carried out through the scale subresource: set while the replicas
are those the decision started from, left alone once someone else moved them. Against the
fake API server, which serves the Model's scale subresource as a real one does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kaiwo_contracts.plans import Plan, ScaleIntent
from kaiwo_kube import resources
from kaiwo_kubefake import ResourceKind, ScalePaths

from tests.unit.executor.conftest import MODEL_NAMESPACE, FlakyKube, Harness, model_owner_harness

MODEL = ResourceKind(
    group="kubeai.org",
    version="v1",
    plural="models",
    kind="Model",
    namespaced=True,
    scale=ScalePaths(spec_replicas_path=".spec.replicas", status_replicas_path=".status.all"),
)
NAMESPACE = MODEL_NAMESPACE


def model_harness(tmp_path: Path, spec: dict[str, Any]) -> AsyncIterator[Harness]:
    return model_owner_harness(tmp_path, kind=MODEL, metadata={}, spec=spec)


@pytest.fixture
async def at_zero(tmp_path: Path) -> AsyncIterator[Harness]:
    """A Model whose spec has no replicas (as created by most users)."""
    async for harness in model_harness(tmp_path, {}):
        yield harness


@pytest.fixture
async def at_two(tmp_path: Path) -> AsyncIterator[Harness]:
    async for harness in model_harness(tmp_path, {"replicas": 2}):
        yield harness


def scaled(harness: Harness, *, from_replicas: int, replicas: int) -> Plan:
    return Plan(
        owner=harness.owner,
        scale=ScaleIntent(target=harness.owner, replicas=replicas, from_replicas=from_replicas),
    )


def replicas_of(harness: Harness) -> Any:
    found = harness.find("kubeai.org/v1", "Model", "llm", namespace=NAMESPACE)
    assert found is not None
    return found["spec"].get("replicas")


def scale_actions(execution: Any) -> list[tuple[str, str | None]]:
    return [(a.outcome, a.reason) for a in execution.actions if a.operation == "scale"]


async def test_a_model_without_replicas_is_scaled_from_zero(at_zero: Harness) -> None:
    execution = await at_zero.run(scaled(at_zero, from_replicas=0, replicas=1), plan_id="p1")

    assert replicas_of(at_zero) == 1
    assert scale_actions(execution) == [("applied", "replicas 0 -> 1")]


async def test_a_model_is_scaled_from_the_replicas_the_decision_started_from(
    at_two: Harness,
) -> None:
    execution = await at_two.run(scaled(at_two, from_replicas=2, replicas=5), plan_id="p1")
    assert replicas_of(at_two) == 5
    assert scale_actions(execution) == [("applied", "replicas 2 -> 5")]

    # Another plan still carrying the scale (made before the new replicas were observed).
    again = await at_two.run(
        scaled(at_two, from_replicas=2, replicas=5).model_copy(update={"status": {"x": 1}}),
        plan_id="p2",
    )
    assert scale_actions(again) == [("unchanged", "already at 5 replicas")]


async def test_replicas_someone_else_changed_are_left_to_the_next_decision(
    at_two: Harness,
) -> None:
    execution = await at_two.run(scaled(at_two, from_replicas=1, replicas=4), plan_id="p1")

    assert replicas_of(at_two) == 2
    assert scale_actions(execution) == [
        (
            "unchanged",
            "no longer at the 1 replicas the decision started from; left to the next decision",
        )
    ]


async def test_a_change_between_the_read_and_the_patch_is_not_overwritten(
    at_two: Harness,
) -> None:
    flaky = FlakyKube(at_two.kube)
    original_get = at_two.kube.get
    reads = 0

    async def get_then_scale_by_hand(*args: Any, **kwargs: Any) -> dict[str, Any]:
        nonlocal reads
        found = await original_get(*args, **kwargs)
        reads += 1
        if reads == 1:  # someone scales the Model right after the executor read it
            await at_two.kube.merge_patch(
                resources.KUBEAI_MODEL, "llm", {"spec": {"replicas": 7}}, namespace=NAMESPACE
            )
        return found

    flaky.get = get_then_scale_by_hand  # type: ignore[method-assign]
    execution = await at_two.run(
        scaled(at_two, from_replicas=2, replicas=4),
        plan_id="p1",
        executor=at_two.executor(kube=flaky),
    )

    assert replicas_of(at_two) == 7
    assert [outcome for outcome, _ in scale_actions(execution)] == ["unchanged"]


def decided_at(harness: Harness, *, generation: int, from_replicas: int, replicas: int) -> Plan:
    """The scale as the planner plans it: from the Model's generation it observed."""
    return scaled(harness, from_replicas=from_replicas, replicas=replicas).model_copy(
        update={"observed_generation": generation}
    )


def generation_of(harness: Harness) -> int:
    found = harness.find("kubeai.org/v1", "Model", "llm", namespace=NAMESPACE)
    assert found is not None
    generation = found["metadata"]["generation"]
    assert isinstance(generation, int)
    return generation


async def disable_autoscaling(harness: Harness) -> None:
    await harness.kube.merge_patch(
        resources.KUBEAI_MODEL, "llm", {"spec": {"autoscalingDisabled": True}}, namespace=NAMESPACE
    )


async def test_autoscaling_disabled_between_the_read_and_the_patch_is_not_overwritten(
    at_two: Harness,
) -> None:
    """The user sets ``autoscalingDisabled`` (``replicas`` untouched) in the instant between
    the executor's read of the Model and its scale: the patch must not land."""
    planned = generation_of(at_two)
    assert planned == 1
    flaky = FlakyKube(at_two.kube)
    original_get = at_two.kube.get
    reads = 0

    async def get_then_disable(*args: Any, **kwargs: Any) -> dict[str, Any]:
        nonlocal reads
        found = await original_get(*args, **kwargs)
        reads += 1
        if reads == 1:
            await disable_autoscaling(at_two)
        return found

    flaky.get = get_then_disable  # type: ignore[method-assign]
    execution = await at_two.run(
        decided_at(at_two, generation=planned, from_replicas=2, replicas=4),
        plan_id="p1",
        executor=at_two.executor(kube=flaky),
    )

    assert replicas_of(at_two) == 2
    assert scale_actions(execution) == [
        (
            "unchanged",
            "the spec changed since the decision (generation 1); left to the next decision",
        )
    ]


async def test_a_model_whose_spec_moved_since_the_plan_is_not_scaled(at_two: Harness) -> None:
    planned = generation_of(at_two)
    await disable_autoscaling(at_two)

    execution = await at_two.run(
        decided_at(at_two, generation=planned, from_replicas=2, replicas=4), plan_id="p1"
    )

    assert replicas_of(at_two) == 2
    assert [outcome for outcome, _ in scale_actions(execution)] == ["unchanged"]


async def test_a_status_write_between_the_read_and_the_patch_is_read_again_and_scaled(
    at_two: Harness,
) -> None:
    """Only the resourceVersion moved (a status write, not the spec): the scale is tried
    again from a fresh read and holds."""
    planned = generation_of(at_two)
    flaky = FlakyKube(at_two.kube)
    original_get = at_two.kube.get
    reads = 0

    async def get_then_write_status(*args: Any, **kwargs: Any) -> dict[str, Any]:
        nonlocal reads
        found = await original_get(*args, **kwargs)
        reads += 1
        if reads == 1:
            await at_two.kube.patch_status(
                resources.KUBEAI_MODEL,
                "llm",
                {"replicas": {"all": 2}},
                namespace=NAMESPACE,
                field_manager="someone",
                method="merge",
            )
        return found

    flaky.get = get_then_write_status  # type: ignore[method-assign]
    execution = await at_two.run(
        decided_at(at_two, generation=planned, from_replicas=2, replicas=4),
        plan_id="p1",
        executor=at_two.executor(kube=flaky),
    )

    assert replicas_of(at_two) == 4
    assert [
        (a.outcome, a.reason, a.attempts) for a in execution.actions if a.operation == "scale"
    ] == [("applied", "replicas 2 -> 4", 2)]


# ------------------------------------------------ an unset spec.replicas written down (0223)


def written_down(harness: Harness) -> Plan:
    """The bounds' write-back of an unset ``spec.replicas`` with ``minReplicas`` 0, as the
    planner plans it: 0 from 0."""
    return decided_at(harness, generation=generation_of(harness), from_replicas=0, replicas=0)


async def test_an_unset_replicas_is_written_down_once(at_zero: Harness) -> None:
    execution = await at_zero.run(written_down(at_zero), plan_id="p1")
    assert replicas_of(at_zero) == 0
    assert scale_actions(execution) == [("applied", "replicas unset -> 0")]

    again = await at_zero.run(
        written_down(at_zero).model_copy(update={"status": {"x": 1}}), plan_id="p2"
    )
    assert scale_actions(again) == [("unchanged", "already at 0 replicas")]


@pytest.mark.parametrize("set_to", [0, 3])
async def test_replicas_set_since_the_plan_are_never_overwritten(
    tmp_path: Path, set_to: int
) -> None:
    async for harness in model_harness(tmp_path, {}):
        plan = written_down(harness)
        await harness.kube.merge_patch(
            resources.KUBEAI_MODEL, "llm", {"spec": {"replicas": set_to}}, namespace=NAMESPACE
        )
        execution = await harness.run(plan, plan_id="p1")
        assert replicas_of(harness) == set_to
        assert scale_actions(execution) == [
            ("unchanged", "already at 0 replicas")
            if set_to == 0
            else ("unchanged", "set by someone else since the plan; left as set")
        ]


async def test_replicas_set_between_the_read_and_the_write_down_stand(at_zero: Harness) -> None:
    plan = written_down(at_zero)
    flaky = FlakyKube(at_zero.kube)
    original_get = at_zero.kube.get
    reads = 0

    async def get_then_set(*args: Any, **kwargs: Any) -> dict[str, Any]:
        nonlocal reads
        found = await original_get(*args, **kwargs)
        reads += 1
        if reads == 1:  # the user's apply lands right after the executor read the Model
            await at_zero.kube.merge_patch(
                resources.KUBEAI_MODEL, "llm", {"spec": {"replicas": 2}}, namespace=NAMESPACE
            )
        return found

    flaky.get = get_then_set  # type: ignore[method-assign]
    execution = await at_zero.run(plan, plan_id="p1", executor=at_zero.executor(kube=flaky))

    assert replicas_of(at_zero) == 2
    assert scale_actions(execution) == [
        ("unchanged", "set by someone else since the plan; left as set")
    ]
