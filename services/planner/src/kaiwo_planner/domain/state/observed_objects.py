"""The latest version of every observed object, and a tombstone for each deleted one.

Level-triggered: every observation carries the whole object, so the latest one per object
is kept and anything older than what is known is dropped. Objects are keyed by
(``apiVersion/kind``, uid). Resource versions are compared as integers when both are
integers (they are, on every real API server, though Kubernetes calls them opaque);
otherwise a different version counts as newer. A ``DELETED`` observation removes the
object and leaves a *tombstone* with its last resource version, so a late, older
``MODIFIED`` for the same uid does not bring it back. Tombstones are forgotten once
``tombstone_retention`` further observations have been applied, so they cannot grow
without bound. An observation marked ``reobserved`` (read again after the executor refused
a plan made from the projection's copy) replaces the copy whatever its version.

Objects are filed in a persistent :class:`~kaiwo_planner.domain.state.object_index.ObjectIndex`
as they arrive, so the cluster state made from them costs O(1) per change.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from kaiwo_contracts.events.observed import ObservedObjectV1, WatchEventType
from kaiwo_contracts.plans import ObjectRef

from kaiwo_planner.domain.state.index_entry import (
    NAMESPACE,
    NODE,
    Entry,
    QueueUse,
    api_group_of,
)
from kaiwo_planner.domain.state.nodes import NodeInfo
from kaiwo_planner.domain.state.object_index import ObjectIndex
from kaiwo_planner.domain.state.stored_form import (
    at_version,
    projected_form,
    same_content,
    with_shared_strings,
)

_Key = tuple[str, str]
"""How an object is filed: (``apiVersion/kind``, uid), its name left out, so that a snapshot's
tombstone (type, uid and version only) names it too."""


def _key(api_version: str, kind: str, uid: str) -> _Key:
    return (f"{api_version}/{kind}", uid)


def _key_of(ref: ObjectRef) -> _Key:
    return _key(ref.api_version, ref.kind, ref.uid or "")


@dataclass(frozen=True, slots=True)
class Change:
    """One observation the projection accepted.

    ``object`` is the new state (for ``DELETED``: the last state the API server reported);
    ``previous`` is the version the projection held before, or None when it held none.
    """

    ref: ObjectRef
    event_type: WatchEventType
    resource_version: str
    sequence: int
    object: Mapping[str, Any]
    previous: Mapping[str, Any] | None = None
    queue_uses_changed: bool = False
    """The set of (declared queue, namespace) pairs of the workloads changed with this."""
    content_changed: bool = True
    """False when only the object's ``resourceVersion`` moved (its ``managedFields`` too, as
    long as the same party wrote it last): a relist after a restore, a no-op apply by another
    field manager. Such a change alters no plan but the owner's own when a status write of
    its last plan is still outstanding (the write must go onto the new version)."""

    @property
    def deleted(self) -> bool:
        return self.event_type == "DELETED"

    @property
    def group(self) -> str:
        return api_group_of(self.ref.api_version)

    @property
    def kind(self) -> str:
        return self.ref.kind


_TakenIn: TypeAlias = "tuple[Entry | None, Entry | None, bool, Mapping[QueueUse, int]]"
"""An observation taken in (:meth:`ObservedObjects._take_in`): the entry held before, the
one filed now (None: deleted), whether the content changed, the queue uses before."""


@dataclass(frozen=True, slots=True)
class Tombstone:
    resource_version: str
    sequence: int


def is_newer(incoming: str, known: str) -> bool:
    """Whether resource version ``incoming`` is newer than ``known`` (see the module doc)."""
    if incoming.isdigit() and known.isdigit():
        return int(incoming) > int(known)
    return incoming != known


def superseded(observations: Iterable[tuple[int, ObservedObjectV1]]) -> frozenset[int]:
    """The sequences of ``observations`` (in sequence order) whose taking-in a later one of the
    same object undoes: :meth:`ObservedObjects.fast_forward` skips them.

    An object's observations are all but its last superseded when none is ``reobserved`` and
    their resource versions are integers that rise strictly. Then, whatever the projection
    holds for the object, each is taken in exactly when it would be after the skipped ones
    (integers compare transitively; a version that is not an integer is unequal to all of
    them), and the last one taken in replaces whatever the earlier ones would have left,
    object or tombstone. Any other object's observations are all taken in.
    """
    by_object: dict[_Key, list[tuple[int, int | None]]] = {}
    for sequence, observed in observations:
        key = _key(observed.api_version, observed.kind, observed.uid)
        by_object.setdefault(key, []).append((sequence, _plain_number(observed)))
    skipped: list[int] = []
    for versions in by_object.values():
        numbers = [number for _, number in versions]
        if len(numbers) > 1 and _rising(numbers):
            skipped.extend(sequence for sequence, _ in versions[:-1])
    return frozenset(skipped)


def _plain_number(observed: ObservedObjectV1) -> int | None:
    """The resource version as an integer, unless it is not one or the object was reobserved."""
    version = observed.resource_version
    if observed.reobserved or not (version.isascii() and version.isdigit()):
        return None
    return int(version)


def _rising(numbers: list[int | None]) -> bool:
    return all(
        earlier is not None and later is not None and earlier < later
        for earlier, later in itertools.pairwise(numbers)
    )


class ObservedObjects:
    """The live objects by key, their index, the tombstones, and the nodes and namespaces."""

    def __init__(self, *, retention: int, share_strings: bool) -> None:
        """``share_strings``: each object filed is kept with its strings shared
        (:func:`with_shared_strings`), else as its :func:`projected_form` is."""
        self._retention = retention
        self._share_strings = share_strings
        self._live: dict[_Key, Entry] = {}
        self._tombstones: dict[_Key, Tombstone] = {}
        self._index = ObjectIndex()
        self._nodes: dict[str, NodeInfo] = {}
        self._node_tuple: tuple[NodeInfo, ...] = ()
        self._namespaces: frozenset[str] = frozenset()
        self._last_sequence = 0

    @property
    def last_sequence(self) -> int:
        """The highest stream sequence given to :meth:`apply` (accepted or not)."""
        return self._last_sequence

    @property
    def index(self) -> ObjectIndex:
        return self._index

    @property
    def nodes(self) -> tuple[NodeInfo, ...]:
        """The Nodes, by name."""
        return self._node_tuple

    @property
    def namespaces(self) -> frozenset[str]:
        return self._namespaces

    def __len__(self) -> int:
        return len(self._live)

    @property
    def tombstone_count(self) -> int:
        return len(self._tombstones)

    def get(self, ref: ObjectRef) -> Mapping[str, Any] | None:
        """The live object of ``ref``'s type and uid."""
        entry = self._live.get(_key_of(ref))
        return entry.object if entry is not None else None

    def resource_version(self, ref: ObjectRef) -> str | None:
        """The newest resource version known for ``ref``'s type and uid, tombstones included."""
        key = _key_of(ref)
        entry = self._live.get(key)
        if entry is not None:
            return entry.resource_version
        tombstone = self._tombstones.get(key)
        return tombstone.resource_version if tombstone is not None else None

    def holds_version(self, uid: str, resource_version: str) -> bool:
        """Whether the live object ``uid`` is at exactly ``resource_version``: an observation
        of it (other than a reobserved one) changes nothing. A deletion is a write and brings
        a version of its own, so it never matches."""
        entry = self._index.entry(uid)
        return entry is not None and entry.resource_version == resource_version

    def pass_over(self, sequence: int) -> None:
        """Count observation ``sequence`` as read without taking it in (it changes nothing:
        :meth:`holds_version`), as :meth:`apply` would count it."""
        self._last_sequence = max(self._last_sequence, sequence)

    def fast_forward(
        self, observations: Sequence[tuple[int, ObservedObjectV1]]
    ) -> list[tuple[str, str]]:
        """Take in ``observations`` (in sequence order) as :meth:`apply` would one by one, to
        the same objects, tombstones and sequence, without filing the versions that a later
        one of the same object replaces anyway (:func:`superseded`). Such a version is passed
        over with what taking it in would do to the other objects: if it would be taken in,
        the tombstones that forgets. Returns the (API group, kind) of each observation filed,
        all that its caller reads of a change: no :class:`Change` is made (a replay takes in
        every observation of its store here, decision 0258)."""
        skipped = superseded(observations) if len(observations) > 1 else frozenset()
        kinds: list[tuple[str, str]] = []
        for sequence, observed in observations:
            if sequence in skipped:
                self._pass_over_superseded(observed, sequence)
            elif self._take_in(observed, sequence) is not None:
                kinds.append((api_group_of(observed.api_version), observed.kind))
        return kinds

    def _pass_over_superseded(self, observed: ObservedObjectV1, sequence: int) -> None:
        """Pass over ``observed``, forgetting the tombstones :meth:`apply` would forget.

        Whether :meth:`apply` would take it in is whether it is newer than what is held for
        its object here, where its skipped earlier versions left nothing: had one of them
        been taken in, this one, a higher integer, is newer than what that one replaced."""
        self.pass_over(sequence)
        key = _key(observed.api_version, observed.kind, observed.uid)
        if not self._is_stale(key, self._live.get(key), observed):
            self._forget_old_tombstones()

    def apply(self, observed: ObservedObjectV1, *, sequence: int) -> Change | None:
        """Take in one observation; None when it is stale or a duplicate.

        A *reobserved* object (the watcher read it again because the executor refused a plan
        made from the projection's copy, decision 0038) is what the API server holds now: it
        replaces whatever is held, a version that looks newer (forged) or a tombstone
        included, unless it is exactly that already. A reobserved ``DELETED`` (the API server
        has no object with that uid) removes it likewise.
        """
        taken = self._take_in(observed, sequence)
        if taken is None:
            return None
        live, entry, content_changed, uses_before = taken
        return Change(
            ref=ObjectRef(
                api_version=observed.api_version,
                kind=observed.kind,
                name=observed.name,
                namespace=observed.namespace,
                uid=observed.uid,
            ),
            event_type=observed.event_type,
            resource_version=observed.resource_version,
            sequence=sequence,
            object=observed.object,
            previous=live.object if live is not None else None,
            queue_uses_changed=_queue_uses_changed(
                uses_before,
                self._index.queue_uses,
                old=live.queue_use if live is not None else None,
                new=entry.queue_use if entry is not None else None,
            ),
            content_changed=content_changed,
        )

    def _take_in(self, observed: ObservedObjectV1, sequence: int) -> _TakenIn | None:
        """:meth:`apply` but for its :class:`Change`: what was held, what is filed now,
        whether the content changed, and the queue uses before; None when stale."""
        self.pass_over(sequence)
        key = _key(observed.api_version, observed.kind, observed.uid)
        live = self._live.get(key)
        if self._is_stale(key, live, observed):
            return None
        entry, content_changed = self._entry_for(live, observed, sequence)
        uses_before = self._index.queue_uses
        self._tombstones.pop(key, None)
        if live is not None and entry is not None:
            self._refile(key, live, entry)
        else:
            if live is not None:
                self._unfile(key, live)
            if entry is None:
                self._tombstones[key] = Tombstone(observed.resource_version, sequence)
            else:
                self._file(key, entry)
        self._forget_old_tombstones()
        return live, entry, content_changed, uses_before

    def _is_stale(self, key: _Key, live: Entry | None, observed: ObservedObjectV1) -> bool:
        incoming = observed.resource_version
        deleting = observed.event_type == "DELETED"
        if observed.reobserved:
            return live is not None and not deleting and self._holds(live, observed)
        if live is not None:
            same = incoming == live.resource_version
            return (same and not deleting) or (
                not same and not is_newer(incoming, live.resource_version)
            )
        tombstone = self._tombstones.get(key)
        return tombstone is not None and not is_newer(incoming, tombstone.resource_version)

    def _entry_for(
        self, live: Entry | None, observed: ObservedObjectV1, sequence: int
    ) -> tuple[Entry | None, bool]:
        """The entry to file for ``observed`` (None: deleted) and whether its content changed."""
        if observed.event_type == "DELETED":
            return None, True
        incoming = observed.resource_version
        projected = projected_form(observed.object)
        same = live is not None and same_content(live.object, projected)
        entry = Entry.of(
            observed.object,
            api_version=observed.api_version,
            kind=observed.kind,
            uid=observed.uid,
            resource_version=incoming,
            sequence=sequence,
            # The same content at a new version: the stored copy is shared, not made again.
            stored=at_version(live.object, incoming)
            if same and live is not None
            else self._kept(projected),
        )
        content_changed = not (
            same
            and live is not None
            and live.written_last_by_operator == entry.written_last_by_operator
        )
        return entry, content_changed

    def _kept(self, projected: dict[str, Any]) -> dict[str, Any]:
        return with_shared_strings(projected) if self._share_strings else projected

    def _holds(self, live: Entry, observed: ObservedObjectV1) -> bool:
        """Exactly ``observed`` is held already (version and content)."""
        return live.resource_version == observed.resource_version and live.object == (
            projected_form(observed.object)
        )

    def _forget_old_tombstones(self) -> None:
        horizon = self._last_sequence - self._retention
        while self._tombstones:
            key, tombstone = next(iter(self._tombstones.items()))
            if tombstone.sequence >= horizon:
                break
            del self._tombstones[key]

    def _file(self, key: _Key, entry: Entry) -> None:
        self._live[key] = entry
        self._index = self._index.adding(entry)
        name = entry.identity[3]
        if entry.node is not None:
            self._nodes[name] = entry.node
            self._node_tuple = tuple(self._nodes[n] for n in sorted(self._nodes))
        elif entry.category == NAMESPACE:
            self._namespaces = self._namespaces | {name}

    def _refile(self, key: _Key, live: Entry, entry: Entry) -> None:
        """``_unfile(key, live)`` then ``_file(key, entry)``, the index changed in one step.
        Both versions are of one kind (the key holds it), so of one category."""
        if live.category in (NODE, NAMESPACE):  # kept beside the index as well: see _file
            self._unfile(key, live)
            self._file(key, entry)
            return
        self._live[key] = entry
        self._index = self._index.replacing(live, entry)

    def _unfile(self, key: _Key, entry: Entry) -> None:
        del self._live[key]
        self._index = self._index.removing(entry)
        name = entry.identity[3]
        if entry.node is not None:
            self._nodes.pop(name, None)
            self._node_tuple = tuple(self._nodes[n] for n in sorted(self._nodes))
        elif entry.category == NAMESPACE:
            self._namespaces = self._namespaces - {name}

    # ------------------------------------------------------------------ snapshot

    def documents(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The live objects (sorted by key) and the tombstones (in deletion order: the oldest
        are forgotten first), as JSON-ready data; objects are shared, not copied."""
        objects = [
            {
                "type": key[0],
                "uid": key[1],
                "resourceVersion": entry.resource_version,
                "sequence": entry.sequence,
                "object": entry.object,
            }
            for key, entry in sorted(self._live.items(), key=lambda item: item[0])
        ]
        tombstones = [
            {
                "type": key[0],
                "uid": key[1],
                "resourceVersion": tombstone.resource_version,
                "sequence": tombstone.sequence,
            }
            for key, tombstone in self._tombstones.items()
        ]
        return objects, tombstones

    def restore(
        self,
        *,
        last_sequence: int,
        objects: list[Mapping[str, Any]],
        tombstones: list[Mapping[str, Any]],
    ) -> None:
        """Hold what :meth:`documents` gave (raises KeyError, TypeError, ValueError)."""
        self._last_sequence = last_sequence
        for item in objects:
            key = (str(item["type"]), str(item["uid"]))
            api_version, _, kind = key[0].rpartition("/")
            obj = dict(item["object"])
            entry = Entry.of(
                obj,
                api_version=api_version,
                kind=kind,
                uid=key[1],
                resource_version=str(item["resourceVersion"]),
                sequence=int(item["sequence"]),
                stored=self._kept(projected_form(obj)),
            )
            self._file(key, entry)
        for item in tombstones:
            key = (str(item["type"]), str(item["uid"]))
            self._tombstones[key] = Tombstone(
                resource_version=str(item["resourceVersion"]), sequence=int(item["sequence"])
            )


def _queue_uses_changed(
    before: Mapping[QueueUse, int],
    after: Mapping[QueueUse, int],
    *,
    old: QueueUse | None,
    new: QueueUse | None,
) -> bool:
    """After a change from ``old`` to ``new``: did a (queue, namespace) pair come or go?"""
    if old == new:
        return False
    appeared = new is not None and new not in before
    went = old is not None and old not in after
    return appeared or went
