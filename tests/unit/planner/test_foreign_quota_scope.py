"""GPU idle preemption counts a GPU workload no Kaiwo kind owns where Kueue counts it: the
ClusterQueue of the LocalQueue its ``kueue.x-k8s.io/queue-name`` label names (decision 0260).
An idle plain Job of one queue is kept for a plain Job or KaiwoJob waiting in another queue of
no shared cohort: Kueue would give what it frees back to its own queue. Expected plans written
by hand."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any, Final

from kaiwo_planner.domain.scheduling.idle_preemption import (
    FlavorReach,
    QuotaScope,
    frees_quota_for,
)
from kaiwo_planner.domain.scheduling.quota_scope import QuotaTrees, queue_name_of
from kaiwo_planner.domain.scheduling.selected_flavors import admitting

from tests.unit.planner.kueue_queues import cohort_queue
from tests.unit.planner.test_gpu_workloads import (
    KAIWO,
    NOW,
    ON_PRESSURE,
    QUOTA_FOR_GPUS,
    cluster,
    deployment,
    finding,
    job,
    kueue_workload,
    plan_of,
    record,
)

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE = "kueue.x-k8s.io/v1beta1"


def local_queue(name: str, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": "team-a", "uid": f"lq-{name}"},
        "spec": {"clusterQueue": cluster_queue},
    }


def gpu_quota(**limits: int | str) -> list[dict[str, Any]]:
    """Resource groups of 8 AMD GPUs in two flavors, each with ``limits`` (``lendingLimit``,
    ``borrowingLimit``), and CPUs without."""
    gpus = {"name": "amd.com/gpu", "nominalQuota": 8, **limits}
    return [
        {
            "coveredResources": ["amd.com/gpu", "cpu"],
            "flavors": [
                {"name": flavor, "resources": [gpus, {"name": "cpu", "nominalQuota": 64}]}
                for flavor in ("mi300x", "mi250")
            ],
        }
    ]


def cluster_queue(name: str, cohort: str | None = None, **limits: int | str) -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceGroups": gpu_quota(**limits)}
    if cohort is not None:
        spec["cohort"] = cohort
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


QUEUES = (
    local_queue("qa", "qa"),
    local_queue("qb", "qb"),
    cluster_queue("qa"),
    cluster_queue("qb"),
)
"""Two ClusterQueues of no cohort, each with its LocalQueue of its name in team-a."""


def labels(queue: str | None) -> dict[str, str]:
    return {QUEUE_LABEL: queue} if queue else {}


def idle_job(queue: str | None) -> dict[str, Any]:
    return job("idle", annotations=ON_PRESSURE, labels=labels(queue))


def waiting_job(queue: str | None) -> list[dict[str, Any]]:
    """A plain Job opted in that Kueue does not admit for GPUs, its record and Workload."""
    waits = job(
        "waits",
        annotations=ON_PRESSURE,
        labels=labels(queue),
        creationTimestamp="2026-03-01T11:00:00Z",
    )
    refused = kueue_workload(waits, reserved="False", message=QUOTA_FOR_GPUS)
    return [waits, record(waits, name="job-waits-waits-01"), refused]


def preempted_for(idle: dict[str, Any], *others: dict[str, Any]) -> str | None:
    """The name of the workload the idle plain Job is preempted for, or None when kept."""
    read = finding(idle["metadata"]["uid"], percent=0.0, idle_since=NOW - timedelta(minutes=5))
    state = cluster(idle, record(idle), *others, findings=(read,))
    plan = plan_of(record(idle), state).plan
    if plan.preempt is None:
        return None
    return str(plan.status["preemptedFor"]["name"])


def test_an_idle_plain_job_of_another_cluster_queue_is_kept_for_a_waiting_one() -> None:
    assert preempted_for(idle_job("qb"), *waiting_job("qa"), *QUEUES) is None
    assert preempted_for(idle_job("qa"), *waiting_job("qa"), *QUEUES) == "waits"


def test_an_idle_plain_job_is_kept_for_a_kaiwo_job_of_another_cluster_queue() -> None:
    def pending(queue: str) -> dict[str, Any]:
        return {
            "apiVersion": KAIWO,
            "kind": "KaiwoJob",
            "metadata": {
                "name": "next",
                "namespace": "team-a",
                "uid": "next-uid",
                "creationTimestamp": "2026-03-01T11:00:00Z",
            },
            "spec": {"gpus": 2, "clusterQueue": queue},
            "status": {"status": "PENDING"},
        }

    assert preempted_for(idle_job("qb"), pending("qa"), *QUEUES) is None
    assert preempted_for(idle_job("qb"), pending("qb"), *QUEUES) == "next"


def test_cluster_queues_of_one_cohort_share() -> None:
    shared = (
        local_queue("qa", "qa"),
        local_queue("qb", "qb"),
        cluster_queue("qa", "research"),
        cluster_queue("qb", "research"),
    )
    assert preempted_for(idle_job("qb"), *waiting_job("qa"), *shared) == "waits"
    apart = (*shared[:2], cluster_queue("qa", "research"), cluster_queue("qb", "prod"))
    assert preempted_for(idle_job("qb"), *waiting_job("qa"), *apart) is None


def cohort(name: str, parent: str | None = None, **limits: int | str) -> dict[str, Any]:
    spec: dict[str, Any] = {"parentName": parent} if parent else {}
    if limits:
        spec["resourceGroups"] = gpu_quota(**limits)
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def test_cluster_queues_of_one_cohort_tree_share() -> None:
    """Decision 0271: Kueue lends unused quota across a cohort tree (a Cohort's
    ``parentName``), so cohorts ``research`` and ``prod`` under one root share."""
    queues = (
        local_queue("qa", "qa"),
        local_queue("qb", "qb"),
        cluster_queue("qa", "research"),
        cluster_queue("qb", "prod"),
    )
    one_tree = (cohort("research", "org"), cohort("prod", "org"), cohort("org"))
    assert preempted_for(idle_job("qb"), *waiting_job("qa"), *queues, *one_tree) == "waits"
    deeper = (cohort("research", "org"), cohort("prod", "dept"), cohort("dept", "org"))
    assert preempted_for(idle_job("qb"), *waiting_job("qa"), *queues, *deeper) == "waits"
    two_trees = (cohort("research", "org"), cohort("prod", "lab"))
    assert preempted_for(idle_job("qb"), *waiting_job("qa"), *queues, *two_trees) is None
    # No Cohort objects: each cohort is its own root, as before.
    assert preempted_for(idle_job("qb"), *waiting_job("qa"), *queues) is None


def test_an_idle_job_is_kept_for_a_queue_its_own_lends_nothing_or_that_borrows_nothing() -> None:
    """Decision 0272: Kueue lends none of a ClusterQueue's unused GPUs whose lending limit
    is 0 in every flavor, and a queue whose borrowing limit is 0 takes none of its cohort's."""
    local = (local_queue("qa", "qa"), local_queue("qb", "qb"))
    lends_nothing = (
        cluster_queue("qa", "research"),
        cluster_queue("qb", "research", lendingLimit=0),
    )
    assert preempted_for(idle_job("qb"), *waiting_job("qa"), *local, *lends_nothing) is None
    borrows_nothing = (
        cluster_queue("qa", "research", borrowingLimit="0"),
        cluster_queue("qb", "research"),
    )
    assert preempted_for(idle_job("qb"), *waiting_job("qa"), *local, *borrows_nothing) is None
    lends_some = (
        cluster_queue("qa", "research"),
        cluster_queue("qb", "research", lendingLimit="4"),
    )
    assert preempted_for(idle_job("qb"), *waiting_job("qa"), *local, *lends_some) == "waits"
    # Its own queue's workloads take what it frees, whatever it lends.
    assert preempted_for(idle_job("qb"), *waiting_job("qb"), *local, *lends_nothing) == "waits"


def borrowing(queue: dict[str, Any], field: str, **by_flavor: int) -> dict[str, Any]:
    """``queue`` (8 AMD GPUs of each flavor) with a status that says it uses all of them and
    borrows ``by_flavor`` more (in ``field``: ``flavorsReservation`` or ``flavorsUsage``), as
    Kueue writes it."""
    usage = [
        {
            "name": flavor,
            "resources": [
                {"name": "amd.com/gpu", "total": str(8 + amount), "borrowed": str(amount)}
            ],
        }
        for flavor, amount in by_flavor.items()
    ]
    return {**queue, "status": {field: usage}}


def test_an_idle_job_is_kept_for_a_queue_that_borrows_all_its_limit_lets_it_already() -> None:
    """Decision 0281: ``qa`` may borrow 8 GPUs of each flavor, and Kueue's status says it
    borrows 8 of each already, or 7 while the waiting Job wants 2: Kueue admits it on no
    more, so what the idle Job of ``qb`` frees would go to nobody waiting in ``qa``. Before,
    a limit above 0 was open however much of it was used."""
    local = (local_queue("qa", "qa"), local_queue("qb", "qb"))
    limited = cluster_queue("qa", "research", borrowingLimit=8)
    lender = cluster_queue("qb", "research")
    waiting = waiting_job("qa")
    for field in ("flavorsReservation", "flavorsUsage"):
        used_up = borrowing(limited, field, mi300x=8, mi250=8)
        assert preempted_for(idle_job("qb"), *waiting, *local, used_up, lender) is None
    too_little = borrowing(limited, "flavorsReservation", mi300x=7, mi250=7)
    assert preempted_for(idle_job("qb"), *waiting, *local, too_little, lender) is None
    # Room for its 2 GPUs in one flavor, or no limit at all: it may borrow what is freed.
    some_room = borrowing(limited, "flavorsReservation", mi300x=8, mi250=6)
    assert preempted_for(idle_job("qb"), *waiting, *local, some_room, lender) == "waits"
    unlimited = borrowing(cluster_queue("qa", "research"), "flavorsUsage", mi300x=8, mi250=8)
    assert preempted_for(idle_job("qb"), *waiting, *local, unlimited, lender) == "waits"


def test_a_queue_borrowing_all_its_limit_borrows_no_more_of_that_flavor() -> None:
    """Per flavor, the larger of the reservation and the usage Kueue reports counts; for a
    waiting workload, also whether what the queue holds and what it wants pass the queue's
    nominal quota and borrowing limit together."""
    queue = cluster_queue("qa", "research", borrowingLimit="8")
    queue["status"] = {
        "flavorsReservation": [
            {"name": "mi300x", "resources": [{"name": "amd.com/gpu", "borrowed": "8"}]},
            {"name": "mi250", "resources": [{"name": "amd.com/gpu", "borrowed": "2"}]},
        ],
        "flavorsUsage": [
            {"name": "mi300x", "resources": [{"name": "amd.com/gpu", "borrowed": "0"}]},
            {"name": "mi250", "resources": [{"name": "amd.com/gpu", "borrowed": "7"}]},
        ],
    }
    forest = QuotaTrees.of(cluster(queue, cluster_queue("qb", "research")))
    assert forest.scope("qa", "amd").flavors == (
        FlavorReach("mi300x", lends_to=("research",), borrows_from=()),
        FlavorReach("mi250", lends_to=("research",), borrows_from=("research",)),
    )
    # Holding 10 of MI250 (8 + 2 borrowed): 6 more fit under 8 + 8, 7 do not.
    queue["status"]["flavorsUsage"][1]["resources"][0]["total"] = "10"
    forest = QuotaTrees.of(cluster(queue, cluster_queue("qb", "research")))
    assert forest.scope("qa", "amd", wanting=6).flavors[1].borrows_from == ("research",)
    assert forest.scope("qa", "amd", wanting=7).flavors[1].borrows_from == ()
    queue["status"]["flavorsUsage"][1]["resources"][0]["borrowed"] = "8"
    forest = QuotaTrees.of(cluster(queue, cluster_queue("qb", "research")))
    assert all(reach.borrows_from == () for reach in forest.scope("qa", "amd").flavors)
    # Another resource borrowed (CPUs, which set no limit) closes nothing for the GPUs.
    cpus = [{"name": "mi300x", "resources": [{"name": "cpu", "borrowed": "64"}]}]
    queue["status"] = {"flavorsUsage": cpus}
    forest = QuotaTrees.of(cluster(queue, cluster_queue("qb", "research")))
    assert all(reach.borrows_from == ("research",) for reach in forest.scope("qa", "amd").flavors)


def in_use(queue: dict[str, Any], **by_flavor: int) -> dict[str, Any]:
    """``queue`` with a status that says it uses ``by_flavor`` AMD GPUs, borrowing none."""
    usage = [
        {"name": flavor, "resources": [{"name": "amd.com/gpu", "total": str(amount)}]}
        for flavor, amount in by_flavor.items()
    ]
    return {**queue, "status": {"flavorsUsage": usage}}


def test_an_idle_job_within_the_quota_its_queue_keeps_from_lending_is_kept() -> None:
    """Decision 0282: ``qb``'s lending limit of 4 keeps 4 of its 8 GPUs of each flavor for
    itself. Kueue counts in the cohort only what ``qb`` uses beyond those 4: the idle Job's
    2 GPUs, all it uses, free nothing a Job waiting in ``qa`` can borrow. Used beyond the
    kept 4 in one flavor, freeing the idle Job gives the cohort back what it took."""
    local = (local_queue("qa", "qa"), local_queue("qb", "qb"))
    lender = cluster_queue("qb", "research", lendingLimit=4)
    waiting = (*waiting_job("qa"), cluster_queue("qa", "research"))
    within = in_use(lender, mi300x=2, mi250=4)
    assert preempted_for(idle_job("qb"), *waiting, *local, within) is None
    beyond = in_use(lender, mi300x=6, mi250=0)
    assert preempted_for(idle_job("qb"), *waiting, *local, beyond) == "waits"
    # Its own queue takes back what it frees, lent or kept.
    own = (*waiting_job("qb"), cluster_queue("qa", "research"))
    assert preempted_for(idle_job("qb"), *own, *local, within) == "waits"


def test_an_idle_job_of_another_queue_frees_no_more_than_its_queue_uses_beyond_what_it_keeps():
    """Decision 0284: ``qb`` keeps 4 of its 8 GPUs of each flavor from lending. Using 5 of
    ``mi300x``, stopping the idle Job's 2 gives the cohort 1, and the Job waiting in ``qa``
    for 2 would still wait: the idle Job is kept. Using 6, it gives the 2 the waiting Job
    wants. A flavor does not add to another's: the idle Job's GPUs are in one of them."""
    local = (local_queue("qa", "qa"), local_queue("qb", "qb"))
    lender = cluster_queue("qb", "research", lendingLimit=4)
    waiting = (*waiting_job("qa"), cluster_queue("qa", "research"))
    one_beyond = in_use(lender, mi300x=5, mi250=5)
    assert preempted_for(idle_job("qb"), *waiting, *local, one_beyond) is None
    two_beyond = in_use(lender, mi300x=6, mi250=5)
    assert preempted_for(idle_job("qb"), *waiting, *local, two_beyond) == "waits"


def test_gpus_already_being_freed_still_serve_the_waiting_job_they_were_freed_for() -> None:
    """Decision 0282 judges only a running victim. ``stopping``, a Job of ``qb`` preempted a
    minute ago, frees its 2 MI300X GPUs for the Job waiting in ``qa``; ``qb``'s status may
    count them still, within what its lending limit keeps. Judged so, they would serve nobody, and
    the idle Job of ``qc`` would be stopped too for the same 2 GPUs: it is kept."""
    stopping = job("stopping", annotations=ON_PRESSURE, labels=labels("qb"))
    preempting = {"phase": "Preempting", "preemptedAt": "2026-03-01T11:59:00Z"}
    queues = (
        local_queue("qa", "qa"),
        local_queue("qb", "qb"),
        local_queue("qc", "qc"),
        cluster_queue("qa", "research"),
        in_use(cluster_queue("qb", "research", lendingLimit=4), mi300x=2),
        cluster_queue("qc", "research"),
    )
    freeing = (
        stopping,
        record(stopping, status=preempting, name="job-stopping-01"),
        admitted_workload(stopping, "mi300x"),
    )
    assert preempted_for(idle_job("qc"), *waiting_job("qa"), *queues, *freeing) is None
    assert preempted_for(idle_job("qc"), *waiting_job("qa"), *queues) == "waits"


def test_only_a_workload_its_queue_counts_now_is_judged_by_the_quota_kept() -> None:
    """``held_now``: a running victim, which the status counts. GPUs already being freed may
    be counted no more, and a status not read or counting nothing tells nothing: both lend
    as the limits let them."""
    queue = in_use(cluster_queue("qb", "research", lendingLimit="4"), mi300x=4, mi250=5)
    forest = QuotaTrees.of(cluster(queue, cluster_queue("qa", "research")))
    assert forest.scope("qb", "amd", held_now=True).flavors == (
        FlavorReach("mi300x", lends_to=(), borrows_from=("research",), lends_at_most=0),
        FlavorReach("mi250", lends_to=("research",), borrows_from=("research",), lends_at_most=1),
    )
    assert all(r.lends_to == ("research",) for r in forest.scope("qb", "amd").flavors)
    for unread in (cluster_queue("qb", "research", lendingLimit="4"), in_use(queue, mi300x=0)):
        forest = QuotaTrees.of(cluster(unread))
        scope = forest.scope("qb", "amd", held_now=True)
        assert scope.flavors[0].lends_to == ("research",)


def trees(*objects: dict[str, Any]) -> QuotaTrees:
    def specs(kind: str) -> dict[str, Any]:
        return {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == kind}

    return QuotaTrees(cluster_queues=specs("ClusterQueue"), cohorts=specs("Cohort"))


def any_flavor(scope: QuotaScope) -> QuotaScope:
    """``scope`` without its flavors: where any of them reach."""
    return replace(scope, flavors=(), held_in=frozenset())


def test_a_queue_lends_and_borrows_up_its_tree_as_far_as_the_limits_let_it() -> None:
    """``research`` lends nothing to ``org`` (its lending limit is 0) and ``prod`` borrows
    nothing from it; ``qa`` lends none of its AMD GPUs, and sets no limit on NVIDIA's."""
    forest = trees(
        cluster_queue("qa", "research", lendingLimit=0),
        cluster_queue("qb", "prod"),
        cluster_queue("solo"),
        cohort("research", "org", lendingLimit="0"),
        cohort("prod", "org", borrowingLimit=0),
        cohort("org"),
    )
    assert any_flavor(forest.scope("qa", "AMD")) == QuotaScope(
        "qa", lends_to=(), borrows_from=("research", "org")
    )
    assert any_flavor(forest.scope("qa", "nvidia")) == QuotaScope(
        "qa", lends_to=("research", "org"), borrows_from=("research", "org")
    )
    assert any_flavor(forest.scope("qb", "amd")) == QuotaScope(
        "qb", lends_to=("prod", "org"), borrows_from=("prod",)
    )
    assert any_flavor(forest.scope("solo", "amd")) == QuotaScope("solo")
    assert any_flavor(forest.scope("unseen", "amd")) == QuotaScope("unseen")
    assert forest.knows("qa") and not forest.knows("unseen")


def test_a_cycle_of_cohorts_ends_the_walk_where_it_repeats() -> None:
    """Kueue deactivates the queues of a cycle; here each of its queues reaches all of it."""
    forest = trees(cluster_queue("qa", "a"), cohort("a", "b"), cohort("b", "c"), cohort("c", "a"))
    assert any_flavor(forest.scope("qa", "amd")) == QuotaScope(
        "qa", ("a", "b", "c"), ("a", "b", "c")
    )


LAB_QUEUES: Final = {
    "lends-mi250-only": {"mi300x": {"lendingLimit": 0}, "mi250": {}},
    "mi300x-only": {"mi300x": {}},
    "mi250-only": {"mi250": {}},
    "borrows-no-mi250": {"mi300x": {}, "mi250": {"borrowingLimit": 0}},
}
"""Four ClusterQueues of the cohort ``lab`` by their flavors' limits; the first lends none of
its MI300X quota."""


def lab_queues() -> tuple[dict[str, Any], ...]:
    return tuple(cohort_queue(name, "lab", **flavors) for name, flavors in LAB_QUEUES.items())


LAB: Final = trees(*lab_queues())


def test_each_flavor_lends_and_borrows_as_far_as_its_own_limits_let_it() -> None:
    """Decision 0279: Kueue lends and borrows each flavor on its own. Before, a queue whose
    MI250 quota lends was taken to lend its MI300X quota too, though its lending limit on
    MI300X is 0."""
    assert LAB.scope("lends-mi250-only", "amd").flavors == (
        FlavorReach("mi300x", lends_to=(), borrows_from=("lab",)),
        FlavorReach("mi250", lends_to=("lab",), borrows_from=("lab",)),
    )
    # Freed, a workload's GPUs lend only from the flavors Kueue admitted it into.
    held_in_mi300x = LAB.scope("lends-mi250-only", "amd", held_in={"mi300x"})
    assert held_in_mi300x.flavors == (
        FlavorReach("mi300x", lends_to=(), borrows_from=("lab",)),
        FlavorReach("mi250", lends_to=(), borrows_from=("lab",)),
    )
    assert any_flavor(held_in_mi300x) == QuotaScope(
        "lends-mi250-only", lends_to=(), borrows_from=("lab",)
    )
    assert LAB.scope("borrows-no-mi250", "amd").flavors == (
        FlavorReach("mi300x", lends_to=("lab",), borrows_from=("lab",)),
        FlavorReach("mi250", lends_to=("lab",), borrows_from=()),
    )


def test_a_victim_frees_quota_only_in_a_flavor_the_waiting_queue_may_borrow() -> None:
    def frees(victim: str, held: set[str], waiting: str) -> bool:
        return frees_quota_for(LAB.scope(victim, "amd", held_in=held), LAB.scope(waiting, "amd"))

    # Held in MI300X, which its queue lends nothing of: no other queue gets it.
    assert not frees("lends-mi250-only", {"mi300x"}, "mi300x-only")
    assert not frees("lends-mi250-only", {"mi300x"}, "mi250-only")
    # Held in MI250, which it lends: to a queue that lists MI250 and may borrow it.
    assert frees("lends-mi250-only", {"mi250"}, "mi250-only")
    assert not frees("lends-mi250-only", {"mi250"}, "mi300x-only")
    assert not frees("lends-mi250-only", {"mi250"}, "borrows-no-mi250")
    # Not known where it is held: any flavor it lends, to a queue that borrows that one.
    assert frees("lends-mi250-only", set(), "mi250-only")
    assert not frees("lends-mi250-only", set(), "mi300x-only")
    # Its own queue takes back what it frees, in any flavor.
    assert frees("lends-mi250-only", {"mi300x"}, "lends-mi250-only")


def test_an_idle_job_held_in_a_flavor_its_queue_lends_nothing_of_is_kept() -> None:
    """The whole plan: the idle plain Job of ``lends-mi250-only`` that Kueue admitted into
    MI300X is kept for a Job waiting in ``mi300x-only``; admitted into MI250, it is preempted
    for one waiting in ``mi250-only``."""
    queues = (
        local_queue("lf", "lends-mi250-only"),
        local_queue("l3", "mi300x-only"),
        local_queue("l2", "mi250-only"),
        *lab_queues(),
    )

    def idle_in(flavor: str) -> list[dict[str, Any]]:
        idle = idle_job("lf")
        return [idle, admitted_workload(idle, flavor)]

    [idle, admitted] = idle_in("mi300x")
    assert preempted_for(idle, admitted, *waiting_job("l3"), *queues) is None
    [idle, admitted] = idle_in("mi250")
    assert preempted_for(idle, admitted, *waiting_job("l2"), *queues) == "waits"


def admitted_workload(owner: dict[str, Any], flavor: str) -> dict[str, Any]:
    """Kueue's Workload of ``owner``, admitted with its GPUs in ``flavor``."""
    workload = kueue_workload(owner, reserved="True", message="Quota reserved")
    workload["status"]["admission"] = {
        "clusterQueue": "lends-mi250-only",
        "podSetAssignments": [{"name": "main", "flavors": {"amd.com/gpu": flavor}, "count": 1}],
    }
    return workload


PRODUCT = "amd.com/gpu.product-name"


def resource_flavor(name: str, product: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": name, "uid": f"rf-{name}"},
        "spec": {"nodeLabels": {PRODUCT: product}, **spec},
    }


FLAVORS: Final = (resource_flavor("mi300x", "MI300X"), resource_flavor("mi250", "MI250X"))


def selecting(objects: list[dict[str, Any]], **pod_spec: Any) -> list[dict[str, Any]]:
    """``objects`` (a waiting Job first) with ``pod_spec`` added to the Job's pod template."""
    [waits, *rest] = objects
    waits["spec"]["template"]["spec"].update(pod_spec)
    return [waits, *rest]


def test_freed_gpus_serve_a_waiting_job_only_in_a_flavor_its_node_constraints_allow() -> None:
    """Decision 0283: the idle Job holds MI300X GPUs of ``qb``. A Job waiting in ``qb`` that
    selects MI250X nodes is one Kueue admits only into ``mi250``: the idle Job is kept for
    it. Selecting MI300X, or a key no flavor declares, it is preempted for it."""
    idle = idle_job("qb")
    admitted = admitted_workload(idle, "mi300x")
    cluster_objects = (*QUEUES, *FLAVORS)

    def preempted_for_selecting(**pod_spec: Any) -> str | None:
        waiting = selecting(waiting_job("qb"), **pod_spec)
        return preempted_for(idle, admitted, *waiting, *cluster_objects)

    assert preempted_for_selecting(nodeSelector={PRODUCT: "MI250X"}) is None
    assert preempted_for_selecting(nodeSelector={PRODUCT: "MI300X"}) == "waits"
    assert preempted_for_selecting(nodeSelector={"zone": "a"}) == "waits"
    mi250_only = {"key": PRODUCT, "operator": "NotIn", "values": ["MI300X"]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [mi250_only]}]
            }
        }
    }
    assert preempted_for_selecting(affinity=affinity) is None


def test_kueue_reads_a_pods_constraints_only_on_its_flavors_label_keys() -> None:
    """Kueue's flavor assigner, pure: the node selector and the required affinity terms on
    the flavors' keys, a term with none of those keys matching every flavor, and the taints
    each flavor puts on its nodes."""
    tainted = resource_flavor(
        "mi250", "MI250X", nodeTaints=[{"key": "spare", "value": "yes", "effect": "NoSchedule"}]
    )
    flavors = [(f["metadata"]["name"], f["spec"]) for f in (FLAVORS[0], tainted)]
    assert admitting({}, flavors) == ["mi300x"]
    tolerates = {"tolerations": [{"key": "spare", "operator": "Exists"}]}
    assert admitting(tolerates, flavors) == ["mi300x", "mi250"]
    assert admitting({"tolerations": [{"operator": "Exists"}]}, flavors) == ["mi300x", "mi250"]
    wrong_value = {"tolerations": [{"key": "spare", "value": "no"}]}
    assert admitting(wrong_value, flavors) == ["mi300x"]
    other_key_term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    mi250_term = {"matchExpressions": [{"key": PRODUCT, "operator": "In", "values": ["MI250X"]}]}
    terms = {"nodeSelectorTerms": [mi250_term]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}}
    assert admitting({"affinity": affinity, **tolerates}, flavors) == ["mi250"]
    terms["nodeSelectorTerms"] = [mi250_term, other_key_term]
    assert admitting({"affinity": affinity, **tolerates}, flavors) == ["mi300x", "mi250"]


def test_the_label_names_a_local_queue_whose_cluster_queue_counts() -> None:
    """The LocalQueue ``team`` of team-a points at ClusterQueue ``qb``."""
    queues = (*QUEUES, local_queue("team", "qb"))
    assert preempted_for(idle_job("team"), *waiting_job("qa"), *queues) is None
    assert preempted_for(idle_job("team"), *waiting_job("qb"), *queues) == "waits"


def test_a_workload_kueue_does_not_queue_is_matched_by_vendor_as_upstream() -> None:
    assert preempted_for(idle_job(None), *waiting_job("qa"), *QUEUES) == "waits"
    # A pod the scheduler places (no queue) is helped by GPUs freed in any queue.
    assert preempted_for(idle_job("qb"), *waiting_job(None), *QUEUES) == "waits"


def test_an_unobserved_local_queue_is_read_from_the_admitted_workload_or_left_unknown() -> None:
    """The LocalQueue ``theirs`` is not one the watcher sees: the idle Job's admitted Kueue
    Workload names its ClusterQueue; without that, its scope is unknown and matches any."""
    idle = idle_job("theirs")
    admitted = kueue_workload(idle, reserved="True", message="Quota reserved in ClusterQueue qb")
    admitted["metadata"]["uid"] = "wl-idle"
    admitted["status"]["admission"] = {"clusterQueue": "qb", "podSetAssignments": []}
    assert preempted_for(idle, admitted, *waiting_job("qa"), *QUEUES) is None
    assert preempted_for(idle, *waiting_job("qa"), *QUEUES) == "waits"


def test_a_cluster_queue_not_observed_has_no_cohort_the_planner_can_tell() -> None:
    """``qb`` is not one of the KaiwoQueueConfig's: it may share a cohort with ``qa``."""
    unobserved = (local_queue("qa", "qa"), local_queue("qb", "qb"), cluster_queue("qa"))
    assert preempted_for(idle_job("qb"), *waiting_job("qa"), *unobserved) == "waits"


def test_a_deployments_queue_may_be_on_its_pod_template() -> None:
    serve = deployment(1)
    assert queue_name_of(serve) == ""
    serve["spec"]["template"]["metadata"] = {"labels": {QUEUE_LABEL: "qb"}}
    assert queue_name_of(serve) == "qb"
    serve["metadata"]["labels"] = {QUEUE_LABEL: "qa"}
    assert queue_name_of(serve) == "qa"
