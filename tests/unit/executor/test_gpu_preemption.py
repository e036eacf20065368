"""A GpuWorkload's plan preempting the workload it names (decision 0047), carried out against
the fake API server: a Job deleted, a Deployment's replicas set to 0 by a JSON patch of the
object itself (its uid and replicas as tests), one scaled by someone else meanwhile left to
the next decision. Admission (opt-in, the named workload) is tested on its own
(tests/unit/contracts/test_gpu_workload_confinement.py) and on the real API server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kaiwo_contracts.plans import ObjectRef, Plan, PreemptIntent
from kaiwo_executor.step_outcomes import STATUS_FIRST
from kaiwo_kube import resources
from kaiwo_kubefake import ResourceKind

from tests.unit.executor.conftest import FlakyKube, Harness, owner_harness

GPU_WORKLOAD = ResourceKind(
    group="kaiwo.silogen.ai",
    version="v1alpha1",
    plural="gpuworkloads",
    kind="GpuWorkload",
    namespaced=True,
)
NAMESPACE = "team-a"
OPTED_IN = {"kaiwo.silogen.ai/gpu-preemption.policy": "Always"}


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    record = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "GpuWorkload",
        "metadata": {"name": "deployment-serve-0", "namespace": NAMESPACE},
        "spec": {"workloadRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "serve"}},
    }
    async for found in owner_harness(tmp_path, kinds=(GPU_WORKLOAD,), owner=record):
        yield found


async def serve(harness: Harness, replicas: int) -> dict[str, Any]:
    labels = {"app": "serve"}
    return await harness.kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "serve", "namespace": NAMESPACE, "annotations": OPTED_IN},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "main", "image": "vllm"}]},
                },
            },
        }
    )


def preempting(harness: Harness, live: dict[str, Any], **intent: Any) -> Plan:
    meta = live["metadata"]
    target = ObjectRef(
        api_version=live["apiVersion"],
        kind=live["kind"],
        name=meta["name"],
        namespace=meta["namespace"],
        uid=meta["uid"],
    )
    return Plan(
        owner=harness.owner,
        status={"phase": "Preempting"},
        preempt=PreemptIntent(target=target, **intent),
    )


def preempt_actions(execution: Any) -> list[tuple[str, str | None]]:
    return [(a.outcome, a.reason) for a in execution.actions if a.operation == "preempt"]


async def test_a_deployment_is_scaled_to_zero_through_the_object_itself(harness: Harness) -> None:
    live = await serve(harness, replicas=2)
    plan = preempting(harness, live, action="scale-to-zero", from_replicas=2)

    kube = FlakyKube(harness.kube)  # counts the port's calls
    execution = await harness.run(plan, plan_id="p1", executor=harness.executor(kube=kube))

    found = harness.find("apps/v1", "Deployment", "serve", namespace=NAMESPACE)
    assert found is not None
    assert found["spec"]["replicas"] == 0
    assert found["spec"]["template"] == live["spec"]["template"]
    assert preempt_actions(execution) == [("applied", "replicas 2 -> 0")]
    assert (kube.calls["json_patch"], kube.calls["patch_scale"]) == (1, 0)

    # Asked again (the record still says Preempting): nothing more to do.
    again = await harness.run(plan.model_copy(update={"status": {"x": 1}}), plan_id="p2")
    assert preempt_actions(again) == [("unchanged", "already at 0 replicas")]


async def test_a_deployment_someone_scaled_meanwhile_is_left_to_the_next_decision(
    harness: Harness,
) -> None:
    live = await serve(harness, replicas=3)
    plan = preempting(harness, live, action="scale-to-zero", from_replicas=1)

    execution = await harness.run(plan, plan_id="p1")

    found = harness.find("apps/v1", "Deployment", "serve", namespace=NAMESPACE)
    assert found is not None and found["spec"]["replicas"] == 3
    assert preempt_actions(execution) == [
        (
            "unchanged",
            "no longer at the 1 replicas the decision started from; left to the next decision",
        )
    ]


async def train(harness: Harness) -> dict[str, Any]:
    return await harness.kube.create(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "train", "namespace": NAMESPACE, "annotations": OPTED_IN},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "train"}],
                    }
                }
            },
        }
    )


async def test_a_job_is_deleted(harness: Harness) -> None:
    job = await train(harness)

    execution = await harness.run(preempting(harness, job, action="delete"), plan_id="p1")

    assert harness.find("batch/v1", "Job", "train", namespace=NAMESPACE) is None
    assert [outcome for outcome, _ in preempt_actions(execution)] == ["deleted"]
    assert (await harness.kube.list(resources.JOB, namespace=NAMESPACE)).items == []


async def test_no_workload_goes_while_its_record_does_not_say_why(harness: Harness) -> None:
    """A preempting plan made from an older version of the record writes no status (the
    record changed meanwhile): its workload stays, or the record would still say Idle once it
    is gone, and the planner, finding GPUs freed by a deletion it cannot explain, would
    preempt another workload for the same demand (seen on the real stack). The plan of the
    record's newer version preempts."""
    job = await train(harness)
    record = harness.find("kaiwo.silogen.ai/v1alpha1", "GpuWorkload", "deployment-serve-0")
    assert record is not None
    planned_from = record["metadata"]["resourceVersion"]
    await harness.kube.patch_status(
        resources.GPU_WORKLOAD,
        "deployment-serve-0",
        {"phase": "Idle"},
        namespace=NAMESPACE,
        field_manager="kaiwo-status",
    )
    late = preempting(harness, job, action="delete").model_copy(
        update={"observed_resource_version": planned_from}
    )

    execution = await harness.run(late, plan_id="p1")

    assert harness.find("batch/v1", "Job", "train", namespace=NAMESPACE) is not None
    assert preempt_actions(execution) == [("unchanged", STATUS_FIRST)]

    current = harness.find("kaiwo.silogen.ai/v1alpha1", "GpuWorkload", "deployment-serve-0")
    assert current is not None
    newer = preempting(harness, job, action="delete").model_copy(
        update={"observed_resource_version": current["metadata"]["resourceVersion"]}
    )
    execution = await harness.run(newer, plan_id="p2")

    assert harness.find("batch/v1", "Job", "train", namespace=NAMESPACE) is None
    assert [outcome for outcome, _ in preempt_actions(execution)] == ["deleted"]
