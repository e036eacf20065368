"""Per-workload GPU utilization and the underutilized and idle stretches it is part of.

The rules (KaiwoConfig ``spec.resourceMonitoring``, seeds; upstream §12 differs where noted):

* **Which pods.** Running pods that carry a KaiwoJob/KaiwoService's labels (see
  :mod:`kaiwo_monitor.domain.pods`), in ``targetNamespaces``, or in every namespace but
  ``kube-system`` when that list is empty (as the API reference says; upstream's code
  forgot the exclusion).
* **Utilization versus requested capacity** (the API reference: "the percentage
  utilization versus the requested capacity"). A pod's capacity is the GPUs it requested (or
  the GPUs reported for it, if more); what it uses is the sum of its GPUs'
  ``gpu_gfx_activity`` percentages. A workload's utilization is what all its pods use over
  all the capacity they hold (``aggregation = "Avg"``, the mean over its GPUs): 7 GPUs at
  0 % and 1 at 100 % use 12.5 % of 8, whether in one pod or two. The mean of the pods'
  ratios counted a one-GPU pod as much as an eight-GPU one (50 % there). One idle GPU among
  busy ones does not make a workload underutilized, its GPUs on average must be. Upstream
  flags a workload as soon as any single GPU reading is low; that punishes a job whose rank
  0 waits while the others compute, so we do not copy it. **A running GPU pod without any
  reading makes the workload's utilization unknown** (None), as no reading at all does: the
  endpoint not knowing a pod (its node's exporter gone or late) says nothing about its use,
  and judging the others alone read the busy pod as idle (decision 0173: a two-pod job
  whose busy pod went unreported was preempted as idle on the real stack, for every
  aggregation but Min).
* **Underutilized** when the utilization is below ``lowUtilizationThreshold`` percent
  (strictly: a threshold of 0 never flags anything). The state remembers since when.
* **GPU idle** (upstream §11), for workloads opted in by annotation
  (:mod:`kaiwo_contracts.gpu_preemption`): the per-pod utilizations combined with the
  workload's aggregation (Min, Max or Avg, over pods as upstream) below its threshold. The
  state remembers since when.
* **Judged as published** (decision 0228): both verdicts compare the ratio the monitor
  publishes (:func:`published_ratio`, rounded to 4 digits) with the threshold as a ratio
  capped at 1, the planner's rule for the same finding, so the planner never reads "below
  the threshold" where the monitor opened no stretch, or the other way round. A threshold
  over 100 % flags everything below full use.
* **No decisions here.** What follows from a stretch (the ``ResourceUnderutilization``
  condition, termination after ``terminateUnderutilizedAfter``, preemption after the grace
  period) is the planner's, from the ``UtilizationV1`` published every tick.
  An unknown utilization (no readings, all pods pending) neither ends nor extends a stretch:
  the state is kept as it was (unless a threshold changed so that it no longer holds, below).
  **A gap is no part of a stretch** (decision 0173): when the first reading after more than
  ``gap`` without one is below the threshold, the stretch starts anew at it, so a workload
  is never counted idle (toward its grace period, or ``terminateUnderutilizedAfter``) for
  the time nobody could read it. A missed scrape or two (``gap`` is a few polling
  intervals) does not break a stretch.
* **A stretch is "below threshold T since S"** (decision 0213): the state keeps the measure
  it was last judged against (the threshold; for idleness the aggregation too). Thresholds
  can be changed at runtime (the KaiwoConfig, the annotations). When the threshold in force
  is lowered, time below the old one is no time below the new one: the stretch starts anew
  at the first reading below the new threshold. When it is raised, the old stretch is below
  the new threshold too and keeps its start (and is from then on below the new one). Idle
  under ``Max`` (every pod) is idle under ``Avg`` and under ``Min``, not the other way round:
  an aggregation made stricter starts the idle stretch anew as well. A reading that is
  unknown meanwhile keeps no stretch that no longer holds. A workload no longer monitored
  (``targetNamespaces``) has no underutilized stretch, one no longer opted in to idle
  preemption no idle stretch: time nobody judged is no part of one.

State in, state out: :func:`assess` takes the previous :class:`UtilizationState` per
workload uid and returns the next ones; only workloads with something to remember (an open
underutilized stretch) have a state, and workloads without pods lose theirs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Final, Literal

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoResourceMonitoringConfig
from kaiwo_contracts.gpu_preemption import Aggregation, GpuPreemptionSettings
from kaiwo_contracts.plans import ObjectRef
from kaiwo_contracts.utilization_threshold import capped_threshold_ratio

from kaiwo_monitor.domain.pods import GpuVendor, MonitoredPod, is_kaiwo_workload
from kaiwo_monitor.domain.samples import GpuSample

EXCLUDED_BY_DEFAULT: Final = frozenset({"kube-system"})
AGGREGATION: Final[Literal["Avg"]] = "Avg"
FULL_PERCENT: Final = 100.0
RATIO_DIGITS: Final = 4
"""Digits of every ratio the monitor publishes, and judges (module docstring)."""
PROFILE_RESOURCES: Final[Mapping[str, Callable[[MonitoredPod], bool]]] = {
    "gpu": lambda pod: pod.requested_gpus > 0,
}
"""What each ``resourceMonitoring.profile`` monitors: whether a pod uses that resource."""
STRICTNESS: Final[Mapping[Aggregation, int]] = {"Min": 0, "Avg": 1, "Max": 2}
"""Idle under an aggregation implies idle under every less strict one: the busiest pod below
a threshold (``Max``) puts the average below it, and the average the least used pod."""


@dataclass(frozen=True, slots=True)
class MonitoringPolicy:
    """``spec.resourceMonitoring`` of the KaiwoConfig, parsed once per tick.

    ``profile`` chooses the resource monitored (the API reference; ``gpu`` is its only value):
    with ``gpu``, only pods that requested GPUs are judged for underutilization, so a CPU-only
    workload in a target namespace is never reported as idle GPUs (decision 0046).
    """

    threshold_percent: float = 1.0
    target_namespaces: frozenset[str] = frozenset()
    profile: str = "gpu"

    @classmethod
    def from_config(cls, config: KaiwoResourceMonitoringConfig) -> MonitoringPolicy:
        return cls(
            threshold_percent=config.low_utilization_threshold,
            target_namespaces=frozenset(config.target_namespaces or ()),
            profile=config.profile,
        )

    def targets(self, pod: MonitoredPod) -> bool:
        """Whether resource monitoring judges ``pod``: a KaiwoJob's or KaiwoService's, in a
        monitored namespace, using the profile's resource (GPU workloads no Kaiwo kind owns
        take part in idle preemption only)."""
        return (
            is_kaiwo_workload(pod.workload)
            and self.monitors(pod.namespace)
            and PROFILE_RESOURCES[self.profile](pod)
        )

    def monitors(self, namespace: str) -> bool:
        if self.target_namespaces:
            return namespace in self.target_namespaces
        return namespace not in EXCLUDED_BY_DEFAULT

    @property
    def threshold_ratio(self) -> float:
        """The threshold as a fraction, capped at 1 (a threshold over 100 % flags everything)."""
        return capped_threshold_ratio(self.threshold_percent)


@dataclass(frozen=True, slots=True)
class UtilizationState:
    """What the monitor remembers about one workload between ticks."""

    workload_uid: str
    below_since: datetime | None = None
    """Start of the current underutilized stretch; None when there is none."""
    below_threshold: float | None = None
    """The threshold (a ratio) the underutilized stretch was last judged against: the
    stretch is below it since ``below_since``. None without a stretch, or when an older
    monitor kept the stretch (then taken as judged against the threshold in force)."""
    idle_since: datetime | None = None
    """Start of the current GPU-idle stretch (preemption settings); None when there is none."""
    idle_threshold: float | None = None
    idle_aggregation: Aggregation | None = None
    """The idle threshold (a ratio) and aggregation the idle stretch was last judged with;
    None as for ``below_threshold``."""
    read_at: datetime | None = None
    """The last tick with a reading that kept a stretch open (None: not known, kept by an
    older monitor): a reading after more than ``gap`` starts the stretches anew."""

    @property
    def worth_keeping(self) -> bool:
        return self.below_since is not None or self.idle_since is not None


@dataclass(frozen=True, slots=True)
class WorkloadUtilization:
    """One workload's utilization on one tick."""

    workload: ObjectRef
    vendor: GpuVendor
    gpu_count: int
    pod_count: int
    percent: float | None
    """Used / requested GPU capacity over all the workload's pods, 0-100; None unless every
    running GPU pod has readings."""
    pod_percents: tuple[float, ...] = ()
    """Each pod with readings: used / requested GPU capacity, 0-100."""
    window_start: datetime = field(kw_only=True)
    window_end: datetime = field(kw_only=True)
    """Times of the earliest and latest reading used (both ``now`` without readings)."""

    @property
    def ratio(self) -> float | None:
        """The utilization as published and judged (:func:`published_ratio`)."""
        return published_ratio(self.percent)

    def aggregated(self, aggregation: Aggregation) -> float | None:
        """The pods' utilizations combined (0-100); None without readings."""
        if not self.pod_percents:
            return None
        if aggregation == "Min":
            return min(self.pod_percents)
        if aggregation == "Max":
            return max(self.pod_percents)
        return sum(self.pod_percents) / len(self.pod_percents)


@dataclass(frozen=True, slots=True)
class Underutilization:
    """A workload that has just fallen below the threshold."""

    utilization: WorkloadUtilization
    since: datetime
    threshold_ratio: float


@dataclass(frozen=True, slots=True)
class IdleJudgment:
    """One opted-in workload against its GPU idle-preemption settings on one tick."""

    settings: GpuPreemptionSettings
    percent: float | None
    """The pods' utilizations combined with ``settings.aggregation``; None without readings."""
    since: datetime | None
    """Start of the current idle stretch; None when the workload is not idle."""


@dataclass(frozen=True, slots=True)
class Judgment:
    """One workload's utilization and the stretches it is part of, on one tick.

    ``underutilized_since`` and ``threshold_ratio`` are None when the workload's namespace is
    not monitored; ``idle`` is None when the workload has not opted in to idle preemption.
    """

    utilization: WorkloadUtilization
    threshold_ratio: float | None = None
    underutilized_since: datetime | None = None
    idle: IdleJudgment | None = None


@dataclass(frozen=True, slots=True)
class Assessment:
    """Everything one tick found, and the states to keep for the next tick."""

    judgments: tuple[Judgment, ...] = ()
    underutilized: tuple[Underutilization, ...] = ()
    states: Mapping[str, UtilizationState] = field(default_factory=dict)

    @property
    def utilizations(self) -> tuple[WorkloadUtilization, ...]:
        return tuple(judgment.utilization for judgment in self.judgments)


def assess(
    *,
    pods: Iterable[MonitoredPod],
    samples: Iterable[GpuSample],
    states: Mapping[str, UtilizationState],
    policy: MonitoringPolicy,
    now: datetime,
    preemption: Mapping[str, GpuPreemptionSettings] | None = None,
    gap: timedelta | None = None,
) -> Assessment:
    """Utilization of every monitored or opted-in workload, new findings, the next states.

    ``preemption``: the idle-preemption settings of the opted-in workloads, by uid.
    ``gap``: the longest time without a reading an open stretch survives (None: any).
    """
    opted_in = preemption or {}
    pods_by_workload: dict[str, list[MonitoredPod]] = defaultdict(list)
    for pod in pods:
        uid = pod.workload.uid or ""  # a monitored pod's workload always carries its uid
        if policy.targets(pod) or uid in opted_in:
            pods_by_workload[uid].append(pod)
    readings = readings_by_pod(samples)
    judgments: list[Judgment] = []
    underutilized: list[Underutilization] = []
    next_states: dict[str, UtilizationState] = {}
    for uid in sorted(pods_by_workload):
        previous = states.get(uid, UtilizationState(workload_uid=uid))
        running = [pod for pod in pods_by_workload[uid] if pod.running]
        utilization = workload_utilization(running, readings, now=now) if running else None
        state = previous
        if utilization is not None:
            if utilization.percent is not None and _after_a_gap(previous, now, gap):
                previous = UtilizationState(workload_uid=uid)
            monitored = any(policy.targets(pod) for pod in pods_by_workload[uid])
            state, finding = judge(
                utilization, previous, policy=policy, now=now, monitored=monitored
            )
            idle = _judge_idle(utilization, previous, opted_in.get(uid), now=now)
            state = _with_idle(state, idle)
            judgments.append(
                Judgment(
                    utilization=utilization,
                    threshold_ratio=policy.threshold_ratio if monitored else None,
                    underutilized_since=state.below_since if monitored else None,
                    idle=idle,
                )
            )
            underutilized.extend([finding] if finding else [])
            if utilization.percent is not None:
                state = replace(state, read_at=now)
        if state.worth_keeping:
            next_states[uid] = state
    return Assessment(
        judgments=tuple(judgments), underutilized=tuple(underutilized), states=next_states
    )


def _after_a_gap(previous: UtilizationState, now: datetime, gap: timedelta | None) -> bool:
    """The workload went unread for longer than ``gap`` since the reading that last kept
    its stretch open (module docstring)."""
    read_at = previous.read_at
    return gap is not None and read_at is not None and now - read_at > gap


def judge(
    utilization: WorkloadUtilization,
    previous: UtilizationState,
    *,
    policy: MonitoringPolicy,
    now: datetime,
    monitored: bool = True,
) -> tuple[UtilizationState, Underutilization | None]:
    """The next state of one workload, and whether it just became underutilized."""
    ended = replace(previous, below_since=None, below_threshold=None)
    if not monitored:  # time not judged is no part of a stretch
        return ended, None
    threshold = policy.threshold_ratio
    kept = previous.below_since if still_below(previous.below_threshold, threshold) else None
    if utilization.percent is None:  # unknown: a stretch that still holds is kept as it was
        return (previous if kept is not None else ended), None
    if not _below(utilization.percent, policy.threshold_ratio):
        return ended, None
    state = replace(previous, below_since=kept or now, below_threshold=threshold)
    if kept is not None:
        return state, None
    finding = Underutilization(utilization=utilization, since=now, threshold_ratio=threshold)
    return state, finding


def still_below(judged_against: float | None, threshold: float) -> bool:
    """Whether a stretch below ``judged_against`` is below ``threshold`` too: the threshold
    in force was not lowered. Unknown (a stretch an older monitor kept): taken as it is."""
    return judged_against is None or threshold >= judged_against


def still_idle(previous: UtilizationState, settings: GpuPreemptionSettings) -> bool:
    """Whether the idle stretch of ``previous`` is an idle stretch under ``settings`` too: its
    threshold was not lowered and its aggregation not made stricter (module docstring)."""
    aggregation = previous.idle_aggregation
    return still_below(previous.idle_threshold, settings.threshold_ratio) and (
        aggregation is None or STRICTNESS[settings.aggregation] <= STRICTNESS[aggregation]
    )


def _judge_idle(
    utilization: WorkloadUtilization,
    previous: UtilizationState,
    settings: GpuPreemptionSettings | None,
    *,
    now: datetime,
) -> IdleJudgment | None:
    if settings is None:
        return None
    percent = utilization.aggregated(settings.aggregation)
    kept = previous.idle_since if still_idle(previous, settings) else None
    if percent is None:  # no readings: a stretch that still holds stays as it was
        return IdleJudgment(settings=settings, percent=None, since=kept)
    if not _below(percent, settings.threshold_ratio):
        return IdleJudgment(settings=settings, percent=percent, since=None)
    return IdleJudgment(settings=settings, percent=percent, since=kept or now)


def published_ratio(percent: float | None) -> float | None:
    """``percent`` (0-100) as the ratio the monitor publishes: within 0-1, rounded to
    :data:`RATIO_DIGITS` digits; None stays None."""
    if percent is None:
        return None
    return round(min(max(percent / FULL_PERCENT, 0.0), 1.0), RATIO_DIGITS)


def _below(percent: float, threshold_ratio: float) -> bool:
    """Whether ``percent`` is below the threshold as the planner reads the finding: the
    published ratio against the capped threshold ratio (module docstring)."""
    ratio = published_ratio(percent)
    return ratio is not None and ratio < threshold_ratio


def _with_idle(state: UtilizationState, idle: IdleJudgment | None) -> UtilizationState:
    """``state`` with the idle stretch ``idle`` found: none when the workload is not opted in
    (any more) or is not idle, as it was without readings, else the stretch and what it was
    judged with."""
    if idle is None or idle.since is None:
        return replace(state, idle_since=None, idle_threshold=None, idle_aggregation=None)
    if idle.percent is None:
        return state
    return replace(
        state,
        idle_since=idle.since,
        idle_threshold=idle.settings.threshold_ratio,
        idle_aggregation=idle.settings.aggregation,
    )


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
    used = 0.0
    pod_percents: list[float] = []
    times: list[datetime] = []
    unread = 0
    for pod in running:
        found = readings.get((pod.namespace, pod.name), PodReadings())
        gpus = found.percents_by_gpu
        capacity = max(pod.requested_gpus, len(gpus))
        gpu_count += capacity
        if gpus:
            pod_used = sum(sum(values) / len(values) for values in gpus.values())
            used += pod_used
            pod_percents.append(pod_used / capacity)
            times.extend(found.times)
        elif capacity > 0:
            unread += 1
    if gpu_count == 0:
        return None  # a CPU-only workload has no GPU utilization to judge
    if unread:  # one GPU pod unread: the workload's use is unknown (module docstring)
        pod_percents, times = [], []
    vendor: GpuVendor = "nvidia" if any(pod.vendor == "nvidia" for pod in running) else "amd"
    return WorkloadUtilization(
        workload=running[0].workload,
        vendor=vendor,
        gpu_count=gpu_count,
        pod_count=len(running),
        # Every GPU pod read: their capacities add up to gpu_count (module docstring).
        percent=used / gpu_count if pod_percents else None,
        pod_percents=tuple(pod_percents),
        window_start=min(times, default=now),
        window_end=max(times, default=now),
    )
