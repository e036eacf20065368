"""A preemption for idleness the planner published counts as under way in every decision it
makes until the victim's new status is observed (``PlanDecidedV1.preempting``): on the real
stack, a decision made in the moment before the first victim's status came back, from a
second holder's newer reading, chose that holder too for the same demand."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kaiwo_planner.domain.planning import PlanningResult
from kaiwo_planner.domain.state.planning_context import PlanningContext

KAIWO = "kaiwo.silogen.ai/v1alpha1"
IDLE_PREEMPTION = {
    "type": "WorkloadTerminatedEarly",
    "status": "True",
    "reason": "GpuIdlePreemption",
    "message": "Preempted to free 2 amd GPU(s) for pending workload KaiwoJob/team-a/waits",
}
TERMINATING = {"status": "TERMINATING", "conditions": [IDLE_PREEMPTION]}


def holder(name: str, status: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": KAIWO,
        "kind": "KaiwoJob",
        "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}", "generation": 1},
        "spec": {"image": "busybox", "gpus": 2},
        "status": dict(status),
    }


async def test_a_published_preemption_is_under_way_until_its_status_comes_back(
    harness: Any, build: Any
) -> None:
    seen: list[tuple[str, frozenset[str]]] = []

    def plan_fn(
        *, owner: Mapping[str, Any], context: PlanningContext, now: datetime
    ) -> PlanningResult:
        name = owner["metadata"]["name"]
        seen.append((name, context.preempting))
        result: PlanningResult = build.toy_planner(owner=owner, context=context, now=now)
        if name == "first" and result.plan is not None:
            preempted = result.plan.model_copy(update={"status": TERMINATING})
            return PlanningResult(plan=preempted)
        return result

    service = harness.service(plan_fn=plan_fn)
    await service.start()
    await harness.observe(holder("first", {"status": "RUNNING"}), "1", "ADDED")
    await harness.drain(service)
    await harness.observe(holder("second", {"status": "RUNNING"}), "2", "ADDED")
    await harness.drain(service)

    assert seen == [("first", frozenset()), ("second", frozenset({"uid-first"}))]
    first_plan, second_plan = harness.plans()
    assert first_plan.data.preempting == ()
    assert second_plan.data.preempting == ("uid-first",)

    # The executor's write comes back: no longer under way.
    await harness.observe(holder("first", TERMINATING), "3")
    await harness.drain(service)
    await harness.observe(holder("second", {"status": "RUNNING", "x": 1}), "4")
    await harness.drain(service)
    assert seen[2:] == [("first", frozenset()), ("second", frozenset())]
    assert harness.plans()[-1].data.preempting == ()


DURATION_PREEMPTION = {
    "type": "WorkloadTerminatedEarly",
    "status": "False",
    "reason": "DurationExceededWithActiveGpuDemand",
    "message": "Terminated since duration was exceeded and there is active GPU demand",
}


async def test_a_published_duration_preemption_is_under_way_until_its_status_comes_back(
    harness: Any, build: Any
) -> None:
    """Decision 0148: a workload terminated for a waiting one because its duration ran out
    frees GPUs for that one from the moment the plan is published, as one preempted for
    idleness does; before, the decisions made meanwhile saw it running."""
    seen: list[tuple[str, frozenset[str]]] = []
    terminating = {"status": "TERMINATING", "conditions": [DURATION_PREEMPTION]}

    def plan_fn(
        *, owner: Mapping[str, Any], context: PlanningContext, now: datetime
    ) -> PlanningResult:
        name = owner["metadata"]["name"]
        seen.append((name, context.preempting))
        result: PlanningResult = build.toy_planner(owner=owner, context=context, now=now)
        if name == "overtime" and result.plan is not None:
            return PlanningResult(plan=result.plan.model_copy(update={"status": terminating}))
        return result

    service = harness.service(plan_fn=plan_fn)
    await service.start()
    await harness.observe(holder("overtime", {"status": "RUNNING"}), "1", "ADDED")
    await harness.drain(service)
    await harness.observe(holder("other", {"status": "RUNNING"}), "2", "ADDED")
    await harness.drain(service)

    assert seen == [("overtime", frozenset()), ("other", frozenset({"uid-overtime"}))]
    assert harness.plans()[-1].data.preempting == ("uid-overtime",)

    await harness.observe(holder("overtime", terminating), "3")
    await harness.drain(service)
    await harness.observe(holder("other", {"status": "RUNNING", "x": 1}), "4")
    await harness.drain(service)
    assert seen[2:] == [("overtime", frozenset()), ("other", frozenset())]
