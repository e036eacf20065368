"""Per-workload GPU utilization, underutilization and the termination decision.

The rules (KaiwoConfig ``spec.resourceMonitoring``, seeds; upstream §12 differs where noted):

* **Which pods.** Running pods that carry a KaiwoJob/KaiwoService's labels (see
  :mod:`kaiwo_monitor.domain.pods`), in ``targetNamespaces``, or in every namespace but
  ``kube-system`` when that list is empty (as the API reference says; upstream's code
  forgot the exclusion).
* **Utilization versus requested capacity.** A pod's utilization is the sum of its GPUs'
  ``gpu_gfx_activity`` percentages divided by the GPUs it requested (or by the GPUs reported
  for it, if more): a pod holding 4 GPUs of which the endpoint shows 2 at 80 % uses 40 % of
  what it asked for. A workload's utilization is the **average** of its pods' utilizations
  (``aggregation = "Avg"``): one idle GPU among busy ones does not make a workload
  underutilized, its GPUs on average must be. Upstream flags a workload as soon as any single
  GPU reading is low; that punishes a job whose rank 0 waits while the others compute, so we
  do not copy it. Pods of the workload without any reading are left out of the average (the
  endpoint not knowing them says nothing about their use); with no reading at all the
  utilization is unknown (None).
* **Underutilized** when the utilization is below ``lowUtilizationThreshold`` percent
  (strictly: a threshold of 0 never flags anything). The state remembers since when.
* **Termination** when ``terminateUnderutilized`` is on and the workload has been
  underutilized continuously for at least ``terminateUnderutilizedAfter``; decided once per
  underutilized stretch. Any reading at or above the threshold ends the stretch. An unknown
  utilization (no readings, all pods pending) neither ends nor extends the evidence: the
  state is kept as it was, and nothing is decided on that tick.

State in, state out: :func:`assess` takes the previous :class:`UtilizationState` per
workload uid and returns the next ones; only workloads with something to remember (an open
underutilized stretch) have a state, and workloads without pods lose theirs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final, Literal

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoResourceMonitoringConfig

from kaiwo_monitor.domain.durations import parse_duration
from kaiwo_monitor.domain.pods import GpuVendor, MonitoredPod, WorkloadRef
from kaiwo_monitor.domain.samples import GpuSample

EXCLUDED_BY_DEFAULT: Final = frozenset({"kube-system"})
AGGREGATION: Final[Literal["Avg"]] = "Avg"
FULL_PERCENT: Final = 100.0


@dataclass(frozen=True, slots=True)
class MonitoringPolicy:
    """``spec.resourceMonitoring`` of the KaiwoConfig, parsed once per tick."""

    threshold_percent: float = 1.0
    target_namespaces: frozenset[str] = frozenset()
    terminate_underutilized: bool = False
    terminate_after: timedelta = timedelta(hours=24)

    @classmethod
    def from_config(cls, config: KaiwoResourceMonitoringConfig) -> MonitoringPolicy:
        return cls(
            threshold_percent=config.low_utilization_threshold,
            target_namespaces=frozenset(config.target_namespaces or ()),
            terminate_underutilized=config.terminate_underutilized,
            terminate_after=parse_duration(config.terminate_underutilized_after),
        )

    def monitors(self, namespace: str) -> bool:
        if self.target_namespaces:
            return namespace in self.target_namespaces
        return namespace not in EXCLUDED_BY_DEFAULT

    @property
    def threshold_ratio(self) -> float:
        """The threshold as a fraction, capped at 1 (a threshold over 100 % flags everything)."""
        return min(self.threshold_percent / FULL_PERCENT, 1.0)


@dataclass(frozen=True, slots=True)
class UtilizationState:
    """What the monitor remembers about one workload between ticks."""

    workload_uid: str
    below_since: datetime | None = None
    """Start of the current underutilized stretch; None when there is none."""
    termination_decided: bool = False
    """Termination was already asked for in this stretch (ask once)."""


@dataclass(frozen=True, slots=True)
class WorkloadUtilization:
    """One workload's utilization on one tick."""

    workload: WorkloadRef
    vendor: GpuVendor
    gpu_count: int
    pod_count: int
    percent: float | None
    """Average over pods of used / requested GPU capacity, 0-100; None without readings."""
    window_start: datetime
    window_end: datetime
    """Times of the earliest and latest reading used (both ``now`` without readings)."""

    @property
    def ratio(self) -> float | None:
        return None if self.percent is None else self.percent / FULL_PERCENT


@dataclass(frozen=True, slots=True)
class Underutilization:
    """A workload that has just fallen below the threshold."""

    utilization: WorkloadUtilization
    since: datetime
    threshold_ratio: float


@dataclass(frozen=True, slots=True)
class TerminationDecision:
    """Terminate ``utilization.workload``: underutilized since ``since`` (for ``idle_for``)."""

    utilization: WorkloadUtilization
    since: datetime
    idle_for: timedelta
    threshold_ratio: float


@dataclass(frozen=True, slots=True)
class Assessment:
    """Everything one tick found, and the states to keep for the next tick."""

    utilizations: tuple[WorkloadUtilization, ...] = ()
    underutilized: tuple[Underutilization, ...] = ()
    terminations: tuple[TerminationDecision, ...] = ()
    states: Mapping[str, UtilizationState] = field(default_factory=dict)


def assess(
    *,
    pods: Iterable[MonitoredPod],
    samples: Iterable[GpuSample],
    states: Mapping[str, UtilizationState],
    policy: MonitoringPolicy,
    now: datetime,
) -> Assessment:
    """Utilization of every monitored workload, the new findings and the next states."""
    pods_by_workload: dict[str, list[MonitoredPod]] = defaultdict(list)
    for pod in pods:
        if policy.monitors(pod.namespace):
            pods_by_workload[pod.workload.uid].append(pod)
    readings = readings_by_pod(samples)
    utilizations: list[WorkloadUtilization] = []
    underutilized: list[Underutilization] = []
    terminations: list[TerminationDecision] = []
    next_states: dict[str, UtilizationState] = {}
    for uid in sorted(pods_by_workload):
        previous = states.get(uid, UtilizationState(workload_uid=uid))
        running = [pod for pod in pods_by_workload[uid] if pod.running]
        utilization = workload_utilization(running, readings, now=now) if running else None
        if utilization is None:
            state = previous
        else:
            utilizations.append(utilization)
            state, finding, termination = judge(utilization, previous, policy=policy, now=now)
            underutilized.extend([finding] if finding else [])
            terminations.extend([termination] if termination else [])
        if state.below_since is not None:
            next_states[uid] = state
    return Assessment(
        utilizations=tuple(utilizations),
        underutilized=tuple(underutilized),
        terminations=tuple(terminations),
        states=next_states,
    )


def judge(
    utilization: WorkloadUtilization,
    previous: UtilizationState,
    *,
    policy: MonitoringPolicy,
    now: datetime,
) -> tuple[UtilizationState, Underutilization | None, TerminationDecision | None]:
    """The next state of one workload, and whether it just became underutilized or must go."""
    if utilization.percent is None:
        return previous, None, None
    if utilization.percent >= policy.threshold_percent:
        return UtilizationState(workload_uid=previous.workload_uid), None, None
    since = previous.below_since or now
    finding = (
        Underutilization(
            utilization=utilization, since=since, threshold_ratio=policy.threshold_ratio
        )
        if previous.below_since is None
        else None
    )
    idle_for = now - since
    termination = None
    if (
        policy.terminate_underutilized
        and not previous.termination_decided
        and idle_for >= policy.terminate_after
    ):
        termination = TerminationDecision(
            utilization=utilization,
            since=since,
            idle_for=idle_for,
            threshold_ratio=policy.threshold_ratio,
        )
    state = UtilizationState(
        workload_uid=previous.workload_uid,
        below_since=since,
        termination_decided=previous.termination_decided or termination is not None,
    )
    return state, finding, termination


@dataclass(slots=True)
class PodReadings:
    """One pod's readings: percentages per GPU (duplicates averaged) and their times."""

    percents_by_gpu: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    times: list[datetime] = field(default_factory=list)


def readings_by_pod(samples: Iterable[GpuSample]) -> dict[tuple[str, str], PodReadings]:
    """Samples grouped by ``(namespace, pod)``; each percentage clamped to 0-100."""
    readings: dict[tuple[str, str], PodReadings] = defaultdict(PodReadings)
    for sample in samples:
        pod = readings[(sample.namespace, sample.pod)]
        pod.percents_by_gpu[sample.gpu].append(min(max(sample.percent, 0.0), FULL_PERCENT))
        pod.times.append(sample.at)
    return readings


def workload_utilization(
    running: list[MonitoredPod],
    readings: Mapping[tuple[str, str], PodReadings],
    *,
    now: datetime,
) -> WorkloadUtilization | None:
    """The utilization of one workload from its running pods; None when it holds no GPU."""
    gpu_count = 0
    pod_percents: list[float] = []
    times: list[datetime] = []
    for pod in running:
        found = readings.get((pod.namespace, pod.name), PodReadings())
        gpus = found.percents_by_gpu
        capacity = max(pod.requested_gpus, len(gpus))
        gpu_count += capacity
        if gpus:
            used = sum(sum(values) / len(values) for values in gpus.values())
            pod_percents.append(used / capacity)
            times.extend(found.times)
    if gpu_count == 0:
        return None  # a CPU-only workload has no GPU utilization to judge
    vendor: GpuVendor = "nvidia" if any(pod.vendor == "nvidia" for pod in running) else "amd"
    return WorkloadUtilization(
        workload=running[0].workload,
        vendor=vendor,
        gpu_count=gpu_count,
        pod_count=len(running),
        percent=sum(pod_percents) / len(pod_percents) if pod_percents else None,
        window_start=min(times, default=now),
        window_end=max(times, default=now),
    )
