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
    """GPU utilization of one workload over a scrape window, and the stretches it is part of.

    ``utilization_ratio`` is what the workload's GPUs use over the GPU capacity its pods
    requested (``aggregation`` ``Avg``: the mean over its GPUs, not over its pods), rounded to
    4 digits, the value the stretches were judged on; it is None when the metrics endpoint
    returned no sample for the workload's pods (then the stretches are the ones already open:
    missing data neither ends nor extends them).

    Published every tick for every workload with running GPU pods: the planner keeps the
    latest one per workload and decides from it (``ResourceUnderutilization``, termination,
    GPU idle preemption). A lost message is made good by the next tick.
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
    low_utilization_threshold_ratio: Ratio | None = Field(default=None, ge=0.0, le=1.0)
    """KaiwoConfig ``resourceMonitoring.lowUtilizationThreshold``; None when the workload's
    namespace is not monitored (then ``underutilized_since`` is None too)."""
    underutilized_since: AwareDatetime | None = None
    """Start of the current stretch below ``low_utilization_threshold_ratio``; None: none."""
    idle_threshold_ratio: Ratio | None = Field(default=None, ge=0.0, le=1.0)
    """The workload's GPU idle-preemption threshold; None when it has not opted in."""
    idle_aggregation: Aggregation | None = None
    idle_policy: Literal["OnPressure", "Always"] | None = None
    idle_grace_seconds: float | None = Field(default=None, ge=0)
    """The workload's resolved idle-preemption policy and grace period (annotations over
    KaiwoConfig over defaults): the planner decides with them."""
    idle_utilization_ratio: Ratio | None = Field(default=None, ge=0.0, le=1.0)
    """The per-pod utilizations combined with ``idle_aggregation``."""
    idle_since: AwareDatetime | None = None
    """Start of the current stretch below ``idle_threshold_ratio``; None: none."""


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
