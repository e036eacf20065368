"""Per-workload utilization and the underutilized and idle stretches (pure)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoResourceMonitoringConfig
from kaiwo_contracts.gpu_preemption import GpuPreemptionSettings
from kaiwo_contracts.plans import ObjectRef
from kaiwo_monitor.domain.pods import GpuVendor, MonitoredPod, workload_ref
from kaiwo_monitor.domain.samples import GpuSample
from kaiwo_monitor.domain.utilization import (
    Assessment,
    MonitoringPolicy,
    UtilizationState,
    assess,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
SEEN = datetime(2026, 3, 1, 11, 59, 50, tzinfo=UTC)
UID_A = "00000000-0000-4000-8000-00000000000a"
UID_B = "00000000-0000-4000-8000-00000000000b"
TRAIN = workload_ref(kind="KaiwoJob", name="train", namespace="team-a", uid=UID_A)
CHAT = workload_ref(kind="KaiwoService", name="chat", namespace="team-b", uid=UID_B)
DEFAULT = MonitoringPolicy()


def a_pod(
    name: str,
    workload: ObjectRef = TRAIN,
    *,
    gpus: int = 1,
    running: bool = True,
    vendor: GpuVendor = "amd",
) -> MonitoredPod:
    return MonitoredPod(
        namespace=workload.namespace,
        name=name,
        workload=workload,
        requested_gpus=gpus,
        vendor=vendor,
        running=running,
    )


def reading(
    pod: str, gpu: str, percent: float, *, namespace: str = "team-a", at: datetime = SEEN
) -> GpuSample:
    return GpuSample(namespace=namespace, pod=pod, gpu=gpu, percent=percent, at=at)


def run(
    pods: list[MonitoredPod],
    samples: list[GpuSample],
    *,
    states: dict[str, UtilizationState] | None = None,
    policy: MonitoringPolicy = DEFAULT,
    now: datetime = NOW,
) -> Assessment:
    return assess(pods=pods, samples=samples, states=states or {}, policy=policy, now=now)


# ------------------------------------------------------------------ utilization


def test_a_pod_using_its_two_gpus_at_30_and_50_percent_uses_40_percent() -> None:
    early = datetime(2026, 3, 1, 11, 59, 45, tzinfo=UTC)
    result = run(
        [a_pod("train-0", gpus=2)],
        [reading("train-0", "0", 30.0, at=early), reading("train-0", "1", 50.0)],
    )
    (utilization,) = result.utilizations
    assert utilization.workload == TRAIN
    assert utilization.percent == pytest.approx(40.0)
    assert utilization.ratio == pytest.approx(0.40)
    assert (utilization.gpu_count, utilization.pod_count, utilization.vendor) == (2, 1, "amd")
    assert (utilization.window_start, utilization.window_end) == (early, SEEN)
    assert result.underutilized == ()
    assert result.states == {}


def test_gpus_requested_but_not_reported_count_as_unused_capacity() -> None:
    result = run(
        [a_pod("train-0", gpus=4)], [reading("train-0", "0", 80.0), reading("train-0", "1", 80.0)]
    )
    (utilization,) = result.utilizations
    assert utilization.percent == pytest.approx(40.0)
    assert utilization.gpu_count == 4


def test_more_gpus_reported_than_requested_are_the_capacity() -> None:
    result = run(
        [a_pod("train-0", gpus=1)], [reading("train-0", "0", 60.0), reading("train-0", "1", 20.0)]
    )
    (utilization,) = result.utilizations
    assert utilization.percent == pytest.approx(40.0)
    assert utilization.gpu_count == 2


def test_the_workload_averages_its_pods() -> None:
    result = run(
        [a_pod("train-0"), a_pod("train-1")],
        [reading("train-0", "0", 10.0), reading("train-1", "3", 0.0)],
    )
    (utilization,) = result.utilizations
    assert utilization.percent == pytest.approx(5.0)
    assert (utilization.gpu_count, utilization.pod_count) == (2, 2)


def test_a_workload_uses_what_its_gpus_use_together_whatever_pod_holds_them() -> None:
    """The API reference: "the percentage utilization versus the requested capacity".
    Seven GPUs at 0 % in one pod and one at 100 % in another use 100 of 800 percent-GPUs,
    12.5 % (the mean of the pods' ratios said 50 %), below a threshold of 20 %. The pods'
    own ratios stay what idleness aggregates (decision 0228)."""
    pods = [a_pod("train-0", gpus=7), a_pod("train-1", gpus=1)]
    samples = [*(reading("train-0", str(gpu), 0.0) for gpu in range(7))]
    samples.append(reading("train-1", "0", 100.0))

    result = run(pods, samples, policy=MonitoringPolicy(threshold_percent=20.0))

    (judgment,) = result.judgments
    utilization = judgment.utilization
    assert (utilization.percent, utilization.ratio) == (12.5, 0.125)
    assert utilization.pod_percents == (0.0, 100.0)
    assert (utilization.gpu_count, utilization.pod_count) == (8, 2)
    assert judgment.underutilized_since == NOW
    assert [finding.since for finding in result.underutilized] == [NOW]
    assert [utilization.aggregated(a) for a in ("Min", "Max", "Avg")] == [0.0, 100.0, 50.0]


def test_the_monitor_judges_the_ratio_it_publishes_against_the_capped_threshold() -> None:
    """Decision 0228: the planner reads the published ratio (4 digits) against the threshold
    as a ratio capped at 1. A reading of 0.99996 % is published as 0.01, not below 1 %; a
    reading of 100 % is not below a threshold of 150 % (capped: 1.0). The monitor opened a
    stretch for both, and announced it, where the planner saw none; 0.99 % is below 1 %."""
    for threshold, percent, published in [(1.0, 0.99996, 0.01), (150.0, 100.0, 1.0)]:
        result = run(
            [a_pod("train-0")],
            [reading("train-0", "0", percent)],
            policy=MonitoringPolicy(threshold_percent=threshold),
        )
        (judgment,) = result.judgments
        assert judgment.utilization.ratio == published
        assert (judgment.underutilized_since, result.underutilized) == (None, ()), threshold
        assert result.states == {}
    low = run([a_pod("train-0")], [reading("train-0", "0", 0.99)])
    assert low.judgments[0].utilization.ratio == 0.0099
    assert low.judgments[0].underutilized_since == NOW


def test_idleness_is_judged_on_the_published_ratio_against_the_capped_threshold() -> None:
    """The same rule for the idle stretch: 4.99996 % is published as 0.05, not below 5 %;
    100 % is not below 150 % (capped)."""
    for threshold, percent in [(5.0, 4.99996), (150.0, 100.0)]:
        result = assess(
            pods=[a_pod("train-0")],
            samples=[reading("train-0", "0", percent)],
            states={},
            policy=DEFAULT,
            now=NOW,
            preemption={UID_A: GpuPreemptionSettings(threshold_percent=threshold)},
        )
        (judgment,) = result.judgments
        assert judgment.idle is not None
        assert judgment.idle.since is None, threshold
        assert result.states == {}


def test_a_gpu_pod_without_readings_makes_the_utilization_unknown() -> None:
    """Decision 0173: the other pod's readings alone say nothing of the unread one."""
    result = run([a_pod("train-0"), a_pod("train-1")], [reading("train-0", "0", 30.0)])
    (utilization,) = result.utilizations
    assert utilization.percent is None
    assert utilization.pod_percents == ()
    assert (utilization.window_start, utilization.window_end) == (NOW, NOW)
    assert (utilization.gpu_count, utilization.pod_count) == (2, 2)

    # Read too, the second pod makes it known; a CPU pod (an opted-in workload's head, all
    # its pods judged) has no GPU to read and changes nothing.
    result = assess(
        pods=[a_pod("train-0"), a_pod("train-1"), a_pod("head", gpus=0)],
        samples=[reading("train-0", "0", 30.0), reading("train-1", "0", 10.0)],
        states={},
        policy=DEFAULT,
        now=NOW,
        preemption={UID_A: GpuPreemptionSettings()},
    )
    (utilization,) = result.utilizations
    assert utilization.percent == pytest.approx(20.0)
    assert (utilization.gpu_count, utilization.pod_count) == (2, 3)


def test_an_unread_busy_pod_opens_no_idle_or_underutilized_stretch() -> None:
    """One pod reads 0 %, the other's node exporter is gone: neither stretch opens, and open
    ones are kept as they were (neither ended nor extended)."""
    settings = GpuPreemptionSettings(threshold_percent=50.0)  # Max, the default
    pods = [a_pod("train-0"), a_pod("train-1")]
    samples = [reading("train-0", "0", 0.0)]

    fresh = assess(
        pods=pods,
        samples=samples,
        states={},
        policy=DEFAULT,
        now=NOW,
        preemption={UID_A: settings},
    )
    (judgment,) = fresh.judgments
    assert judgment.idle is not None
    assert (judgment.idle.percent, judgment.idle.since) == (None, None)
    assert judgment.underutilized_since is None
    assert fresh.underutilized == ()
    assert fresh.states == {}

    open_since = NOW - timedelta(minutes=3)
    kept = UtilizationState(workload_uid=UID_A, below_since=open_since, idle_since=open_since)
    later = assess(
        pods=pods,
        samples=samples,
        states={UID_A: kept},
        policy=DEFAULT,
        now=NOW,
        preemption={UID_A: settings},
    )
    assert later.states == {UID_A: kept}


def test_two_series_of_one_gpu_are_averaged_and_readings_are_clamped() -> None:
    result = run(
        [a_pod("train-0", gpus=2)],
        [
            reading("train-0", "0", 20.0),
            reading("train-0", "0", 40.0),
            reading("train-0", "1", 150.0),
        ],
    )
    (utilization,) = result.utilizations
    assert utilization.percent == pytest.approx(65.0)  # (30 + 100) / 2


def test_partitions_are_separate_gpus() -> None:
    result = run(
        [a_pod("train-0", gpus=2)],
        [reading("train-0", "0/0", 10.0), reading("train-0", "0/1", 30.0)],
    )
    assert result.utilizations[0].percent == pytest.approx(20.0)


def test_without_any_reading_the_utilization_is_unknown() -> None:
    result = run([a_pod("train-0", gpus=2)], [reading("other", "0", 90.0)])
    (utilization,) = result.utilizations
    assert utilization.percent is None
    assert utilization.ratio is None
    assert (utilization.window_start, utilization.window_end) == (NOW, NOW)
    assert utilization.gpu_count == 2


def test_nvidia_pods_make_an_nvidia_workload() -> None:
    result = run([a_pod("train-0", vendor="nvidia")], [reading("train-0", "0", 50.0)])
    assert result.utilizations[0].vendor == "nvidia"


def test_cpu_only_workloads_and_pending_pods_are_not_judged() -> None:
    result = run(
        [a_pod("train-0", gpus=0), a_pod("chat-0", CHAT, running=False)],
        [reading("chat-0", "0", 0.0, namespace="team-b")],
    )
    assert result == Assessment()


def test_readings_of_the_same_pod_name_in_another_namespace_do_not_count() -> None:
    result = run([a_pod("train-0")], [reading("train-0", "0", 75.0, namespace="team-b")])
    assert result.utilizations[0].percent is None


def test_workloads_come_out_in_uid_order() -> None:
    result = run(
        [a_pod("chat-0", CHAT), a_pod("train-0")],
        [reading("chat-0", "0", 50.0, namespace="team-b"), reading("train-0", "0", 50.0)],
    )
    assert [u.workload.uid for u in result.utilizations] == [UID_A, UID_B]


# ------------------------------------------------------------------ namespaces


def test_without_target_namespaces_everything_but_kube_system_is_monitored() -> None:
    system = workload_ref(kind="KaiwoJob", name="sys", namespace="kube-system", uid="uid-sys")
    result = run(
        [a_pod("train-0"), a_pod("sys-0", system), a_pod("chat-0", CHAT)],
        [
            reading("train-0", "0", 50.0),
            reading("sys-0", "0", 50.0, namespace="kube-system"),
            reading("chat-0", "0", 50.0, namespace="team-b"),
        ],
    )
    assert [u.workload.name for u in result.utilizations] == ["train", "chat"]


def test_target_namespaces_limit_the_monitoring() -> None:
    policy = MonitoringPolicy(target_namespaces=frozenset({"team-b"}))
    result = run(
        [a_pod("train-0"), a_pod("chat-0", CHAT)],
        [reading("train-0", "0", 0.0), reading("chat-0", "0", 0.0, namespace="team-b")],
        policy=policy,
    )
    assert [u.workload.name for u in result.utilizations] == ["chat"]
    assert [f.utilization.workload.name for f in result.underutilized] == ["chat"]


# ------------------------------------------------------------------ underutilization


def test_falling_below_the_threshold_opens_a_stretch() -> None:
    result = run([a_pod("train-0")], [reading("train-0", "0", 0.5)])
    (finding,) = result.underutilized
    assert finding.since == NOW
    assert finding.threshold_ratio == pytest.approx(0.01)
    assert finding.utilization.percent == pytest.approx(0.5)
    assert result.states == {
        UID_A: UtilizationState(
            workload_uid=UID_A, below_since=NOW, below_threshold=0.01, read_at=NOW
        )
    }
    (judgment,) = result.judgments
    assert (judgment.underutilized_since, judgment.idle) == (NOW, None)


def test_staying_below_keeps_the_start_and_reports_nothing_new() -> None:
    since = NOW - timedelta(hours=1)
    previous = {
        UID_A: UtilizationState(workload_uid=UID_A, below_since=since, below_threshold=0.01)
    }
    result = run([a_pod("train-0")], [reading("train-0", "0", 0.0)], states=previous)
    assert result.underutilized == ()
    assert result.states == {
        UID_A: UtilizationState(
            workload_uid=UID_A, below_since=since, below_threshold=0.01, read_at=NOW
        )
    }


def test_a_reading_after_a_gap_starts_both_stretches_anew() -> None:
    """Decision 0173: ten minutes unread count neither toward the grace period nor toward
    ``terminateUnderutilizedAfter``; a minute unread (within ``gap``) breaks nothing."""
    since = NOW - timedelta(minutes=12)
    settings = GpuPreemptionSettings(threshold_percent=50.0)

    def after(unread: timedelta) -> Assessment:
        previous = UtilizationState(
            workload_uid=UID_A, below_since=since, idle_since=since, read_at=NOW - unread
        )
        return assess(
            pods=[a_pod("train-0")],
            samples=[reading("train-0", "0", 0.0)],
            states={UID_A: previous},
            policy=DEFAULT,
            now=NOW,
            preemption={UID_A: settings},
            gap=timedelta(minutes=2),
        )

    broken = after(timedelta(minutes=10))
    assert broken.states == {
        UID_A: UtilizationState(
            workload_uid=UID_A,
            below_since=NOW,
            below_threshold=0.01,
            idle_since=NOW,
            idle_threshold=0.5,
            idle_aggregation="Max",
            read_at=NOW,
        )
    }
    (judgment,) = broken.judgments
    assert judgment.idle is not None
    assert (judgment.underutilized_since, judgment.idle.since) == (NOW, NOW)
    (finding,) = broken.underutilized  # announced again: a new stretch
    assert finding.since == NOW

    kept = after(timedelta(minutes=1))
    assert kept.states == {
        UID_A: UtilizationState(
            workload_uid=UID_A,
            below_since=since,
            below_threshold=0.01,
            idle_since=since,
            idle_threshold=0.5,
            idle_aggregation="Max",
            read_at=NOW,
        )
    }
    assert kept.underutilized == ()


def test_a_reading_at_the_threshold_ends_the_stretch() -> None:
    previous = {UID_A: UtilizationState(workload_uid=UID_A, below_since=NOW - timedelta(hours=2))}
    result = run([a_pod("train-0")], [reading("train-0", "0", 1.0)], states=previous)
    assert result.underutilized == ()
    assert result.states == {}


def test_a_threshold_of_zero_never_flags() -> None:
    result = run(
        [a_pod("train-0")],
        [reading("train-0", "0", 0.0)],
        policy=MonitoringPolicy(threshold_percent=0.0),
    )
    assert result.underutilized == ()


def test_an_unknown_utilization_keeps_the_stretch_without_deciding() -> None:
    since = NOW - timedelta(hours=30)
    previous = {UID_A: UtilizationState(workload_uid=UID_A, below_since=since)}
    result = run([a_pod("train-0")], [], states=previous)
    assert result.states == previous
    (judgment,) = result.judgments
    assert judgment.utilization.percent is None
    assert judgment.underutilized_since == since


def test_pending_pods_keep_the_stretch_and_a_workload_without_pods_loses_it() -> None:
    since = NOW - timedelta(hours=3)
    previous = {
        UID_A: UtilizationState(workload_uid=UID_A, below_since=since),
        UID_B: UtilizationState(workload_uid=UID_B, below_since=since),
    }
    result = run([a_pod("train-0", running=False)], [], states=previous)
    assert result.states == {UID_A: previous[UID_A]}


def test_a_lowered_threshold_starts_the_stretch_anew_at_the_first_reading_below_it() -> None:
    """Decision 0213, as reproduced: 23 h at 40 % under a threshold of 50 %, then the
    threshold set to 20 % and a reading of 5 %: the stretch is below 20 % since this reading,
    not since 23 h ago (the planner terminated it an hour later, "below 20% since T0")."""
    t0 = NOW - timedelta(hours=23)
    previous = {
        UID_A: UtilizationState(
            workload_uid=UID_A, below_since=t0, below_threshold=0.5, read_at=NOW - SECOND
        )
    }
    twenty = MonitoringPolicy(threshold_percent=20.0)

    result = run([a_pod("train-0")], [reading("train-0", "0", 5.0)], states=previous, policy=twenty)

    assert result.states == {
        UID_A: UtilizationState(
            workload_uid=UID_A, below_since=NOW, below_threshold=0.2, read_at=NOW
        )
    }
    (judgment,) = result.judgments
    assert (judgment.threshold_ratio, judgment.underutilized_since) == (0.2, NOW)
    (finding,) = result.underutilized  # a new stretch, announced
    assert (finding.since, finding.threshold_ratio) == (NOW, 0.2)

    # 40 % is not below 20 %: the lowered threshold ends the stretch.
    busy = run([a_pod("train-0")], [reading("train-0", "0", 40.0)], states=previous, policy=twenty)
    assert busy.states == {}
    assert busy.judgments[0].underutilized_since is None

    # No reading meanwhile: a stretch below 50 % is no stretch below 20 %, so none is kept
    # (the first reading below 20 % opens one, as above).
    unread = run([a_pod("train-0")], [], states=previous, policy=twenty)
    assert unread.states == {}
    assert unread.judgments[0].underutilized_since is None
    assert unread.underutilized == ()


def test_a_raised_threshold_keeps_the_stretch_and_holds_it_to_the_new_one() -> None:
    """Below 20 % since t0 is below 50 % since t0 too; from then on the stretch is below
    50 %, so lowering the threshold back to 20 % starts it anew."""
    t0 = NOW - timedelta(hours=5)
    previous = {UID_A: UtilizationState(workload_uid=UID_A, below_since=t0, below_threshold=0.2)}
    fifty = MonitoringPolicy(threshold_percent=50.0)

    raised = run([a_pod("train-0")], [reading("train-0", "0", 40.0)], states=previous, policy=fifty)

    assert raised.states == {
        UID_A: UtilizationState(
            workload_uid=UID_A, below_since=t0, below_threshold=0.5, read_at=NOW
        )
    }
    assert raised.judgments[0].underutilized_since == t0
    assert raised.underutilized == ()

    later = NOW + timedelta(minutes=1)
    lowered = run(
        [a_pod("train-0")],
        [reading("train-0", "0", 10.0, at=later)],
        states=dict(raised.states),
        policy=MonitoringPolicy(threshold_percent=20.0),
        now=later,
    )
    assert lowered.states == {
        UID_A: UtilizationState(
            workload_uid=UID_A, below_since=later, below_threshold=0.2, read_at=later
        )
    }
    assert [f.since for f in lowered.underutilized] == [later]


def test_a_stretch_an_older_monitor_kept_is_taken_as_judged_against_the_threshold_in_force() -> (
    None
):
    """Its bucket value has no threshold (decision 0213): kept, and from now on held to the
    threshold in force."""
    t0 = NOW - timedelta(hours=5)
    previous = {UID_A: UtilizationState(workload_uid=UID_A, below_since=t0)}
    result = run(
        [a_pod("train-0")],
        [reading("train-0", "0", 5.0)],
        states=previous,
        policy=MonitoringPolicy(threshold_percent=20.0),
    )
    assert result.states == {
        UID_A: UtilizationState(
            workload_uid=UID_A, below_since=t0, below_threshold=0.2, read_at=NOW
        )
    }
    assert result.underutilized == ()


def test_a_namespace_left_out_of_the_targets_ends_the_stretch_even_unread() -> None:
    """Decision 0213: a workload no longer monitored has no underutilized stretch, even
    when it is not read (opted in to idle preemption, it is still judged for idleness); so
    when its namespace is monitored again, its stretch starts at its first reading below."""
    t0 = NOW - timedelta(hours=5)
    previous = {
        UID_A: UtilizationState(
            workload_uid=UID_A,
            below_since=t0,
            below_threshold=0.01,
            idle_since=t0,
            idle_threshold=0.2,
            idle_aggregation="Max",
        )
    }
    elsewhere = MonitoringPolicy(target_namespaces=frozenset({"team-b"}))
    narrowed = assess(
        pods=[a_pod("train-0")],
        samples=[],
        states=previous,
        policy=elsewhere,
        now=NOW,
        preemption={UID_A: ALWAYS_MAX},
    )
    assert narrowed.states == {
        UID_A: UtilizationState(
            workload_uid=UID_A, idle_since=t0, idle_threshold=0.2, idle_aggregation="Max"
        )
    }

    later = NOW + timedelta(minutes=1)
    widened = assess(
        pods=[a_pod("train-0")],
        samples=[reading("train-0", "0", 0.0, at=later)],
        states=dict(narrowed.states),
        policy=DEFAULT,
        now=later,
        preemption={UID_A: ALWAYS_MAX},
    )
    assert widened.judgments[0].underutilized_since == later
    assert [f.since for f in widened.underutilized] == [later]


# ------------------------------------------------------------------ GPU idle (opted in)

ALWAYS_MAX = GpuPreemptionSettings(threshold_percent=20.0, policy="Always", aggregation="Max")


def test_max_aggregation_keeps_a_workload_with_one_busy_pod_active() -> None:
    pods = [a_pod("train-0"), a_pod("train-1")]
    samples = [reading("train-0", "0", 5.0), reading("train-1", "0", 60.0)]
    result = assess(
        pods=pods,
        samples=samples,
        states={},
        policy=DEFAULT,
        now=NOW,
        preemption={UID_A: ALWAYS_MAX},
    )
    (judgment,) = result.judgments
    assert judgment.idle is not None
    assert judgment.idle.percent == pytest.approx(60.0)
    assert judgment.idle.since is None
    assert result.states == {}


def test_min_aggregation_makes_the_same_workload_idle_since_now() -> None:
    pods = [a_pod("train-0"), a_pod("train-1")]
    samples = [reading("train-0", "0", 5.0), reading("train-1", "0", 60.0)]
    settings = GpuPreemptionSettings(threshold_percent=20.0, aggregation="Min")
    result = assess(
        pods=pods,
        samples=samples,
        states={},
        policy=DEFAULT,
        now=NOW,
        preemption={UID_A: settings},
    )
    (judgment,) = result.judgments
    assert judgment.idle is not None
    assert (judgment.idle.percent, judgment.idle.since) == (pytest.approx(5.0), NOW)
    assert result.states == {
        UID_A: UtilizationState(
            workload_uid=UID_A,
            idle_since=NOW,
            idle_threshold=0.2,
            idle_aggregation="Min",
            read_at=NOW,
        )
    }


def test_an_opted_in_workload_outside_the_target_namespaces_is_judged_for_idleness_only() -> None:
    since = NOW - timedelta(minutes=20)
    previous = {UID_A: UtilizationState(workload_uid=UID_A, idle_since=since)}
    result = assess(
        pods=[a_pod("train-0")],
        samples=[reading("train-0", "0", 1.0)],
        states=previous,
        policy=MonitoringPolicy(target_namespaces=frozenset({"team-b"})),
        now=NOW,
        preemption={UID_A: ALWAYS_MAX},
    )
    (judgment,) = result.judgments
    assert (judgment.threshold_ratio, judgment.underutilized_since) == (None, None)
    assert judgment.idle is not None and judgment.idle.since == since
    assert result.underutilized == ()


def test_no_readings_keep_the_idle_stretch_as_it_was() -> None:
    since = NOW - timedelta(minutes=20)
    previous = {UID_A: UtilizationState(workload_uid=UID_A, idle_since=since)}
    result = assess(
        pods=[a_pod("train-0")],
        samples=[],
        states=previous,
        policy=DEFAULT,
        now=NOW,
        preemption={UID_A: ALWAYS_MAX},
    )
    (judgment,) = result.judgments
    assert judgment.idle is not None
    assert (judgment.idle.percent, judgment.idle.since) == (None, since)
    assert result.states == previous


def test_a_lowered_idle_threshold_or_a_stricter_aggregation_starts_the_idle_stretch_anew() -> None:
    """Decision 0213: idle under Max below 50 % since s is not idle below 20 %; idle under
    Max is idle under Avg and Min (kept), idle under Min is not idle under Max (anew)."""
    since = NOW - timedelta(minutes=8)
    pods = [a_pod("train-0"), a_pod("train-1")]
    samples = [reading("train-0", "0", 5.0), reading("train-1", "0", 10.0)]
    before = UtilizationState(
        workload_uid=UID_A, idle_since=since, idle_threshold=0.5, idle_aggregation="Max"
    )

    def idle_since(settings: GpuPreemptionSettings, state: UtilizationState = before) -> object:
        result = assess(
            pods=pods,
            samples=samples,
            states={UID_A: state},
            policy=MonitoringPolicy(threshold_percent=0.0),  # no underutilized stretch
            now=NOW,
            preemption={UID_A: settings},
        )
        (judgment,) = result.judgments
        assert judgment.idle is not None
        state_after = result.states[UID_A]
        assert state_after.idle_since == judgment.idle.since
        assert (state_after.idle_threshold, state_after.idle_aggregation) == (
            settings.threshold_ratio,
            settings.aggregation,
        )
        return judgment.idle.since

    assert idle_since(GpuPreemptionSettings(threshold_percent=50.0, aggregation="Max")) == since
    assert idle_since(GpuPreemptionSettings(threshold_percent=80.0, aggregation="Max")) == since
    assert idle_since(GpuPreemptionSettings(threshold_percent=20.0, aggregation="Max")) == NOW
    assert idle_since(GpuPreemptionSettings(threshold_percent=50.0, aggregation="Avg")) == since
    assert idle_since(GpuPreemptionSettings(threshold_percent=50.0, aggregation="Min")) == since
    under_min = replace(before, idle_aggregation="Min")
    max_50 = GpuPreemptionSettings(threshold_percent=50.0, aggregation="Max")
    assert idle_since(max_50, under_min) == NOW
    assert (
        idle_since(GpuPreemptionSettings(threshold_percent=50.0, aggregation="Avg"), under_min)
        == NOW
    )


def test_a_workload_no_longer_opted_in_loses_its_idle_stretch() -> None:
    """Time nobody judged for idleness is no idle time: opted in again later, the workload
    is idle from its first idle reading then, not from before it opted out."""
    since = NOW - timedelta(minutes=8)
    previous = {
        UID_A: UtilizationState(
            workload_uid=UID_A, idle_since=since, idle_threshold=0.2, idle_aggregation="Max"
        )
    }
    result = run([a_pod("train-0")], [reading("train-0", "0", 50.0)], states=previous)
    assert result.states == {}


# ------------------------------------------------------------------ the policy


def test_the_policy_from_the_default_kaiwoconfig_section() -> None:
    assert MonitoringPolicy.from_config(KaiwoResourceMonitoringConfig()) == MonitoringPolicy(
        threshold_percent=1.0,
        target_namespaces=frozenset(),
    )


def test_the_policy_from_a_written_kaiwoconfig_section() -> None:
    section = KaiwoResourceMonitoringConfig.model_validate(
        {
            "lowUtilizationThreshold": 12.5,
            "targetNamespaces": ["team-a", "team-b"],
            "terminateUnderutilized": True,
            "terminateUnderutilizedAfter": "1h30m",
        }
    )
    policy = MonitoringPolicy.from_config(section)
    assert policy == MonitoringPolicy(
        threshold_percent=12.5,
        target_namespaces=frozenset({"team-a", "team-b"}),
    )
    assert policy.threshold_ratio == pytest.approx(0.125)


def test_a_threshold_above_100_percent_is_a_ratio_of_one() -> None:
    assert MonitoringPolicy(threshold_percent=150.0).threshold_ratio == 1.0


def test_the_gpu_profile_targets_pods_that_requested_gpus_in_monitored_namespaces() -> None:
    from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoResourceMonitoringConfig

    policy = MonitoringPolicy.from_config(KaiwoResourceMonitoringConfig(profile="gpu"))
    assert policy.profile == "gpu"
    assert policy.targets(a_pod("train-0", gpus=2))
    assert not policy.targets(a_pod("train-1", gpus=0))
    system = workload_ref(kind="KaiwoJob", name="sys", namespace="kube-system", uid="uid-sys")
    assert not policy.targets(a_pod("sys-0", system, gpus=1))
