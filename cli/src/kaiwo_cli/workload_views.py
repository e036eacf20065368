"""What ``kaiwo list`` and ``kaiwo status`` print, from plain objects: pure functions.

Objects are the API server's JSON (dicts); ``now`` is passed in so that ages are testable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from kaiwo_contracts.failure_conditions import failure_rank
from kaiwo_contracts.ray_service_status import ray_service_serves, ray_service_status_clusters

from kaiwo_cli.text_tables import render_table

if TYPE_CHECKING:
    from kaiwo_contracts.queue_estimates.kueue import Placed

WORKLOAD_KINDS: Final = ("KaiwoJob", "KaiwoService")
FINAL_PHASES: Final = frozenset({"COMPLETE", "FAILED", "TERMINATED"})
"""A workload in one of these phases changes no more (``kaiwo submit --wait`` stops)."""
STUCK_PHASES: Final = frozenset({"ERROR"})
"""Phases a workload does not leave by itself (its spec, its queue or the cluster must be
changed first): ``--wait`` stops there and says why rather than spin for ever."""
SERVING_PHASE: Final = "READY"
"""Where a KaiwoService's ``--wait`` stops: it serves and keeps serving."""
PLURALS: Final = {"KaiwoJob": "kaiwojob", "KaiwoService": "kaiwoservice"}
KUEUE_WORKLOAD_KIND: Final = "Workload"
"""Kueue's Workload, named among the kinds ``kaiwo status`` could not read."""
WAITING_PHASE: Final = "PENDING"
"""Where a workload waits for Kueue's admission: its place in the queue matters."""
GROUP: Final = "kaiwo.silogen.ai"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("status") or {}


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def age(created: str | None, now: datetime) -> str:
    """kubectl's short age, one unit: seconds below 2 minutes, minutes below 3 hours, hours
    below 2 days, then days (``<unknown>`` without a time)."""
    moment = parse_time(created)
    if moment is None:
        return "<unknown>"
    seconds = max(0, int((now - moment).total_seconds()))
    if seconds < 2 * 60:
        return f"{seconds}s"
    if seconds < 3 * 3600:
        return f"{seconds // 60}m"
    if seconds < 2 * 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def phase_of(obj: Mapping[str, Any]) -> str:
    """``status.status``; ``NEW`` before the operator wrote any."""
    return str(_status(obj).get("status") or "NEW")


def is_settled(obj: Mapping[str, Any]) -> bool:
    """Where ``--wait`` stops: a final phase, a phase it will not leave by itself (ERROR), or a
    KaiwoService that serves."""
    phase = phase_of(obj)
    return (
        phase in FINAL_PHASES
        or phase in STUCK_PHASES
        or (obj.get("kind") == "KaiwoService" and phase == SERVING_PHASE)
    )


TROUBLE_WHEN_TRUE: Final = frozenset(
    {"ResourceUnderutilization", "GpuIdle", "Preempted", "WorkloadTerminatedEarly"}
)
"""Conditions whose False is the healthy state ("GPU utilization is at or above 1%"): never
why a workload failed."""


def failure_condition(conditions: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The False condition that says why a workload is FAILED or ERROR: the first of
    ``FAILURE_CONDITIONS`` that is False, else any other False one that is not healthy
    when False. The first False one was, for a job whose container failed, the monitor's
    ``ResourceUnderutilization`` "GPU utilization is at or above 1%" (decision 0138)."""
    failing = [
        c
        for c in conditions
        if c.get("status") == "False" and c.get("type") not in TROUBLE_WHEN_TRUE
    ]
    return min(failing, key=lambda c: failure_rank(str(c.get("type"))), default=None)


def qualified_name(obj: Mapping[str, Any]) -> str:
    """``kaiwojob.kaiwo.silogen.ai/NAME`` (``-o name``, as kubectl prints it)."""
    kind = str(obj.get("kind", ""))
    plural = PLURALS.get(kind, kind.lower())
    return f"{plural}.{GROUP}/{_meta(obj).get('name')}"


def owner_of(obj: Mapping[str, Any]) -> str:
    return str(_spec(obj).get("user") or "")


def matches(
    obj: Mapping[str, Any], *, user: str | None, kind: str | None, phase: str | None
) -> bool:
    """The filters of ``kaiwo list`` (case-insensitive kind and phase; None: any)."""
    if user is not None and owner_of(obj) != user:
        return False
    if kind is not None and str(obj.get("kind", "")).lower() != kind.lower():
        return False
    return phase is None or phase_of(obj).upper() == phase.upper()


def _gpus(obj: Mapping[str, Any]) -> str:
    spec = _spec(obj)
    gpus = spec.get("gpus")
    if not gpus and spec.get("gpusPerReplica"):
        gpus = int(spec["gpusPerReplica"]) * int(spec.get("replicas") or 1)
    vendor = str(spec.get("gpuVendor") or "")
    return f"{gpus} {vendor}".strip() if gpus else "-"


def list_table(workloads: Sequence[Mapping[str, Any]], *, now: datetime, wide: bool = False) -> str:
    """``kaiwo list``: one row per workload, sorted by namespace, kind and name."""
    ordered = sorted(
        workloads,
        key=lambda o: (_meta(o).get("namespace", ""), o.get("kind", ""), _meta(o).get("name", "")),
    )
    headers = ["NAMESPACE", "KIND", "NAME", "USER", "QUEUE", "PHASE", "AGE"]
    if wide:
        headers += ["GPUS", "PRIORITY", "DURATION"]
    rows = []
    for obj in ordered:
        spec = _spec(obj)
        row = [
            str(_meta(obj).get("namespace", "")),
            str(obj.get("kind", "")),
            str(_meta(obj).get("name", "")),
            owner_of(obj) or "-",
            str(spec.get("clusterQueue") or "-"),
            phase_of(obj),
            age(_meta(obj).get("creationTimestamp"), now),
        ]
        if wide:
            row += [
                _gpus(obj),
                str(spec.get("priorityClass") or "-"),
                str(spec.get("duration") or "-"),
            ]
        rows.append(row)
    return render_table(headers, rows)


def watch_line(obj: Mapping[str, Any], *, now: datetime) -> str:
    """One line per change while ``kaiwo list -w`` watches (the table's columns, no header)."""
    return list_table([obj], now=now).splitlines()[1]


# --------------------------------------------------------------------------- the queue


@dataclass(frozen=True, slots=True)
class QueuePosition:
    queue: str
    position: int
    """1 is next to be admitted."""
    pending: int


def queue_position(
    workload: Mapping[str, Any], kueue_workloads: Iterable[Mapping[str, Any]]
) -> QueuePosition | None:
    """Where the workload's Kueue Workload waits among the pending ones of its LocalQueue:
    higher ``spec.priority`` first, then older first (Kueue's order). None when it has no
    Kueue Workload or is admitted already."""
    name = _meta(workload).get("name")
    namespace = _meta(workload).get("namespace")
    uid = _meta(workload).get("uid")
    own_children = [
        w
        for w in kueue_workloads
        if _meta(w).get("namespace") == namespace
        and any(
            ref.get("name") == name or ref.get("uid") == uid
            for ref in _meta(w).get("ownerReferences") or []
        )
    ]
    mine = next((w for w in own_children if not _admitted(w)), None)
    if mine is None:
        return None
    queue = str(_spec(mine).get("queueName") or "")
    pending = sorted(
        (
            w
            for w in kueue_workloads
            if _meta(w).get("namespace") == namespace
            and str(_spec(w).get("queueName") or "") == queue
            and not _admitted(w)
        ),
        key=lambda w: (-int(_spec(w).get("priority") or 0), _meta(w).get("creationTimestamp", "")),
    )
    position = next(i for i, w in enumerate(pending, start=1) if w is mine)
    return QueuePosition(queue=queue, position=position, pending=len(pending))


def _admitted(kueue_workload: Mapping[str, Any]) -> bool:
    status = _status(kueue_workload)
    if status.get("admission"):
        return True
    return any(
        c.get("type") in ("Admitted", "Finished") and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


# --------------------------------------------------------------------------- status


def status_report(
    workload: Mapping[str, Any],
    *,
    children: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]],
    position: QueuePosition | None,
    now: datetime,
    recent_events: int = 10,
    estimate: Placed | None = None,
    estimate_partial: bool = False,
    unreadable: Sequence[str] = (),
) -> str:
    """``kaiwo status``: what a person asks first, in the order they ask it; a pending one's
    place in its ClusterQueue and estimated start (decision 0055) when ``estimate`` is given.
    ``unreadable``: the kinds the caller may not list (403), named so that no child is taken
    for absent and no queue for empty (decision 0138)."""
    meta, spec, status = _meta(workload), _spec(workload), _status(workload)
    queue = _queue_line(spec, position)
    if KUEUE_WORKLOAD_KIND in unreadable and phase_of(workload) == WAITING_PHASE:
        queue += " (place in the queue unknown: your credentials may not list Kueue Workloads)"
    lines = [
        f"{workload.get('kind')} {meta.get('namespace')}/{meta.get('name')}",
        f"Phase:     {phase_of(workload)}",
        f"User:      {spec.get('user') or '-'}",
        f"Queue:     {queue}",
    ]
    if estimate is not None:
        lines += _estimate_lines(estimate, now=now)
        if estimate_partial:
            lines.append(
                "           (from your namespace's workloads only: others' were not readable,"
                " so it may start later)"
            )
    lines.append(f"Age:       {age(meta.get('creationTimestamp'), now)}")
    if status.get("startTime"):
        lines.append(f"Started:   {status['startTime']}")
    lines.append("")
    lines.append("Conditions:")
    conditions = status.get("conditions") or []
    if conditions:
        lines.append(
            _indent(
                render_table(
                    ["TYPE", "STATUS", "REASON", "MESSAGE"],
                    [
                        [
                            str(c.get("type", "")),
                            str(c.get("status", "")),
                            str(c.get("reason") or "-"),
                            str(c.get("message") or ""),
                        ]
                        for c in conditions
                    ],
                )
            )
        )
    else:
        lines.append("  (none)")
    lines.append("")
    lines.append("Children:")
    rows = [[f"{c.get('kind')}/{_meta(c).get('name')}", child_state(c)] for c in children]
    rows += [[f"Pod/{_meta(p).get('name')}", pod_state(p)] for p in pods]
    hidden = [kind for kind in unreadable if kind != KUEUE_WORKLOAD_KIND]
    if rows:
        lines.append(_indent(render_table(["OBJECT", "STATE"], rows)))
    else:
        lines.append("  (none you may see yet)" if hidden else "  (none yet)")
    if hidden:
        kinds = ", ".join(f"{kind}s" for kind in hidden)
        lines.append(f"  (not shown: your credentials may not list {kinds})")
    lines.append("")
    lines.append("Events:")
    ordered = sorted(events, key=_event_order)[-recent_events:]
    if ordered:
        lines.append(
            _indent(
                render_table(
                    ["AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"],
                    [
                        [
                            age(_event_time(e), now),
                            str(e.get("type", "")),
                            str(e.get("reason", "")),
                            _involved(e),
                            " ".join(str(e.get("message", "")).split()),
                        ]
                        for e in ordered
                    ],
                )
            )
        )
    else:
        lines.append("  (none)")
    return "\n".join(lines)


def _queue_line(spec: Mapping[str, Any], position: QueuePosition | None) -> str:
    queue = str(spec.get("clusterQueue") or "-")
    if position is None:
        return queue
    return (
        f"{queue} (waiting: {position.position} of {position.pending} pending in {position.queue})"
    )


def _estimate_lines(estimate: Placed, *, now: datetime) -> list[str]:
    from kaiwo_contracts.queue_estimates.kueue import band_words, basis_words, start_words

    eta = estimate.eta
    return [
        f"Estimate:  #{eta.position} in {estimate.queue} ({estimate.resource or 'no GPUs'}), "
        f"starts {start_words(eta, now=now)}, 80% between {band_words(eta)}",
        f"Basis:     {basis_words(eta)}",
    ]


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def _event_time(event: Mapping[str, Any]) -> str:
    return str(
        event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or _meta(event).get("creationTimestamp")
        or ""
    )


_NO_TIME: Final = datetime.min.replace(tzinfo=UTC)


def _event_order(event: Mapping[str, Any]) -> tuple[datetime, int]:
    """When it happened, to the second, then the order the API server stored it in.

    An Event's timestamps have whole seconds (``eventTime`` has microseconds, and must not
    reorder a second by that), and the API server lists a namespace's Events by name: events
    of one second came out in name order, WorkloadStarting before WorkloadPending, and the
    latest ten were not the latest. Within a second, the ``resourceVersion`` etcd counts up
    at every write orders them as they were written (decision 0138)."""
    moment = parse_time(_event_time(event)) or _NO_TIME
    version = str(_meta(event).get("resourceVersion") or "")
    return moment.replace(microsecond=0), int(version) if version.isdigit() else 0


def _involved(event: Mapping[str, Any]) -> str:
    involved = event.get("involvedObject") or {}
    return f"{involved.get('kind')}/{involved.get('name')}"


def child_state(child: Mapping[str, Any]) -> str:
    """A child's state in a few words (Job, Deployment, PVC, RayJob, ...)."""
    kind, status = child.get("kind"), _status(child)
    if kind == "Job":
        return _job_state(child)
    if kind == "Deployment":
        wanted = _spec(child).get("replicas", 1)
        return f"ready {status.get('readyReplicas', 0)}/{wanted}"
    if kind == "PersistentVolumeClaim":
        return str(status.get("phase") or "Pending")
    if kind == "RayService":
        return _ray_service_state(status)
    found = [
        status.get(key) for key in ("jobStatus", "jobDeploymentStatus", "serviceStatus", "phase")
    ]
    return str(next((value for value in found if value), "-"))


def _job_state(job: Mapping[str, Any]) -> str:
    status = _status(job)
    for condition in status.get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"])
    if _spec(job).get("suspend"):
        return "Suspended (waiting for admission)"
    return f"active {status.get('active', 0)}, succeeded {status.get('succeeded', 0)}"


def _ray_service_state(status: Mapping[str, Any]) -> str:
    """Whether KubeRay says the service serves, and the Serve applications of each of its
    Ray clusters: the serving one, and the one it starts (the first, or one for an edit),
    whose failing application would otherwise be seen nowhere but in the condition."""
    parts = ["serving" if ray_service_serves(status) else "not serving"]
    for cluster in ray_service_status_clusters(status):
        if not cluster.name:
            continue
        applications = ", ".join(
            f"{name} {application.get('status') or '-'}"
            for name, application in cluster.applications
        )
        role = "cluster" if cluster.serving else "starting"
        parts.append(f"{role} {cluster.name}: {applications or 'no application'}")
    return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class LogStream:
    """One container whose log ``kaiwo logs`` reads."""

    pod: str
    container: str
    phase: str
    started: bool
    """Running or ended: its kubelet has a log to give."""


def log_streams(pods: Sequence[Mapping[str, Any]], *, container: str | None) -> list[LogStream]:
    """Every container of ``pods`` (only those named ``container`` when given), in order."""
    streams = []
    for pod in pods:
        status = _status(pod)
        states = {
            c.get("name"): c.get("state") or {} for c in status.get("containerStatuses") or []
        }
        for spec in _spec(pod).get("containers") or []:
            if container is not None and spec.get("name") != container:
                continue
            state = states.get(spec.get("name")) or {}
            streams.append(
                LogStream(
                    pod=str(_meta(pod).get("name")),
                    container=str(spec.get("name")),
                    phase=str(status.get("phase") or "Pending"),
                    started=bool(state.get("running") or state.get("terminated")),
                )
            )
    return streams


def pod_state(pod: Mapping[str, Any]) -> str:
    status = _status(pod)
    phase = str(status.get("phase") or "Pending")
    waiting = [
        str((c.get("state") or {}).get("waiting", {}).get("reason"))
        for c in status.get("containerStatuses") or []
        if (c.get("state") or {}).get("waiting")
    ]
    return f"{phase} ({', '.join(waiting)})" if waiting else phase
