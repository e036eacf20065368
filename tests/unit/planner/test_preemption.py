from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoSchedulingConfig
from kaiwo_contracts.plans import ObjectRef, RefKey
from kaiwo_planner.domain.scheduling.preemption import (
    FreeingWorkload,
    PendingWorkload,
    Preemption,
    PreemptionDecision,
    RunningWorkload,
    decide_preemptions,
)
from kaiwo_planner.domain.status.workload_status import TerminationRequest

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
FIVE_MINUTES = KaiwoSchedulingConfig()  # pendingThresholdForPreemption defaults to 5m


def ref(name: str, kind: str = "KaiwoJob") -> ObjectRef:
    return ObjectRef(api_version="kaiwo.silogen.ai/v1alpha1", kind=kind, name=name, namespace="t")


def key(name: str) -> RefKey:
    return ("kaiwo.silogen.ai/v1alpha1", "KaiwoJob", "t", name, "")


def running(
    name: str,
    *,
    gpus: int = 8,
    vendor: str = "amd",
    queue: str = "kaiwo",
    started_minutes_ago: int = 120,
    duration_minutes: int | None = 60,
) -> RunningWorkload:
    return RunningWorkload(
        key=key(name),
        gpu_vendor=vendor,
        gpus=gpus,
        cluster_queue=queue,
        start_time=NOW - timedelta(minutes=started_minutes_ago),
        duration=None if duration_minutes is None else timedelta(minutes=duration_minutes),
    )


def waiting(
    name: str, *, gpus: int = 8, vendor: str = "amd", queue: str = "kaiwo", minutes: int = 10
) -> PendingWorkload:
    return PendingWorkload(
        key=key(name),
        gpu_vendor=vendor,
        gpus=gpus,
        cluster_queue=queue,
        pending_since=NOW - timedelta(minutes=minutes),
    )


def request(beneficiary: str, gpus: int, vendor: str = "amd") -> TerminationRequest:
    return TerminationRequest(
        reason="DurationExceededWithActiveGpuDemand",
        message=(
            "Terminated since duration was exceeded and there is active GPU demand: "
            f"KaiwoJob/t/{beneficiary} has waited for {gpus} {vendor} GPUs longer than 5m0s"
        ),
        beneficiary=ref(beneficiary),
    )


def test_expired_without_demand_is_not_terminated() -> None:
    decision = decide_preemptions(
        running=[running("old"), running("fresh", started_minutes_ago=10)],
        pending=[],
        scheduling=FIVE_MINUTES,
        now=NOW,
    )
    assert decision == PreemptionDecision(expired=(ref("old"),), preemptions=())


def test_oldest_overdue_first_and_only_as_many_as_needed() -> None:
    decision = decide_preemptions(
        running=[
            running("a", gpus=4, started_minutes_ago=90),  # 30 min overdue
            running("b", gpus=4, started_minutes_ago=180),  # 120 min overdue
            running("c", gpus=4, started_minutes_ago=120),  # 60 min overdue
            running("no-duration", duration_minutes=None),
        ],
        pending=[waiting("wait", gpus=8)],
        scheduling=FIVE_MINUTES,
        now=NOW,
    )
    assert decision.expired == (ref("b"), ref("c"), ref("a"))
    assert decision.preemptions == (
        Preemption(victim=ref("b"), beneficiary=ref("wait"), request=request("wait", 8)),
        Preemption(victim=ref("c"), beneficiary=ref("wait"), request=request("wait", 8)),
    )
    assert decision.termination_for(ref("c")) == request("wait", 8)
    assert decision.termination_for(ref("a")) is None


def test_pending_below_threshold_preempts_nothing() -> None:
    decision = decide_preemptions(
        running=[running("old")],
        pending=[waiting("new", minutes=4)],
        scheduling=FIVE_MINUTES,
        now=NOW,
    )
    assert decision.preemptions == ()


def test_threshold_from_config() -> None:
    decision = decide_preemptions(
        running=[running("old")],
        pending=[waiting("new", minutes=4)],
        scheduling=KaiwoSchedulingConfig(pending_threshold_for_preemption="1s"),
        now=NOW,
    )
    assert [p.victim for p in decision.preemptions] == [ref("old")]
    assert decision.preemptions[0].request.message.endswith("longer than 1s")


def test_vendor_queue_and_gpu_demand_must_match() -> None:
    decision = decide_preemptions(
        running=[
            running("nvidia-old", vendor="nvidia"),
            running("other-queue", queue="research"),
            running("cpu-only", gpus=0),
        ],
        pending=[waiting("amd-wait"), waiting("cpu-wait", gpus=0, vendor="nvidia")],
        scheduling=FIVE_MINUTES,
        now=NOW,
    )
    assert decision.expired == (ref("cpu-only"), ref("nvidia-old"), ref("other-queue"))
    assert decision.preemptions == ()


def test_vendor_case_is_ignored_and_each_victim_is_taken_once() -> None:
    decision = decide_preemptions(
        running=[
            running("x", vendor="NVIDIA"),
            running("y", vendor="nvidia", started_minutes_ago=70),
        ],
        pending=[
            waiting("first", vendor="nvidia", gpus=8, minutes=30),
            waiting("second", vendor="nvidia", gpus=8, minutes=20),
        ],
        scheduling=FIVE_MINUTES,
        now=NOW,
    )
    assert decision.preemptions == (
        Preemption(
            victim=ref("x"), beneficiary=ref("first"), request=request("first", 8, "nvidia")
        ),
        Preemption(
            victim=ref("y"), beneficiary=ref("second"), request=request("second", 8, "nvidia")
        ),
    )


def test_not_enough_gpus_takes_every_candidate() -> None:
    decision = decide_preemptions(
        running=[running("small", gpus=2), running("tiny", gpus=1, started_minutes_ago=100)],
        pending=[waiting("big", gpus=30)],
        scheduling=FIVE_MINUTES,
        now=NOW,
    )
    assert [p.victim for p in decision.preemptions] == [ref("small"), ref("tiny")]


# ------------------------------------------------------------ GPUs on their way (decision 0148)


def waiting_with_uid(name: str, *, gpus: int, minutes: int = 10) -> PendingWorkload:
    """A waiting workload with a uid: a terminated workload's status names its beneficiary
    by uid."""
    return PendingWorkload(
        key=(*key(name)[:4], f"uid-{name}"),
        gpu_vendor="amd",
        gpus=gpus,
        cluster_queue="kaiwo",
        pending_since=NOW - timedelta(minutes=minutes),
    )


def freeing(
    name: str, *, gpus: int, beneficiary: str | None, queue: str = "kaiwo"
) -> FreeingWorkload:
    return FreeingWorkload(
        key=key(name), gpu_vendor="amd", gpus=gpus, cluster_queue=queue, beneficiary=beneficiary
    )


def test_gpus_freed_for_a_waiting_workload_cover_it_and_no_one_else_is_terminated() -> None:
    """Real stack, decision 0148: an expired Job of 8 was terminated for a waiter of 8 and,
    before Kueue admitted the waiter, a second expired Job of 8 for the same waiter."""
    decision = decide_preemptions(
        running=[running("second", gpus=8)],
        pending=[waiting_with_uid("waits", gpus=8)],
        scheduling=FIVE_MINUTES,
        now=NOW,
        freeing=[freeing("first", gpus=8, beneficiary="uid-waits")],
    )
    assert decision == PreemptionDecision(expired=(ref("second"),), preemptions=())


def test_gpus_freed_for_one_waiter_do_not_count_for_another() -> None:
    """4 of the 8 the older waiter needs are on their way: the first expired one (8) goes to
    it; the younger waiter, whom nothing was freed for, takes the next one."""
    decision = decide_preemptions(
        running=[
            running("a", gpus=8, started_minutes_ago=180),
            running("b", gpus=8, started_minutes_ago=120),
            running("c", gpus=8, started_minutes_ago=90),
        ],
        pending=[
            waiting_with_uid("older", gpus=8, minutes=20),
            waiting_with_uid("younger", gpus=8, minutes=10),
        ],
        scheduling=FIVE_MINUTES,
        now=NOW,
        freeing=[freeing("stopped", gpus=4, beneficiary="uid-older")],
    )
    victims = [(p.victim.name, p.beneficiary.name) for p in decision.preemptions]
    assert victims == [("a", "older"), ("b", "younger")]


def test_a_termination_not_yet_observed_frees_gpus_for_the_first_waiter_it_competes_with() -> None:
    """Its status still says it runs: it is not chosen again, and its 8 GPUs cover the older
    waiter; one of another queue covers nobody here, so the younger waiter gets the first
    expired workload."""
    decision = decide_preemptions(
        running=[
            running("being-stopped", gpus=8, started_minutes_ago=300),
            running("a", gpus=8, started_minutes_ago=180),
            running("b", gpus=8, started_minutes_ago=120),
        ],
        pending=[
            waiting_with_uid("older", gpus=8, minutes=20),
            waiting_with_uid("younger", gpus=8, minutes=10),
        ],
        scheduling=FIVE_MINUTES,
        now=NOW,
        freeing=[
            freeing("being-stopped", gpus=8, beneficiary=None),
            freeing("other-queue", gpus=8, beneficiary=None, queue="other"),
        ],
    )
    victims = [(p.victim.name, p.beneficiary.name) for p in decision.preemptions]
    assert victims == [("a", "younger")]
    assert decision.expired == (ref("a"), ref("b"))
    assert decision.termination_for(ref("being-stopped")) is None


def test_gpus_on_their_way_short_of_the_need_are_topped_up() -> None:
    """4 of 8 are on their way: one more expired workload of 4 is enough."""
    decision = decide_preemptions(
        running=[
            running("a", gpus=4, started_minutes_ago=180),
            running("b", gpus=4, started_minutes_ago=120),
        ],
        pending=[waiting_with_uid("waits", gpus=8)],
        scheduling=FIVE_MINUTES,
        now=NOW,
        freeing=[freeing("stopped", gpus=4, beneficiary="uid-waits")],
    )
    assert [p.victim.name for p in decision.preemptions] == ["a"]
