"""The GPUs a running workload holds, as preemption counts them: the same numbers its
allocation gives its pods (decisions 0111 and 0113)."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_planner.domain.settings.cluster_settings import requested_gpus


def workload(kind: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": kind, "spec": spec}


@pytest.mark.parametrize(
    ("obj", "held"),
    [
        # A batch Job runs one pod: all of gpus, or gpusPerReplica; replicas does not count.
        (workload("KaiwoJob", gpus=16), 16),
        (workload("KaiwoJob", gpus=16, replicas=2), 16),
        (workload("KaiwoJob", replicas=2, gpusPerReplica=4), 4),
        (workload("KaiwoJob", replicas=0, gpusPerReplica=4), 4),
        # A Ray job: its worker groups.
        (workload("KaiwoJob", ray=True, replicas=2, gpusPerReplica=4), 8),
        (workload("KaiwoJob", rayJob={}, replicas=3, gpusPerReplica=2), 6),
        (workload("KaiwoJob", ray=True, gpus=16), 16),
        # A service: its replicas; paused (replicas 0), none.
        (workload("KaiwoService", replicas=4, gpus=8), 8),
        (workload("KaiwoService", replicas=3, gpusPerReplica=2), 6),
        (workload("KaiwoService", replicas=0, gpus=8), 0),
        (workload("KaiwoService", replicas=0, gpusPerReplica=2), 0),
        (workload("KaiwoService", ray=True, gpus=4), 4),
        (workload("KaiwoService"), 0),
        # What the wire does not say as a whole number counts as absent.
        (workload("KaiwoService", gpus="8"), 0),
        ({"kind": "KaiwoService"}, 0),
    ],
)
def test_a_workload_holds_what_its_allocation_gives_its_pods(
    obj: dict[str, Any], held: int
) -> None:
    assert requested_gpus(obj) == held
