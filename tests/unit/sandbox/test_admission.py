"""Kueue-style admission: order, quota fit per flavor, strict and best-effort FIFO (expected
admissions worked out by hand from the quotas below)."""

from __future__ import annotations

from decimal import Decimal

from kaiwo_sandbox.admission import (
    Admission,
    ClusterQueue,
    FlavorQuota,
    QueuedWorkload,
    ResourceGroup,
    Usage,
    Waiting,
    admit,
    assign_flavors,
    queue_order,
)

AMD = FlavorQuota("amd-mi300x", {"amd.com/gpu": Decimal(16), "nvidia.com/gpu": Decimal(0)})
NVIDIA = FlavorQuota("nvidia-h100", {"amd.com/gpu": Decimal(0), "nvidia.com/gpu": Decimal(8)})
GPUS = ResourceGroup(frozenset({"amd.com/gpu", "nvidia.com/gpu"}), (AMD, NVIDIA))
RESEARCH = ClusterQueue("research", (GPUS,))


def queued(
    name: str, *, amd: int = 0, nvidia: int = 0, priority: int = 0, created: str = "t1"
) -> QueuedWorkload:
    requests = {}
    if amd:
        requests["amd.com/gpu"] = Decimal(amd)
    if nvidia:
        requests["nvidia.com/gpu"] = Decimal(nvidia)
    return QueuedWorkload(
        key=f"ml-team/{name}",
        cluster_queue="research",
        priority=priority,
        created=created,
        requests=requests,
    )


def test_higher_priority_first_then_first_come_then_name() -> None:
    late_high = queued("c", priority=100, created="t3")
    early = queued("b", created="t1")
    same_time = queued("a", created="t1")
    assert [w.key for w in queue_order([early, late_high, same_time])] == [
        "ml-team/c",
        "ml-team/a",
        "ml-team/b",
    ]


def test_two_8_gpu_jobs_fill_16_and_the_third_waits_with_the_shortfall() -> None:
    admitted, waiting = admit(
        queues={"research": RESEARCH},
        pending=[
            queued("first", amd=8, created="t1"),
            queued("second", amd=8, created="t2"),
            queued("third", amd=8, created="t3"),
        ],
        usage=Usage(),
    )
    assert admitted == [
        Admission("ml-team/first", "research", {"amd.com/gpu": "amd-mi300x"}),
        Admission("ml-team/second", "research", {"amd.com/gpu": "amd-mi300x"}),
    ]
    assert waiting == [
        Waiting(
            "ml-team/third",
            "couldn't assign flavors to pod set main: insufficient quota for amd.com/gpu in "
            "flavor nvidia-h100, previously considered podsets requests (0) + current podset "
            "request (8) > maximum capacity (0), insufficient unused quota for amd.com/gpu in "
            "flavor amd-mi300x, 8 more needed",
        )
    ]


def test_quota_in_use_counts() -> None:
    usage = Usage({("research", "amd-mi300x", "amd.com/gpu"): Decimal(12)})
    assignment, reason = assign_flavors(RESEARCH, {"amd.com/gpu": Decimal(4)}, usage)
    assert assignment == {"amd.com/gpu": "amd-mi300x"}
    assignment, reason = assign_flavors(RESEARCH, {"amd.com/gpu": Decimal(5)}, usage)
    assert assignment is None
    # As Kueue v0.17 words it (seen on the real stack): every flavor's reason, sorted.
    assert reason == (
        "insufficient quota for amd.com/gpu in flavor nvidia-h100, previously considered "
        "podsets requests (0) + current podset request (5) > maximum capacity (0), "
        "insufficient unused quota for amd.com/gpu in flavor amd-mi300x, 1 more needed"
    )


def test_the_first_flavor_that_fits_is_taken() -> None:
    assignment, _ = assign_flavors(RESEARCH, {"nvidia.com/gpu": Decimal(1)}, Usage())
    assert assignment == {"nvidia.com/gpu": "nvidia-h100"}


def test_a_resource_no_group_covers_is_inadmissible() -> None:
    assignment, reason = assign_flavors(RESEARCH, {"cpu": Decimal(4)}, Usage())
    assert assignment is None
    assert (
        reason == "resource cpu unavailable in ClusterQueue research (no resource group covers it)"
    )


def test_best_effort_fifo_lets_a_smaller_later_workload_through() -> None:
    admitted, waiting = admit(
        queues={"research": RESEARCH},
        pending=[
            queued("big", amd=16, created="t1"),
            queued("huge", amd=24, created="t2"),
            queued("small", nvidia=2, created="t3"),
        ],
        usage=Usage(),
    )
    assert [a.key for a in admitted] == ["ml-team/big", "ml-team/small"]
    assert [w.key for w in waiting] == ["ml-team/huge"]


def test_strict_fifo_blocks_behind_the_head() -> None:
    strict = ClusterQueue("research", (GPUS,), strict_fifo=True)
    admitted, waiting = admit(
        queues={"research": strict},
        pending=[
            queued("huge", amd=24, created="t1"),
            queued("small", nvidia=2, created="t2"),
        ],
        usage=Usage(),
    )
    assert admitted == []
    assert waiting[1] == Waiting("ml-team/small", "waiting behind earlier workloads in research")


def test_an_unknown_cluster_queue_is_named() -> None:
    admitted, waiting = admit(queues={}, pending=[queued("x", amd=1)], usage=Usage())
    assert admitted == []
    assert waiting == [Waiting("ml-team/x", "ClusterQueue research doesn't exist")]
