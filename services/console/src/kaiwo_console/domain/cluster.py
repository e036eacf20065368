"""The cluster as the watcher observed it, and what each page shows of it: pure.

:class:`ClusterState` keeps the last observed state of every object by kind (the observation
is level-triggered: each carries the whole object). The functions below turn it into the
rows of the pages; ``now`` and the namespaces the caller may see are passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from kaiwo_contracts.queue_estimates.kueue import (
    GPU_RESOURCES,
    admitted_at,
    condition,
    is_admitted,
    is_finished,
    is_true,
    kueue_gpus,
    parse_time,
)

WORKLOAD_KINDS: Final = ("KaiwoJob", "KaiwoService")
MODEL_KIND: Final = "Model"
KUEUE_WORKLOAD: Final = "Workload"
CLUSTER_QUEUE: Final = "ClusterQueue"
LOCAL_QUEUE: Final = "LocalQueue"
NODE: Final = "Node"
POD: Final = "Pod"
DEFAULT_QUEUE: Final = "kaiwo"
FINAL_PHASES: Final = frozenset({"COMPLETE", "FAILED", "TERMINATED"})

Obj = Mapping[str, Any]
Visible = Callable[[str], bool]
"""Whether the caller may see a namespace."""

__all__ = [
    "GPU_RESOURCES",
    "admitted_at",
    "condition",
    "is_admitted",
    "is_finished",
    "is_true",
    "kueue_gpus",
    "parse_time",
]


def meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def spec(obj: Obj) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def status(obj: Obj) -> Mapping[str, Any]:
    return obj.get("status") or {}


@dataclass
class ClusterState:
    """The last observed state of every object, by kind, then (namespace, name)."""

    objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = field(default_factory=dict)
    version: int = 0
    """Counts changes: a page showing version N is current until it grows."""

    def apply(self, *, kind: str, event: str, obj: dict[str, Any]) -> bool:
        """Take one observation in; True when it changed what the pages show."""
        key = (str(meta(obj).get("namespace") or ""), str(meta(obj).get("name") or ""))
        of_kind = self.objects.setdefault(kind, {})
        if event == "DELETED":
            changed = of_kind.pop(key, None) is not None
        else:
            known = of_kind.get(key)
            same = known is not None and meta(known).get("resourceVersion") == meta(obj).get(
                "resourceVersion"
            )
            changed = not same
            if changed:
                of_kind[key] = obj
        if changed:
            self.version += 1
        return changed

    def of(self, kind: str) -> list[dict[str, Any]]:
        return list(self.objects.get(kind, {}).values())

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get(kind, {}).get((namespace, name))

    def namespaces(self) -> list[str]:
        """Every namespace an observed workload or Model is in."""
        return sorted(
            {ns for kind in (*WORKLOAD_KINDS, MODEL_KIND) for ns, _ in self.objects.get(kind, {})}
        )


# --------------------------------------------------------------------------- workloads


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
    gpus = _int(workload_spec.get("gpus"))
    if not gpus and workload_spec.get("gpusPerReplica"):
        gpus = _int(workload_spec.get("gpusPerReplica")) * max(
            _int(workload_spec.get("replicas")), 1
        )
    return gpus


def _int(value: object) -> int:
    try:
        return int(str(value)) if value is not None else 0
    except ValueError:
        return 0


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


# --------------------------------------------------------------------------- queues


@dataclass(frozen=True, slots=True)
class QuotaUse:
    flavor: str
    resource: str
    quota: float
    used: float


def cluster_queue_of(state: ClusterState, kueue_workload: Obj) -> str:
    """The ClusterQueue a Kueue Workload is admitted to, else its LocalQueue's."""
    admission = status(kueue_workload).get("admission") or {}
    if admission.get("clusterQueue"):
        return str(admission["clusterQueue"])
    local = state.get(
        LOCAL_QUEUE,
        str(meta(kueue_workload).get("namespace") or ""),
        str(spec(kueue_workload).get("queueName") or ""),
    )
    if local is not None and spec(local).get("clusterQueue"):
        return str(spec(local)["clusterQueue"])
    return str(spec(kueue_workload).get("queueName") or "")


def quota_use(state: ClusterState, queue: Obj) -> list[QuotaUse]:
    """Per flavor and resource of a ClusterQueue: nominal quota against what its admitted,
    unfinished Workloads use."""
    name = str(meta(queue).get("name") or "")
    used: dict[tuple[str, str], float] = {}
    for kueue_workload in state.of(KUEUE_WORKLOAD):
        admission = status(kueue_workload).get("admission") or {}
        if admission.get("clusterQueue") != name or is_finished(kueue_workload):
            continue
        for assignment in admission.get("podSetAssignments") or ():
            flavors = assignment.get("flavors") or {}
            for resource, amount in (assignment.get("resourceUsage") or {}).items():
                key = (str(flavors.get(resource, "")), str(resource))
                used[key] = used.get(key, 0.0) + quantity(amount)
    rows = []
    for group in spec(queue).get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            for resource in flavor.get("resources") or ():
                key = (str(flavor.get("name", "")), str(resource.get("name", "")))
                rows.append(
                    QuotaUse(
                        key[0], key[1], quantity(resource.get("nominalQuota")), used.get(key, 0.0)
                    )
                )
    return rows


def gpu_quota(state: ClusterState, queue_name: str) -> dict[str, int]:
    """GPU resource -> the ClusterQueue's nominal quota of it over its flavors."""
    queue = state.get(CLUSTER_QUEUE, "", queue_name)
    totals: dict[str, int] = {}
    if queue is None:
        return totals
    for row in quota_use(state, queue):
        if row.resource in GPU_RESOURCES:
            totals[row.resource] = totals.get(row.resource, 0) + int(row.quota)
    return totals


SUFFIXES: Final = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "m": 1e-3,
}


def quantity(value: object) -> float:
    """A Kubernetes quantity as a number (0 when unreadable)."""
    text = str(value if value is not None else "").strip()
    for suffix, scale in SUFFIXES.items():
        if text.endswith(suffix):
            try:
                return float(text[: -len(suffix)]) * scale
            except ValueError:
                return 0.0
    try:
        return float(text)
    except ValueError:
        return 0.0


# --------------------------------------------------------------------------- nodes, Models


@dataclass(frozen=True, slots=True)
class NodeRow:
    name: str
    vendor: str
    product: str
    gpus: int
    allocated: int
    ready: bool


def pod_gpus(pod: Obj) -> int:
    """GPUs a Pod's containers request (their limits where no request is set)."""
    total = 0
    for container in spec(pod).get("containers") or ():
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for resource in GPU_RESOURCES:
            total += _int(requests.get(resource, limits.get(resource)))
    return total


def node_rows(state: ClusterState) -> list[NodeRow]:
    """GPU nodes: capacity and what running Pods on each request."""
    allocated: dict[str, int] = {}
    for pod in state.of(POD):
        on = str(spec(pod).get("nodeName") or "")
        if not on or status(pod).get("phase") in ("Succeeded", "Failed"):
            continue
        allocated[on] = allocated.get(on, 0) + pod_gpus(pod)
    rows = []
    for node in state.of(NODE):
        capacity = status(node).get("capacity") or {}
        labels = meta(node).get("labels") or {}
        for resource in GPU_RESOURCES:
            gpus = _int(capacity.get(resource))
            if not gpus:
                continue
            name = str(meta(node).get("name") or "")
            rows.append(
                NodeRow(
                    name=name,
                    vendor=resource.split(".")[0],
                    product=str(
                        labels.get("amd.com/gpu.product-name")
                        or labels.get("nvidia.com/gpu.product")
                        or ""
                    ),
                    gpus=gpus,
                    allocated=allocated.get(name, 0),
                    ready=is_true(node, "Ready"),
                )
            )
    return sorted(rows, key=lambda r: r.name)


@dataclass(frozen=True, slots=True)
class ModelRow:
    namespace: str
    name: str
    engine: str
    desired: int
    ready: int
    min_replicas: int
    max_replicas: int | None
    endpoints: tuple[str, ...]


def model_rows(state: ClusterState, visible: Visible) -> list[ModelRow]:
    rows = []
    for model in state.of(MODEL_KIND):
        namespace = str(meta(model).get("namespace") or "")
        if not visible(namespace):
            continue
        name = str(meta(model).get("name") or "")
        replicas = status(model).get("replicas") or {}
        endpoints = tuple(
            sorted(
                f"{status(served).get('podIP')}"
                for served in state.of(POD)
                if meta(served).get("namespace") == namespace
                and (meta(served).get("labels") or {}).get("model") == name
                and status(served).get("podIP")
                and is_true(served, "Ready")
            )
        )
        maximum = spec(model).get("maxReplicas")
        rows.append(
            ModelRow(
                namespace=namespace,
                name=name,
                engine=str(spec(model).get("engine") or ""),
                desired=_int(spec(model).get("replicas")),
                ready=_int(replicas.get("ready")),
                min_replicas=_int(spec(model).get("minReplicas")),
                max_replicas=None if maximum is None else _int(maximum),
                endpoints=endpoints,
            )
        )
    return sorted(rows, key=lambda r: (r.namespace, r.name))


def everything(_namespace: str) -> bool:
    return True


def only(namespaces: Iterable[str]) -> Visible:
    allowed = frozenset(namespaces)
    return lambda namespace: namespace in allowed


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
