"""GPU idle preemption (upstream §11): which idle workloads to stop, and for whom.

A workload opted in by annotation is *eligible* once the monitor's evidence shows it idle for
its grace period (the reading that confirmed the stretch is at least ``grace`` after the
stretch's start) and that evidence is fresh. Then, by its policy:

* ``Always``: it is preempted, for nobody in particular.
* ``OnPressure``: it is preempted only for a PENDING KaiwoJob/KaiwoService that waits for GPUs
  of the same vendor and that it would help satisfy. Pending workloads are served oldest
  first; each one's demand is its GPUs less the GPUs already being freed for it: first those
  of the victims that name it (``freed_for``: of either preemption, decision 0150), then
  those of preemptions in flight for its vendor that name nobody (decided and not yet
  observed, or ``Always`` victims still stopping), shared oldest first, each only where
  Kueue gives them back to its queue or cohort (decision 0256). A victim can serve it
  only where Kueue would give the waiting workload what the victim frees
  (:func:`frees_quota_for`, decision 0236): both in one ClusterQueue, or in ClusterQueues of
  one cohort tree that lend and borrow across it (decisions 0271, 0272), flavor by flavor
  (decision 0279), and only in a flavor the waiting workload's ``gpuModels`` let Kueue admit
  it into (:func:`serves`, decision 0280); a victim of another queue counts only for what
  its queue can lend (:func:`lendable_to`, decision 0284). For the rest of its demand the
  **fewest** victims are chosen that together cover it, and among equally few the **longest
  idle** first. When all unclaimed eligible victims together cannot cover it, nobody is preempted
  for it (stopping some would free GPUs it still could not use). A victim serves one
  beneficiary.

Pure: every input is passed in, ``now`` included; the same inputs give the same victims.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Final, Literal

from kaiwo_contracts.plans import ObjectRef, RefKey

from kaiwo_planner.domain.status.workload_status import TerminationRequest

REASON_IDLE: Final = "GpuIdlePreemption"
IdlePolicy = Literal["OnPressure", "Always"]


@dataclass(frozen=True, slots=True)
class FlavorReach:
    """Where the quota of one flavor of a queue's GPUs goes and comes from: Kueue lends and
    borrows each flavor on its own, as far as that flavor's limits let it (decision 0279)."""

    flavor: str
    lends_to: tuple[str, ...] = ()
    borrows_from: tuple[str, ...] = ()
    lends_at_most: int | None = None
    """The most GPUs of the flavor that stopping running workloads of the queue can give its
    cohort: what the queue uses beyond the quota its ``lendingLimit`` keeps for itself
    (decision 0284). None: no limit read (no ``lendingLimit``, or its use not known)."""


@dataclass(frozen=True, slots=True)
class QuotaScope:
    """Where Kueue counts a workload's GPUs: its ClusterQueue. Quota a workload frees goes to
    workloads of that queue, and is lent to the cohorts of ``lends_to`` (its cohort, then
    each parent up its tree, as far as no lending limit of 0 stops it); a workload may borrow
    from the cohorts of ``borrows_from`` (the same walk, stopped by borrowing limits of 0).
    Decisions 0236, 0271, 0272.

    ``flavors``: the same per flavor of the queue's GPUs (decision 0279), lending only from
    ``held_in``, the flavors Kueue admitted the workload's GPUs into, when they are known;
    ``lends_to`` and ``borrows_from`` are then what any of them reach. Empty when the
    queue's flavors are not known."""

    cluster_queue: str
    lends_to: tuple[str, ...] = ()
    borrows_from: tuple[str, ...] = ()
    flavors: tuple[FlavorReach, ...] = ()
    held_in: frozenset[str] = frozenset()


def frees_quota_for(victim: QuotaScope | None, waiting: QuotaScope | None) -> bool:
    """Whether stopping the ``victim`` can let Kueue admit the ``waiting`` workload: both in
    one ClusterQueue, or the victim's queue lends a flavor to a cohort the waiting one's
    borrows that flavor from (decision 0279; by any flavor where either side's flavors are
    not known). A workload of unknown scope (None: Kueue does not queue it, or its queue is
    not observed) may free what the other waits for."""
    if victim is None or waiting is None:
        return True
    if victim.cluster_queue == waiting.cluster_queue:
        return True
    if victim.flavors and waiting.flavors:
        borrows = {reach.flavor: reach.borrows_from for reach in waiting.flavors}
        return any(
            not set(reach.lends_to).isdisjoint(borrows.get(reach.flavor, ()))
            for reach in victim.flavors
        )
    return not set(victim.lends_to).isdisjoint(waiting.borrows_from)


def may_run_on(freed: QuotaScope | None, waiting: GpuDemand) -> bool:
    """Whether the waiting workload's pods may run in a flavor ``freed`` GPUs are in: Kueue
    admits a workload of ``gpuModels`` only into the flavors whose nodes hold one of them
    (decision 0237). Either side not known (no models, the victim's flavor not read): it
    may."""
    if freed is None or not freed.held_in or not waiting.flavors:
        return True
    return not freed.held_in.isdisjoint(waiting.flavors)


def lendable_to(victim: QuotaScope | None, waiting: GpuDemand) -> int | None:
    """The most GPUs stopping workloads of the ``victim``'s queue can give the ``waiting``
    workload of another queue (decision 0284): in the flavor that reaches it with the most,
    since Kueue admits a workload's GPUs into one flavor; None: as many as they hold (one
    queue, a scope or flavor not known, or no lending limit read)."""
    wanted = waiting.quota
    if victim is None or wanted is None or victim.cluster_queue == wanted.cluster_queue:
        return None
    if not (victim.flavors and wanted.flavors):
        return None
    borrows = {reach.flavor: set(reach.borrows_from) for reach in wanted.flavors}
    reaching = [
        reach
        for reach in victim.flavors
        if not borrows.get(reach.flavor, set()).isdisjoint(reach.lends_to)
        and (not waiting.flavors or reach.flavor in waiting.flavors)
    ]
    if not reaching or any(reach.lends_at_most is None for reach in reaching):
        return None
    return max(reach.lends_at_most or 0 for reach in reaching)


def serves(freed: QuotaScope | None, waiting: GpuDemand) -> bool:
    """Whether GPUs counted in ``freed`` can let Kueue admit ``waiting``: where Kueue gives
    them back (:func:`frees_quota_for`), in a flavor it may run in (:func:`may_run_on`)."""
    return frees_quota_for(freed, waiting.quota) and may_run_on(freed, waiting)


@dataclass(frozen=True, slots=True)
class InFlight:
    """GPUs being freed for nobody named: a preemption decided and not observed yet, or an
    ``Always`` victim still stopping. Kueue gives them back to the victim's ``quota`` (None:
    unknown, they may serve any waiting workload)."""

    vendor: str
    gpus: int
    quota: QuotaScope | None = None


@dataclass(frozen=True, slots=True)
class IdleWorkload:
    """A running, opted-in workload that the monitor reports idle since ``idle_since``."""

    key: RefKey
    vendor: str
    gpus: int
    idle_since: datetime
    evidence_at: datetime
    """Time of the reading that last confirmed the idle stretch."""
    grace: timedelta
    policy: IdlePolicy
    quota: QuotaScope | None = None

    @property
    def idle_for(self) -> timedelta:
        return self.evidence_at - self.idle_since

    def past_grace(self, now: datetime) -> bool:
        """Idle for its whole grace period by ``now``: only then may it be preempted."""
        return self.idle_for >= self.grace and self.idle_since <= now

    def may_be_chosen(self, now: datetime, *, pressed: bool) -> bool:
        """Whether :func:`decide_idle_preemptions` could choose it, whatever it holds: past its
        grace period, and ``Always``, or ``OnPressure`` while some workload waits
        (``pressed``)."""
        return self.past_grace(now) and (pressed or self.policy == "Always")


@dataclass(frozen=True, slots=True)
class GpuDemand:
    """A PENDING workload waiting for ``gpus`` GPUs of ``vendor`` since ``pending_since``."""

    key: RefKey
    vendor: str
    gpus: int
    pending_since: datetime
    quota: QuotaScope | None = None
    flavors: frozenset[str] = frozenset()
    """The flavors of its queue Kueue may admit it into, those whose nodes hold one of its
    ``gpuModels`` (decision 0237); empty: any."""


@dataclass(frozen=True, slots=True)
class IdlePreemption:
    """Terminate ``victim``; ``beneficiary`` is None under the ``Always`` policy."""

    victim: ObjectRef
    beneficiary: ObjectRef | None
    request: TerminationRequest


@dataclass(frozen=True, slots=True)
class IdlePreemptionDecision:
    preemptions: tuple[IdlePreemption, ...] = ()

    def for_victim(self, ref: ObjectRef) -> IdlePreemption | None:
        key = ref.sort_key()
        return next((p for p in self.preemptions if p.victim.sort_key() == key), None)


def decide_idle_preemptions(
    *,
    idle: Sequence[IdleWorkload],
    pending: Sequence[GpuDemand],
    in_flight: Sequence[InFlight],
    now: datetime,
    freed_for: Mapping[str, int] | None = None,
) -> IdlePreemptionDecision:
    """Victims, beneficiaries and reasons (module docstring). ``in_flight``: GPUs being freed
    by earlier preemptions for nobody named; ``freed_for``: GPUs being freed for the waiting
    workload of each uid; ``now`` is when the decision is made."""
    eligible = sorted(
        (w for w in idle if w.gpus > 0 and w.past_grace(now)),
        key=lambda w: (w.idle_since, w.key),
    )
    preemptions = [
        IdlePreemption(victim=ObjectRef.of_key(w.key), beneficiary=None, request=_always(w))
        for w in eligible
        if w.policy == "Always"
    ]
    unclaimed = [w for w in eligible if w.policy == "OnPressure"]
    left = [max(entry.gpus, 0) for entry in in_flight]
    lent: dict[str, int] = {}  # by victim queue: GPUs counted as lent to another queue
    for waiting in sorted(pending, key=lambda p: (p.pending_since, p.key)):
        vendor = waiting.vendor.lower()
        named = (freed_for or {}).get(waiting.key[4], 0)
        covered = _take_in_flight(in_flight, left, waiting, waiting.gpus - named)
        demand = waiting.gpus - named - covered
        if demand <= 0:
            continue
        candidates = _weighed(
            [w for w in unclaimed if w.vendor.lower() == vendor and serves(w.quota, waiting)],
            waiting,
            lent,
        )
        victims = fewest_covering(list(candidates), demand)
        for weighed in victims:
            victim = candidates[weighed]
            unclaimed.remove(victim)
            if weighed is not victim and victim.quota is not None:  # weighed by its queue
                queue = victim.quota.cluster_queue
                lent[queue] = lent.get(queue, 0) + weighed.gpus
            preemptions.append(
                IdlePreemption(
                    victim=ObjectRef.of_key(victim.key),
                    beneficiary=ObjectRef.of_key(waiting.key),
                    request=_on_pressure(victim, waiting, demand),
                )
            )
    return IdlePreemptionDecision(preemptions=tuple(preemptions))


def _weighed(
    candidates: Sequence[IdleWorkload], waiting: GpuDemand, lent: Mapping[str, int]
) -> dict[IdleWorkload, IdleWorkload]:
    """Each candidate that gives ``waiting`` any GPUs, as many as it gives (key: a copy when
    its queue's lending weighed it, else the candidate itself), with the candidate itself
    (value), longest idle first. A workload of another queue gives no more
    than its queue can lend (:func:`lendable_to`) less what ``lent`` counts from that queue
    already and what the candidates before it give (decision 0284): stopping an 8-GPU job
    of a queue that uses 2 beyond what its lending limit keeps frees 2 for the cohort."""
    weighed: dict[IdleWorkload, IdleWorkload] = {}
    given: dict[str, int] = dict(lent)
    for candidate in candidates:
        cap = lendable_to(candidate.quota, waiting)
        if cap is None or candidate.quota is None:
            weighed[candidate] = candidate
            continue
        queue = candidate.quota.cluster_queue
        share = min(candidate.gpus, cap - given.get(queue, 0))
        if share <= 0:
            continue
        given[queue] = given.get(queue, 0) + share
        weighed[replace(candidate, gpus=share)] = candidate
    return weighed


def _take_in_flight(
    in_flight: Sequence[InFlight], left: list[int], waiting: GpuDemand, wanted: int
) -> int:
    """Take up to ``wanted`` of the GPUs in flight still ``left`` that can serve ``waiting``
    (its vendor, and quota Kueue would give it: :func:`frees_quota_for`, decision 0256); how
    many. Counted per vendor alone, GPUs another queue gets back covered the oldest waiting
    workload, and a younger one of that queue had an idle workload stopped for what was
    coming to it anyway."""
    taken = 0
    for index, entry in enumerate(in_flight):
        if taken >= wanted:
            break
        if entry.vendor.lower() != waiting.vendor.lower():
            continue
        if left[index] <= 0 or not serves(entry.quota, waiting):
            continue
        share = min(left[index], wanted - taken)
        left[index] -= share
        taken += share
    return taken


def fewest_covering(candidates: Sequence[IdleWorkload], demand: int) -> tuple[IdleWorkload, ...]:
    """The fewest ``candidates`` whose GPUs add up to ``demand``, preferring those earlier in
    the sequence (longest idle); () when all of them together fall short."""
    by_size = sorted((w.gpus for w in candidates), reverse=True)
    count = next(
        (k for k in range(1, len(by_size) + 1) if sum(by_size[:k]) >= demand),
        None,
    )
    if count is None:
        return ()
    chosen: list[IdleWorkload] = []
    for index, candidate in enumerate(candidates):
        slots = count - len(chosen) - 1
        if slots < 0:
            break
        rest = sorted((w.gpus for w in candidates[index + 1 :]), reverse=True)[:slots]
        if sum(w.gpus for w in chosen) + candidate.gpus + sum(rest) >= demand:
            chosen.append(candidate)
    return tuple(chosen)


def _always(victim: IdleWorkload) -> TerminationRequest:
    return TerminationRequest(
        reason=REASON_IDLE,
        message=(
            f"Preempted: GPUs idle since {_text(victim.idle_since)}, longer than the grace "
            f"period of {_seconds(victim.grace)}; policy Always"
        ),
    )


def _on_pressure(victim: IdleWorkload, waiting: GpuDemand, demand: int) -> TerminationRequest:
    return TerminationRequest(
        reason=REASON_IDLE,
        message=(
            f"Preempted to free {victim.gpus} {victim.vendor.lower()} GPU(s) for pending "
            f"workload {ObjectRef.of_key(waiting.key).display()}, which needs {demand} more: "
            "GPUs idle since "
            f"{_text(victim.idle_since)}, longer than the grace period of "
            f"{_seconds(victim.grace)}; policy OnPressure"
        ),
        beneficiary=ObjectRef.of_key(waiting.key),
    )


def _text(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _seconds(length: timedelta) -> str:
    return f"{int(length.total_seconds())}s"
