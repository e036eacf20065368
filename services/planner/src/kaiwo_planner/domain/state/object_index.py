"""The observed objects filed for the questions planning asks, as one immutable value.

An :class:`ObjectIndex` never changes: :meth:`ObjectIndex.adding` and
:meth:`ObjectIndex.removing` return a new index that shares everything unchanged with the
old one (persistent hash tries, ``rpds.HashTrieMap``, and small sorted tuples per group). So
the projection hands every plan a snapshot in O(1), and a snapshot taken earlier stays
valid, and unchanged, however far the projection has moved on.

What is filed, and under what:

* every object by uid and by identity (API group, kind, namespace, name);
* children by the uid of each owner in their ``ownerReferences``; a pod the operator did not
  make whose ReplicaSet belongs to a Deployment also under that Deployment's namespace and
  name (:func:`deployment_key`; the ReplicaSet, not observed, is named after it: decision
  0066);
* Kueue Workloads by the uid of the job they were created for (an owner reference or the
  ``kueue.x-k8s.io/job-uid`` label);
* objects by the labels in :data:`INDEXED_LABELS` only: the questions planning asks (a
  run's Pods, the Models configuration). Filing every label pair cost memory on every
  object for answers nobody read;
* objects of the kinds in :data:`LISTED_KINDS` only, in sort order: the kinds planning
  lists whole (the workloads, the namespace configurations, the Models). Keeping every
  kind sorted (every Pod, every Job) would rebuild a list of thousands per observation;
* Nodes by name, Namespaces by name, and how many Kaiwo workloads declare each (queue,
  namespace) pair.

Groups are kept in :data:`SortKey` order, so everything handed out has one order whatever
order the objects came in.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from kaiwo_contracts.gpu_workloads import deployment_of_pod, made_by_kaiwo
from kaiwo_contracts.models_config import CONFIG_MAP_LABEL
from kaiwo_contracts.plans import OPERATOR_FIELD_MANAGERS
from rpds import HashTrieMap

from kaiwo_planner.domain.state.nodes import NodeInfo

CORE_GROUP: Final = ""
KUEUE_GROUP: Final = "kueue.x-k8s.io"
KAIWO_GROUP: Final = "kaiwo.silogen.ai"
CONFIG_GROUP: Final = "config.kaiwo.silogen.ai"
KUEUE_JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"
RUN_ID_LABEL: Final = "kaiwo.silogen.ai/run-id"

INDEXED_LABELS: Final = frozenset({RUN_ID_LABEL, CONFIG_MAP_LABEL})
"""Label keys :meth:`ObjectIndex.labelled` answers for."""

LISTED_KINDS: Final = frozenset(
    {
        (KAIWO_GROUP, "KaiwoJob"),
        (KAIWO_GROUP, "KaiwoService"),
        (KAIWO_GROUP, "KaiwoQueueConfig"),
        (KAIWO_GROUP, "GpuWorkload"),
        (CONFIG_GROUP, "KaiwoConfig"),
        (CONFIG_GROUP, "AIMNamespaceConfig"),
        ("kubeai.org", "Model"),
        ("scheduling.k8s.io", "PriorityClass"),
        (KUEUE_GROUP, "WorkloadPriorityClass"),
        # What the queued public event's estimate reads (decision 0055).
        (KUEUE_GROUP, "ClusterQueue"),
        (KUEUE_GROUP, "LocalQueue"),
        (KUEUE_GROUP, "Workload"),
    }
)
"""(API group, kind) pairs :meth:`ObjectIndex.of_kind` answers for."""

_WORKLOAD_KINDS: Final = frozenset({"KaiwoJob", "KaiwoService"})

Kind = tuple[str, str]
"""(API group, kind)."""
QueueUse = tuple[str, str]
"""(cluster queue a workload declares, "" for the default; its namespace)."""
Identity = tuple[str, str, str, str]
"""(API group, kind, namespace or "", name): an object's identity across API versions."""
SortKey = tuple[str, str, str, str, str]
"""(apiVersion, kind, namespace, name, uid): the order of every group handed out."""

NODE: Final = "node"
NAMESPACE: Final = "namespace"
KUEUE_WORKLOAD: Final = "workload"
OBJECT: Final = "object"


class NotIndexedError(ValueError):
    """A question the index does not answer (a label key or kind it does not file)."""


def api_group_of(api_version: str) -> str:
    """``batch/v1`` -> ``batch``; ``v1`` -> "" (the core group)."""
    return api_version.rpartition("/")[0]


def category_of(group: str, kind: str) -> str:
    """How the index files an object of this kind: node, namespace, Kueue Workload, other."""
    if group == CORE_GROUP and kind == "Node":
        return NODE
    if group == CORE_GROUP and kind == "Namespace":
        return NAMESPACE
    if group == KUEUE_GROUP and kind == "Workload":
        return KUEUE_WORKLOAD
    return OBJECT


@dataclass(frozen=True, slots=True)
class Entry:
    """One observed object and everything it is filed under, worked out once.

    ``resource_version`` and ``sequence`` (the observation's stream sequence) say which
    version this is; ``written_last_by_operator`` is read from ``managedFields``, which the
    projection does not keep.
    """

    object: Mapping[str, Any]
    uid: str
    resource_version: str
    sequence: int
    sort_key: SortKey
    identity: Identity
    category: str
    owners: tuple[str, ...] = ()
    label_groups: tuple[str, ...] = ()
    node: NodeInfo | None = None
    queue_use: QueueUse | None = None
    """For a KaiwoJob or KaiwoService: its declared cluster queue ("" for the default) and
    namespace, counted so the queues' namespaces need no scan of every workload."""
    written_last_by_operator: bool = False

    @classmethod
    def of(
        cls,
        obj: Mapping[str, Any],
        *,
        api_version: str,
        kind: str,
        uid: str,
        resource_version: str,
        sequence: int,
        stored: Mapping[str, Any] | None = None,
    ) -> Entry:
        """What ``obj`` is filed under; ``stored`` is the form kept (default: ``obj``).

        A malformed object raises here (TypeError, ValueError, ...) and nothing is filed.
        """
        _check_shape(obj)
        meta = _metadata(obj)
        namespace = str(meta.get("namespace") or "")
        name = str(meta.get("name") or "")
        group = api_group_of(api_version)
        category = category_of(group, kind)
        owners: tuple[str, ...] = ()
        label_groups: tuple[str, ...] = ()
        node = None
        if category == NODE:
            node = NodeInfo.from_wire(obj)
        elif category == KUEUE_WORKLOAD:
            owners = _workload_owner_uids(obj)
        elif category == OBJECT:
            owners = owner_uids(obj) + _deployment_of(group, kind, namespace, obj)
            label_groups = tuple(
                label_group(key, value)
                for key, value in _labels(obj).items()
                if key in INDEXED_LABELS
            )
        return cls(
            object=obj if stored is None else stored,
            uid=uid,
            resource_version=resource_version,
            sequence=sequence,
            sort_key=(api_version, kind, namespace, name, uid),
            identity=(group, kind, namespace, name),
            category=category,
            owners=owners,
            label_groups=label_groups,
            node=node,
            queue_use=_queue_use(group, kind, obj),
            written_last_by_operator=written_last_by_operator(obj),
        )

    @classmethod
    def of_wire(
        cls, obj: Mapping[str, Any], *, sequence: int = 0, kueue_workload: bool = False
    ) -> Entry:
        """An object given whole (tests, ``kaiwo plan``): type and uid from the object;
        ``kueue_workload``: filed as a Kueue Workload whatever its ``apiVersion`` says."""
        meta = _metadata(obj)
        api_version = str(obj.get("apiVersion", ""))
        if kueue_workload and api_group_of(api_version) != KUEUE_GROUP:
            api_version = f"{KUEUE_GROUP}/v1beta1"
        return cls.of(
            obj,
            api_version=api_version,
            kind="Workload" if kueue_workload else str(obj.get("kind", "")),
            uid=str(meta.get("uid") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
            sequence=sequence,
        )


@dataclass(frozen=True, slots=True)
class SortedGroup:
    """Objects in :data:`SortKey` order; changed by making a new group."""

    keys: tuple[SortKey, ...] = ()
    objects: tuple[Mapping[str, Any], ...] = ()

    def putting(self, key: SortKey, obj: Mapping[str, Any]) -> SortedGroup:
        index = bisect.bisect_left(self.keys, key)
        keys, objects = self.keys, self.objects
        if index < len(keys) and keys[index] == key:
            return SortedGroup(keys, (*objects[:index], obj, *objects[index + 1 :]))
        return SortedGroup(
            (*keys[:index], key, *keys[index:]), (*objects[:index], obj, *objects[index:])
        )

    def removing(self, key: SortKey) -> SortedGroup | None:
        """The group without ``key``; None when that leaves it empty."""
        index = bisect.bisect_left(self.keys, key)
        keys, objects = self.keys, self.objects
        if index >= len(keys) or keys[index] != key:
            return self
        if len(keys) == 1:
            return None
        return SortedGroup(
            (*keys[:index], *keys[index + 1 :]), (*objects[:index], *objects[index + 1 :])
        )


_NO_GROUP: Final = SortedGroup()
_EMPTY: Final[HashTrieMap[Any, Any]] = HashTrieMap()
Groups: TypeAlias = "HashTrieMap[Any, SortedGroup]"
"""Group key (an owner uid, a label pair, a kind) -> its objects."""


def _put(groups: Groups, group: object, key: SortKey, obj: Mapping[str, Any]) -> Groups:
    return groups.insert(group, groups.get(group, _NO_GROUP).putting(key, obj))


def _drop(groups: Groups, group: object, key: SortKey) -> Groups:
    found = groups.get(group)
    if found is None:
        return groups
    left = found.removing(key)
    return groups.remove(group) if left is None else groups.insert(group, left)


@dataclass(frozen=True, slots=True)
class ObjectIndex:
    """Observed objects filed for planning's questions (see the module docstring)."""

    by_uid: HashTrieMap[str, Entry] = _EMPTY
    by_identity: HashTrieMap[Identity, tuple[Entry, ...]] = _EMPTY
    """Identity -> tuple of entries (more than one only when a deletion was missed)."""
    children: Groups = _EMPTY
    kueue_workloads: Groups = _EMPTY
    labelled: Groups = _EMPTY
    listed: Groups = _EMPTY
    queue_uses: HashTrieMap[QueueUse, int] = _EMPTY
    """QueueUse -> how many workloads declare it."""

    @classmethod
    def of(cls, entries: Iterable[Entry]) -> ObjectIndex:
        index = cls()
        for entry in entries:
            index = index.adding(entry)
        return index

    # ------------------------------------------------------------------ changing

    def adding(self, entry: Entry) -> ObjectIndex:
        """This index with ``entry`` filed (an entry of its uid must have been removed)."""
        key = entry.sort_key
        children, workloads = self.children, self.kueue_workloads
        labelled, listed = self.labelled, self.listed
        if entry.category == KUEUE_WORKLOAD:
            for owner in entry.owners:
                workloads = _put(workloads, owner, key, entry.object)
        elif entry.category == OBJECT:
            for owner in entry.owners:
                children = _put(children, owner, key, entry.object)
            for group in entry.label_groups:
                labelled = _put(labelled, group, key, entry.object)
        kind = (entry.identity[0], entry.identity[1])
        if kind in LISTED_KINDS:
            listed = _put(listed, kind, key, entry.object)
        uses = self.queue_uses
        if entry.queue_use is not None:
            uses = uses.insert(entry.queue_use, uses.get(entry.queue_use, 0) + 1)
        same = self.by_identity.get(entry.identity, ())
        return ObjectIndex(
            by_uid=self.by_uid.insert(entry.uid, entry),
            by_identity=self.by_identity.insert(entry.identity, (*same, entry)),
            children=children,
            kueue_workloads=workloads,
            labelled=labelled,
            listed=listed,
            queue_uses=uses,
        )

    def removing(self, entry: Entry) -> ObjectIndex:
        """This index without ``entry`` (which it must hold)."""
        key = entry.sort_key
        children, workloads = self.children, self.kueue_workloads
        labelled, listed = self.labelled, self.listed
        if entry.category == KUEUE_WORKLOAD:
            for owner in entry.owners:
                workloads = _drop(workloads, owner, key)
        elif entry.category == OBJECT:
            for owner in entry.owners:
                children = _drop(children, owner, key)
            for group in entry.label_groups:
                labelled = _drop(labelled, group, key)
        kind = (entry.identity[0], entry.identity[1])
        if kind in LISTED_KINDS:
            listed = _drop(listed, kind, key)
        uses = self.queue_uses
        if entry.queue_use is not None:
            count = uses.get(entry.queue_use, 0) - 1
            uses = (
                uses.insert(entry.queue_use, count) if count > 0 else uses.discard(entry.queue_use)
            )
        by_uid = self.by_uid
        if by_uid.get(entry.uid) is entry:
            by_uid = by_uid.remove(entry.uid)
        same = tuple(e for e in self.by_identity.get(entry.identity, ()) if e is not entry)
        by_identity = (
            self.by_identity.insert(entry.identity, same)
            if same
            else self.by_identity.discard(entry.identity)
        )
        return ObjectIndex(
            by_uid=by_uid,
            by_identity=by_identity,
            children=children,
            kueue_workloads=workloads,
            labelled=labelled,
            listed=listed,
            queue_uses=uses,
        )

    # ------------------------------------------------------------------ reading

    def entry(self, uid: str) -> Entry | None:
        found: Entry | None = self.by_uid.get(uid)
        return found

    def newest(self, identity: Identity) -> Entry | None:
        """The entry of this identity; of two (a deletion was missed), the one observed last."""
        found: tuple[Entry, ...] = self.by_identity.get(identity, ())
        if not found:
            return None
        if len(found) == 1:
            return found[0]
        return max(found, key=lambda e: (e.sequence, e.sort_key))

    def children_of(self, owner_uid: str) -> tuple[Mapping[str, Any], ...]:
        found: SortedGroup = self.children.get(owner_uid, _NO_GROUP)
        return found.objects

    def kueue_workloads_for(self, job_uid: str) -> tuple[Mapping[str, Any], ...]:
        found: SortedGroup = self.kueue_workloads.get(job_uid, _NO_GROUP)
        return found.objects

    def labelled_with(self, key: str, value: str) -> tuple[Mapping[str, Any], ...]:
        if key not in INDEXED_LABELS:
            raise NotIndexedError(f"objects are not indexed by the label {key!r}")
        found: SortedGroup = self.labelled.get(label_group(key, value), _NO_GROUP)
        return found.objects

    def of_kind(self, group: str, kind: str) -> tuple[Mapping[str, Any], ...]:
        if (group, kind) not in LISTED_KINDS:
            raise NotIndexedError(f"objects of {group or 'core'}/{kind} are not listed")
        found: SortedGroup = self.listed.get((group, kind), _NO_GROUP)
        return found.objects

    def sorted_queue_uses(self) -> tuple[QueueUse, ...]:
        return tuple(sorted(self.queue_uses.keys()))

    def __len__(self) -> int:
        return sum(len(entries) for entries in self.by_identity.values())


# --------------------------------------------------------------------------- reading objects


def label_group(key: str, value: str) -> str:
    """One string per label pair; "\\x00" cannot occur in a label key or value."""
    return f"{key}\x00{value}"


def _check_shape(obj: Mapping[str, Any]) -> None:
    """Every Kubernetes object's ``spec`` and ``status`` are objects: planning reads into them
    without checking each level (found by fuzzing: a Job whose ``spec`` was ``true``)."""
    for part in ("spec", "status"):
        value = obj.get(part)
        if value is not None and not isinstance(value, Mapping):
            raise TypeError(f"{part} must be an object, not {type(value).__name__}")


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels = _metadata(obj).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def owner_uids(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """The uids in ``metadata.ownerReferences``, each once, in order."""
    refs = _metadata(obj).get("ownerReferences") or ()
    return tuple(
        dict.fromkeys(str(r["uid"]) for r in refs if isinstance(r, Mapping) and r.get("uid"))
    )


def deployment_key(namespace: str, name: str) -> str:
    """What a Deployment's pods are filed under besides their ReplicaSet's uid: no uid has a
    NUL in it, so it is never taken for one."""
    return f"Deployment\x00{namespace}\x00{name}"


def _deployment_of(
    group: str, kind: str, namespace: str, obj: Mapping[str, Any]
) -> tuple[str, ...]:
    if (group, kind) != (CORE_GROUP, "Pod") or made_by_kaiwo(obj):
        return ()
    deployment = deployment_of_pod(obj)
    return (deployment_key(namespace, deployment),) if deployment else ()


def _workload_owner_uids(workload: Mapping[str, Any]) -> tuple[str, ...]:
    owners = dict.fromkeys(owner_uids(workload))
    job_uid = _labels(workload).get(KUEUE_JOB_UID_LABEL)
    if job_uid:
        owners[str(job_uid)] = None
    return tuple(owners)


def _queue_use(group: str, kind: str, obj: Mapping[str, Any]) -> QueueUse | None:
    """(declared cluster queue or "", namespace) of a Kaiwo workload, else None."""
    if kind not in _WORKLOAD_KINDS or group != KAIWO_GROUP:
        return None
    namespace = _metadata(obj).get("namespace")
    spec = obj.get("spec")
    if not isinstance(namespace, str) or not namespace or not isinstance(spec, Mapping):
        return None
    queue = spec.get("clusterQueue")
    return (queue if isinstance(queue, str) and queue else "", namespace)


def written_last_by_operator(obj: Mapping[str, Any]) -> bool:
    """Whether the newest ``managedFields`` entry outside the status subresource is the
    operator's (a tie with another manager's counts as theirs: their edit may be newer)."""
    entries = [
        entry
        for entry in _metadata(obj).get("managedFields") or ()
        if isinstance(entry, Mapping) and not entry.get("subresource")
    ]
    if not entries:
        return False
    newest = max(str(entry.get("time") or "") for entry in entries)
    last = {
        str(entry.get("manager")) for entry in entries if str(entry.get("time") or "") == newest
    }
    return last <= OPERATOR_FIELD_MANAGERS
