"""The simulated Kueue: a Workload per queued Job, RayJob or AppWrapper, admitted by
:func:`kaiwo_sandbox.admission.admit`; the admitted object unsuspended; quota given back when
it finishes. Reads and writes through its port only, each round from a fresh list
(level-triggered: a settled queue writes nothing)."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any, Final

from kaiwo_kube import AlreadyExists, Conflict, NotFound, resources
from kaiwo_kube.resources import ResourceType

from kaiwo_sandbox.admission import (
    Admission,
    ClusterQueue,
    FlavorQuota,
    QueuedWorkload,
    ResourceGroup,
    Usage,
    Waiting,
    admit,
)
from kaiwo_sandbox.cluster_port import SandboxCluster
from kaiwo_sandbox.controller_status import job_is_finished
from kaiwo_sandbox.lifecycle import Timing, format_time, parse_time
from kaiwo_sandbox.quantities import Requests, quantity, templates_requests

FIELD_MANAGER: Final = "kueue-sandbox"
QUEUE_NAME_LABEL: Final = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL: Final = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"
QUEUED_KINDS: Final = (resources.JOB, resources.RAY_JOB, resources.APP_WRAPPER)


def cluster_queue(obj: Mapping[str, Any]) -> ClusterQueue:
    """A ClusterQueue object as admission sees it."""
    spec = obj.get("spec") or {}
    groups = tuple(
        ResourceGroup(
            covered=frozenset(group.get("coveredResources") or ()),
            flavors=tuple(
                FlavorQuota(
                    name=flavor.get("name", ""),
                    nominal={
                        r.get("name", ""): quantity(r.get("nominalQuota", 0))
                        for r in flavor.get("resources") or ()
                    },
                )
                for flavor in group.get("flavors") or ()
            ),
        )
        for group in spec.get("resourceGroups") or ()
    )
    return ClusterQueue(
        name=obj["metadata"]["name"],
        groups=groups,
        strict_fifo=spec.get("queueingStrategy") == "StrictFIFO",
    )


def workload_name(owner: Mapping[str, Any]) -> str:
    metadata = owner["metadata"]
    return f"{str(owner['kind']).lower()}-{metadata['name']}-{metadata['uid'][:5]}"[:253]


def has_condition(obj: Mapping[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or ()
    )


def owner_finished(owner: Mapping[str, Any]) -> bool:
    if owner.get("kind") == "Job":
        return job_is_finished(owner)
    status = owner.get("status") or {}
    if owner.get("kind") == "RayJob":
        return status.get("jobStatus") in ("SUCCEEDED", "FAILED", "STOPPED")
    return status.get("phase") in ("Succeeded", "Failed")


class KueueController:
    """One :meth:`reconcile` is one Kueue scheduling round."""

    def __init__(self, kube: SandboxCluster, *, timing: Timing) -> None:
        self.kube = kube
        self.timing = timing

    async def reconcile(self, now: datetime) -> None:
        owners = await self._queued_objects()
        workloads = {
            w["metadata"]["labels"].get(JOB_UID_LABEL, ""): w
            for w in (await self.kube.list(resources.KUEUE_WORKLOAD)).items
            if (w["metadata"].get("labels") or {}).get(JOB_UID_LABEL)
        }
        priorities = {
            c["metadata"]["name"]: int(c.get("value") or 0)
            for c in (await self.kube.list(resources.KUEUE_WORKLOAD_PRIORITY_CLASS)).items
        }
        for uid, queued in owners.items():
            if uid not in workloads:
                workloads[uid] = await self._create_workload(queued, priorities)
        local_queues = {
            (q["metadata"]["namespace"], q["metadata"]["name"]): (q.get("spec") or {}).get(
                "clusterQueue", ""
            )
            for q in (await self.kube.list(resources.KUEUE_LOCAL_QUEUE)).items
        }
        queue_objects = (await self.kube.list(resources.KUEUE_CLUSTER_QUEUE)).items
        queues = {q["metadata"]["name"]: cluster_queue(q) for q in queue_objects}
        usage, pending, waiting = Usage(), [], []
        for uid, workload in workloads.items():
            owner = owners.get(uid)
            if owner is None:
                continue  # its owner is gone; the garbage collector takes the Workload
            requests = templates_requests(owner.get("spec") or {})
            if has_condition(workload, "Admitted"):
                if owner_finished(owner):
                    await self._finish(workload, now)
                    continue
                admission = (workload.get("status") or {}).get("admission") or {}
                usage = usage.plus(admission.get("clusterQueue", ""), _flavors(admission), requests)
                await self._unsuspend(owner)
                continue
            created = parse_time(workload["metadata"].get("creationTimestamp"))
            if created is not None and now < created + self.timing.delay(self.timing.admit_seconds):
                continue  # Kueue has not looked at it yet
            namespace = workload["metadata"]["namespace"]
            local = (workload.get("spec") or {}).get("queueName", "")
            target = local_queues.get((namespace, local))
            if target is None:
                waiting.append(Waiting(_key(workload), f"LocalQueue {local} doesn't exist"))
                continue
            pending.append(
                QueuedWorkload(
                    key=_key(workload),
                    cluster_queue=target,
                    priority=int((workload.get("spec") or {}).get("priority") or 0),
                    created=str(workload["metadata"].get("creationTimestamp") or ""),
                    requests=requests,
                )
            )
        admitted, still_waiting = admit(queues=queues, pending=pending, usage=usage)
        by_key = {_key(w): w for w in workloads.values()}
        owner_by_key = {_key(workloads[uid]): o for uid, o in owners.items() if uid in workloads}
        for decision in admitted:
            requests = {
                r: a
                for r, a in templates_requests(owner_by_key[decision.key].get("spec") or {}).items()
                if a > 0
            }
            await self._admit(by_key[decision.key], decision, requests, now)
            await self._unsuspend(owner_by_key[decision.key])
        for wait in [*waiting, *still_waiting]:
            await self._pending(by_key[wait.key], wait.message, now)
        referenced = {p.cluster_queue for p in pending} | {
            str(((w.get("status") or {}).get("admission") or {}).get("clusterQueue", ""))
            for uid, w in workloads.items()
            if uid in owners
        }
        admitted_keys = {a.key for a in admitted}
        waiting_by_queue = Counter(p.cluster_queue for p in pending if p.key not in admitted_keys)
        await self._queue_status(
            queue_objects, workloads, owners, referenced=referenced, pending=waiting_by_queue
        )

    async def _queued_objects(self) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for kind in QUEUED_KINDS:
            with contextlib.suppress(NotFound):  # a kind whose CRD is not installed
                for obj in (await self.kube.list(kind, label_selector=QUEUE_NAME_LABEL)).items:
                    obj.setdefault("kind", kind.kind)
                    obj.setdefault("apiVersion", kind.api_version)
                    found[obj["metadata"]["uid"]] = obj
        return found

    async def _create_workload(
        self, owner: dict[str, Any], priorities: Mapping[str, int]
    ) -> dict[str, Any]:
        metadata = owner["metadata"]
        labels = metadata.get("labels") or {}
        priority_class = labels.get(PRIORITY_CLASS_LABEL)
        template = _first_template(owner.get("spec") or {}) or {"spec": {"containers": []}}
        spec: dict[str, Any] = {
            "queueName": labels.get(QUEUE_NAME_LABEL, ""),
            "priority": priorities.get(priority_class or "", 0),
            "podSets": [{"name": "main", "count": 1, "template": template}],
        }
        if priority_class:
            spec["priorityClassName"] = priority_class
            spec["priorityClassSource"] = "kueue.x-k8s.io/workloadpriorityclass"
        workload = {
            "apiVersion": resources.KUEUE_WORKLOAD.api_version,
            "kind": "Workload",
            "metadata": {
                "name": workload_name(owner),
                "namespace": metadata["namespace"],
                "labels": {JOB_UID_LABEL: metadata["uid"]},
                "ownerReferences": [
                    {
                        "apiVersion": owner["apiVersion"],
                        "kind": owner["kind"],
                        "name": metadata["name"],
                        "uid": metadata["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": spec,
        }
        try:
            return await self.kube.create(workload, field_manager=FIELD_MANAGER)
        except AlreadyExists:
            return await self.kube.get(
                resources.KUEUE_WORKLOAD, workload_name(owner), namespace=metadata["namespace"]
            )

    async def _admit(
        self, workload: dict[str, Any], decision: Admission, requests: Requests, now: datetime
    ) -> None:
        at = format_time(now)
        message = f"Quota reserved in ClusterQueue {decision.cluster_queue}"
        status = {
            "admission": {
                "clusterQueue": decision.cluster_queue,
                "podSetAssignments": [
                    {
                        "name": "main",
                        "count": 1,
                        "flavors": dict(decision.flavors),
                        "resourceUsage": {r: _quantity_text(a) for r, a in requests.items()},
                    }
                ],
            },
            "conditions": [
                _condition("QuotaReserved", "True", "QuotaReserved", message, at),
                _condition("Admitted", "True", "Admitted", "The workload is admitted", at),
            ],
        }
        await self._write_status(workload, status)

    async def _pending(self, workload: dict[str, Any], message: str, now: datetime) -> None:
        for condition in (workload.get("status") or {}).get("conditions") or ():
            if condition.get("type") == "QuotaReserved" and condition.get("message") == message:
                return
        condition = _condition("QuotaReserved", "False", "Pending", message, format_time(now))
        await self._write_status(workload, {"conditions": [condition]})

    async def _finish(self, workload: dict[str, Any], now: datetime) -> None:
        if has_condition(workload, "Finished"):
            return
        conditions = [
            *((workload.get("status") or {}).get("conditions") or ()),
            _condition("Finished", "True", "Succeeded", "Job finished", format_time(now)),
        ]
        await self._write_status(workload, {"conditions": conditions})

    async def _write_status(self, workload: dict[str, Any], status: dict[str, Any]) -> None:
        metadata = workload["metadata"]
        with contextlib.suppress(NotFound, Conflict):
            await self.kube.patch_status(
                resources.KUEUE_WORKLOAD,
                metadata["name"],
                status,
                namespace=metadata["namespace"],
                field_manager=FIELD_MANAGER,
                method="merge",
            )

    async def _unsuspend(self, owner: dict[str, Any]) -> None:
        if (owner.get("spec") or {}).get("suspend") is not True:
            return
        metadata = owner["metadata"]
        with contextlib.suppress(NotFound, Conflict):
            await self.kube.merge_patch(
                _kind_of(owner),
                metadata["name"],
                {"spec": {"suspend": False}},
                namespace=metadata["namespace"],
                field_manager=FIELD_MANAGER,
            )

    async def _queue_status(
        self,
        queues: Sequence[dict[str, Any]],
        workloads: Mapping[str, dict[str, Any]],
        owners: Mapping[str, dict[str, Any]],
        *,
        referenced: set[str],
        pending: Mapping[str, int],
    ) -> None:
        """The counts and usage per flavor of each ClusterQueue a workload uses, or used (to
        report it empty again), as Kueue reports them; other queues are left alone."""
        for queue in queues:
            name = queue["metadata"]["name"]
            old = queue.get("status") or {}
            if name not in referenced and not old.get("admittedWorkloads"):
                continue
            admitted = [
                (w, owners[uid])
                for uid, w in workloads.items()
                if uid in owners
                and has_condition(w, "Admitted")
                and not has_condition(w, "Finished")
                and ((w.get("status") or {}).get("admission") or {}).get("clusterQueue") == name
            ]
            usage = Usage()
            for workload, owner in admitted:
                usage = usage.plus(
                    name,
                    _flavors((workload.get("status") or {}).get("admission") or {}),
                    templates_requests(owner.get("spec") or {}),
                )
            flavors: dict[str, list[dict[str, str]]] = {}
            for (_, flavor, resource), amount in sorted(usage.amounts.items()):
                flavors.setdefault(flavor, []).append(
                    {"name": resource, "total": _quantity_text(amount)}
                )
            status = {
                "admittedWorkloads": len(admitted),
                "reservingWorkloads": len(admitted),
                "pendingWorkloads": pending.get(name, 0),
                "flavorsUsage": [{"name": f, "resources": r} for f, r in flavors.items()],
            }
            if all(old.get(key) == value for key, value in status.items()):
                continue
            with contextlib.suppress(NotFound, Conflict):
                await self.kube.patch_status(
                    resources.KUEUE_CLUSTER_QUEUE,
                    name,
                    status,
                    field_manager=FIELD_MANAGER,
                    method="merge",
                )


def _kind_of(owner: Mapping[str, Any]) -> ResourceType:
    return next(k for k in QUEUED_KINDS if k.kind == owner.get("kind"))


def _key(workload: Mapping[str, Any]) -> str:
    return f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"


def _flavors(admission: Mapping[str, Any]) -> dict[str, str]:
    flavors: dict[str, str] = {}
    for assignment in admission.get("podSetAssignments") or ():
        flavors.update(assignment.get("flavors") or {})
    return flavors


def _first_template(spec: Any) -> dict[str, Any] | None:
    if isinstance(spec, Mapping):
        template = spec.get("template")
        if isinstance(template, Mapping) and isinstance(template.get("spec"), Mapping):
            return dict(template)
        for value in spec.values():
            found = _first_template(value)
            if found is not None:
                return found
    if isinstance(spec, list):
        for item in spec:
            found = _first_template(item)
            if found is not None:
                return found
    return None


def _quantity_text(amount: Decimal) -> str:
    return format(amount.normalize(), "f")


def _condition(kind: str, status: str, reason: str, message: str, at: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": at,
    }
