"""Kueue ClusterQueues as the planner observes them, for tests of where quota goes."""

from __future__ import annotations

from typing import Any


def cohort_queue(name: str, cohort: str, **flavors: dict[str, int]) -> dict[str, Any]:
    """A ClusterQueue of ``cohort`` with 8 AMD GPUs in each of ``flavors``, in that order,
    each with its own limits (``lendingLimit``, ``borrowingLimit``, or another
    ``nominalQuota``)."""
    listed = [
        {"name": flavor, "resources": [{"name": "amd.com/gpu", "nominalQuota": 8, **limits}]}
        for flavor, limits in flavors.items()
    ]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": name, "uid": f"cq-{name}"},
        "spec": {
            "cohort": cohort,
            "resourceGroups": [{"coveredResources": ["amd.com/gpu"], "flavors": listed}],
        },
    }
