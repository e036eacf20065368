"""Duration-based preemption (upstream Kaiwo §10): who has run past its ``duration``, and who to
stop so that a GPU workload that has waited too long can start.

A running workload whose ``spec.duration`` has passed is *expired*; that alone changes nothing
but its ``Preemptable`` condition. It is terminated only when some workload with GPUs of the
same vendor, in the same cluster queue, has been pending for longer than
``KaiwoConfig.spec.scheduling.pendingThresholdForPreemption``.

Order, so that the same inputs always give the same decision: waiting workloads are served
longest-waiting first; for each, expired workloads are taken longest-overdue first (then by
namespace and name) until the GPUs they free cover the waiting workload's request. If all
candidates together do not cover it, all of them are taken: they are past their time, and
what they free adds to whatever is already free. A waiting Job that Kueue may start with fewer
pods (partial admission) counts at its whole width, as Kueue's own scheduler tries the whole
count, preemption included, before fewer pods (decision 0157).

GPUs already on their way count first (decision 0148): an expired workload terminated for
GPU demand whose status names the waiting workload it was terminated for frees its GPUs for
that one; one whose termination the planner decided and has not observed yet (its status
still says it runs) frees them for the first waiting workload in the order above it competes
with that still needs GPUs. Neither is chosen again, and a waiting workload they cover has
nobody else terminated for it. Without that, a second expired workload was terminated for
the same waiting one in the seconds between the first one's termination and Kueue's
admission of the waiting one (seen on the real stack).

Differences from upstream, on purpose:

* Upstream also terminates *every* expired workload whenever any workload is observed PENDING
  (``CleanupExpiredWorkloads``), without checking vendor, queue, GPU demand or the threshold,
  and even on the brief PENDING every new workload passes through. We do not: expiry without
  a matching, long-waiting GPU request never terminates anything.
* Upstream stops all matching expired workloads for one waiting workload; we stop only as many
  as its request needs.
* GPU requests are the allocated totals (``gpus`` or ``replicas x gpusPerReplica``); upstream
  reads only ``spec.gpus``. Vendors compare case-insensitively.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoSchedulingConfig
from kaiwo_contracts.plans import ObjectRef, RefKey

from kaiwo_planner.domain.state.durations import format_duration, parse_duration
from kaiwo_planner.domain.status.workload_status import TerminationRequest

PREEMPTION_REASON = "DurationExceededWithActiveGpuDemand"


@dataclass(frozen=True, slots=True)
class RunningWorkload:
    """A RUNNING (or READY) KaiwoJob/KaiwoService and what it holds."""

    key: RefKey
    gpu_vendor: str
    gpus: int
    cluster_queue: str
    start_time: datetime
    duration: timedelta | None = None

    @property
    def deadline(self) -> datetime | None:
        return None if self.duration is None else self.start_time + self.duration


@dataclass(frozen=True, slots=True)
class PendingWorkload:
    """A PENDING KaiwoJob/KaiwoService; ``pending_since`` is when its current wait began, or
    its creation time (decision 0191; upstream counts from the creation time always). Or a
    running service waiting for the GPUs of its pods Kueue has not admitted, since the first
    of their Workloads was made (decision 0256): it is not its own victim."""

    key: RefKey
    gpu_vendor: str
    gpus: int
    cluster_queue: str
    pending_since: datetime


@dataclass(frozen=True, slots=True)
class FreeingWorkload:
    """A workload already being stopped, whose GPUs are on their way to a waiting workload:
    to the one whose uid is ``beneficiary``, as its status names it, or (None: the planner's
    own termination of it, not observed yet) to the first waiting one it competes with."""

    key: RefKey
    gpu_vendor: str
    gpus: int
    cluster_queue: str
    beneficiary: str | None = None


@dataclass(frozen=True, slots=True)
class Preemption:
    """Terminate ``victim`` to make room for ``beneficiary``."""

    victim: ObjectRef
    beneficiary: ObjectRef
    request: TerminationRequest


@dataclass(frozen=True, slots=True)
class PreemptionDecision:
    """``expired``: running past their duration (longest overdue first).
    ``preemptions``: which of them to terminate, and for whom."""

    expired: tuple[ObjectRef, ...] = ()
    preemptions: tuple[Preemption, ...] = ()

    def termination_for(self, ref: ObjectRef) -> TerminationRequest | None:
        key = ref.sort_key()
        return next((p.request for p in self.preemptions if p.victim.sort_key() == key), None)


def decide_preemptions(
    *,
    running: Sequence[RunningWorkload],
    pending: Sequence[PendingWorkload],
    scheduling: KaiwoSchedulingConfig,
    now: datetime,
    freeing: Sequence[FreeingWorkload] = (),
) -> PreemptionDecision:
    """Decide which expired workloads to terminate (see the module docstring); ``freeing``:
    the workloads whose GPUs are already on their way."""
    threshold = parse_duration(scheduling.pending_threshold_for_preemption)
    being_stopped = {f.key for f in freeing}
    freed_for: dict[str, int] = defaultdict(int)
    for named in (f for f in freeing if f.beneficiary is not None):
        freed_for[named.beneficiary or ""] += named.gpus
    unnamed = sorted((f for f in freeing if f.beneficiary is None), key=lambda f: f.key)
    expired = sorted(
        (
            w
            for w in running
            if w.deadline is not None and w.deadline <= now and w.key not in being_stopped
        ),
        key=lambda w: (w.deadline, w.key),
    )
    waiting = sorted(
        (p for p in pending if p.gpus > 0 and now - p.pending_since > threshold),
        key=lambda p: (p.pending_since, p.key),
    )
    expired_refs = tuple(ObjectRef.of_key(w.key) for w in expired)
    # Still free to take, in the order above; once none is left, nobody else can be served.
    free = list(zip(expired, expired_refs, strict=True))
    preemptions: list[Preemption] = []
    for beneficiary in waiting:
        freed = freed_for.get(beneficiary.key[4], 0)
        freed, unnamed = _on_their_way(unnamed, beneficiary, freed)
        if not free:
            continue
        left, beneficiary_ref = [], ObjectRef.of_key(beneficiary.key)
        for victim, victim_ref in free:
            if freed < beneficiary.gpus and _competes(victim, beneficiary):
                freed += victim.gpus
                preemptions.append(
                    Preemption(
                        victim=victim_ref,
                        beneficiary=beneficiary_ref,
                        request=_request(beneficiary, beneficiary_ref, threshold),
                    )
                )
            else:
                left.append((victim, victim_ref))
        free = left
    return PreemptionDecision(expired=expired_refs, preemptions=tuple(preemptions))


def _on_their_way(
    unnamed: list[FreeingWorkload], beneficiary: PendingWorkload, freed: int
) -> tuple[int, list[FreeingWorkload]]:
    """The GPUs on their way to ``beneficiary`` once the unobserved terminations it competes
    for are given to it while it still needs GPUs, and those left for the next ones."""
    left = []
    for freeing in unnamed:
        if freed < beneficiary.gpus and _competes(freeing, beneficiary):
            freed += freeing.gpus
        else:
            left.append(freeing)
    return freed, left


def _competes(victim: RunningWorkload | FreeingWorkload, waiting: PendingWorkload) -> bool:
    return (
        victim.gpus > 0
        # A running service waiting for more replicas is not stopped for itself.
        and victim.key != waiting.key
        and victim.gpu_vendor.lower() == waiting.gpu_vendor.lower()
        and victim.cluster_queue == waiting.cluster_queue
    )


def _request(
    beneficiary: PendingWorkload, beneficiary_ref: ObjectRef, threshold: timedelta
) -> TerminationRequest:
    return TerminationRequest(
        reason=PREEMPTION_REASON,
        message=(
            "Terminated since duration was exceeded and there is active GPU demand: "
            f"{beneficiary_ref.display()} has waited for {beneficiary.gpus} "
            f"{beneficiary.gpu_vendor.lower()} GPUs longer than {format_duration(threshold)}"
        ),
        beneficiary=beneficiary_ref,
    )
