"""Position and estimated start of every pending Kueue Workload, from Kueue's objects: pure.

The console, the CLI (``kaiwo status``, ``kaiwo queues``) and the planner (the public workload
events) give the same estimate from the same code (decision 0055). Each passes what it has:

* the ClusterQueues (their nominal GPU quota is the capacity the replay fills),
* the LocalQueues (to find the ClusterQueue of a Workload not admitted yet),
* the Kueue Workloads (admitted ones hold GPUs; pending ones wait, in Kueue's order: higher
  ``spec.priority`` first, then older first),
* each workload's declared ``duration`` (:data:`Declared`),
* the queue's record (:data:`Records`): the console folds it from the event store; the CLI and
  the planner, which have no store, take it from the finished Kueue Workloads the cluster
  still holds (:func:`history_in_cluster`).

A queue is estimated per GPU resource (a lane): an AMD job does not wait for NVIDIA GPUs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from kaiwo_contracts.crds.go_duration import duration_nanoseconds
from kaiwo_contracts.queue_estimates.eta import (
    Eta,
    EtaSettings,
    QueueHistory,
    QueueNow,
    Running,
    Waiting,
    estimate_starts,
)

Obj = Mapping[str, Any]
Lane = tuple[str, str]
"""(ClusterQueue, GPU resource): the workloads that compete for the same GPUs."""
Declared = Callable[[Obj], float | None]
"""A Kueue Workload -> the ``duration`` its workload declared, in seconds (None: none)."""
Records = Callable[[Lane], QueueHistory]

GPU_RESOURCES: Final = ("amd.com/gpu", "nvidia.com/gpu")


@dataclass(frozen=True, slots=True)
class Placed:
    """A pending Kueue Workload's place in its queue and its estimated start."""

    uid: str
    namespace: str
    owner: str
    """The name of the workload behind it (its first owner), else its own name."""
    queue: str
    resource: str
    gpus: int
    eta: Eta


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _spec(obj: Obj) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _status(obj: Obj) -> Mapping[str, Any]:
    return obj.get("status") or {}


def _int(value: object) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def parse_time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def condition(obj: Obj, kind: str) -> Mapping[str, Any] | None:
    for found in _status(obj).get("conditions") or ():
        if isinstance(found, Mapping) and found.get("type") == kind:
            return found
    return None


def is_true(obj: Obj, kind: str) -> bool:
    found = condition(obj, kind)
    return found is not None and found.get("status") == "True"


def is_admitted(kueue_workload: Obj) -> bool:
    return bool(_status(kueue_workload).get("admission")) or is_true(kueue_workload, "Admitted")


def is_finished(kueue_workload: Obj) -> bool:
    return is_true(kueue_workload, "Finished")


def admitted_at(kueue_workload: Obj) -> datetime | None:
    for kind in ("Admitted", "QuotaReserved"):
        found = condition(kueue_workload, kind)
        if found is not None and found.get("status") == "True":
            return parse_time(found.get("lastTransitionTime"))
    return None


def finished_at(kueue_workload: Obj) -> datetime | None:
    found = condition(kueue_workload, "Finished")
    if found is None or found.get("status") != "True":
        return None
    return parse_time(found.get("lastTransitionTime"))


def kueue_gpus(kueue_workload: Obj) -> tuple[str, int]:
    """(GPU resource, count) a Kueue Workload asks for over its pod sets (("", 0): none)."""
    wanted: dict[str, int] = {}
    for pod_set in _spec(kueue_workload).get("podSets") or ():
        count = _int(pod_set.get("count")) or 1
        pod_spec = (pod_set.get("template") or {}).get("spec") or {}
        for container in pod_spec.get("containers") or ():
            requests = (container.get("resources") or {}).get("requests") or {}
            limits = (container.get("resources") or {}).get("limits") or {}
            for resource in GPU_RESOURCES:
                amount = _int(requests.get(resource, limits.get(resource)))
                if amount:
                    wanted[resource] = wanted.get(resource, 0) + amount * count
    if not wanted:
        return "", 0
    resource = max(wanted, key=lambda r: wanted[r])
    return resource, wanted[resource]


def owner_name(kueue_workload: Obj) -> str:
    refs = _meta(kueue_workload).get("ownerReferences") or ()
    return str(refs[0].get("name")) if refs else str(_meta(kueue_workload).get("name") or "")


def admission_order(kueue_workload: Obj) -> tuple[int, str]:
    """Kueue's order among pending Workloads: higher priority first, then older first."""
    return (
        -_int(_spec(kueue_workload).get("priority")),
        str(_meta(kueue_workload).get("creationTimestamp") or ""),
    )


def gpu_quota(cluster_queue: Obj) -> dict[str, int]:
    """GPU resource -> the ClusterQueue's nominal quota of it over its flavors."""
    totals: dict[str, int] = {}
    for group in _spec(cluster_queue).get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            for resource in flavor.get("resources") or ():
                name = str(resource.get("name") or "")
                if name in GPU_RESOURCES:
                    totals[name] = totals.get(name, 0) + _int(resource.get("nominalQuota"))
    return totals


def cluster_queue_of(kueue_workload: Obj, local_queues: Mapping[tuple[str, str], str]) -> str:
    """The ClusterQueue a Kueue Workload is admitted to, else its LocalQueue's
    (``local_queues``: (namespace, LocalQueue) -> ClusterQueue), else its LocalQueue's name."""
    admission = _status(kueue_workload).get("admission") or {}
    if admission.get("clusterQueue"):
        return str(admission["clusterQueue"])
    namespace = str(_meta(kueue_workload).get("namespace") or "")
    local = str(_spec(kueue_workload).get("queueName") or "")
    return local_queues.get((namespace, local), local)


def key_of(kueue_workload: Obj) -> str:
    return str(_meta(kueue_workload).get("uid") or _meta(kueue_workload).get("name") or "")


def lane_estimates(
    *,
    queue: str,
    capacity: Mapping[str, int],
    admitted: Sequence[Obj],
    waiting: Sequence[Obj],
    declared: Declared,
    records: Records,
    now: datetime,
    settings: EtaSettings | None = None,
) -> tuple[Placed, ...]:
    """The place and estimate of each of ``waiting`` (one ClusterQueue's pending Workloads,
    in admission order), given its admitted, unfinished ones; in the order given."""
    placed: dict[str, Placed] = {}
    for resource in sorted({kueue_gpus(w)[0] for w in waiting}):
        lane_waiting = [w for w in waiting if kueue_gpus(w)[0] == resource]
        etas = estimate_starts(
            records((queue, resource)),
            QueueNow(
                capacity_gpus=capacity.get(resource, 0),
                running=tuple(
                    Running(admitted_at(w) or now, kueue_gpus(w)[1], declared(w))
                    for w in admitted
                    if kueue_gpus(w)[0] == resource
                ),
                pending=tuple(
                    Waiting(key_of(w), kueue_gpus(w)[1], declared(w)) for w in lane_waiting
                ),
            ),
            now=now,
            settings=settings,
        )
        for kueue_workload, eta in zip(lane_waiting, etas, strict=True):
            placed[eta.name] = Placed(
                uid=key_of(kueue_workload),
                namespace=str(_meta(kueue_workload).get("namespace") or ""),
                owner=owner_name(kueue_workload),
                queue=queue,
                resource=resource,
                gpus=kueue_gpus(kueue_workload)[1],
                eta=eta,
            )
    return tuple(placed[key_of(w)] for w in waiting if key_of(w) in placed)


def history_in_cluster(
    kueue_workloads: Iterable[Obj], *, now: datetime
) -> dict[Lane, QueueHistory]:
    """What the cluster still holds of each lane's past, for a reader without the event
    store: the admission time of every Workload that shows one, and the run time of every
    finished one (admitted to finished), oldest finish first. Kueue deletes finished
    Workloads with their jobs, so this is a shorter record than the store's."""
    admissions: dict[Lane, list[datetime]] = {}
    finished: dict[Lane, list[tuple[datetime, float]]] = {}
    for kueue_workload in kueue_workloads:
        start = admitted_at(kueue_workload)
        queue = str((_status(kueue_workload).get("admission") or {}).get("clusterQueue") or "")
        if start is None or not queue or start > now:
            continue
        lane = (queue, kueue_gpus(kueue_workload)[0])
        admissions.setdefault(lane, []).append(start)
        end = finished_at(kueue_workload)
        if end is not None and end <= now:
            finished.setdefault(lane, []).append((end, max((end - start).total_seconds(), 0.0)))
    return {
        lane: QueueHistory(
            admissions=tuple(sorted(admissions[lane])),
            run_seconds=tuple(run for _, run in sorted(finished.get(lane, ()))),
        )
        for lane in admissions
    }


def cluster_estimates(
    *,
    cluster_queues: Iterable[Obj],
    local_queues: Iterable[Obj],
    kueue_workloads: Sequence[Obj],
    declared: Declared,
    now: datetime,
    records: Records | None = None,
    settings: EtaSettings | None = None,
) -> dict[str, Placed]:
    """Every pending Kueue Workload's place and estimate, by its uid, over every ClusterQueue.

    ``records`` defaults to :func:`history_in_cluster` of ``kueue_workloads``."""
    if records is None:
        held = history_in_cluster(kueue_workloads, now=now)

        def records(lane: Lane) -> QueueHistory:
            return held.get(lane, QueueHistory())

    to_cluster_queue = {
        (str(_meta(q).get("namespace") or ""), str(_meta(q).get("name") or "")): str(
            _spec(q).get("clusterQueue") or ""
        )
        for q in local_queues
    }
    found: dict[str, Placed] = {}
    for cluster_queue in cluster_queues:
        name = str(_meta(cluster_queue).get("name") or "")
        mine = [
            w
            for w in kueue_workloads
            if not is_finished(w) and cluster_queue_of(w, to_cluster_queue) == name
        ]
        waiting = sorted((w for w in mine if not is_admitted(w)), key=admission_order)
        for placed in lane_estimates(
            queue=name,
            capacity=gpu_quota(cluster_queue),
            admitted=[w for w in mine if is_admitted(w)],
            waiting=waiting,
            declared=declared,
            records=records,
            now=now,
            settings=settings,
        ):
            found[placed.uid] = placed
    return found


def placed_for(
    workload: Obj, kueue_workloads: Iterable[Obj], estimates: Mapping[str, Placed]
) -> Placed | None:
    """The estimate of a KaiwoJob's or KaiwoService's pending Kueue Workload, if it has one
    (its Kueue Workload names it as owner, by uid or name in its namespace)."""
    uid = _meta(workload).get("uid")
    name = _meta(workload).get("name")
    namespace = _meta(workload).get("namespace")
    for kueue_workload in kueue_workloads:
        if _meta(kueue_workload).get("namespace") != namespace:
            continue
        refs = _meta(kueue_workload).get("ownerReferences") or ()
        if any((uid and r.get("uid") == uid) or r.get("name") == name for r in refs):
            placed = estimates.get(key_of(kueue_workload))
            if placed is not None:
                return placed
    return None


def declared_durations(workloads: Iterable[Obj]) -> Declared:
    """A :data:`Declared` over KaiwoJobs and KaiwoServices: the ``spec.duration`` of the
    workload that owns a Kueue Workload (by name in its namespace), in seconds."""
    seconds: dict[tuple[str, str], float] = {}
    for workload in workloads:
        text = _spec(workload).get("duration")
        nanoseconds = duration_nanoseconds(str(text)) if text else None
        if nanoseconds is not None:
            key = (str(_meta(workload).get("namespace") or ""), str(_meta(workload).get("name")))
            seconds[key] = nanoseconds / 1e9

    def declared(kueue_workload: Obj) -> float | None:
        namespace = str(_meta(kueue_workload).get("namespace") or "")
        return seconds.get((namespace, owner_name(kueue_workload)))

    return declared


def span_words(seconds: float) -> str:
    """A wait in the fewest words: ``<1m``, ``45m``, ``2h05m``, ``3d4h``."""
    minutes = int(seconds // 60)
    if minutes < 1:
        return "<1m"
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h"


def start_words(eta: Eta, *, now: datetime) -> str:
    """``~12:05 UTC (in 5m)``, or ``no estimate``."""
    if eta.start is None:
        return "no estimate"
    return f"~{eta.start.astimezone(UTC):%H:%M} UTC (in {span_words(eta.wait_seconds(now) or 0)})"


def band_words(eta: Eta) -> str:
    """The p10-p90 band of the start: ``12:05-12:40``; ``-`` without one."""
    if eta.earliest is None or eta.latest is None:
        return "-"
    return f"{eta.earliest.astimezone(UTC):%H:%M}-{eta.latest.astimezone(UTC):%H:%M}"


def basis_words(eta: Eta) -> str:
    """What the estimate rests on: ``recorded run times: 12 runs, 1 declared, 16 GPUs``."""
    basis = eta.basis
    rate = (
        f", {basis.admissions_per_hour:.1f} admissions/h"
        if basis.admissions_per_hour is not None
        else ""
    )
    return (
        f"{basis.method.value}: {basis.recorded_runs} runs, {basis.declared} declared, "
        f"{basis.capacity_gpus} GPUs{rate}"
    )
