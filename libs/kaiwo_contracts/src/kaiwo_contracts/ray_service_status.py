"""KubeRay's status of a RayService, as the planner's phases and the CLI's child lines read it.
Plain data, so that the CLI's quick commands read it without importing the API models.

KubeRay gives a RayService two Ray clusters: the one that serves, and the one it starts (the
service's first, or one to take an edit) until every Serve application on it runs and it is
promoted. A first deployment whose application fails stays on the started one for good, so a
reader of only the serving one misses it (decision 0186)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

SERVING_CLUSTER: Final = "activeServiceStatus"
STARTED_CLUSTER: Final = "pendingServiceStatus"
"""The status keys of the two clusters. Each has the cluster's name, its state and the
status of its Serve applications."""


@dataclass(frozen=True, slots=True)
class RayServiceCluster:
    """One of a RayService's Ray clusters, as its status tells it.

    ``serving``: whether it is the one that serves (else KubeRay starts it); ``state``: its
    ``rayClusterStatus.state`` ("" until KubeRay writes it); ``applications``: each Serve
    application's name and its status object, in name order."""

    name: str
    serving: bool
    state: str
    applications: tuple[tuple[str, Mapping[str, Any]], ...]


def ray_service_status_clusters(status: Mapping[str, Any]) -> tuple[RayServiceCluster, ...]:
    """The clusters ``status`` (a RayService's) has a section for, the serving one first."""
    found = []
    for key in (SERVING_CLUSTER, STARTED_CLUSTER):
        section = status.get(key)
        if not section:
            continue
        applications = section.get("applicationStatuses") or {}
        found.append(
            RayServiceCluster(
                name=str(section.get("rayClusterName") or ""),
                serving=key == SERVING_CLUSTER,
                state=str((section.get("rayClusterStatus") or {}).get("state") or ""),
                applications=tuple(
                    (str(name), application or {})
                    for name, application in sorted(applications.items())
                ),
            )
        )
    return tuple(found)


def ray_service_serves(status: Mapping[str, Any]) -> bool:
    """Whether KubeRay says the service serves: its ``Ready`` condition is True."""
    return any(
        condition.get("type") == "Ready" and condition.get("status") == "True"
        for condition in status.get("conditions") or []
    )
