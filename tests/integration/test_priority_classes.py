"""A workload naming a PriorityClass that does not exist yet waits in ERROR, saying which field;
once the platform team creates it, the workload's pods are given it (decision 0045). On the
real API server the Job is accepted with the pod template naming the PriorityClass."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_kube import resources

from tests.integration.conftest import FAKE_SQLITE, real_sqlite
from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pipeline

pytestmark = [pytest.mark.nats, pytest.mark.slow]

NAME = "prioritised"


def priority_class(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": 1000,
        "description": "test",
    }


@pytest.mark.parametrize("pipeline", [FAKE_SQLITE, real_sqlite()], indirect=True)
async def test_a_missing_priority_class_is_waited_for_then_given_to_the_pods(
    pipeline: Pipeline,
) -> None:
    kube, namespace = pipeline.kube, pipeline.namespace
    name = f"urgent-{namespace}"  # cluster-scoped: one per test's namespace
    job = actors.training_job(NAME, namespace=namespace, download=False)
    job["spec"]["priorityClass"] = name
    await kube.create(job)

    waiting = await pipeline.reaches(NAME, "ERROR")
    schedulable = next(c for c in waiting["status"]["conditions"] if c["type"] == "Schedulable")
    assert schedulable["reason"] == "PriorityClassNotFound"
    assert f"spec.priorityClass '{name}'" in schedulable["message"]
    assert await pipeline.child(resources.JOB, NAME) is None

    await kube.create(priority_class(name))
    try:
        child = await pipeline.appears(resources.JOB, NAME)
        await pipeline.reaches(NAME, "PENDING")
        assert child["spec"]["template"]["spec"]["priorityClassName"] == name
        assert "kueue.x-k8s.io/priority-class" not in child["metadata"]["labels"]
    finally:
        await kube.delete(resources.PRIORITY_CLASS, name)
