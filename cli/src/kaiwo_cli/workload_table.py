"""The live table of ``kaiwo demo``: one row per KaiwoJob and KaiwoService with its kind,
queue, phase, the phases it went through, its age and why it waits or failed.

:func:`workload_rows` is pure (objects and ``now`` in, rows out); :func:`render` makes the rich
table; :class:`PhaseHistory` remembers the phases seen between two looks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from rich.table import Table
from rich.text import Text

from kaiwo_cli.workload_views import failure_condition

JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
FINAL_PHASES: Final = frozenset({"COMPLETE", "FAILED", "TERMINATED"})
PHASE_STYLE: Final = {
    "COMPLETE": "green",
    "READY": "green",
    "RUNNING": "cyan",
    "STARTING": "cyan",
    "PENDING": "yellow",
    "DOWNLOADING": "blue",
    "FAILED": "red",
    "ERROR": "red",
}


@dataclass(frozen=True, slots=True)
class WorkloadRow:
    namespace: str
    name: str
    kind: str
    queue: str
    phase: str
    age_seconds: int
    detail: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def settled(self) -> bool:
        """Nothing more to see: finished, or a service that serves."""
        return self.phase in FINAL_PHASES or (self.kind == "KaiwoService" and self.phase == "READY")


@dataclass
class PhaseHistory:
    """Phases each workload was seen in, in order, and why it waited or failed."""

    seen: dict[str, list[str]] = field(default_factory=dict)
    reasons: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    waiting_looks: dict[str, int] = field(default_factory=dict)
    """How many looks found each workload PENDING with a reason."""

    def record(self, rows: Iterable[WorkloadRow]) -> None:
        for row in rows:
            if row.phase == "PENDING" and row.detail and row.detail != "waiting for Kueue":
                self.waiting_looks[row.key] = self.waiting_looks.get(row.key, 0) + 1
            phases = self.seen.setdefault(row.key, [])
            if row.phase and (not phases or phases[-1] != row.phase):
                phases.append(row.phase)
            told = self.reasons.setdefault(row.key, [])
            moment = (row.phase, row.detail)
            if row.detail and row.detail != "waiting for Kueue" and moment not in told:
                told.append(moment)

    def story(self) -> list[str]:
        """One line per wait and failure seen: what a user should notice."""
        verbs = {"PENDING": "waited", "FAILED": "failed", "ERROR": "was in error"}
        return [
            f"{key} {verbs.get(phase, phase.lower())}: {detail}"
            for key, moments in sorted(self.reasons.items())
            for phase, detail in moments
        ]

    def first_in(self, phase: str, *, with_reason: bool = False) -> str | None:
        """The first workload (by name) seen in ``phase`` (with a reason given there)."""
        keys = sorted(
            key
            for key, phases in self.seen.items()
            if phase in phases
            and (not with_reason or any(seen == phase for seen, _ in self.reasons.get(key, ())))
        )
        return keys[0] if keys else None

    def longest_wait(self) -> str | None:
        """The workload seen waiting, with a reason, in the most looks (then by name): the
        wait worth a look. On the real Kueue every job of a queue made at the same moment
        waits a moment too ("ClusterQueue ... is inactive" until its flavors exist)."""
        if not self.waiting_looks:
            return None
        return min(self.waiting_looks, key=lambda key: (-self.waiting_looks[key], key))

    def path(self, key: str) -> str:
        return " → ".join(self.seen.get(key, []))


def workload_rows(
    *,
    workloads: Sequence[Mapping[str, Any]],
    kueue_workloads: Sequence[Mapping[str, Any]],
    jobs: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]] = (),
    now: datetime,
) -> list[WorkloadRow]:
    """Rows sorted by namespace and name. ``kueue_workloads``, ``jobs`` and ``pods`` explain a
    wait (Kueue's QuotaReserved message) and a failure (the Job's Failed condition and what
    its container said when it ended)."""
    rows = []
    for workload in workloads:
        metadata = workload.get("metadata") or {}
        namespace, name = metadata.get("namespace", ""), metadata.get("name", "")
        phase = str((workload.get("status") or {}).get("status") or "")
        created = _time(metadata.get("creationTimestamp"))
        rows.append(
            WorkloadRow(
                namespace=namespace,
                name=name,
                kind=str(workload.get("kind", "")),
                queue=str((workload.get("spec") or {}).get("clusterQueue") or "kaiwo"),
                phase=phase,
                age_seconds=int((now - created).total_seconds()) if created else 0,
                detail=_detail(phase, namespace, name, workload, kueue_workloads, jobs, pods),
            )
        )
    return sorted(rows, key=lambda r: (r.namespace, r.name))


def _detail(
    phase: str,
    namespace: str,
    name: str,
    workload: Mapping[str, Any],
    kueue_workloads: Sequence[Mapping[str, Any]],
    jobs: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
) -> str:
    if phase == "PENDING":
        for kueue_workload in kueue_workloads:
            if _owned_by(kueue_workload, namespace, name):
                for condition in (kueue_workload.get("status") or {}).get("conditions") or ():
                    if (
                        condition.get("type") == "QuotaReserved"
                        and condition.get("status") == "False"
                    ):
                        return str(condition.get("message") or "")
        return "waiting for Kueue"
    if phase == "FAILED":
        for job in jobs:
            job_metadata = job.get("metadata") or {}
            if (job_metadata.get("namespace"), job_metadata.get("name")) != (namespace, name):
                continue
            for condition in (job.get("status") or {}).get("conditions") or ():
                if condition.get("type") == "Failed" and condition.get("status") == "True":
                    told = f"{condition.get('reason')}: {condition.get('message')}"
                    said = _container_message(pods, namespace, name)
                    return f"{told}: {said}" if said and said not in told else told
    if phase in ("FAILED", "ERROR"):
        found = failure_condition((workload.get("status") or {}).get("conditions") or ())
        if found is not None:
            return f"{found.get('reason')}: {found.get('message')}"
    return ""


def _container_message(pods: Sequence[Mapping[str, Any]], namespace: str, job: str) -> str:
    """What the Job's failed container said when it ended ("" when nothing)."""
    for pod in pods:
        metadata = pod.get("metadata") or {}
        labels = metadata.get("labels") or {}
        if metadata.get("namespace") != namespace or labels.get(JOB_NAME_LABEL) != job:
            continue
        for container in (pod.get("status") or {}).get("containerStatuses") or ():
            ended = (container.get("state") or {}).get("terminated") or {}
            if ended.get("exitCode") and ended.get("message"):
                return str(ended["message"])
    return ""


def _owned_by(obj: Mapping[str, Any], namespace: str, name: str) -> bool:
    metadata = obj.get("metadata") or {}
    return metadata.get("namespace") == namespace and any(
        o.get("name") == name for o in metadata.get("ownerReferences") or ()
    )


def _time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def age(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds}s"
    return f"{seconds // 60}m{seconds % 60:02d}s"


def render(rows: Sequence[WorkloadRow], history: PhaseHistory, *, title: str) -> Table:
    table = Table(title=title, title_justify="left", expand=False)
    for column in ("NAMESPACE/NAME", "KIND", "QUEUE", "PHASE", "SEEN", "AGE", "DETAIL"):
        table.add_column(column, overflow="fold")
    for row in rows:
        style = PHASE_STYLE.get(row.phase, "")
        table.add_row(
            row.key,
            row.kind,
            row.queue,
            f"[{style}]{row.phase}[/]" if style else row.phase,
            history.path(row.key),
            age(row.age_seconds),
            # A container's or the API server's own words, brackets and all: not markup.
            Text(row.detail),
        )
    return table
