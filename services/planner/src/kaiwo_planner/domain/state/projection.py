"""The planner's projection: the latest version of every observed object, built from events.

Level-triggered: every observation carries the whole object, so the projection keeps the
latest one per object and drops anything older than what it knows. Objects are keyed by
(``apiVersion/kind``, uid). Resource versions are compared as integers when both are
integers (they are, on every real API server, though Kubernetes calls them opaque);
otherwise a different version counts as newer. A ``DELETED`` observation removes the
object and leaves a *tombstone* with its last resource version, so a late, older
``MODIFIED`` for the same uid does not bring it back. Tombstones are forgotten once
``tombstone_retention`` further observations have been applied, so they cannot grow
without bound. An observation marked ``reobserved`` (read again after the executor refused
a plan made from the projection's copy) replaces the copy whatever its version.

:meth:`Projection.cluster_state` is what the pure planners read: a plain immutable
:class:`ClusterState`. The projection files objects in a persistent
:class:`~kaiwo_planner.domain.state.object_index.ObjectIndex` as they arrive (children by
owner uid, Kueue Workloads by job uid, the indexed labels, the listed kinds), so a state is
made in O(1) per change, shares everything unchanged with the previous one, and stays valid
after the projection has moved on.

``metadata.managedFields`` is dropped from stored objects: it is large and no decision
reads it. Keys and short strings of stored objects are interned (shared between objects),
unless the projection is made with ``share_strings=False``.

Pure: no I/O, no clock. :meth:`Projection.snapshot` / :meth:`Projection.restore` turn the
whole state (objects, tombstones, sequence) into canonical JSON bytes and back, exactly.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Final

from kaiwo_contracts.events.observed import ObservedObjectV1, WatchEventType
from kaiwo_contracts.plans import ObjectRef, canonical_json

from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.manifest_comparison import contains
from kaiwo_planner.domain.state.nodes import NodeInfo
from kaiwo_planner.domain.state.object_index import (
    CORE_GROUP,
    KUEUE_GROUP,
    KUEUE_JOB_UID_LABEL,
    LISTED_KINDS,
    NAMESPACE,
    Entry,
    Identity,
    Kind,
    NotIndexedError,
    ObjectIndex,
    QueueUse,
    api_group_of,
    written_last_by_operator,
)
from kaiwo_planner.domain.state.planning_context import FINDINGS, SCALE_REQUESTS
from kaiwo_planner.domain.state.scale_request import SCALE_REQUEST_RETENTION, ScaleRequest
from kaiwo_planner.domain.state.workload_finding import WorkloadFinding

__all__ = (
    "CORE_GROUP",
    "KUEUE_GROUP",
    "KUEUE_JOB_UID_LABEL",
    "Change",
    "ObjectKey",
    "Projection",
    "SnapshotFormatError",
    "api_group",
    "is_newer",
    "object_identity",
    "object_ref",
    "ref_identity",
    "written_last_by_operator",
)

SNAPSHOT_FORMAT: Final = 1
DEFAULT_TOMBSTONE_RETENTION: Final = 100_000
FINDING_RETENTION: Final = timedelta(hours=1)
"""A workload's finding not renewed for this long (by later findings' times) is forgotten."""
FINDING_PRUNE_EVERY: Final = timedelta(minutes=1)
"""Forgotten findings are looked for at most this often (by the findings' own times)."""


class SnapshotFormatError(ValueError):
    """The bytes given to :meth:`Projection.restore` are not a projection snapshot."""


api_group = api_group_of


def object_identity(obj: Mapping[str, Any]) -> Identity:
    meta = obj.get("metadata") or {}
    return (
        api_group(str(obj.get("apiVersion", ""))),
        str(obj.get("kind", "")),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


def ref_identity(ref: ObjectRef) -> Identity:
    return (api_group(ref.api_version), ref.kind, ref.namespace or "", ref.name)


def object_ref(obj: Mapping[str, Any]) -> ObjectRef:
    """The :class:`ObjectRef` (with uid) of a JSON object."""
    meta = obj.get("metadata") or {}
    return ObjectRef(
        api_version=str(obj.get("apiVersion", "")),
        kind=str(obj.get("kind", "")),
        name=str(meta.get("name", "")),
        namespace=meta.get("namespace") or None,
        uid=meta.get("uid") or None,
    )


@dataclass(frozen=True, slots=True, order=True)
class ObjectKey:
    """How the projection keys an object: ``apiVersion/kind`` and uid."""

    type: str
    uid: str

    @classmethod
    def of(cls, *, api_version: str, kind: str, uid: str) -> ObjectKey:
        return cls(type=f"{api_version}/{kind}", uid=uid)


@dataclass(frozen=True, slots=True)
class Change:
    """One observation the projection accepted.

    ``object`` is the new state (for ``DELETED``: the last state the API server reported);
    ``previous`` is the version the projection held before, or None when it held none.
    """

    key: ObjectKey
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
        return api_group(self.ref.api_version)

    @property
    def kind(self) -> str:
        return self.ref.kind


@dataclass(frozen=True, slots=True)
class _Tombstone:
    resource_version: str
    sequence: int


def is_newer(incoming: str, known: str) -> bool:
    """Whether resource version ``incoming`` is newer than ``known`` (see the module doc)."""
    if incoming.isdigit() and known.isdigit():
        return int(incoming) > int(known)
    return incoming != known


def _asked_for(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    """A manifest without ``apiVersion``: the observed copy may be served at another version."""
    return {key: value for key, value in manifest.items() if key != "apiVersion"}


_INTERNED_UP_TO: Final = 64
"""Strings this short are shared between stored objects (keys, kinds, labels, phases...)."""


def _stored_form(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as the projection keeps it: without ``metadata.managedFields``, and with its
    keys and short strings interned. Every object decoded from JSON has its own copy of
    each key; shared, they take 44% less memory per tracked workload."""
    return _interned(_without_managed_fields(obj))  # type: ignore[no-any-return]


def _without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj


def _interned(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            (sys.intern(key) if type(key) is str else key): _interned(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_interned(item) for item in value]
    if type(value) is str and len(value) <= _INTERNED_UP_TO:
        return sys.intern(value)
    return value


class Projection:
    """The latest observed version of every object, filed for the planners' questions."""

    def __init__(
        self,
        *,
        tombstone_retention: int = DEFAULT_TOMBSTONE_RETENTION,
        share_strings: bool = True,
    ) -> None:
        """``share_strings=False`` keeps each observed object as given (still without
        ``managedFields``): for a short-lived projection, such as replay's, whose observations
        are held in memory anyway, where copying them to share strings only costs time."""
        if tombstone_retention < 1:
            raise ValueError("tombstone_retention must be >= 1")
        self._retention = tombstone_retention
        self._stored_form = _stored_form if share_strings else _without_managed_fields
        self._live: dict[ObjectKey, Entry] = {}
        self._tombstones: dict[ObjectKey, _Tombstone] = {}
        self._index = ObjectIndex()
        self._nodes: dict[str, NodeInfo] = {}
        self._node_tuple: tuple[NodeInfo, ...] = ()
        self._namespaces: frozenset[str] = frozenset()
        self._last_sequence = 0
        self._findings: dict[str, WorkloadFinding] = {}
        self._findings_view: Mapping[str, WorkloadFinding] = MappingProxyType({})
        self._findings_pruned_at: datetime | None = None
        self._last_finding_sequence = 0
        self._scale_requests: dict[str, ScaleRequest] = {}
        self._scale_requests_view: Mapping[str, ScaleRequest] = MappingProxyType({})
        self._last_scale_sequence = 0
        self._version = 0
        self._state: ClusterState | None = None
        self._kind_versions: dict[Kind, int] = {}
        """The version at which objects of each kind last changed (findings: FINDINGS)."""

    # ------------------------------------------------------------------ reading

    @property
    def last_sequence(self) -> int:
        """The highest stream sequence given to :meth:`apply` (accepted or not)."""
        return self._last_sequence

    @property
    def last_finding_sequence(self) -> int:
        """The highest ``KAIWO_MON`` stream sequence given to :meth:`apply_finding`."""
        return self._last_finding_sequence

    def finding(self, uid: str) -> WorkloadFinding | None:
        return self._findings.get(uid)

    def apply_finding(self, finding: WorkloadFinding, *, sequence: int) -> bool:
        """Keep ``finding`` as its workload's latest (an older one is dropped); returns
        whether planning may come out differently. Findings not renewed for
        :data:`FINDING_RETENTION` (by the findings' own times, looked for every
        :data:`FINDING_PRUNE_EVERY`) are forgotten, so workloads
        that went away do not pile up; this depends on the findings alone, so replay
        forgets the same ones."""
        if sequence <= self._last_finding_sequence:
            return False
        self._last_finding_sequence = sequence
        previous = self._findings.get(finding.uid)
        if previous is not None and previous.at > finding.at:
            return False
        self._findings[finding.uid] = finding
        pruned_at = self._findings_pruned_at
        if pruned_at is None or finding.at - pruned_at >= FINDING_PRUNE_EVERY:
            horizon = finding.at - FINDING_RETENTION
            for uid in [u for u, f in self._findings.items() if f.at < horizon]:
                del self._findings[uid]
            self._findings_pruned_at = finding.at
        # The states show every finding taken in, whether or not it decides anything.
        self._findings_view = MappingProxyType(dict(self._findings))
        self._changed(FINDINGS)
        return finding.decides_differently_from(previous)

    @property
    def last_scale_sequence(self) -> int:
        """The highest ``KAIWO_GATEWAY`` stream sequence given to :meth:`apply_scale_request`."""
        return self._last_scale_sequence

    def scale_request(self, uid: str) -> ScaleRequest | None:
        return self._scale_requests.get(uid)

    def apply_scale_request(self, request: ScaleRequest, *, sequence: int) -> bool:
        """Keep ``request`` as its Model's latest decision (an older one is dropped); returns
        whether planning may come out differently. Decisions not followed by a newer one of
        any Model for :data:`SCALE_REQUEST_RETENTION` (by their own times) are forgotten, as
        findings are, so replay forgets the same ones."""
        if sequence <= self._last_scale_sequence:
            return False
        self._last_scale_sequence = sequence
        previous = self._scale_requests.get(request.uid)
        if previous is not None and previous.at > request.at:
            return False
        self._scale_requests[request.uid] = request
        horizon = request.at - SCALE_REQUEST_RETENTION
        for uid in [u for u, r in self._scale_requests.items() if r.at < horizon]:
            del self._scale_requests[uid]
        self._scale_requests_view = MappingProxyType(dict(self._scale_requests))
        self._changed(SCALE_REQUESTS)
        return request.decides_differently_from(previous)

    @property
    def version(self) -> int:
        """Counts the changes to the projection (observations and findings taken in)."""
        return self._version

    def kinds_changed_since(self, version: int) -> frozenset[Kind]:
        """The (API group, kind) pairs, and :data:`FINDINGS`, changed after ``version``."""
        return frozenset(kind for kind, at in self._kind_versions.items() if at > version)

    def __len__(self) -> int:
        return len(self._live)

    @property
    def tombstone_count(self) -> int:
        return len(self._tombstones)

    def get(self, key: ObjectKey) -> Mapping[str, Any] | None:
        entry = self._live.get(key)
        return entry.object if entry is not None else None

    def by_uid(self, uid: str) -> Mapping[str, Any] | None:
        entry = self._index.entry(uid)
        return entry.object if entry is not None else None

    def find(
        self, *, group: str, kind: str, name: str, namespace: str | None = None
    ) -> Mapping[str, Any] | None:
        entry = self._index.newest((group, kind, namespace or "", name))
        return entry.object if entry is not None else None

    def contains(self, ref: ObjectRef) -> bool:
        """Whether an object with ``ref``'s group, kind, namespace and name is observed."""
        return self._index.newest(ref_identity(ref)) is not None

    def missing(self, manifests: Iterable[Mapping[str, Any]]) -> tuple[ObjectRef, ...]:
        """Refs (without uid) of the ``manifests`` not observed, sorted; e.g. a plan's desired.

        Asked after every plan, and most desired objects exist: only the absent ones are
        turned into refs (a validated model each).
        """
        index = self._index
        absent = (m for m in manifests if index.newest(object_identity(m)) is None)
        refs = (object_ref(manifest).model_copy(update={"uid": None}) for manifest in absent)
        return tuple(sorted(refs, key=ObjectRef.sort_key))

    def drifted(
        self, manifests: Iterable[Mapping[str, Any]], *, ours_too: bool = False
    ) -> tuple[ObjectRef, ...]:
        """Refs (without uid) of the ``manifests`` observed without what they ask for, sorted.

        An object changed by hand (a Job's ``parallelism``, a ConfigMap's data) shows here
        until the executor applies the manifest again. Server-side defaults, canonical
        quantities and fields others added do not count (:func:`manifest_comparison.contains`).

        Nor, unless ``ours_too``, does an object the operator itself wrote last: that is an
        older version of ours whose update is still on its way back (the plan changed, the
        executor applied it, the observation has not come yet). A resync counts those too, as
        an apply that failed for good leaves the object so.
        """
        drifted = []
        for manifest in manifests:
            entry = self._index.newest(object_identity(manifest))
            if entry is None:
                continue
            if (ours_too or not entry.written_last_by_operator) and not contains(
                entry.object, _asked_for(manifest)
            ):
                drifted.append(object_ref(manifest).model_copy(update={"uid": None}))
        return tuple(sorted(drifted, key=ObjectRef.sort_key))

    def objects_of_kind(
        self, *, group: str, kind: str, namespace: str | None = None
    ) -> tuple[Mapping[str, Any], ...]:
        """Live objects of one listed kind (optionally in one namespace), in sort order."""
        if (group, kind) not in LISTED_KINDS:
            raise NotIndexedError(f"objects of {group or 'core'}/{kind} are not listed")
        objects = self._index.of_kind(group, kind)
        if namespace is None:
            return objects
        return tuple(o for o in objects if (o.get("metadata") or {}).get("namespace") == namespace)

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

    def resource_version(self, key: ObjectKey) -> str | None:
        """The newest resource version known for ``key``, tombstones included."""
        entry = self._live.get(key)
        if entry is not None:
            return entry.resource_version
        tombstone = self._tombstones.get(key)
        return tombstone.resource_version if tombstone is not None else None

    # ------------------------------------------------------------------ applying

    def apply(self, observed: ObservedObjectV1, *, sequence: int) -> Change | None:
        """Take in one observation; None when it is stale or a duplicate.

        ``sequence`` is the observation's stream sequence; :attr:`last_sequence` advances
        whether or not the observation changes anything.

        A *reobserved* object (the watcher read it again because the executor refused a plan
        made from the projection's copy, decision 0038) is what the API server holds now: it
        replaces whatever the projection holds, a version that looks newer (forged) or a
        tombstone included, unless it is exactly that already. A reobserved ``DELETED`` (the
        API server has no object with that uid) removes it likewise.
        """
        self._last_sequence = max(self._last_sequence, sequence)
        key = ObjectKey.of(api_version=observed.api_version, kind=observed.kind, uid=observed.uid)
        incoming = observed.resource_version
        deleting = observed.event_type == "DELETED"
        live = self._live.get(key)
        if observed.reobserved:
            if live is not None and not deleting and self._holds(live, observed):
                return None
        elif live is not None:
            same = incoming == live.resource_version
            if (same and not deleting) or (
                not same and not is_newer(incoming, live.resource_version)
            ):
                return None
        else:
            tombstone = self._tombstones.get(key)
            if tombstone is not None and not is_newer(incoming, tombstone.resource_version):
                return None
        entry = None
        content_changed = True
        if not deleting:
            same = live is not None and _same_content(
                live.object, _without_managed_fields(observed.object)
            )
            entry = Entry.of(
                observed.object,
                api_version=observed.api_version,
                kind=observed.kind,
                uid=observed.uid,
                resource_version=incoming,
                sequence=sequence,
                # The same content at a new version: the stored copy is shared, not made again.
                stored=_at_version(live.object, incoming)
                if same and live is not None
                else self._stored_form(observed.object),
            )
            content_changed = not (
                same
                and live is not None
                and live.written_last_by_operator == entry.written_last_by_operator
            )
        uses_before = self._index.queue_uses
        if live is not None:
            self._unfile(key, live)
        self._tombstones.pop(key, None)
        if entry is None:
            self._tombstones[key] = _Tombstone(resource_version=incoming, sequence=sequence)
        else:
            self._file(key, entry)
        self._forget_old_tombstones()
        self._changed((api_group(observed.api_version), observed.kind))
        return Change(
            key=key,
            ref=ObjectRef(
                api_version=observed.api_version,
                kind=observed.kind,
                name=observed.name,
                namespace=observed.namespace,
                uid=observed.uid,
            ),
            event_type=observed.event_type,
            resource_version=incoming,
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

    def _holds(self, live: Entry, observed: ObservedObjectV1) -> bool:
        """The projection holds exactly ``observed`` already (version and content)."""
        return live.resource_version == observed.resource_version and live.object == (
            _without_managed_fields(observed.object)
        )

    def _changed(self, kind: Kind) -> None:
        self._version += 1
        self._kind_versions[kind] = self._version
        self._state = None

    def _forget_old_tombstones(self) -> None:
        horizon = self._last_sequence - self._retention
        while self._tombstones:
            key, tombstone = next(iter(self._tombstones.items()))
            if tombstone.sequence >= horizon:
                break
            del self._tombstones[key]

    def _file(self, key: ObjectKey, entry: Entry) -> None:
        self._live[key] = entry
        self._index = self._index.adding(entry)
        name = entry.identity[3]
        if entry.node is not None:
            self._nodes[name] = entry.node
            self._node_tuple = tuple(self._nodes[n] for n in sorted(self._nodes))
        elif entry.category == NAMESPACE:
            self._namespaces = self._namespaces | {name}

    def _unfile(self, key: ObjectKey, entry: Entry) -> None:
        del self._live[key]
        self._index = self._index.removing(entry)
        name = entry.identity[3]
        if entry.node is not None:
            self._nodes.pop(name, None)
            self._node_tuple = tuple(self._nodes[n] for n in sorted(self._nodes))
        elif entry.category == NAMESPACE:
            self._namespaces = self._namespaces - {name}

    # ------------------------------------------------------------------ the planners' view

    def cluster_state(self) -> ClusterState:
        """The cluster as observed, for the planners: an immutable value."""
        if self._state is None:
            self._state = ClusterState(
                nodes=self._node_tuple,
                namespaces=self._namespaces,
                findings=self._findings_view,
                scale_requests=self._scale_requests_view,
                index=self._index,
            )
        return self._state

    # ------------------------------------------------------------------ snapshot

    def to_document(self) -> dict[str, Any]:
        """The whole state as JSON-ready data (objects are shared, not copied)."""
        return {
            "format": SNAPSHOT_FORMAT,
            "lastSequence": self._last_sequence,
            "lastFindingSequence": self._last_finding_sequence,
            "findingsPrunedAt": (
                self._findings_pruned_at.isoformat() if self._findings_pruned_at else None
            ),
            "findings": [f.to_document() for _, f in sorted(self._findings.items())],
            "lastScaleSequence": self._last_scale_sequence,
            "scaleRequests": [r.to_document() for _, r in sorted(self._scale_requests.items())],
            "objects": [
                {
                    "type": key.type,
                    "uid": key.uid,
                    "resourceVersion": entry.resource_version,
                    "sequence": entry.sequence,
                    "object": entry.object,
                }
                for key, entry in sorted(self._live.items(), key=lambda item: item[0])
            ],
            # In deletion order: the oldest are forgotten first.
            "tombstones": [
                {
                    "type": key.type,
                    "uid": key.uid,
                    "resourceVersion": tombstone.resource_version,
                    "sequence": tombstone.sequence,
                }
                for key, tombstone in self._tombstones.items()
            ],
        }

    def snapshot(self) -> bytes:
        """Canonical JSON of :meth:`to_document`: equal projections give equal bytes."""
        return canonical_json(self.to_document()).encode()

    @classmethod
    def from_document(
        cls,
        document: Mapping[str, Any],
        *,
        tombstone_retention: int = DEFAULT_TOMBSTONE_RETENTION,
    ) -> Projection:
        if not isinstance(document, Mapping) or document.get("format") != SNAPSHOT_FORMAT:
            raise SnapshotFormatError(f"not a projection snapshot of format {SNAPSHOT_FORMAT}")
        projection = cls(tombstone_retention=tombstone_retention)
        try:
            projection._last_sequence = int(document["lastSequence"])
            projection._last_finding_sequence = int(document.get("lastFindingSequence") or 0)
            for item in document.get("findings") or ():
                found = WorkloadFinding.from_document(item)
                projection._findings[found.uid] = found
            pruned = document.get("findingsPrunedAt")
            projection._findings_pruned_at = datetime.fromisoformat(pruned) if pruned else None
            projection._findings_view = MappingProxyType(dict(projection._findings))
            projection._last_scale_sequence = int(document.get("lastScaleSequence") or 0)
            for item in document.get("scaleRequests") or ():
                request = ScaleRequest.from_document(item)
                projection._scale_requests[request.uid] = request
            projection._scale_requests_view = MappingProxyType(dict(projection._scale_requests))
            for item in document["objects"]:
                projection._restore_object(item)
            for item in document["tombstones"]:
                key = ObjectKey(type=str(item["type"]), uid=str(item["uid"]))
                projection._tombstones[key] = _Tombstone(
                    resource_version=str(item["resourceVersion"]),
                    sequence=int(item["sequence"]),
                )
        except (KeyError, TypeError, ValueError) as error:
            raise SnapshotFormatError(f"projection snapshot is malformed: {error!r}") from error
        projection._changed(FINDINGS)
        projection._changed(SCALE_REQUESTS)
        return projection

    def _restore_object(self, item: Mapping[str, Any]) -> None:
        key = ObjectKey(type=str(item["type"]), uid=str(item["uid"]))
        api_version, _, kind = key.type.rpartition("/")
        obj = dict(item["object"])
        entry = Entry.of(
            obj,
            api_version=api_version,
            kind=kind,
            uid=key.uid,
            resource_version=str(item["resourceVersion"]),
            sequence=int(item["sequence"]),
            stored=self._stored_form(obj),
        )
        self._file(key, entry)

    @classmethod
    def restore(
        cls, data: bytes, *, tombstone_retention: int = DEFAULT_TOMBSTONE_RETENTION
    ) -> Projection:
        """The projection :meth:`snapshot` wrote; raises :class:`SnapshotFormatError`."""
        try:
            document = json.loads(data)
        except ValueError as error:
            raise SnapshotFormatError(f"projection snapshot is not JSON: {error}") from error
        return cls.from_document(document, tombstone_retention=tombstone_retention)


def _at_version(stored: Mapping[str, Any], version: str) -> dict[str, Any]:
    """A stored object at another resourceVersion, everything else shared with it."""
    if len(version) <= _INTERNED_UP_TO:
        version = sys.intern(version)
    return {**stored, "metadata": {**stored["metadata"], "resourceVersion": version}}


def _same_content(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """``new`` is ``old`` but for ``metadata.resourceVersion`` (both without
    ``managedFields``)."""
    if old.keys() != new.keys():
        return False
    for key, value in old.items():
        if key == "metadata" and isinstance(value, Mapping):
            other = new[key]
            if not isinstance(other, Mapping) or not _same_but_key(value, other, "resourceVersion"):
                return False
        elif value != new[key]:
            return False
    return True


def _same_but_key(old: Mapping[str, Any], new: Mapping[str, Any], ignored: str) -> bool:
    if old.keys() != new.keys():
        return False
    return all(key == ignored or value == new[key] for key, value in old.items())


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
