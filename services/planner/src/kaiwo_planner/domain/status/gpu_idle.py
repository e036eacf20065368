"""The ``GpuIdle`` condition of a KaiwoJob or KaiwoService that opted in to GPU idle preemption
(decision 0056), pure.

A GPU workload no Kaiwo kind owns has its GpuWorkload record (decision 0047); a KaiwoJob or
KaiwoService is its own record: while it runs and the monitor's finding gives a fresh reading,
its status carries

* ``GpuIdle`` True, reason ``GpuIdle``: an idle stretch that counts (the workload's own
  threshold and aggregation, :func:`~kaiwo_planner.domain.scheduling.gpu_workload_state.
  reading_of`), the message beginning ``Idle since <time>`` and saying what the policy will do
  and when (the words of the GpuWorkload's verdict);
* ``GpuIdle`` False, reason ``GpuActive``: at or above the threshold.

Without a fresh reading the condition is left as it is: the message holds no reading, only
the stretch's start and the settings, so a settled workload's status does not change tick
after tick. ``kaiwo gpus`` lists these workloads beside the GpuWorkload records.

A workload no longer opted in, or no longer running (evicted back to PENDING, a service no
longer READY), is not judged: a condition it has is withdrawn, False with reason
``NotOptedIn`` or ``NotRunning`` (decision 0228; it stayed True for good, promising a
preemption that would never come, and ``kaiwo gpus`` and the console flagged the workload
idle from it). Withdrawn once, it is written the same way each plan (no status write); a
workload that never had the condition gets none.

A workload that ends (COMPLETE, FAILED, TERMINATED) has the condition withdrawn in the very
write of its final phase, False with reason ``NotRunning`` (:func:`gpu_idle_once_ended`,
decision 0242): the planner writes nothing after a final phase, so whatever that write said
stayed for good, ``GpuIdle`` True included. A workload that ended under an earlier version
has it withdrawn once; one whose condition is already withdrawn keeps it as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from kaiwo_contracts.gpu_preemption import ANNOTATION_PREFIX, GpuPreemptionSettings

from kaiwo_planner.domain.scheduling.gpu_workload_state import reading_of, settings_of
from kaiwo_planner.domain.settings.cluster_settings import kaiwo_config
from kaiwo_planner.domain.state.durations import format_duration
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.state.workload_finding import WorkloadFinding
from kaiwo_planner.domain.status.conditions import ConditionSpec, condition_of, format_time

GPU_IDLE: Final = "GpuIdle"
REASON_IDLE: Final = "GpuIdle"
REASON_ACTIVE: Final = "GpuActive"
REASON_NOT_OPTED_IN: Final = "NotOptedIn"
REASON_NOT_RUNNING: Final = "NotRunning"
NOT_RUNNING_MESSAGE: Final = "Not running: GPU idleness is judged only while the workload runs"
_WITHDRAWN_REASONS: Final = frozenset({REASON_NOT_OPTED_IN, REASON_NOT_RUNNING})


def gpu_idle_condition(
    workload: Mapping[str, Any],
    finding: WorkloadFinding | None,
    *,
    vendor: str,
    context: PlanningContext,
    now: datetime,
    running: bool,
    previous_status: Mapping[str, Any],
) -> ConditionSpec | None:
    """``GpuIdle`` as the reading shows it; None: leave the condition as it is (module doc).

    ``running``: the workload's last status says it runs; ``previous_status``: that status,
    for a condition to withdraw."""
    if not running and condition_of(previous_status, GPU_IDLE) is None:
        return None  # whatever the settings, nothing to judge and nothing to withdraw
    defaults = kaiwo_config(context).spec.gpu_preemption
    settings = settings_of(workload, context.cluster, defaults)
    if settings is None:
        return _withdrawn(
            previous_status,
            REASON_NOT_OPTED_IN,
            f"Not opted in to GPU idle preemption (annotations {ANNOTATION_PREFIX}*): "
            "GPU idleness is not judged",
        )
    if not running:
        return _withdrawn(
            previous_status,
            REASON_NOT_RUNNING,
            NOT_RUNNING_MESSAGE,
        )
    reading = reading_of(finding, settings, now=now)
    if reading.percent is None:
        return None
    if reading.idle_since is None:
        return ConditionSpec(GPU_IDLE, "False", REASON_ACTIVE, busy_message(settings))
    return ConditionSpec(
        GPU_IDLE, "True", REASON_IDLE, idle_message(settings, reading.idle_since, vendor=vendor)
    )


def gpu_idle_once_ended(previous_status: Mapping[str, Any]) -> ConditionSpec | None:
    """``GpuIdle`` of a workload whose phase is final (module docstring); None: leave the
    condition as ``previous_status`` has it (none, or withdrawn already)."""
    found = condition_of(previous_status, GPU_IDLE)
    if found is None or (
        found.get("status") == "False" and found.get("reason") in _WITHDRAWN_REASONS
    ):
        return None
    return ConditionSpec(GPU_IDLE, "False", REASON_NOT_RUNNING, NOT_RUNNING_MESSAGE)


def _withdrawn(
    previous_status: Mapping[str, Any], reason: str, message: str
) -> ConditionSpec | None:
    """The condition withdrawn (module docstring); None when the workload has none (nothing
    to withdraw, nothing to write)."""
    if condition_of(previous_status, GPU_IDLE) is None:
        return None
    return ConditionSpec(GPU_IDLE, "False", reason, message)


def busy_message(settings: GpuPreemptionSettings) -> str:
    return (
        f"Busy: at or above the idle threshold of {_percent(settings.threshold_percent)} "
        f"(policy {settings.policy}, grace period {format_duration(settings.grace_period)})"
    )


def idle_message(settings: GpuPreemptionSettings, since: datetime, *, vendor: str) -> str:
    threshold = _percent(settings.threshold_percent)
    due = format_time(since + settings.grace_period)
    if settings.policy == "Always":
        then = f"preempted once idle until {due} (policy Always)"
    else:
        then = (
            f"from {due} preempted when a pending workload needs {vendor} GPUs (policy OnPressure)"
        )
    return f"Idle since {format_time(since)}: GPU utilization below {threshold}; {then}"


def _percent(value: float) -> str:
    return f"{value:g}%"
