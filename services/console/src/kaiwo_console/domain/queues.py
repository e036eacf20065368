"""The queues page: per ClusterQueue, quota against use, and the pending workloads in
admission order with their position and estimated start (decision 0050). Pure.

A queue's pending Kueue Workloads are ordered as Kueue admits them (higher priority first,
then older first) and estimated per GPU resource (a lane): an AMD job does not wait for
NVIDIA GPUs to free. A pending workload of a namespace the caller may not see keeps its place
(it holds up the others) but is shown without its name.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from kaiwo_contracts.crds.go_duration import duration_nanoseconds
from kaiwo_contracts.queue_estimates.eta import Eta, EtaSettings
from kaiwo_contracts.queue_estimates.kueue import admission_order, lane_estimates, owner_name

from kaiwo_console.domain.cluster import (
    CLUSTER_QUEUE,
    KUEUE_WORKLOAD,
    LOCAL_QUEUE,
    WORKLOAD_KINDS,
    ClusterState,
    Visible,
    is_admitted,
    is_finished,
    meta,
    spec,
)
from kaiwo_console.domain.history import (
    DepthStep,
    LocalQueueKey,
    QueueRecords,
    WaitPoint,
    depth_over_time,
    waits_in,
)
from kaiwo_console.domain.quota import QuotaUse, cluster_queue_of, gpu_quota, quota_use


@dataclass(frozen=True, slots=True)
class PendingEntry:
    namespace: str
    name: str
    """The workload's (its Kueue Workload's owner's) name; "" when hidden from the caller."""
    gpus: int
    resource: str
    eta: Eta


@dataclass(frozen=True, slots=True)
class QueueView:
    name: str
    quota: tuple[QuotaUse, ...]
    admitted: int
    pending: tuple[PendingEntry, ...]
    admissions_by_hour: tuple[int, ...]
    depth: tuple[DepthStep, ...] = ()
    """Workloads waiting over the same hours."""
    waits: tuple[WaitPoint, ...] = ()
    """How long each workload admitted in those hours had waited."""


def queue_views(
    state: ClusterState,
    records: QueueRecords,
    *,
    now: datetime,
    visible: Visible,
    settings: EtaSettings | None = None,
    hours: int = 24,
    memo: EstimateMemo | None = None,
    plots: bool = False,
) -> list[QueueView]:
    """Every ClusterQueue's view as ``visible`` may see it. With ``memo``, a queue's
    estimates are computed again only when what they read changed (or they grew too old).
    With ``plots``, its depth and waits over the ``hours`` too (only the queues page draws
    them; the estimates' other readers skip the work)."""
    views = []
    since = now - timedelta(hours=hours)
    stretches = (
        records.stretches(lambda local: _cluster_queue_of_local(state, local)) if plots else {}
    )
    for queue in sorted(state.of(CLUSTER_QUEUE), key=lambda q: str(meta(q).get("name"))):
        name = str(meta(queue).get("name") or "")
        mine = [w for w in state.of(KUEUE_WORKLOAD) if cluster_queue_of(state, w) == name]
        running = [w for w in mine if is_admitted(w) and not is_finished(w)]
        waiting = sorted(
            (w for w in mine if not is_admitted(w) and not is_finished(w)),
            key=admission_order,
        )
        views.append(
            QueueView(
                name=name,
                quota=tuple(quota_use(state, queue)),
                admitted=len(running),
                pending=_hidden(
                    _remembered(state, records, name, running, waiting, now, settings, memo),
                    visible,
                ),
                admissions_by_hour=tuple(records.admissions_by_hour(name, now=now, hours=hours)),
                depth=depth_over_time(stretches.get(name, ()), start=since, now=now)
                if plots
                else (),
                waits=waits_in(stretches.get(name, ()), start=since, now=now),
            )
        )
    return views


def _cluster_queue_of_local(state: ClusterState, local: LocalQueueKey) -> str:
    found = state.get(LOCAL_QUEUE, *local)
    if found is not None and spec(found).get("clusterQueue"):
        return str(spec(found)["clusterQueue"])
    return local[1]


def pending_estimates(
    state: ClusterState,
    records: QueueRecords,
    *,
    now: datetime,
    settings: EtaSettings | None = None,
    memo: EstimateMemo | None = None,
) -> dict[tuple[str, str], PendingEntry]:
    """(namespace, workload name) -> its place and estimate, over every queue."""
    return estimates_in(
        queue_views(state, records, now=now, visible=lambda _ns: True, settings=settings, memo=memo)
    )


@dataclass
class EstimateMemo:
    """Each queue's last estimates and what they were computed from (the console keeps one
    for every page and reader): a change elsewhere in the cluster, or in another queue, does
    not replay this one. Estimates are absolute times, so for ``max_age_seconds`` they say
    the same; after that they are replayed from the new ``now``."""

    max_age_seconds: float = 30.0
    entries: dict[str, tuple[Hashable, datetime, tuple[PendingEntry, ...]]] = field(
        default_factory=dict
    )
    computed: int = 0
    """How many times a queue was estimated (replayed)."""


def _remembered(
    state: ClusterState,
    records: QueueRecords,
    queue: str,
    running: list[dict[str, Any]],
    waiting: list[dict[str, Any]],
    now: datetime,
    settings: EtaSettings | None,
    memo: EstimateMemo | None,
) -> tuple[PendingEntry, ...]:
    if memo is None:
        return _estimated(state, records, queue, running, waiting, now, settings)
    inputs = (
        records.version,
        tuple(sorted(gpu_quota(state, queue).items())),
        tuple(_input(state, w) for w in running),
        tuple(_input(state, w) for w in waiting),
    )
    known = memo.entries.get(queue)
    if (
        known is not None
        and known[0] == inputs
        and 0 <= (now - known[1]).total_seconds() < memo.max_age_seconds
    ):
        return known[2]
    entries = _estimated(state, records, queue, running, waiting, now, settings)
    memo.entries[queue] = (inputs, now, entries)
    memo.computed += 1
    return entries


def _input(state: ClusterState, kueue_workload: Mapping[str, Any]) -> Hashable:
    """What an estimate reads of a Kueue Workload: which one, its version (its admission,
    GPUs, order), and the duration its workload declared."""
    metadata = meta(kueue_workload)
    return (
        str(metadata.get("uid") or metadata.get("name")),
        str(metadata.get("resourceVersion") or ""),
        _declared(state, kueue_workload),
    )


def _hidden(entries: tuple[PendingEntry, ...], visible: Visible) -> tuple[PendingEntry, ...]:
    """A pending workload of a namespace the reader may not see keeps its place, not its
    name."""
    return tuple(e if visible(e.namespace) else replace(e, name="") for e in entries)


def estimates_in(views: Sequence[QueueView]) -> dict[tuple[str, str], PendingEntry]:
    """(namespace, workload name) -> its place and estimate, from views that hide nothing."""
    return {(e.namespace, e.name): e for view in views for e in view.pending}


def _estimated(
    state: ClusterState,
    records: QueueRecords,
    queue: str,
    running: list[dict[str, Any]],
    waiting: list[dict[str, Any]],
    now: datetime,
    settings: EtaSettings | None,
) -> tuple[PendingEntry, ...]:
    """Estimated for a reader who sees everything."""
    placed = lane_estimates(
        queue=queue,
        capacity=gpu_quota(state, queue),
        admitted=running,
        waiting=waiting,
        declared=lambda w: _declared(state, w),
        records=records.history,
        now=now,
        settings=settings,
    )
    return tuple(
        PendingEntry(
            namespace=one.namespace,
            name=one.owner,
            gpus=one.gpus,
            resource=one.resource,
            eta=one.eta,
        )
        for one in placed
    )


def _declared(state: ClusterState, kueue_workload: Mapping[str, Any]) -> float | None:
    """The ``duration`` the workload behind a Kueue Workload declared, in seconds."""
    namespace = str(meta(kueue_workload).get("namespace") or "")
    name = owner_name(kueue_workload)
    for kind in WORKLOAD_KINDS:
        workload = state.get(kind, namespace, name)
        if workload is not None:
            text = spec(workload).get("duration")
            nanoseconds = duration_nanoseconds(str(text)) if text else None
            return None if nanoseconds is None else nanoseconds / 1e9
    return None
