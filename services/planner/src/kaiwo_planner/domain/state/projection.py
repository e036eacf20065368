"""The planner's projection: the latest version of every observed object, built from events.

Three parts, each its own module: the observed objects with their tombstones
(:class:`~kaiwo_planner.domain.state.observed_objects.ObservedObjects`: which observation is
news, level-triggered), the monitor's latest finding per workload and the autoscaler's latest
decision per Model (:class:`~kaiwo_planner.domain.state.latest_readings.LatestReadings`).
The projection counts their changes, by kind, for the planning context.

:meth:`Projection.cluster_state` is what the pure planners read: a plain immutable
:class:`ClusterState`. The projection files objects in a persistent
:class:`~kaiwo_planner.domain.state.object_index.ObjectIndex` as they arrive (children by
owner uid, Kueue Workloads by job uid, the indexed labels, the listed kinds), so a state is
made in O(1) per change, shares everything unchanged with the previous one, and stays valid
after the projection has moved on.

Objects are kept in their stored form (:mod:`~kaiwo_planner.domain.state.stored_form`:
without ``managedFields``, a Kueue Workload's pod templates but their containers'
resources and a Node's images, strings shared unless ``share_strings=False``).

Pure: no I/O, no clock. :meth:`Projection.snapshot` / :meth:`Projection.restore` turn the
whole state (objects, tombstones, sequence) into canonical JSON bytes and back, exactly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final

from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.plans import ObjectRef, canonical_json_bytes

from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.index_entry import LISTED_KINDS, Kind, api_group_of, object_identity
from kaiwo_planner.domain.state.latest_readings import LatestReadings
from kaiwo_planner.domain.state.manifest_comparison import carries
from kaiwo_planner.domain.state.object_index import NotIndexedError
from kaiwo_planner.domain.state.observed_objects import Change, ObservedObjects
from kaiwo_planner.domain.state.planning_context import FINDINGS, SCALE_REQUESTS
from kaiwo_planner.domain.state.scale_request import SCALE_REQUEST_RETENTION, ScaleRequest
from kaiwo_planner.domain.state.workload_finding import WorkloadFinding

SNAPSHOT_FORMAT: Final = 1
DEFAULT_TOMBSTONE_RETENTION: Final = 100_000
FINDING_RETENTION: Final = timedelta(hours=1)
"""A workload's finding not renewed for this long (by later findings' times) is forgotten."""
FINDING_PRUNE_EVERY: Final = timedelta(minutes=1)
"""Forgotten findings are looked for at most this often (by the findings' own times)."""


class SnapshotFormatError(ValueError):
    """The bytes given to :meth:`Projection.restore` are not a projection snapshot."""


class Projection:
    """The latest observed version of every object, filed for the planners' questions.

    ``objects``, ``findings`` and ``scale_requests`` are its parts, to read; change them only
    through the projection (:meth:`apply`, :meth:`apply_finding`, :meth:`apply_scale_request`),
    which counts the change.
    """

    def __init__(
        self,
        *,
        tombstone_retention: int = DEFAULT_TOMBSTONE_RETENTION,
        share_strings: bool = True,
    ) -> None:
        """``share_strings=False`` keeps each observed object as given (still in its
        ``projected_form``): for a short-lived projection, such as replay's, whose observations
        are held in memory anyway, where copying them to share strings only costs time."""
        if tombstone_retention < 1:
            raise ValueError("tombstone_retention must be >= 1")
        self._retention = tombstone_retention
        self.objects: Final = ObservedObjects(
            retention=tombstone_retention, share_strings=share_strings
        )
        self.findings: Final = LatestReadings[WorkloadFinding](
            retention=FINDING_RETENTION, prune_every=FINDING_PRUNE_EVERY
        )
        self.scale_requests: Final = LatestReadings[ScaleRequest](retention=SCALE_REQUEST_RETENTION)
        self._version = 0
        self._state: ClusterState | None = None
        self._kind_versions: dict[Kind, int] = {}
        """The version at which objects of each kind last changed (findings: FINDINGS)."""

    # ------------------------------------------------------------------ changing

    @property
    def last_sequence(self) -> int:
        """The highest observation stream sequence given to :meth:`apply` (accepted or not)."""
        return self.objects.last_sequence

    def apply(self, observed: ObservedObjectV1, *, sequence: int) -> Change | None:
        """Take in one observation; None when it is stale or a duplicate
        (:meth:`ObservedObjects.apply`). :attr:`last_sequence` advances whether or not the
        observation changes anything."""
        change = self.objects.apply(observed, sequence=sequence)
        if change is not None:
            self._changed((api_group_of(observed.api_version), observed.kind))
        return change

    def fast_forward(self, observations: Sequence[tuple[int, ObservedObjectV1]]) -> None:
        """Take in ``observations`` (in sequence order) as :meth:`apply` would one by one, to
        the same objects, tombstones and sequence, filing each object once
        (:meth:`ObservedObjects.fast_forward`): what a replay does between two plans, most
        of all one that starts far into a store (a replay process, one workload's).

        :attr:`version` counts fewer changes: it is for the planning contexts, and no context
        can have seen a state between two of ``observations``."""
        for kind in self.objects.fast_forward(observations):
            self._changed(kind)

    def pass_over(self, sequence: int) -> None:
        """Count observation ``sequence`` as read without taking it in, as :meth:`apply` would
        count it (it changes nothing: ``objects.holds_version``)."""
        self.objects.pass_over(sequence)

    def apply_finding(self, finding: WorkloadFinding, *, sequence: int) -> bool:
        """Keep ``finding`` as its workload's latest (an older one is dropped); returns
        whether planning may come out differently. Findings not renewed for
        :data:`FINDING_RETENTION` (by the findings' own times, looked for every
        :data:`FINDING_PRUNE_EVERY`) are forgotten, so workloads that went away do not pile
        up; this depends on the findings alone, so replay forgets the same ones."""
        decides = self.findings.take(finding, sequence=sequence)
        if decides is None:
            return False
        self._changed(FINDINGS)
        return decides

    def apply_scale_request(self, request: ScaleRequest, *, sequence: int) -> bool:
        """Keep ``request`` as its Model's latest decision (an older one is dropped); returns
        whether planning may come out differently. Decisions not followed by a newer one of
        any Model for :data:`SCALE_REQUEST_RETENTION` (by their own times) are forgotten, as
        findings are, so replay forgets the same ones."""
        decides = self.scale_requests.take(request, sequence=sequence)
        if decides is None:
            return False
        self._changed(SCALE_REQUESTS)
        return decides

    @property
    def version(self) -> int:
        """Counts the changes to the projection (observations and findings taken in)."""
        return self._version

    def kinds_changed_since(self, version: int) -> frozenset[Kind]:
        """The (API group, kind) pairs, and :data:`FINDINGS`, changed after ``version``."""
        return frozenset(kind for kind, at in self._kind_versions.items() if at > version)

    def _changed(self, kind: Kind) -> None:
        self._version += 1
        self._kind_versions[kind] = self._version
        self._state = None

    # ------------------------------------------------------------------ reading

    def __len__(self) -> int:
        return len(self.objects)

    def by_uid(self, uid: str) -> Mapping[str, Any] | None:
        entry = self.objects.index.entry(uid)
        return entry.object if entry is not None else None

    def find(
        self, *, group: str, kind: str, name: str, namespace: str | None = None
    ) -> Mapping[str, Any] | None:
        entry = self.objects.index.newest((group, kind, namespace or "", name))
        return entry.object if entry is not None else None

    def objects_of_kind(
        self, *, group: str, kind: str, namespace: str | None = None
    ) -> tuple[Mapping[str, Any], ...]:
        """Live objects of one listed kind (optionally in one namespace), in sort order."""
        if (group, kind) not in LISTED_KINDS:
            raise NotIndexedError(f"objects of {group or 'core'}/{kind} are not listed")
        objects = self.objects.index.of_kind(group, kind)
        if namespace is None:
            return objects
        return tuple(o for o in objects if (o.get("metadata") or {}).get("namespace") == namespace)

    def missing(self, manifests: Iterable[Mapping[str, Any]]) -> tuple[ObjectRef, ...]:
        """Refs (without uid) of the ``manifests`` not observed, sorted; e.g. a plan's desired.

        Asked after every plan, and most desired objects exist: only the absent ones are
        turned into refs (a validated model each).
        """
        index = self.objects.index
        absent = (m for m in manifests if index.newest(object_identity(m)) is None)
        refs = (ObjectRef.of(manifest).model_copy(update={"uid": None}) for manifest in absent)
        return tuple(sorted(refs, key=ObjectRef.sort_key))

    def drifted(
        self, manifests: Iterable[Mapping[str, Any]], *, ours_too: bool = False
    ) -> tuple[ObjectRef, ...]:
        """Refs (without uid) of the ``manifests`` observed without what they ask for, sorted.

        An object changed by hand (a Job's ``parallelism``, a ConfigMap's data) shows here
        until the executor applies the manifest again. Server-side defaults, canonical
        quantities and fields others added do not count (:func:`manifest_comparison.contains`);
        but a Kueue object's atomic field (a ClusterQueue's ``resourceGroups``, its
        ``namespaceSelector``) must be exactly as asked, since the apply sets it whole
        (:func:`manifest_comparison.carries`, decision 0226).

        Nor, unless ``ours_too``, does an object the operator itself wrote last: that is an
        older version of ours whose update is still on its way back (the plan changed, the
        executor applied it, the observation has not come yet). A resync counts those too, as
        an apply that failed for good leaves the object so.
        """
        drifted = []
        for manifest in manifests:
            entry = self.objects.index.newest(object_identity(manifest))
            if entry is None:
                continue
            if (ours_too or not entry.written_last_by_operator) and not carries(
                entry.object, manifest
            ):
                drifted.append(ObjectRef.of(manifest).model_copy(update={"uid": None}))
        return tuple(sorted(drifted, key=ObjectRef.sort_key))

    def cluster_state(self) -> ClusterState:
        """The cluster as observed, for the planners: an immutable value."""
        if self._state is None:
            self._state = ClusterState(
                nodes=self.objects.nodes,
                namespaces=self.objects.namespaces,
                findings=self.findings.view,
                scale_requests=self.scale_requests.view,
                index=self.objects.index,
            )
        return self._state

    # ------------------------------------------------------------------ snapshot

    def to_document(self) -> dict[str, Any]:
        """The whole state as JSON-ready data (objects are shared, not copied)."""
        pruned_at = self.findings.pruned_at
        objects, tombstones = self.objects.documents()
        return {
            "format": SNAPSHOT_FORMAT,
            "lastSequence": self.objects.last_sequence,
            "lastFindingSequence": self.findings.last_sequence,
            "findingsPrunedAt": pruned_at.isoformat() if pruned_at else None,
            "findings": self.findings.documents(),
            "lastScaleSequence": self.scale_requests.last_sequence,
            "scaleRequests": self.scale_requests.documents(),
            "objects": objects,
            "tombstones": tombstones,
        }

    def snapshot(self) -> bytes:
        """Canonical JSON of :meth:`to_document`: equal projections give equal bytes."""
        return canonical_json_bytes(self.to_document())

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
            pruned = document.get("findingsPrunedAt")
            projection.findings.restore(
                [WorkloadFinding.from_document(item) for item in document.get("findings") or ()],
                last_sequence=int(document.get("lastFindingSequence") or 0),
                pruned_at=datetime.fromisoformat(pruned) if pruned else None,
            )
            projection.scale_requests.restore(
                [ScaleRequest.from_document(item) for item in document.get("scaleRequests") or ()],
                last_sequence=int(document.get("lastScaleSequence") or 0),
            )
            projection.objects.restore(
                last_sequence=int(document["lastSequence"]),
                objects=document["objects"],
                tombstones=document["tombstones"],
            )
        except (KeyError, TypeError, ValueError) as error:
            raise SnapshotFormatError(f"projection snapshot is malformed: {error!r}") from error
        projection._changed(FINDINGS)
        projection._changed(SCALE_REQUESTS)
        return projection

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
