"""What the planner knows about the cluster: nodes, observed objects, namespaces, findings,
the autoscaler's decisions.

A :class:`ClusterState` is a plain immutable value: its objects are filed in an
:class:`~kaiwo_planner.domain.state.object_index.ObjectIndex` (persistent, so the projection
makes one per observation in O(1)), and nothing in it is computed later or cached. Values
worked out *from* a state (the parsed KaiwoConfig, node pools, GPU totals...) belong to the
:class:`~kaiwo_planner.domain.state.planning_context.PlanningContext` built around it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from kaiwo_planner.domain.state.index_entry import (
    Entry,
    QueueUse,
    api_group_of,
    deployment_key,
    kueue_job_key,
)
from kaiwo_planner.domain.state.nodes import NodeInfo
from kaiwo_planner.domain.state.object_index import ObjectIndex
from kaiwo_planner.domain.state.scale_request import ScaleRequest
from kaiwo_planner.domain.state.workload_finding import WorkloadFinding

__all__ = ("ClusterState", "api_group_of", "object_uid")

_NO_FINDINGS: Final[Mapping[str, WorkloadFinding]] = MappingProxyType({})
_NO_SCALE_REQUESTS: Final[Mapping[str, ScaleRequest]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ClusterState:
    """A read-only snapshot of the cluster as the planner's projection knows it.

    ``nodes``: the Nodes, by name. ``namespaces``: names of the namespaces that exist.
    ``findings``: the monitor's latest finding per workload uid (:mod:`.workload_finding`).
    ``scale_requests``: the autoscaler's latest decision per Model uid
    (:mod:`.scale_request`). ``index``: every other observed object (children, Kueue
    Workloads, configuration, workloads), filed for the queries below.
    """

    nodes: tuple[NodeInfo, ...] = ()
    namespaces: frozenset[str] = frozenset()
    findings: Mapping[str, WorkloadFinding] = field(default_factory=lambda: _NO_FINDINGS)
    index: ObjectIndex = field(default_factory=ObjectIndex)
    scale_requests: Mapping[str, ScaleRequest] = field(default_factory=lambda: _NO_SCALE_REQUESTS)

    @classmethod
    def of(
        cls,
        *,
        nodes: Iterable[NodeInfo] = (),
        objects: Iterable[Mapping[str, Any]] = (),
        kueue_workloads: Iterable[Mapping[str, Any]] = (),
        namespaces: Iterable[str] = (),
        findings: Mapping[str, WorkloadFinding] | None = None,
    ) -> ClusterState:
        """A state of parsed nodes and objects in JSON (each with its own uid); a later
        object of the same identity counts as the newer one."""
        given = [(obj, False) for obj in objects]
        given += [(workload, True) for workload in kueue_workloads]
        entries = (
            Entry.of_wire(obj, sequence=position, kueue_workload=workload)
            for position, (obj, workload) in enumerate(given, start=1)
        )
        return cls(
            nodes=tuple(sorted(nodes, key=lambda n: n.name)),
            namespaces=frozenset(namespaces),
            findings=MappingProxyType(dict(findings)) if findings else _NO_FINDINGS,
            index=ObjectIndex.of(entries),
        )

    @classmethod
    def from_wire(
        cls,
        *,
        nodes: Iterable[Mapping[str, Any]] = (),
        objects: Iterable[Mapping[str, Any]] = (),
        kueue_workloads: Iterable[Mapping[str, Any]] = (),
        namespaces: Iterable[str] = (),
    ) -> ClusterState:
        """Build the state from API-server JSON (Node objects, children, Workloads)."""
        return cls.of(
            nodes=(NodeInfo.from_wire(n) for n in nodes),
            objects=objects,
            kueue_workloads=kueue_workloads,
            namespaces=namespaces,
        )

    def children_of(self, owner_uid: str) -> tuple[Mapping[str, Any], ...]:
        """Objects with an ownerReference to ``owner_uid``, in plan order.

        A reference across namespaces is ignored: a namespaced owner's children live in its
        namespace (Kubernetes' garbage collector ignores such references too), so a Job in
        ``vision`` naming a KaiwoJob of ``ml-team`` by uid changes nothing of that KaiwoJob.
        """
        children = self.index.children_of(owner_uid)
        owner_namespace = self.namespace_of(owner_uid) if children else None
        if not owner_namespace:  # owner not observed, or cluster-scoped
            return children
        if all(_namespace(child) == owner_namespace for child in children):
            return children
        return tuple(child for child in children if _namespace(child) == owner_namespace)

    def namespace_of(self, uid: str) -> str | None:
        """The namespace of the observed object with this uid ("" cluster-scoped, None unknown)."""
        found = self.index.entry(uid)
        return found.identity[2] if found is not None else None

    def by_uid(self, uid: str) -> Mapping[str, Any] | None:
        """The observed object with this uid, or None."""
        found = self.index.entry(uid)
        return found.object if found is not None else None

    def child_of(
        self, owner_uid: str, *, kind: str, name: str | None = None
    ) -> Mapping[str, Any] | None:
        """The first child of ``owner_uid`` of this kind (and name, when given), or None."""
        for child in self.children_of(owner_uid):
            meta = child.get("metadata") or {}
            if child.get("kind") == kind and (name is None or meta.get("name") == name):
                return child
        return None

    def pods_of_deployment(self, namespace: str, name: str) -> tuple[Mapping[str, Any], ...]:
        """The observed pods of the Deployment ``namespace/name`` that the operator did not
        make (filed by their ReplicaSet's name, decision 0066)."""
        return self.index.children_of(deployment_key(namespace, name))

    def kueue_workloads_for(self, job_uid: str) -> tuple[Mapping[str, Any], ...]:
        """Kueue Workloads created for the Kueue-managed object with this uid.

        ``job_uid`` is the uid of the Job, RayJob, AppWrapper or Pod Kueue manages (its owner
        reference or the ``kueue.x-k8s.io/job-uid`` label), not the KaiwoJob's.
        """
        return self.index.kueue_workloads_for(job_uid)

    def kueue_workloads_of_job_named(
        self, namespace: str, kind: str, name: str
    ) -> tuple[Mapping[str, Any], ...]:
        """Kueue Workloads whose owner reference names a ``kind`` called ``name`` in
        ``namespace``: those of the job there now, and of an earlier one of that name."""
        return self.index.kueue_workloads_for(kueue_job_key(namespace, kind, name))

    def kueue_workload_for(self, job_uid: str) -> Mapping[str, Any] | None:
        found = self.kueue_workloads_for(job_uid)
        return found[0] if found else None

    def all_kueue_workloads(self) -> tuple[Mapping[str, Any], ...]:
        """Every observed Kueue Workload filed under a job, once each, in no set order.

        Walks all of them: for the rare question no index answers (which admitted workloads
        use a Kueue object the KaiwoQueueConfig must replace).
        """
        seen: dict[str, Mapping[str, Any]] = {}
        for group in self.index.kueue_workloads.values():
            for workload in group.objects:
                seen.setdefault(object_uid(workload) or str(id(workload)), workload)
        return tuple(seen.values())

    def workload_queue_uses(self) -> tuple[QueueUse, ...]:
        """Every distinct (declared queue, namespace) of the Kaiwo workloads, sorted."""
        return self.index.sorted_queue_uses()

    def objects_labelled(
        self, key: str, value: str, *, kind: str | None = None, namespace: str | None = None
    ) -> tuple[Mapping[str, Any], ...]:
        """Observed objects carrying label ``key=value`` (optionally of one kind), in plan
        order; ``key`` must be one of the indexed labels (``index_entry.INDEXED_LABELS``).

        Only those of ``namespace`` when it is given; else, when ``value`` is the uid of an
        observed namespaced object (the run-id label names the workload a pod runs for), only
        those of that object's namespace, as :meth:`children_of` keeps them: anyone who may
        create a pod in ``vision`` may label it with the uid of a KaiwoJob of ``ml-team``, and
        such a pod is not that KaiwoJob's (decision 0252).
        """
        found = self.index.labelled_with(key, value)
        if kind is not None:
            found = tuple(obj for obj in found if obj.get("kind") == kind)
        if namespace is None and found:
            namespace = self.namespace_of(value)
        if not namespace:  # not an observed object's uid, or a cluster-scoped one
            return found
        return tuple(obj for obj in found if _namespace(obj) == namespace)

    def objects_of_kind(self, *, group: str, kind: str) -> tuple[Mapping[str, Any], ...]:
        """Observed objects of one API group (``""`` for core) and kind, in plan order; the
        kind must be a listed one (``index_entry.LISTED_KINDS``)."""
        return self.index.of_kind(group, kind)

    def find_object(
        self, *, group: str, kind: str, name: str, namespace: str | None = None
    ) -> Mapping[str, Any] | None:
        """The observed object of this group, kind, namespace and name, or None."""
        found = self.index.newest((group, kind, namespace or "", name))
        return found.object if found is not None else None

    def node(self, name: str) -> NodeInfo | None:
        return next((n for n in self.nodes if n.name == name), None)

    def has_namespace(self, name: str) -> bool:
        return name in self.namespaces


def _namespace(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def object_uid(obj: Mapping[str, Any]) -> str:
    """The ``metadata.uid`` of a JSON object ("" when absent)."""
    return str((obj.get("metadata") or {}).get("uid") or "")
