"""The stored objects of the fake cluster and the one global resourceVersion.

Every write goes through :meth:`ObjectTable.commit`, which bumps the resourceVersion, stores
(or removes) the object and hands the change to the :class:`~kaiwo_kubefake.watching.ChangeFeed`
(history and watchers). A CustomResourceDefinition's kinds are served from the table's
:class:`~kaiwo_kubefake.kinds.KindRegistry` once it is stored, and dropped with its objects
when it is deleted.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

from kaiwo_kubefake import errors
from kaiwo_kubefake.custom_resources import read_back
from kaiwo_kubefake.kinds import KindRegistry, ResourceKind, kinds_from_crd
from kaiwo_kubefake.object_rules import NAMESPACES, meta, storage_only
from kaiwo_kubefake.selectors import FieldSelector, LabelSelector
from kaiwo_kubefake.watching import Change, ChangeFeed

ObjectKey = tuple[str, str]  # (namespace or "", name)
_EVERYTHING = LabelSelector()
_ANY_FIELDS = FieldSelector()


class ObjectTable:
    def __init__(self, *, kinds: KindRegistry, feed: ChangeFeed, require_namespaces: bool) -> None:
        self.kinds = kinds
        self.feed = feed
        self._objects: dict[tuple[str, str], dict[ObjectKey, dict[str, Any]]] = {}
        # As etcd's: revision 1 is the empty store, so the first object written has "2", and
        # "1" (the version an apply that must only create names) is no object's.
        self._resource_version = 1
        self._require_namespaces = require_namespaces
        self.changes: Counter[tuple[str, str, str, str]] = Counter()

    @property
    def resource_version(self) -> int:
        return self._resource_version

    def bucket(self, kind: ResourceKind) -> dict[ObjectKey, dict[str, Any]]:
        return self._objects.setdefault(kind.key, {})

    def key(self, kind: ResourceKind, namespace: str | None, name: str) -> ObjectKey:
        return ((namespace or "") if kind.namespaced else "", name)

    def live(self, kind: ResourceKind, namespace: str | None, name: str) -> dict[str, Any]:
        """The stored object itself (not a copy); 404 when there is none."""
        found = self.bucket(kind).get(self.key(kind, namespace, name))
        if found is None:
            raise errors.not_found(name=name, group=kind.group, plural=kind.plural)
        return found

    def find(
        self, kind: ResourceKind, *, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        found = self.bucket(kind).get(self.key(kind, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def list_objects(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        labels: LabelSelector = _EVERYTHING,
        fields: FieldSelector = _ANY_FIELDS,
    ) -> tuple[list[dict[str, Any]], int]:
        """Matching objects in (namespace, name) order, and the list's resourceVersion."""
        items = []
        for (object_namespace, _), obj in sorted(self.bucket(kind).items()):
            if kind.namespaced and namespace is not None and object_namespace != namespace:
                continue
            metadata = obj.get("metadata") or {}
            if labels.matches(metadata.get("labels")) and fields.matches(obj):
                items.append(copy.deepcopy(obj))
        return items, self._resource_version

    def commit(
        self,
        kind: ResourceKind,
        *,
        change_type: str,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
    ) -> dict[str, Any]:
        self._resource_version += 1
        metadata = meta(obj)
        metadata["resourceVersion"] = str(self._resource_version)
        key = self.key(kind, metadata.get("namespace"), metadata["name"])
        if change_type == "DELETED":
            self.bucket(kind).pop(key, None)
        else:
            self.bucket(kind)[key] = obj
        self.feed.record(
            Change(
                resource_version=self._resource_version,
                type=change_type,
                kind_key=kind.key,
                obj=copy.deepcopy(obj),
                old=copy.deepcopy(old) if old is not None else None,
            )
        )
        self.changes[(kind.group, kind.plural, key[0], key[1])] += 1
        return copy.deepcopy(obj)

    def check_namespace(self, kind: ResourceKind, namespace: str | None) -> None:
        """A namespaced object needs a namespace, and (unless not required) one that exists."""
        if not kind.namespaced:
            return
        if not namespace:
            raise errors.bad_request("the server could not find the requested resource")
        if self._require_namespaces and (self.bucket(NAMESPACES).get(("", namespace)) is None):
            raise errors.not_found(name=namespace, group="", plural="namespaces")

    def storage_kinds(self) -> list[ResourceKind]:
        """One served kind per stored (group, plural), for walks over every object."""
        chosen: dict[tuple[str, str], ResourceKind] = {}
        for kind in self.kinds:
            chosen.setdefault(kind.key, kind)
        return list(chosen.values())

    def serve_crd(self, crd: dict[str, Any]) -> None:
        spec = crd.get("spec") or {}
        kinds = kinds_from_crd(crd)
        self.kinds.replace(group=spec["group"], plural=spec["names"]["plural"], kinds=kinds)
        # The real server prunes and defaults objects as it reads them from storage, so a
        # changed schema shows at once, with no new resourceVersion and no watch event.
        storage = next((served for served in kinds if served.storage_version), None)
        if storage is not None and storage.schema is not None:
            bucket = self.bucket(storage)
            for key, obj in bucket.items():
                bucket[key] = read_back(storage, obj)

    def drop_crd(self, crd: dict[str, Any]) -> None:
        spec = crd.get("spec") or {}
        group, plural = spec.get("group", ""), (spec.get("names") or {}).get("plural", "")
        for key, obj in list(self._objects.get((group, plural), {}).items()):
            self.commit(
                storage_only(group, plural, namespaced=bool(key[0])),
                change_type="DELETED",
                obj=copy.deepcopy(obj),
                old=obj,
            )
        self._objects.pop((group, plural), None)
        self.kinds.unregister(group=group, plural=plural)
