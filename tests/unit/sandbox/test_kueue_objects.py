"""How the simulated Kueue reads Kueue objects and names Workloads (expected by hand)."""

from __future__ import annotations

from decimal import Decimal

from kaiwo_sandbox.admission import ClusterQueue, FlavorQuota, ResourceGroup
from kaiwo_sandbox.kueue import cluster_queue, owner_finished, workload_name


def test_a_cluster_queue_object_becomes_its_quota() -> None:
    obj = {
        "metadata": {"name": "team-nlp"},
        "spec": {
            "queueingStrategy": "StrictFIFO",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "amd.com/gpu"],
                    "flavors": [
                        {
                            "name": "mi300x",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "192"},
                                {"name": "amd.com/gpu", "nominalQuota": 16},
                            ],
                        }
                    ],
                }
            ],
        },
    }
    assert cluster_queue(obj) == ClusterQueue(
        name="team-nlp",
        groups=(
            ResourceGroup(
                covered=frozenset({"cpu", "amd.com/gpu"}),
                flavors=(FlavorQuota("mi300x", {"cpu": Decimal(192), "amd.com/gpu": Decimal(16)}),),
            ),
        ),
        strict_fifo=True,
    )


def test_workload_names_follow_kueue() -> None:
    job = {"kind": "Job", "metadata": {"name": "train", "uid": "3f2a9c1e-0000"}}
    assert workload_name(job) == "job-train-3f2a9"


def test_when_an_owner_is_finished() -> None:
    complete = {"kind": "Job", "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    running = {"kind": "Job", "status": {"active": 1}}
    ray_done = {"kind": "RayJob", "status": {"jobStatus": "SUCCEEDED"}}
    ray_running = {"kind": "RayJob", "status": {"jobStatus": "RUNNING"}}
    assert [owner_finished(o) for o in (complete, running, ray_done, ray_running)] == [
        True,
        False,
        True,
        False,
    ]
