"""The status KaiwoJob and KaiwoService share: the workload's phase, its conditions and what
preempted it.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from kaiwo_contracts.crds.base import LIST_MAP_KEYS, LIST_TYPE, KubeModel
from kaiwo_contracts.crds.meta import Condition
from kaiwo_contracts.crds.structural import NoCrdDefault


def _distinct_condition_types(conditions: list[Condition]) -> list[Condition]:
    types = [condition.type for condition in conditions]
    repeated = sorted({t for t in types if types.count(t) > 1})
    if repeated:
        raise PydanticCustomError(
            "duplicate_condition",
            "conditions must have distinct types; repeated: {repeated}",
            {"repeated": ", ".join(repeated)},
        )
    return conditions


Conditions = Annotated[
    list[Condition],
    Field(json_schema_extra={LIST_TYPE: "map", LIST_MAP_KEYS: ["type"]}),
    AfterValidator(_distinct_condition_types),
]
"""Status conditions: one per type, merged by type under server-side apply."""


class WorkloadStatus(StrEnum):
    """The high-level phase in ``status.status`` of every Kaiwo kind.

    The API reference lists NEW (""), PENDING, STARTING, READY, RUNNING, COMPLETE and FAILED;
    the upstream operator also writes DOWNLOADING, ERROR, TERMINATING and TERMINATED, so they
    are valid here too. READY is what a ready KaiwoService reports (its Deployment or
    RayService serves; the API reference defines it so, although later upstream versions write
    RUNNING) and what a KaiwoQueueConfig reports once its Kueue objects are in sync. RUNNING
    means the workload's pods run (for a KaiwoService: some, but not yet all, replicas).
    """

    NEW = ""
    """Created, not yet processed by the controller."""
    DOWNLOADING = "DOWNLOADING"
    """The download job is filling the storage volumes (upstream)."""
    PENDING = "PENDING"
    """Waiting for prerequisites such as Kueue admission."""
    STARTING = "STARTING"
    """The underlying Job, Deployment, RayJob or RayService is being created or started."""
    READY = "READY"
    """A KaiwoService is ready to serve, or a KaiwoQueueConfig is in sync."""
    RUNNING = "RUNNING"
    """The workload's pods are running (a KaiwoService: not yet every replica is ready)."""
    COMPLETE = "COMPLETE"
    """A KaiwoJob finished successfully."""
    ERROR = "ERROR"
    """A recoverable problem, e.g. not schedulable or a Deployment past its deadline (upstream)."""
    FAILED = "FAILED"
    """The workload or its prerequisites failed and will not recover."""
    TERMINATING = "TERMINATING"
    """Being stopped early, e.g. its duration expired while GPUs are in demand (upstream)."""
    TERMINATED = "TERMINATED"
    """Stopped early; its children are deleted, the object is kept for inspection (upstream)."""

    @property
    def is_terminal(self) -> bool:
        """Nothing changes any more once a workload reaches this phase."""
        return self in _TERMINAL


_TERMINAL = frozenset({WorkloadStatus.COMPLETE, WorkloadStatus.FAILED, WorkloadStatus.TERMINATED})


class PreemptedFor(KubeModel):
    """The pending workload a preemption stopped this one for (a KaiwoJob or KaiwoService)."""

    kind: str = Field(description="KaiwoJob or KaiwoService.")
    namespace: str = Field(description="Its namespace.")
    name: str = Field(description="Its name.")
    uid: str | None = Field(default=None, description="Its metadata.uid.")


class CommonStatus(KubeModel):
    """The observed state fields KaiwoJob and KaiwoService share."""

    start_time: datetime | None = Field(
        default=None, description="When the first pod of the workload started running."
    )
    conditions: Conditions | None = Field(
        default=None, description="Standard Kubernetes conditions of the workload."
    )
    status: Annotated[WorkloadStatus, NoCrdDefault] = Field(
        default=WorkloadStatus.NEW, description="The high-level phase of the workload."
    )
    duration: int | None = Field(
        default=None, ge=0, description="Seconds the workload has been running (or ran)."
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="The metadata.generation last processed."
    )
    preempted_for: PreemptedFor | None = Field(
        default=None,
        description=(
            "Not in upstream Kaiwo. The pending workload this one was preempted for (duration "
            "preemption, or GPU idle preemption under OnPressure); unset when it was stopped "
            "for nobody in particular."
        ),
    )

    def condition(self, condition_type: str) -> Condition | None:
        """The condition of that type, if present."""
        return next((c for c in self.conditions or () if c.type == condition_type), None)
