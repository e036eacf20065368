"""The stream a recorded message belongs to: the workload's, a cluster object's, a consumer's."""

from __future__ import annotations

import pytest
from kaiwo_recorder.stream_ids import stream_id_for

JOB = "0b7c0a5e-1111-4c1e-9d0a-3f2e8a9c7d01"
POD = "5d1e6f70-2222-4a3b-8c9d-0e1f2a3b4c5d"
NODE = "7f3e9c2a-3333-4b7d-8c55-0e1d2f3a4b5c"


@pytest.mark.parametrize(
    ("nats_subject", "correlation", "name", "expected"),
    [
        # the workload itself, its plans, results and monitor findings
        (f"kaiwo.obs.kaiwojob.team-a.{JOB}", JOB, "train", f"workload/{JOB}"),
        (f"kaiwo.plan.kaiwojob.team-a.{JOB}", JOB, "train", f"workload/{JOB}"),
        (f"kaiwo.res.failed.kaiwojob.team-a.{JOB}", JOB, "train", f"workload/{JOB}"),
        (f"kaiwo.mon.preemption.team-a.{JOB}", JOB, "train", f"workload/{JOB}"),
        # a child correlates with its workload
        (f"kaiwo.obs.pod.team-a.{POD}", JOB, "train-0", f"workload/{JOB}"),
        # partitioned form of the subject (one more token)
        (f"kaiwo.obs.pod.team-a.{POD}.3", JOB, "train-0", f"workload/{JOB}"),
        # cluster-scoped objects on their own: by kind and name
        (f"kaiwo.obs.node._cluster.{NODE}", NODE, "gpu-1.example.com", "node/gpu-1.example.com"),
        ("kaiwo.plan.kaiwoqueueconfig._cluster.q-uid", "q-uid", "kaiwo", "kaiwoqueueconfig/kaiwo"),
        # ... by uid when the message names nothing
        (f"kaiwo.obs.node._cluster.{NODE}", NODE, None, f"node/{NODE}"),
        # a cluster-scoped object owned by a workload goes with the workload
        ("kaiwo.obs.clusterrole._cluster.cr-uid", JOB, "reader", f"workload/{JOB}"),
        # a gateway replica's load reports, by replica; the autoscaler's decision, the Model's
        (
            "kaiwo.gateway.load._cluster.gw-7d9f_2F1",
            "gw-7d9f/1",
            None,
            "gateway/gw-7d9f/1",
        ),
        (f"kaiwo.gateway.scale.ai.{JOB}", JOB, "ai/llm", f"workload/{JOB}"),
        # dead letters and advisories: per consumer
        ("kaiwo.dlq.KAIWO_OBS.planner-obs", JOB, None, "deadletter/KAIWO_OBS/planner-obs"),
        (
            "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.KAIWO_PLAN.executor-plan",
            "x",
            None,
            "deadletter/KAIWO_PLAN/executor-plan",
        ),
        # not one of ours
        ("something.else", "x", None, "unrouted/KAIWO_OBS"),
    ],
)
def test_stream_rule(nats_subject: str, correlation: str, name: str | None, expected: str) -> None:
    assert (
        stream_id_for(
            nats_subject=nats_subject,
            nats_stream="KAIWO_OBS",
            correlation_id=correlation,
            name=name,
        )
        == expected
    )
