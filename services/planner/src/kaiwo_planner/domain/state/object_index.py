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
  ``kueue.x-k8s.io/job-uid`` label), and by its kind, namespace and name
  (:func:`~kaiwo_planner.domain.state.index_entry.kueue_job_key`), which outlive a deleted
  job (decision 0139);
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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from rpds import HashTrieMap

from kaiwo_planner.domain.state.index_entry import (
    INDEXED_LABELS,
    KUEUE_WORKLOAD,
    LISTED_KINDS,
    OBJECT,
    Entry,
    Identity,
    QueueUse,
    SortKey,
    label_group,
)


class NotIndexedError(ValueError):
    """A question the index does not answer (a label key or kind it does not file)."""


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


def _filed_alike(old: Entry, new: Entry) -> bool:
    """Both versions of an object are filed under the same keys and groups."""
    return (
        old.uid == new.uid
        and old.identity == new.identity
        and old.sort_key == new.sort_key
        and old.category == new.category
        and old.owners == new.owners
        and old.label_groups == new.label_groups
        and old.queue_use == new.queue_use
    )


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
        key, obj = entry.sort_key, entry.object
        children, workloads, labelled, listed = self._regrouped(
            entry, lambda groups, group: _put(groups, group, key, obj)
        )
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
        children, workloads, labelled, listed = self._regrouped(
            entry, lambda groups, group: _drop(groups, group, key)
        )
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

    def replacing(self, old: Entry, new: Entry) -> ObjectIndex:
        """``self.removing(old).adding(new)``, the same index, for a new version of an object
        this index holds: in one step when both versions are filed under the same groups (a
        change that moved no owner, label, kind or queue: most changes), each group keeping
        the object's place and taking the new one, not losing it and finding it again."""
        if not _filed_alike(old, new) or self.by_uid.get(old.uid) is not old:
            return self.removing(old).adding(new)
        same = self.by_identity.get(old.identity, ())
        if same != (old,):  # two entries of one identity (a deletion missed): keep the order
            return self.removing(old).adding(new)
        key, obj = new.sort_key, new.object
        children, workloads, labelled, listed = self._regrouped(
            new, lambda groups, group: _put(groups, group, key, obj)
        )
        return ObjectIndex(
            by_uid=self.by_uid.insert(new.uid, new),
            by_identity=self.by_identity.insert(new.identity, (new,)),
            children=children,
            kueue_workloads=workloads,
            labelled=labelled,
            listed=listed,
            queue_uses=self.queue_uses,
        )

    def _regrouped(
        self, entry: Entry, change: Callable[[Groups, object], Groups]
    ) -> tuple[Groups, Groups, Groups, Groups]:
        """``children``, ``kueue_workloads``, ``labelled`` and ``listed`` with ``change`` made
        to each group ``entry`` is filed under: where adding, removing and replacing agree."""
        children, workloads = self.children, self.kueue_workloads
        labelled, listed = self.labelled, self.listed
        if entry.category == KUEUE_WORKLOAD:
            for owner in entry.owners:
                workloads = change(workloads, owner)
        elif entry.category == OBJECT:
            for owner in entry.owners:
                children = change(children, owner)
            for group in entry.label_groups:
                labelled = change(labelled, group)
        kind = (entry.identity[0], entry.identity[1])
        if kind in LISTED_KINDS:
            listed = change(listed, kind)
        return children, workloads, labelled, listed

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
