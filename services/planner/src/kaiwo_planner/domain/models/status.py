"""A Model's status: its Pods counted as upstream counts them, and Kaiwo's conditions.

``replicas.all`` counts every server Pod, those being deleted too; ``replicas.ready`` those
Ready (as upstream). ``cache`` only with a cache profile: ``loaded``, and the uid of the
volume the files were loaded into (:class:`CacheStatus`). Conditions, each with the
generation it describes:

* ``Configured``: the system configuration serves the Model (False: which profile or image
  is missing, or why the configuration itself is invalid);
* ``CacheLoaded`` (with a cache profile): Loading, Loaded, or LoadFailed with the Job's reason;
  LoadingAsCreated while a load Job made from an earlier spec runs on as it was made, and
  Reloading while a failed one is replaced by one from the edited spec;
* ``Ready``: every wanted replica Ready on the current spec (or none wanted); False while
  Pods are missing or not Ready (``ReplicasFailing`` naming the container that cannot start
  or keeps crashing, with a Warning), during a rollout, while the cache loads, while deleting;
* ``AdaptersLoaded`` (with adapters): every Ready Pod reports every adapter loaded; dropped
  when the adapters are removed (kept, it told of adapters no Pod is asked to load);
* ``CacheEvicted`` (while a cached Model is deleted): the eviction Job's progress;
* ``LimitedByClusterCeiling`` (once it was True): whether the cluster's ceiling on autoscaled
  replicas holds the Model below its own bounds
  (:func:`~kaiwo_planner.domain.models.autoscaling.ceiling_condition`);
* ``LimitedByMaxReplicas`` (once it was True): whether the Model's own ``maxReplicas`` holds
  back the load the autoscaler decided on
  (:func:`~kaiwo_planner.domain.models.autoscaling.max_replicas_condition`).

An Event tells each change of a condition people act on (see :data:`_EVENTS`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final, Literal

from kaiwo_contracts.plans import EventIntent

from kaiwo_planner.domain.models.rollout import ObservedPod
from kaiwo_planner.domain.status.conditions import ConditionSpec, merge_conditions

CONFIGURED: Final = "Configured"
CACHE_LOADED: Final = "CacheLoaded"
READY: Final = "Ready"
ADAPTERS_LOADED: Final = "AdaptersLoaded"
CACHE_EVICTED: Final = "CacheEvicted"
LIMITED_BY_CLUSTER_CEILING: Final = "LimitedByClusterCeiling"
LIMITED_BY_MAX_REPLICAS: Final = "LimitedByMaxReplicas"

# ``CacheLoaded`` reasons while a load Job is made or kept.
LOADING: Final = "Loading"
VOLUME_NOT_BOUND: Final = "VolumeNotBound"
LOADING_AS_CREATED: Final = "LoadingAsCreated"
RELOADING: Final = "Reloading"
LOAD_JOB_PLANNED: Final = frozenset({LOADING, VOLUME_NOT_BOUND, LOADING_AS_CREATED, RELOADING})
"""The ``CacheLoaded`` reasons of a plan that made (or keeps) a load Job: a deletion planned
after it waits for that Job (decision 0290)."""

EventType = Literal["Normal", "Warning"]

# (condition type, status, reason) -> (Event type, Event reason); None: any reason.
_EVENTS: Final[Mapping[tuple[str, str, str | None], tuple[EventType, str]]] = MappingProxyType(
    {
        (CONFIGURED, "False", None): ("Warning", "NotConfigured"),
        (CONFIGURED, "True", None): ("Normal", "Configured"),
        (CACHE_LOADED, "False", LOADING): ("Normal", "CacheLoading"),
        (CACHE_LOADED, "False", "LoadFailed"): ("Warning", "CacheLoadFailed"),
        # An edit that cannot reach the load Job under way (decision 0124).
        (CACHE_LOADED, "False", LOADING_AS_CREATED): ("Warning", "CacheLoadingAsCreated"),
        (CACHE_LOADED, "False", RELOADING): ("Normal", "CacheReloading"),
        (CACHE_LOADED, "True", None): ("Normal", "CacheLoaded"),
        (READY, "True", "ReplicasReady"): ("Normal", "ModelReady"),
        (READY, "False", "RollingOut"): ("Normal", "RolloutStarted"),
        # A server Pod's container cannot start or keeps crashing (decision 0134).
        (READY, "False", "ReplicasFailing"): ("Warning", "ReplicasFailing"),
        (READY, "False", "ReplicasCapped"): ("Warning", "ReplicasCapped"),
        (READY, "True", "ReplicasCapped"): ("Warning", "ReplicasCapped"),
        (ADAPTERS_LOADED, "True", None): ("Normal", "AdaptersLoaded"),
        (CACHE_EVICTED, "False", "EvictionFailed"): ("Warning", "CacheEvictionFailed"),
        (CACHE_EVICTED, "True", None): ("Normal", "CacheEvicted"),
        # Warnings: the Model gets fewer replicas than its spec lets the autoscaler give it.
        # Nothing is told when it turns False (the load dropping below the ceiling again).
        (LIMITED_BY_CLUSTER_CEILING, "True", "MaxReplicasAboveClusterCeiling"): (
            "Warning",
            "MaxReplicasAboveClusterCeiling",
        ),
        (LIMITED_BY_CLUSTER_CEILING, "True", "ScaleCutToClusterCeiling"): (
            "Warning",
            "ScaleCutToClusterCeiling",
        ),
        # Normal: the cap is the Model's own, set by its users (decision 0172). Nothing is
        # told when the load falls back within it.
        (LIMITED_BY_MAX_REPLICAS, "True", "LoadAboveMaxReplicas"): (
            "Normal",
            "LoadAboveMaxReplicas",
        ),
    }
)


@dataclass(frozen=True, slots=True)
class CacheStatus:
    """``status.cache``: whether the Model's files are loaded, and into which volume
    (``volumeUID``, Kaiwo's: the uid of the cache profile's shared volume they were loaded
    into; a volume made anew under the same name does not hold them). Empty: not known (a
    status written before it was recorded)."""

    loaded: bool
    volume_uid: str = ""

    @classmethod
    def of(cls, status: Mapping[str, Any]) -> CacheStatus | None:
        """The cache part of a status, None when it has none."""
        cache = status.get("cache")
        if not isinstance(cache, Mapping) or not isinstance(cache.get("loaded"), bool):
            return None
        uid = cache.get("volumeUID")
        return cls(loaded=cache["loaded"], volume_uid=uid if isinstance(uid, str) else "")

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"loaded": self.loaded}
        if self.volume_uid:
            wire["volumeUID"] = self.volume_uid
        return wire


def replica_counts(pods: Sequence[ObservedPod]) -> dict[str, int]:
    return {"all": len(pods), "ready": sum(pod.ready for pod in pods)}


def model_status(
    *,
    previous: Mapping[str, Any],
    generation: int,
    pods: Sequence[ObservedPod],
    cache: CacheStatus | None,
    conditions: Sequence[ConditionSpec],
    now: datetime,
    retired: Collection[str] = (),
) -> dict[str, Any]:
    """The new status: counts, cache, generation and ``conditions`` merged into the previous
    ones (a transition time moves only when a condition's status does), without the
    ``retired`` conditions."""
    previous_conditions = [
        c
        for c in previous.get("conditions") or ()
        if isinstance(c, Mapping) and c.get("type") not in retired
    ]
    status: dict[str, Any] = {"replicas": replica_counts(pods)}
    if cache is not None:
        status["cache"] = cache.to_wire()
    status["observedGeneration"] = generation
    status["conditions"] = merge_conditions(
        previous_conditions, conditions, generation=generation, now=now
    )
    return status


def condition_events(
    previous: Mapping[str, Any], conditions: Sequence[ConditionSpec]
) -> tuple[EventIntent, ...]:
    """An Event for each condition that changed status or reason since ``previous``."""
    before = {
        c.get("type"): (c.get("status"), c.get("reason"))
        for c in previous.get("conditions") or ()
        if isinstance(c, Mapping)
    }
    events = []
    for condition in conditions:
        if before.get(condition.type) == (condition.status, condition.reason):
            continue
        found = _EVENTS.get((condition.type, condition.status, condition.reason)) or _EVENTS.get(
            (condition.type, condition.status, None)
        )
        if found is not None:
            kind, reason = found
            events.append(EventIntent(type=kind, reason=reason, message=condition.message))
    return tuple(events)
