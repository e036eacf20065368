"""GPU idle preemption (pure): victims, beneficiaries and reasons, written out by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kaiwo_contracts.plans import ObjectRef, RefKey
from kaiwo_planner.domain.scheduling.idle_preemption import (
    FlavorReach,
    GpuDemand,
    IdleWorkload,
    InFlight,
    QuotaScope,
    decide_idle_preemptions,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
GRACE = timedelta(minutes=10)


def key(name: str) -> RefKey:
    return ("kaiwo.silogen.ai/v1alpha1", "KaiwoJob", "team-a", name, f"uid-{name}")


def idle(
    name: str,
    gpus: int,
    *,
    idle_minutes: int = 30,
    policy: str = "OnPressure",
    vendor: str = "amd",
    quota: QuotaScope | None = None,
) -> IdleWorkload:
    return IdleWorkload(
        key=key(name),
        vendor=vendor,
        gpus=gpus,
        idle_since=NOW - timedelta(minutes=idle_minutes),
        evidence_at=NOW,
        grace=GRACE,
        policy="Always" if policy == "Always" else "OnPressure",
        quota=quota,
    )


def waiting(
    name: str,
    gpus: int,
    *,
    minutes: int = 20,
    vendor: str = "amd",
    quota: QuotaScope | None = None,
) -> GpuDemand:
    return GpuDemand(key(name), vendor, gpus, NOW - timedelta(minutes=minutes), quota)


def victims(
    *idle_workloads: IdleWorkload, pending=(), in_flight=None, freed_for=None
) -> list[tuple[str, str]]:
    decision = decide_idle_preemptions(
        idle=idle_workloads,
        pending=pending,
        in_flight=[InFlight(vendor, gpus) for vendor, gpus in (in_flight or {}).items()],
        freed_for=freed_for or {},
        now=NOW,
    )
    return [
        (p.victim.name, p.beneficiary.name if p.beneficiary else "-") for p in decision.preemptions
    ]


def test_no_pending_demand_preempts_nobody_under_on_pressure() -> None:
    assert victims(idle("a", 4), idle("b", 8)) == []


def test_one_victim_that_covers_the_demand() -> None:
    assert victims(idle("a", 4), pending=[waiting("p", 4)]) == [("a", "p")]


def test_the_fewest_victims_even_if_a_longer_idle_one_is_smaller() -> None:
    # a (idle longest, 2 GPUs) and b (2) would make 4 as two victims; c alone has 4.
    assert victims(
        idle("a", 2, idle_minutes=60),
        idle("b", 2, idle_minutes=50),
        idle("c", 4, idle_minutes=20),
        pending=[waiting("p", 4)],
    ) == [("c", "p")]


def test_among_equally_few_the_longest_idle_first() -> None:
    assert victims(
        idle("young", 4, idle_minutes=15),
        idle("old", 4, idle_minutes=90),
        pending=[waiting("p", 3)],
    ) == [("old", "p")]


def test_two_victims_of_five_for_a_demand_of_six() -> None:
    assert victims(idle("a", 5, idle_minutes=40), idle("b", 5), pending=[waiting("p", 6)]) == [
        ("a", "p"),
        ("b", "p"),
    ]


def test_not_enough_idle_gpus_preempts_nobody() -> None:
    assert victims(idle("a", 3), pending=[waiting("p", 10)]) == []


def test_in_flight_gpus_count_against_the_demand() -> None:
    # 3 GPUs are already being freed: a demand of 5 needs 2 more, which b alone covers.
    assert victims(
        idle("a", 1, idle_minutes=60), idle("b", 2), pending=[waiting("p", 5)], in_flight={"amd": 3}
    ) == [("b", "p")]
    # Without them, the 3 idle GPUs cannot cover 5: nobody.
    assert victims(idle("a", 1, idle_minutes=60), idle("b", 2), pending=[waiting("p", 5)]) == []
    # Fully covered by what is in flight: nobody more.
    assert victims(idle("a", 4), pending=[waiting("p", 3)], in_flight={"amd": 3}) == []


def test_gpus_freed_for_a_named_waiter_count_for_it_alone() -> None:
    """Decision 0150: a victim of either preemption that names its waiter (by uid) frees its
    GPUs for that one, and for no other waiter, even one waiting longer."""
    # p is covered by the 4 freed for it: nobody is preempted.
    assert victims(idle("a", 4), pending=[waiting("p", 4)], freed_for={"uid-p": 4}) == []
    # Freed for p, which no longer waits: q gets a victim of its own.
    assert victims(idle("a", 4), pending=[waiting("q", 4)], freed_for={"uid-p": 4}) == [("a", "q")]
    # q waits longer than p, but the GPUs are p's: q gets a; p is covered.
    assert victims(
        idle("a", 4),
        pending=[waiting("p", 4, minutes=10), waiting("q", 4, minutes=30)],
        freed_for={"uid-p": 4},
    ) == [("a", "q")]


def test_named_gpus_count_first_and_unnamed_ones_cover_the_rest() -> None:
    # p needs 6: 2 named for it and 4 in flight for anyone cover it, and the 4 in flight are
    # then spent, so q (waiting less long) gets a.
    assert victims(
        idle("a", 4),
        pending=[waiting("p", 6, minutes=30), waiting("q", 4, minutes=10)],
        in_flight={"amd": 4},
        freed_for={"uid-p": 2},
    ) == [("a", "q")]
    # p needs 4 and 4 are named for it: the 4 in flight are left for q.
    assert (
        victims(
            idle("a", 4),
            pending=[waiting("p", 4, minutes=30), waiting("q", 4, minutes=10)],
            in_flight={"amd": 4},
            freed_for={"uid-p": 4},
        )
        == []
    )


def test_a_victim_serves_one_beneficiary_oldest_pending_first() -> None:
    assert victims(
        idle("a", 4),
        pending=[waiting("late", 4, minutes=10), waiting("early", 4, minutes=30)],
    ) == [("a", "early")]


def test_within_the_grace_period_nobody_is_preempted() -> None:
    assert victims(idle("a", 4, idle_minutes=9), pending=[waiting("p", 4)]) == []


def test_other_vendors_gpus_do_not_help() -> None:
    assert victims(idle("a", 4, vendor="nvidia"), pending=[waiting("p", 4)]) == []


def test_always_preempts_after_the_grace_period_without_demand() -> None:
    assert victims(
        idle("a", 4, policy="Always"), idle("b", 4, policy="Always", idle_minutes=5)
    ) == [("a", "-")]


def test_the_reason_names_the_beneficiary_and_the_policy() -> None:
    decision = decide_idle_preemptions(
        idle=[idle("a", 4)], pending=[waiting("p", 4)], in_flight=(), now=NOW
    )
    (preemption,) = decision.preemptions
    assert preemption.request.reason == "GpuIdlePreemption"
    assert preemption.request.message == (
        "Preempted to free 4 amd GPU(s) for pending workload KaiwoJob/team-a/p, which needs 4 "
        "more: GPUs idle since 2026-03-01T11:30:00Z, longer than the grace period of 600s; "
        "policy OnPressure"
    )
    assert preemption.request.beneficiary == ObjectRef(
        api_version="kaiwo.silogen.ai/v1alpha1",
        kind="KaiwoJob",
        name="p",
        namespace="team-a",
        uid="uid-p",
    )


def test_an_idle_workload_of_another_cluster_queue_does_not_help() -> None:
    # Kueue gives the quota it frees to its own ClusterQueue only (decision 0236).
    assert (
        victims(
            idle("a", 8, quota=QuotaScope("team-b")),
            pending=[waiting("p", 8, quota=QuotaScope("team-a"))],
        )
        == []
    )


def test_of_the_idle_workloads_only_one_of_the_waiting_ones_queue_is_preempted() -> None:
    assert victims(
        idle("other-queue", 8, idle_minutes=60, quota=QuotaScope("team-b")),
        idle("same-queue", 8, quota=QuotaScope("team-a")),
        pending=[waiting("p", 8, quota=QuotaScope("team-a"))],
    ) == [("same-queue", "p")]


def in_cohort(cluster_queue: str, cohort: str) -> QuotaScope:
    """A ClusterQueue of ``cohort``, lending and borrowing there without limits."""
    return QuotaScope(cluster_queue, lends_to=(cohort,), borrows_from=(cohort,))


def test_a_cluster_queue_of_the_same_cohort_lends_what_its_idle_workload_frees() -> None:
    assert victims(
        idle("a", 8, quota=in_cohort("team-b", "research")),
        pending=[waiting("p", 8, quota=in_cohort("team-a", "research"))],
    ) == [("a", "p")]
    assert (
        victims(
            idle("a", 8, quota=in_cohort("team-b", "research")),
            pending=[waiting("p", 8, quota=in_cohort("team-a", "serving"))],
        )
        == []
    )


def test_quota_reaches_a_waiting_workload_where_one_cohort_is_lent_to_and_borrowed_from() -> None:
    """Decision 0272: ``team-b`` lends up to ``org``, the root; ``team-a`` borrows only from
    its own cohort ``research`` (the cohort's borrowing limit is 0), so what ``team-b``
    frees reaches ``team-a`` only if ``team-b`` lends to ``research`` too."""
    lends_to_the_root = QuotaScope("team-b", lends_to=("prod", "org"), borrows_from=("prod",))
    borrows_below = QuotaScope("team-a", lends_to=("research", "org"), borrows_from=("research",))
    assert (
        victims(
            idle("a", 8, quota=lends_to_the_root), pending=[waiting("p", 8, quota=borrows_below)]
        )
        == []
    )
    lends_nothing = QuotaScope("team-b", lends_to=(), borrows_from=("research", "org"))
    borrows_from_all = QuotaScope("team-a", lends_to=(), borrows_from=("research", "org"))
    assert (
        victims(
            idle("a", 8, quota=lends_nothing), pending=[waiting("p", 8, quota=borrows_from_all)]
        )
        == []
    )
    lends_to_research = QuotaScope("team-b", lends_to=("research",))
    assert victims(
        idle("a", 8, quota=lends_to_research), pending=[waiting("p", 8, quota=borrows_below)]
    ) == [("a", "p")]


def lending_at_most(cluster_queue: str, gpus: int | None) -> QuotaScope:
    """A ClusterQueue of ``research`` whose flavor ``mi300x`` gives the cohort at most
    ``gpus`` when its running workloads stop (None: no limit read)."""
    reach = FlavorReach("mi300x", ("research",), ("research",), lends_at_most=gpus)
    return QuotaScope(cluster_queue, ("research",), ("research",), flavors=(reach,))


BORROWER = QuotaScope(
    "team-a",
    ("research",),
    ("research",),
    flavors=(FlavorReach("mi300x", ("research",), ("research",)),),
)


def test_an_idle_workload_of_another_queue_counts_only_what_its_queue_can_lend() -> None:
    """Decision 0284: stopping an 8-GPU job of a queue that uses 2 beyond what its lending
    limit keeps gives the cohort 2; a workload waiting for 8 would still wait."""
    assert (
        victims(
            idle("a", 8, quota=lending_at_most("team-b", 2)),
            pending=[waiting("p", 8, quota=BORROWER)],
        )
        == []
    )
    assert victims(
        idle("a", 8, quota=lending_at_most("team-b", 2)), pending=[waiting("p", 2, quota=BORROWER)]
    ) == [("a", "p")]
    assert victims(
        idle("a", 8, quota=lending_at_most("team-b", None)),
        pending=[waiting("p", 8, quota=BORROWER)],
    ) == [("a", "p")]
    # Its own queue gets back all it frees.
    own = lending_at_most("team-a", 2)
    assert victims(idle("a", 8, quota=own), pending=[waiting("p", 8, quota=BORROWER)]) == [
        ("a", "p")
    ]


def test_what_a_queue_can_lend_is_shared_by_its_idle_workloads_and_the_waiting_ones() -> None:
    """Two idle 8-GPU jobs of a queue that can lend 10: together they give 10, not 16; and
    what one waiting workload is given, the next one is not."""
    lender = lending_at_most("team-b", 10)
    pair = (idle("a", 8, idle_minutes=60, quota=lender), idle("b", 8, quota=lender))
    assert victims(*pair, pending=[waiting("p", 12, quota=BORROWER)]) == []
    assert victims(*pair, pending=[waiting("p", 10, quota=BORROWER)]) == [("a", "p"), ("b", "p")]
    assert victims(
        *pair,
        pending=[waiting("p", 8, minutes=30, quota=BORROWER), waiting("q", 8, quota=BORROWER)],
    ) == [("a", "p")]


def test_a_workload_kueue_does_not_queue_may_free_what_another_waits_for() -> None:
    assert victims(idle("a", 8), pending=[waiting("p", 8, quota=QuotaScope("team-a"))]) == [
        ("a", "p")
    ]
    assert victims(idle("a", 8, quota=QuotaScope("team-b")), pending=[waiting("p", 8)]) == [
        ("a", "p")
    ]


def test_gpus_in_flight_serve_only_a_waiting_workload_their_queue_gives_them_to() -> None:
    """Decision 0256: 8 GPUs an ``Always`` victim of ``qb`` frees go back to ``qb``. Counted
    per vendor, they covered ``pa`` of ``qa`` (waiting longer), and the idle ``b`` of ``qb``
    was stopped for ``pb``, for whom those 8 were coming anyway; ``pa`` stayed waiting."""
    qa, qb = QuotaScope("qa"), QuotaScope("qb")
    decision = decide_idle_preemptions(
        idle=[idle("b", 8, quota=qb)],
        pending=[waiting("pa", 8, minutes=30, quota=qa), waiting("pb", 8, quota=qb)],
        in_flight=[InFlight("amd", 8, qb)],
        now=NOW,
    )
    assert decision.preemptions == ()
    # In one cohort, Kueue lends them to ``qa``: they cover ``pa``, and ``b`` goes for ``pb``.
    qa, qb = in_cohort("qa", "shared"), in_cohort("qb", "shared")
    decision = decide_idle_preemptions(
        idle=[idle("b", 8, quota=qb)],
        pending=[waiting("pa", 8, minutes=30, quota=qa), waiting("pb", 8, quota=qb)],
        in_flight=[InFlight("amd", 8, qb)],
        now=NOW,
    )
    assert [
        (p.victim.name, p.beneficiary and p.beneficiary.name) for p in decision.preemptions
    ] == [("b", "pb")]


def test_freed_gpus_serve_only_a_waiting_workload_that_may_run_in_their_flavor() -> None:
    """Decision 0280: ``p`` asks for MI250X GPUs, so Kueue admits it only into ``mi250x``.
    The idle ``a`` holds ``mi300x`` GPUs and ``b`` ``mi250x`` ones: ``b`` goes, though ``a``
    was idle longer. GPUs in flight in ``mi300x`` do not cover ``p`` either."""
    queue = "kaiwo"
    in_mi300x = QuotaScope(queue, held_in=frozenset({"mi300x"}))
    in_mi250x = QuotaScope(queue, held_in=frozenset({"mi250x"}))
    needs_mi250x = GpuDemand(
        key("p"), "amd", 8, NOW - timedelta(minutes=20), QuotaScope(queue), frozenset({"mi250x"})
    )
    decision = decide_idle_preemptions(
        idle=[idle("a", 8, idle_minutes=60, quota=in_mi300x), idle("b", 8, quota=in_mi250x)],
        pending=[needs_mi250x],
        in_flight=[InFlight("amd", 8, in_mi300x)],
        now=NOW,
    )
    assert [
        (p.victim.name, p.beneficiary and p.beneficiary.name) for p in decision.preemptions
    ] == [("b", "p")]
    # Where the flavor a workload holds is not known, its GPUs may serve anyone, as before.
    decision = decide_idle_preemptions(
        idle=[idle("a", 8, idle_minutes=60, quota=QuotaScope(queue))],
        pending=[needs_mi250x],
        in_flight=[],
        now=NOW,
    )
    assert [p.victim.name for p in decision.preemptions] == ["a"]
