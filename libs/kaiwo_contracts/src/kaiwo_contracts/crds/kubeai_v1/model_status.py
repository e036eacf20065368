"""A Model's status: its replicas and cache as upstream reports them, and Kaiwo's conditions."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from kaiwo_contracts.crds.base import KubeModel
from kaiwo_contracts.crds.kaiwo_v1alpha1.common import Conditions
from kaiwo_contracts.crds.structural import NoCrdDefault


class ModelStatusReplicas(KubeModel):
    """Pods of the model: all of them (terminating included) and the ready ones."""

    all: Annotated[int, NoCrdDefault] = 0
    ready: Annotated[int, NoCrdDefault] = 0


class ModelStatusCache(KubeModel):
    """Whether the model's files are in its cache (only with a cacheProfile)."""

    loaded: Annotated[bool, NoCrdDefault] = False
    volume_uid: str | None = Field(
        default=None,
        alias="volumeUID",
        description="The uid of the cache volume the files were loaded into (Kaiwo): a "
        "volume made anew under the same name does not hold them, and they are loaded again.",
    )


class ModelStatus(KubeModel):
    """Observed state of a Model.

    ``conditions`` and ``observedGeneration`` are Kaiwo's (upstream's status has neither):
    whether the system configuration serves the Model, its cache, its rollout and adapters,
    and whether the cluster's ceiling on autoscaled replicas holds it below its own bounds.
    """

    replicas: Annotated[ModelStatusReplicas, NoCrdDefault] = Field(
        default_factory=ModelStatusReplicas
    )
    cache: ModelStatusCache | None = None
    observed_generation: int | None = Field(
        default=None, description="The generation the status describes (Kaiwo)."
    )
    conditions: Conditions | None = Field(
        default=None,
        description="Configured, CacheLoaded, Ready, AdaptersLoaded, CacheEvicted, "
        "LimitedByClusterCeiling, LimitedByMaxReplicas, Valid (Kaiwo).",
    )
