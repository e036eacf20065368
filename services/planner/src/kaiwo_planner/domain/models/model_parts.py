"""The pieces a Model's plan is put together from, shared by its steps.

:class:`ObservedModel` is what the plan reads about the Model from the cluster state,
:class:`BuiltModel` what its spec and the configuration make (kept per spec version), and
:class:`ModelParts` the plan being put together: serving (:mod:`.serving`), deleting
(:mod:`.model_deletion`) and not configured each fill one in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from kaiwo_contracts.plans import ObjectRef, PruneRule

from kaiwo_planner.domain.models.rollout import ObservedPod
from kaiwo_planner.domain.models.server_pod import ServerPod
from kaiwo_planner.domain.models.setup import ModelSetup
from kaiwo_planner.domain.models.status import CacheStatus
from kaiwo_planner.domain.status.conditions import ConditionSpec

MODEL_PRUNE: Final = (
    PruneRule(api_version="v1", kind="ConfigMap"),
    PruneRule(api_version="batch/v1", kind="Job"),
    PruneRule(api_version="rbac.authorization.k8s.io/v1", kind="Role"),
    PruneRule(api_version="rbac.authorization.k8s.io/v1", kind="RoleBinding"),
)


@dataclass(frozen=True, slots=True)
class ObservedModel:
    """What the plan reads about the Model from the cluster state."""

    identity: ObjectRef
    ref: ObjectRef
    previous: Mapping[str, Any]
    generation: int
    pods: tuple[ObservedPod, ...]


@dataclass(frozen=True, slots=True)
class BuiltModel:
    """What the Model's spec and the configuration make, whatever the cluster holds."""

    setup: ModelSetup
    pod: ServerPod
    files_map: dict[str, Any] | None
    adapters_map: dict[str, Any] | None
    load_job: dict[str, Any] | None


@dataclass(slots=True)
class ModelParts:
    """The plan being put together."""

    desired: list[dict[str, Any]] = field(default_factory=list)
    shared: list[dict[str, Any]] = field(default_factory=list)
    delete: list[ObjectRef] = field(default_factory=list)
    conditions: list[ConditionSpec] = field(default_factory=list)
    cache: CacheStatus | None = None
    finalizers: tuple[str, ...] | None = None
    prune: tuple[PruneRule, ...] = MODEL_PRUNE
    retired: tuple[str, ...] = ()
    """Conditions of the plan's own that no longer describe anything (``AdaptersLoaded``
    once the adapters are gone): dropped from the status rather than left as they were."""
    replan_at: datetime | None = None
    """When to plan the Model again though nothing it reads has changed (a wait that ends)."""


def kept_cache(cache_profile: str | None, observed: ObservedModel) -> CacheStatus | None:
    """``status.cache`` as the last status said it, for a plan that does not look at the
    cache (the Model being deleted, or one the configuration cannot serve right now): None
    without a cache profile (no ``cache`` in the status). Dropping it would make the next
    served plan download the whole model again."""
    return CacheStatus.of(observed.previous) if cache_profile else None


def pod_ref(identity: ObjectRef, pod: ObservedPod) -> ObjectRef:
    """The reference to delete one of the Model's server Pods by."""
    return ObjectRef(
        api_version="v1",
        kind="Pod",
        name=pod.name,
        namespace=identity.namespace or "",
        uid=pod.uid,
    )
