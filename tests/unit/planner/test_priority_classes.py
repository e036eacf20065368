"""A workload's ``priorityClass`` (decision 0045): the pods' PriorityClass as the API reference
says, Kueue's WorkloadPriorityClass label as upstream does, and an ERROR naming the field when
it names neither."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.priority_classes import (
    NO_PRIORITY,
    KnownPriorityClasses,
    PriorityChoice,
    choose_priority,
)

from tests.planning_calls import planned
from tests.unit.planner.test_planning import kaiwo_job, queue_config

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


@pytest.mark.parametrize(
    ("name", "kubernetes", "kueue", "expected"),
    [
        ("", set(), set(), NO_PRIORITY),
        ("urgent", {"urgent"}, set(), PriorityChoice(pod_priority_class="urgent")),
        ("high", set(), {"high"}, PriorityChoice(kueue_priority_class="high")),
        ("both", {"both"}, {"both"}, PriorityChoice("both", "both")),
        ("missing", {"urgent"}, {"high"}, None),
    ],
)
def test_a_name_goes_where_something_of_that_name_exists(
    name: str, kubernetes: set[str], kueue: set[str], expected: PriorityChoice | None
) -> None:
    known = KnownPriorityClasses(kubernetes=frozenset(kubernetes), kueue=frozenset(kueue))
    assert choose_priority(name, known) == expected


def priority_class(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name, "uid": f"pc-{name}"},
        "value": 1000,
    }


def queues_with_priority(name: str) -> dict[str, Any]:
    config = queue_config({"name": "kaiwo"})
    config["spec"]["workloadPriorityClasses"] = [{"metadata": {"name": name}, "value": 100}]
    return config


def plan_of(*objects: dict[str, Any], queues: dict[str, Any] | None = None) -> Any:
    owner = kaiwo_job({"user": "a@example.com", "image": "busybox", "priorityClass": "urgent"})
    cluster = ClusterState.from_wire(
        objects=[queues or queue_config({"name": "kaiwo"}), *objects], namespaces=["team-a"]
    )
    plan = planned(owner=owner, cluster=cluster, now=NOW)
    assert plan is not None
    return plan


def batch_job(plan: Any) -> dict[str, Any]:
    job: dict[str, Any] = next(m for m in plan.desired if m["kind"] == "Job")
    return job


def test_a_kubernetes_priority_class_goes_to_the_pods() -> None:
    job = batch_job(plan_of(priority_class("urgent")))
    assert job["spec"]["template"]["spec"]["priorityClassName"] == "urgent"
    assert PRIORITY_LABEL not in job["metadata"]["labels"]


def test_a_workload_priority_class_of_the_queue_config_becomes_kueues_label() -> None:
    job = batch_job(plan_of(queues=queues_with_priority("urgent")))
    assert job["metadata"]["labels"][PRIORITY_LABEL] == "urgent"
    assert "priorityClassName" not in job["spec"]["template"]["spec"]


def test_a_name_that_is_both_goes_to_both() -> None:
    job = batch_job(plan_of(priority_class("urgent"), queues=queues_with_priority("urgent")))
    assert job["spec"]["template"]["spec"]["priorityClassName"] == "urgent"
    assert job["metadata"]["labels"][PRIORITY_LABEL] == "urgent"


def test_a_name_of_nothing_waits_in_error_naming_the_field() -> None:
    plan = plan_of(priority_class("other"))
    assert [m for m in plan.desired if m["kind"] == "Job"] == []
    assert plan.status["status"] == "ERROR"
    schedulable = next(c for c in plan.status["conditions"] if c["type"] == "Schedulable")
    assert schedulable["status"] == "False"
    assert schedulable["reason"] == "PriorityClassNotFound"
    assert "spec.priorityClass 'urgent'" in schedulable["message"]
