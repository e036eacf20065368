"""The Workloads page's rows: filter, phase, queue, GPUs, why it waits, its children and why it
was stopped early."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kaiwo_contracts.queue_estimates.kueue import (
    condition,
    is_true,
    parse_time,
)

from kaiwo_console.domain.cluster import (
    CLUSTER_QUEUE,
    DEFAULT_QUEUE,
    KUEUE_WORKLOAD,
    MODEL_KIND,
    NODE,
    POD,
    WORKLOAD_KINDS,
    ClusterState,
    Obj,
    Visible,
    as_int,
    meta,
    spec,
    status,
)


@dataclass(frozen=True, slots=True)
class WorkloadFilter:
    namespace: str = ""
    user: str = ""
    queue: str = ""
    kind: str = ""
    phase: str = ""

    def admits(self, row: WorkloadRow) -> bool:
        return all(
            not wanted or wanted.lower() == value.lower()
            for wanted, value in (
                (self.namespace, row.namespace),
                (self.user, row.user),
                (self.queue, row.queue),
                (self.kind, row.kind),
                (self.phase, row.phase),
            )
        )


@dataclass(frozen=True, slots=True)
class WorkloadRow:
    kind: str
    namespace: str
    name: str
    user: str
    queue: str
    phase: str
    created: datetime | None
    gpus: int
    why: str
    """Why it waits or failed ("" otherwise)."""

    def age_seconds(self, now: datetime) -> float:
        return 0.0 if self.created is None else max((now - self.created).total_seconds(), 0.0)


def phase_of(obj: Obj) -> str:
    return str(status(obj).get("status") or "NEW")


def queue_of(obj: Obj) -> str:
    return str(spec(obj).get("clusterQueue") or DEFAULT_QUEUE)


def gpus_of(obj: Obj) -> int:
    """GPUs a KaiwoJob or KaiwoService asks for (``gpus``, else per replica x replicas)."""
    workload_spec = spec(obj)
    gpus = as_int(workload_spec.get("gpus"))
    if not gpus and workload_spec.get("gpusPerReplica"):
        gpus = as_int(workload_spec.get("gpusPerReplica")) * max(
            as_int(workload_spec.get("replicas")), 1
        )
    return gpus


def workload_rows(
    state: ClusterState, visible: Visible, chosen: WorkloadFilter
) -> list[WorkloadRow]:
    """Every workload the caller may see that ``chosen`` admits, by namespace and name."""
    rows = []
    for kind in WORKLOAD_KINDS:
        for obj in state.of(kind):
            namespace = str(meta(obj).get("namespace") or "")
            if not visible(namespace):
                continue
            row = WorkloadRow(
                kind=kind,
                namespace=namespace,
                name=str(meta(obj).get("name") or ""),
                user=str(spec(obj).get("user") or ""),
                queue=queue_of(obj),
                phase=phase_of(obj),
                created=parse_time(meta(obj).get("creationTimestamp")),
                gpus=gpus_of(obj),
                why=why(state, obj),
            )
            if chosen.admits(row):
                rows.append(row)
    return sorted(rows, key=lambda r: (r.namespace, r.name, r.kind))


def why(state: ClusterState, obj: Obj) -> str:
    """Why a workload waits (Kueue's QuotaReserved message) or failed (its False condition,
    or its Job's Failed condition)."""
    phase = phase_of(obj)
    namespace, name = str(meta(obj).get("namespace")), str(meta(obj).get("name"))
    if phase == "PENDING":
        for kueue_workload in owned_kueue_workloads(state, namespace, name):
            reserved = condition(kueue_workload, "QuotaReserved")
            if reserved is not None and reserved.get("status") == "False":
                return str(reserved.get("message") or reserved.get("reason") or "")
        return "waiting for Kueue"
    if phase in ("FAILED", "ERROR", "TERMINATED"):
        job = state.get("Job", namespace, name)
        failed = condition(job, "Failed") if job is not None else None
        if failed is not None and failed.get("status") == "True":
            return f"{failed.get('reason')}: {failed.get('message')}"
        for found in status(obj).get("conditions") or ():
            if isinstance(found, Mapping) and found.get("status") == "False":
                return f"{found.get('reason')}: {found.get('message')}"
    return ""


def owned_kueue_workloads(state: ClusterState, namespace: str, name: str) -> list[dict[str, Any]]:
    """The Kueue Workloads of a workload: owned by it or by its child of the same name."""
    return [
        w
        for w in state.of(KUEUE_WORKLOAD)
        if meta(w).get("namespace") == namespace
        and any(ref.get("name") == name for ref in meta(w).get("ownerReferences") or ())
    ]


def children(state: ClusterState, obj: Obj) -> list[tuple[str, str, str]]:
    """(kind, name, state) of what the operator made for the workload, Pods included."""
    uid = meta(obj).get("uid")
    namespace, name = meta(obj).get("namespace"), meta(obj).get("name")
    found = []
    for kind, objects in sorted(state.objects.items()):
        if kind in (*WORKLOAD_KINDS, MODEL_KIND, NODE, CLUSTER_QUEUE):
            continue
        for (child_ns, child_name), child in sorted(objects.items()):
            if child_ns != namespace:
                continue
            refs = meta(child).get("ownerReferences") or ()
            labels = meta(child).get("labels") or {}
            owned = any(ref.get("uid") == uid for ref in refs) or (
                kind == POD and labels.get("job-name") == name
            )
            if owned or (kind == KUEUE_WORKLOAD and any(r.get("name") == name for r in refs)):
                found.append((kind, child_name, _child_state(kind, child)))
    return found


def _child_state(kind: str, child: Obj) -> str:
    if kind == POD:
        return str(status(child).get("phase") or "")
    if kind == KUEUE_WORKLOAD:
        if is_true(child, "Finished"):
            return "finished"
        return "admitted" if status(child).get("admission") else "pending"
    conditions = [
        str(c.get("type"))
        for c in status(child).get("conditions") or ()
        if isinstance(c, Mapping) and c.get("status") == "True"
    ]
    return ", ".join(conditions)


def ending_of(obj: Obj) -> tuple[str, str, str] | None:
    """(reason, message, beneficiary) when the workload was stopped early: its
    ``WorkloadTerminatedEarly`` condition (or a True ``Preempted`` one), and the pending
    workload it was stopped for (``status.preemptedFor``, ``Kind namespace/name``; "" for
    nobody in particular, as under the GPU idle policy Always)."""
    found = condition(obj, "WorkloadTerminatedEarly")
    if found is None or found.get("status") == "False":
        found = condition(obj, "Preempted")
        if found is None or found.get("status") != "True":
            return None
    named = status(obj).get("preemptedFor") or {}
    beneficiary = (
        f"{named.get('kind')} {named.get('namespace')}/{named.get('name')}"
        if named.get("kind") and named.get("name")
        else ""
    )
    return str(found.get("reason") or ""), str(found.get("message") or ""), beneficiary


def summary_facts(kind: str, obj: dict[str, object]) -> list[tuple[str, str]]:
    """The facts at the top of a workload's page, as (label, value)."""
    workload_spec = spec(obj)
    return [
        ("Kind", kind),
        ("User", str(workload_spec.get("user") or "-")),
        ("Queue", str(workload_spec.get("clusterQueue") or "kaiwo (default)")),
        ("GPUs", str(gpus_of(obj) or "-") + f" {workload_spec.get('gpuVendor') or ''}".rstrip()),
        ("Image", str(workload_spec.get("image") or "-")),
        ("Replicas", str(workload_spec.get("replicas") or 1)),
        ("Duration", str(workload_spec.get("duration") or "-")),
        ("Priority class", str(workload_spec.get("priorityClass") or "-")),
        ("Created", str(meta(obj).get("creationTimestamp") or "-")),
        ("Started", str(status(obj).get("startTime") or "-")),
    ]


def condition_rows(obj: dict[str, object]) -> list[tuple[str, str, str, str]]:
    """Its conditions as (type, status, reason, message)."""
    return [
        (
            str(c.get("type") or ""),
            str(c.get("status") or ""),
            str(c.get("reason") or ""),
            str(c.get("message") or ""),
        )
        for c in status(obj).get("conditions") or ()
        if isinstance(c, dict)
    ]
