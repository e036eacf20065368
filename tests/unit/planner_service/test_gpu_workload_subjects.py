"""The root of a GPU workload no Kaiwo kind owns plans the creation of its GpuWorkload
(decision 0047): that plan's owner is the GpuWorkload, which has no uid yet, so it goes out on
the GpuWorkload's plan subject with the root's uid standing for it, as the executor's subject
check requires (it refused the root's subject as ``wrong-subject``). The real planner."""

from __future__ import annotations

from typing import Any

from kaiwo_contracts.events.decoding import check_subject
from kaiwo_contracts.events.streams import PLAN_STREAM
from kaiwo_planner.domain.planning import plan_object

OPT_IN = {"kaiwo.silogen.ai/gpu-preemption.policy": "Always"}


def gpu_job() -> dict[str, Any]:
    gpu = {"limits": {"amd.com/gpu": "1"}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": "0123abcd-job",
            "annotations": OPT_IN,
        },
        "spec": {"template": {"spec": {"containers": [{"name": "main", "resources": gpu}]}}},
    }


async def test_a_roots_plan_goes_out_under_its_gpu_workloads_subject(harness: Any) -> None:
    service = harness.service(plan_fn=plan_object)
    await service.start()
    await harness.observe(gpu_job(), "10", "ADDED")
    assert await harness.drain(service) == 1

    [plan] = harness.plans()
    assert plan.data.plan.owner.kind == "GpuWorkload"
    assert plan.data.plan.owner.name == "job-train-0123abcd"
    assert plan.data.plan.create_only is True
    assert plan.subject == "team-a/job-train-0123abcd"
    assert plan.correlationid == "0123abcd-job"
    [stored] = harness.server.stream_messages(PLAN_STREAM)
    assert stored.subject == "kaiwo.plan.gpuworkload.team-a.0123abcd-job"
    check_subject(stored.subject, plan)  # what the executor's decoder checks
