"""The monitor's findings: GPU utilization per workload and the decisions drawn from it."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import AwareDatetime, Field

from kaiwo_contracts.events.envelope import EventPayload, event_type
from kaiwo_contracts.plans import ObjectRef

GpuVendor = Literal["amd", "nvidia"]
Aggregation = Literal["Min", "Max", "Avg"]

Ratio = float
"""A fraction in [0, 1] (utilization 37 % is 0.37)."""


class UtilizationV1(EventPayload):
    """GPU utilization of one workload over a scrape window.

    ``utilization_ratio`` aggregates the per-pod means with ``aggregation``; it is None when
    the metrics endpoint returned no sample for the workload's pods.
    """

    EVENT_TYPE: ClassVar[str] = event_type("mon", "utilization")

    workload: ObjectRef
    vendor: GpuVendor
    gpu_count: int = Field(ge=0)
    pod_count: int = Field(ge=0)
    utilization_ratio: Ratio | None = Field(default=None, ge=0.0, le=1.0)
    aggregation: Aggregation = "Max"
    window_start: AwareDatetime
    window_end: AwareDatetime


class UnderutilizedV1(EventPayload):
    """A workload whose utilization stayed below the threshold since ``idle_since``."""

    EVENT_TYPE: ClassVar[str] = event_type("mon", "underutilized")

    workload: ObjectRef
    vendor: GpuVendor
    gpu_count: int = Field(ge=0)
    utilization_ratio: Ratio = Field(ge=0.0, le=1.0)
    threshold_ratio: Ratio = Field(ge=0.0, le=1.0)
    idle_since: AwareDatetime
    reason: str = Field(pattern=r"^[A-Z][A-Za-z0-9]*$")
    message: str = ""


class PreemptionDecidedV1(EventPayload):
    """The monitor asks for ``workload`` to be preempted (the planner turns it into a plan).

    ``preempted_for`` names the pending workload the GPUs are freed for (None when the policy
    preempts idle workloads without pressure).
    """

    EVENT_TYPE: ClassVar[str] = event_type("mon", "preemption-decided")

    workload: ObjectRef
    vendor: GpuVendor
    gpu_count: int = Field(ge=0)
    utilization_ratio: Ratio | None = Field(default=None, ge=0.0, le=1.0)
    threshold_ratio: Ratio | None = Field(default=None, ge=0.0, le=1.0)
    preempted_for: ObjectRef | None = None
    policy: Literal["OnPressure", "Always", "Duration"]
    reason: str = Field(pattern=r"^[A-Z][A-Za-z0-9]*$")
    message: str = ""
