"""The queues page: per ClusterQueue, quota against use, and the pending workloads in
admission order with their position and estimated start (decision 0050). Pure.

A queue's pending Kueue Workloads are ordered as Kueue admits them (higher priority first,
then older first) and estimated per GPU resource (a lane): an AMD job does not wait for
NVIDIA GPUs to free. A pending workload of a namespace the caller may not see keeps its place
(it holds up the others) but is shown without its name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kaiwo_contracts.crds.go_duration import duration_nanoseconds

from kaiwo_console.domain.cluster import (
    CLUSTER_QUEUE,
    KUEUE_WORKLOAD,
    WORKLOAD_KINDS,
    ClusterState,
    QuotaUse,
    Visible,
    admitted_at,
    cluster_queue_of,
    gpu_quota,
    is_admitted,
    is_finished,
    kueue_gpus,
    meta,
    quota_use,
    spec,
)
from kaiwo_console.domain.eta import (
    Eta,
    EtaSettings,
    QueueNow,
    Running,
    Waiting,
    estimate_starts,
)
from kaiwo_console.domain.history import QueueRecords


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


def queue_views(
    state: ClusterState,
    records: QueueRecords,
    *,
    now: datetime,
    visible: Visible,
    settings: EtaSettings | None = None,
    hours: int = 24,
) -> list[QueueView]:
    views = []
    for queue in sorted(state.of(CLUSTER_QUEUE), key=lambda q: str(meta(q).get("name"))):
        name = str(meta(queue).get("name") or "")
        mine = [w for w in state.of(KUEUE_WORKLOAD) if cluster_queue_of(state, w) == name]
        running = [w for w in mine if is_admitted(w) and not is_finished(w)]
        waiting = sorted(
            (w for w in mine if not is_admitted(w) and not is_finished(w)),
            key=lambda w: (-_priority(w), str(meta(w).get("creationTimestamp") or "")),
        )
        views.append(
            QueueView(
                name=name,
                quota=tuple(quota_use(state, queue)),
                admitted=len(running),
                pending=_estimated(state, records, name, running, waiting, now, visible, settings),
                admissions_by_hour=tuple(records.admissions_by_hour(name, now=now, hours=hours)),
            )
        )
    return views


def pending_estimates(
    state: ClusterState,
    records: QueueRecords,
    *,
    now: datetime,
    settings: EtaSettings | None = None,
) -> dict[tuple[str, str], PendingEntry]:
    """(namespace, workload name) -> its place and estimate, over every queue."""
    found = {}
    for view in queue_views(state, records, now=now, visible=lambda _ns: True, settings=settings):
        for entry in view.pending:
            found[(entry.namespace, entry.name)] = entry
    return found


def _estimated(
    state: ClusterState,
    records: QueueRecords,
    queue: str,
    running: list[dict[str, Any]],
    waiting: list[dict[str, Any]],
    now: datetime,
    visible: Visible,
    settings: EtaSettings | None,
) -> tuple[PendingEntry, ...]:
    capacity = gpu_quota(state, queue)
    entries: dict[str, PendingEntry] = {}
    lanes = {kueue_gpus(w)[0] for w in waiting}
    for resource in sorted(lanes):
        lane_running = tuple(
            Running(
                admitted_at(w) or now,
                kueue_gpus(w)[1],
                _declared(state, w),
            )
            for w in running
            if kueue_gpus(w)[0] == resource
        )
        lane_waiting = [w for w in waiting if kueue_gpus(w)[0] == resource]
        etas = estimate_starts(
            records.history((queue, resource)),
            QueueNow(
                capacity_gpus=capacity.get(resource, 0),
                running=lane_running,
                pending=tuple(
                    Waiting(
                        str(meta(w).get("uid") or meta(w).get("name")),
                        kueue_gpus(w)[1],
                        _declared(state, w),
                    )
                    for w in lane_waiting
                ),
            ),
            now=now,
            settings=settings,
        )
        for kueue_workload, eta in zip(lane_waiting, etas, strict=True):
            namespace = str(meta(kueue_workload).get("namespace") or "")
            entries[eta.name] = PendingEntry(
                namespace=namespace,
                name=_owner_name(kueue_workload) if visible(namespace) else "",
                gpus=kueue_gpus(kueue_workload)[1],
                resource=resource,
                eta=eta,
            )
    # Admission order over every lane, as the queue lists them.
    return tuple(
        entries[str(meta(w).get("uid") or meta(w).get("name"))]
        for w in waiting
        if str(meta(w).get("uid") or meta(w).get("name")) in entries
    )


def _priority(kueue_workload: Mapping[str, Any]) -> int:
    try:
        return int(spec(kueue_workload).get("priority") or 0)
    except (TypeError, ValueError):
        return 0


def _owner_name(kueue_workload: Mapping[str, Any]) -> str:
    refs = meta(kueue_workload).get("ownerReferences") or ()
    return str(refs[0].get("name")) if refs else str(meta(kueue_workload).get("name") or "")


def _declared(state: ClusterState, kueue_workload: Mapping[str, Any]) -> float | None:
    """The ``duration`` the workload behind a Kueue Workload declared, in seconds."""
    namespace = str(meta(kueue_workload).get("namespace") or "")
    name = _owner_name(kueue_workload)
    for kind in WORKLOAD_KINDS:
        workload = state.get(kind, namespace, name)
        if workload is not None:
            text = spec(workload).get("duration")
            nanoseconds = duration_nanoseconds(str(text)) if text else None
            return None if nanoseconds is None else nanoseconds / 1e9
    return None
