"""The fake cluster's state and the API server's write rules, behind one object.

Every write commits through :class:`~kaiwo_kubefake.object_table.ObjectTable`, which bumps the
one global resourceVersion and hands the change to the
:class:`~kaiwo_kubefake.watching.ChangeFeed` (a bounded history for watch resumption, and the
watchers). A write that changes nothing commits nothing: no new resourceVersion, no event,
as on the real API server. What a write may do is :mod:`kaiwo_kubefake.object_rules`;
creation and updates are :mod:`kaiwo_kubefake.write_path`; deletion, finalizers and garbage
collection are :mod:`kaiwo_kubefake.lifecycle`.

Methods raise :class:`~kaiwo_kubefake.errors.ApiError` with the code and Status the real server
would answer with. Objects go in and out as deep copies.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kaiwo_kubefake.kinds import CRD_KIND, KindRegistry, ResourceKind
from kaiwo_kubefake.lifecycle import ObjectLifecycle
from kaiwo_kubefake.object_rules import NO_PRECONDITIONS, Preconditions, parse_resource_version
from kaiwo_kubefake.object_table import ObjectKey, ObjectTable
from kaiwo_kubefake.selectors import FieldSelector, LabelSelector
from kaiwo_kubefake.watching import ChangeFeed, Watcher
from kaiwo_kubefake.write_path import WritePath

__all__ = [
    "DEFAULT_NAMESPACES",
    "ObjectKey",
    "ObjectStore",
    "Preconditions",
    "timestamp",
    "utc_now",
]

_EVERYTHING = LabelSelector()
_ANY_FIELDS = FieldSelector()
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def utc_now() -> datetime:
    return datetime.now(UTC)


def timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ObjectStore:
    """All objects of the fake cluster, with the API server's write rules."""

    def __init__(
        self,
        *,
        history_limit: int = 10_000,
        require_namespaces: bool = True,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.kinds = KindRegistry()
        self.feed = ChangeFeed(history_limit=history_limit)
        self.table = ObjectTable(
            kinds=self.kinds, feed=self.feed, require_namespaces=require_namespaces
        )
        self._clock = clock
        self._lifecycle = ObjectLifecycle(self.table, now=self._now)
        self._writes = WritePath(self.table, lifecycle=self._lifecycle, now=self._now)
        self.write_requests: Counter[tuple[str, str, str, str]] = Counter()
        self.changes = self.table.changes
        namespaces = self.kinds.lookup(group="", version="v1", plural="namespaces")
        assert namespaces is not None
        for name in DEFAULT_NAMESPACES:
            self.create(namespaces, namespace=None, body={"metadata": {"name": name}})

    # ------------------------------------------------------------------ bookkeeping

    @property
    def resource_version(self) -> int:
        return self.table.resource_version

    def compact(self) -> None:
        """Forget the whole change history: older resourceVersions now answer 410 Gone."""
        self.feed.compact(through=self.table.resource_version)

    def count_write_request(self, kind: ResourceKind, namespace: str | None, name: str) -> None:
        self.write_requests[(kind.group, kind.plural, namespace or "", name)] += 1

    def _now(self) -> str:
        return timestamp(self._clock())

    # ------------------------------------------------------------------ reads

    def get(self, kind: ResourceKind, *, namespace: str | None, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.table.live(kind, namespace, name))

    def find(
        self, kind: ResourceKind, *, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        return self.table.find(kind, namespace=namespace, name=name)

    def list_objects(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        labels: LabelSelector = _EVERYTHING,
        fields: FieldSelector = _ANY_FIELDS,
    ) -> tuple[list[dict[str, Any]], int]:
        """Matching objects in (namespace, name) order, and the list's resourceVersion."""
        return self.table.list_objects(kind, namespace=namespace, labels=labels, fields=fields)

    def watch(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        resource_version: str | None,
    ) -> Watcher:
        """Subscribe; events after ``resource_version`` are queued first.

        No version (or "0") starts with an ADDED event per existing object, as the real server
        does. A version older than the kept history raises 410 Gone. ``feed.unwatch`` ends it.
        """
        watcher = Watcher(
            kind_key=kind.key,
            namespace=namespace if kind.namespaced else None,
            labels=labels,
            fields=fields,
        )
        if resource_version in (None, "", "0"):
            items, _ = self.list_objects(
                kind, namespace=watcher.namespace, labels=labels, fields=fields
            )
            for item in items:
                watcher.queue.put_nowait(("ADDED", item))
            self.feed.open(watcher)
        else:
            self.feed.resume(watcher, since=parse_resource_version(resource_version))
        return watcher

    # ------------------------------------------------------------------ writes

    def create(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        body: dict[str, Any],
        manager: str = "unknown",
    ) -> dict[str, Any]:
        return self._writes.create(kind, namespace=namespace, body=body, manager=manager)

    def replace(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        name: str,
        body: dict[str, Any],
        manager: str = "unknown",
        subresource: str = "",
    ) -> dict[str, Any]:
        return self._writes.replace(
            kind,
            namespace=namespace,
            name=name,
            body=body,
            manager=manager,
            subresource=subresource,
        )

    def patch(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        name: str,
        content_type: str,
        body: Any,
        manager: str | None,
        force: bool = False,
        subresource: str = "",
    ) -> dict[str, Any]:
        return self._writes.patch(
            kind,
            namespace=namespace,
            name=name,
            content_type=content_type,
            body=body,
            manager=manager,
            force=force,
            subresource=subresource,
        )

    def delete(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        name: str,
        propagation: str | None = None,
        preconditions: Preconditions = NO_PRECONDITIONS,
    ) -> dict[str, Any]:
        """Delete now, or mark for deletion when finalizers remain (returns the object)."""
        return self._lifecycle.delete(
            kind,
            namespace=namespace,
            name=name,
            propagation=propagation,
            preconditions=preconditions,
        )

    def delete_collection(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        propagation: str | None = None,
    ) -> list[dict[str, Any]]:
        items, _ = self.list_objects(kind, namespace=namespace, labels=labels, fields=fields)
        return [
            self.delete(
                kind,
                namespace=item["metadata"].get("namespace"),
                name=item["metadata"]["name"],
                propagation=propagation,
            )
            for item in items
        ]

    # ------------------------------------------------------------------ custom resources

    def register_crd(self, crd: dict[str, Any]) -> dict[str, Any]:
        """Create (or update) a CustomResourceDefinition as a client would; its kinds get served."""
        name = (crd.get("metadata") or {}).get("name", "")
        if self.find(CRD_KIND, namespace=None, name=name) is None:
            return self.create(CRD_KIND, namespace=None, body=crd, manager="kaiwo-kubefake")
        live = self.table.live(CRD_KIND, None, name)
        body = {**copy.deepcopy(crd), "metadata": {**crd.get("metadata", {}), "name": name}}
        body["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
        return self.replace(
            CRD_KIND, namespace=None, name=name, body=body, manager="kaiwo-kubefake"
        )

    # ------------------------------------------------------------------ test conveniences

    def put(self, kind: ResourceKind, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` as given (status included), creating or overwriting; tests use this to
        play the part of other controllers. Server fields are filled in; watchers are told."""
        return self._writes.put(kind, obj)

    def set_status(
        self, kind: ResourceKind, *, namespace: str | None, name: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        """Replace an object's status as its controller would (e.g. a Job's ``succeeded``)."""
        live = self.get(kind, namespace=namespace, name=name)
        return self.put(kind, {**live, "status": copy.deepcopy(status)})
