"""The fake cluster's state: objects, the global resourceVersion, history, watchers.

Every write goes through :meth:`ObjectStore._commit`, which bumps the one global
resourceVersion, records the change in a bounded history (for watch resumption) and hands it to
the watchers. A write that changes nothing commits nothing: no new resourceVersion, no event,
as on the real API server.

Methods raise :class:`~kaiwo_kubefake.errors.ApiError` with the code and Status the real server
would answer with. Objects go in and out as deep copies.
"""

from __future__ import annotations

import copy
import re
import secrets
import uuid
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kaiwo_kubefake import errors
from kaiwo_kubefake.custom_resources import check_apply_configuration, conform, read_back
from kaiwo_kubefake.kinds import CRD_KIND, KindRegistry, ResourceKind, kinds_from_crd
from kaiwo_kubefake.ownership import (
    Ownership,
    canonical,
    read_ownership,
    record_update,
    server_side_apply,
    write_ownership,
)
from kaiwo_kubefake.patching import APPLY_PATCH, apply_patch
from kaiwo_kubefake.pod_validation import check_container_resources
from kaiwo_kubefake.selectors import FieldSelector, LabelSelector
from kaiwo_kubefake.watching import Change, Watcher

ObjectKey = tuple[str, str]  # (namespace or "", name)
_EVERYTHING = LabelSelector()
_ANY_FIELDS = FieldSelector()
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_MODIFIED_MESSAGE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def utc_now() -> datetime:
    return datetime.now(UTC)


def timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Preconditions:
    uid: str | None = None
    resource_version: str | None = None


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
        obj["metadata"] = metadata
    return metadata


def _without(obj: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in keys}


def _content(obj: dict[str, Any]) -> str:
    """The object minus what the server maintains, for no-op detection."""
    metadata = _without(obj.get("metadata") or {}, "resourceVersion", "generation")
    if "managedFields" in metadata:
        metadata["managedFields"] = [_without(entry, "time") for entry in metadata["managedFields"]]
    return canonical({**obj, "metadata": metadata})


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
        self._objects: dict[tuple[str, str], dict[ObjectKey, dict[str, Any]]] = {}
        self._resource_version = 0
        self._history: deque[Change] = deque()
        self._history_limit = history_limit
        self._compacted_through = 0
        self._watchers: set[Watcher] = set()
        self._pending_propagation: dict[str, str] = {}
        self._require_namespaces = require_namespaces
        self._clock = clock
        self.write_requests: Counter[tuple[str, str, str, str]] = Counter()
        self.changes: Counter[tuple[str, str, str, str]] = Counter()
        namespaces = self.kinds.lookup(group="", version="v1", plural="namespaces")
        assert namespaces is not None
        for name in DEFAULT_NAMESPACES:
            self.create(namespaces, namespace=None, body={"metadata": {"name": name}})

    # ------------------------------------------------------------------ bookkeeping

    @property
    def resource_version(self) -> int:
        return self._resource_version

    @property
    def compacted_through(self) -> int:
        return self._compacted_through

    def compact(self) -> None:
        """Forget the whole change history: older resourceVersions now answer 410 Gone."""
        self._history.clear()
        self._compacted_through = self._resource_version

    def count_write_request(self, kind: ResourceKind, namespace: str | None, name: str) -> None:
        self.write_requests[(kind.group, kind.plural, namespace or "", name)] += 1

    def _bucket(self, kind: ResourceKind) -> dict[ObjectKey, dict[str, Any]]:
        return self._objects.setdefault(kind.key, {})

    def _key(self, kind: ResourceKind, namespace: str | None, name: str) -> ObjectKey:
        return ((namespace or "") if kind.namespaced else "", name)

    def _now(self) -> str:
        return timestamp(self._clock())

    def _commit(
        self,
        kind: ResourceKind,
        *,
        change_type: str,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
    ) -> dict[str, Any]:
        self._resource_version += 1
        metadata = _meta(obj)
        metadata["resourceVersion"] = str(self._resource_version)
        key = self._key(kind, metadata.get("namespace"), metadata["name"])
        if change_type == "DELETED":
            self._bucket(kind).pop(key, None)
        else:
            self._bucket(kind)[key] = obj
        change = Change(
            resource_version=self._resource_version,
            type=change_type,
            kind_key=kind.key,
            obj=copy.deepcopy(obj),
            old=copy.deepcopy(old) if old is not None else None,
        )
        self._history.append(change)
        while len(self._history) > self._history_limit:
            self._compacted_through = self._history.popleft().resource_version
        for watcher in list(self._watchers):
            watcher.offer(change)
        self.changes[(kind.group, kind.plural, key[0], key[1])] += 1
        return copy.deepcopy(obj)

    # ------------------------------------------------------------------ reads

    def _live(self, kind: ResourceKind, namespace: str | None, name: str) -> dict[str, Any]:
        found = self._bucket(kind).get(self._key(kind, namespace, name))
        if found is None:
            raise errors.not_found(name=name, group=kind.group, plural=kind.plural)
        return found

    def get(self, kind: ResourceKind, *, namespace: str | None, name: str) -> dict[str, Any]:
        return copy.deepcopy(self._live(kind, namespace, name))

    def find(
        self, kind: ResourceKind, *, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        found = self._bucket(kind).get(self._key(kind, namespace, name))
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
        for (object_namespace, _), obj in sorted(self._bucket(kind).items()):
            if kind.namespaced and namespace is not None and object_namespace != namespace:
                continue
            metadata = obj.get("metadata") or {}
            if labels.matches(metadata.get("labels")) and fields.matches(obj):
                items.append(copy.deepcopy(obj))
        return items, self._resource_version

    # ------------------------------------------------------------------ watch

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
        does. A version older than the kept history raises 410 Gone.
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
        else:
            since = _parse_resource_version(resource_version)
            if since < self._compacted_through:
                raise errors.gone(f"too old resource version: {since} ({self._compacted_through})")
            for change in self._history:
                if change.resource_version > since:
                    watcher.offer(change)
        self._watchers.add(watcher)
        return watcher

    @property
    def open_watches(self) -> int:
        return len(self._watchers)

    def unwatch(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)

    def close_watches(self) -> None:
        for watcher in list(self._watchers):
            watcher.close()
        self._watchers.clear()

    # ------------------------------------------------------------------ create

    def _check_namespace(self, kind: ResourceKind, namespace: str | None) -> None:
        if not kind.namespaced:
            return
        if not namespace:
            raise errors.bad_request("the server could not find the requested resource")
        if self._require_namespaces and (self._bucket(_NAMESPACES).get(("", namespace)) is None):
            raise errors.not_found(name=namespace, group="", plural="namespaces")

    def _prepare_new(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        body: dict[str, Any],
        applied: bool = False,
    ) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.bad_request("the body must be a JSON object")
        obj = copy.deepcopy(body)
        metadata = _meta(obj)
        if obj.get("kind") not in (None, "", kind.kind):
            raise errors.bad_request(
                f"the kind {obj.get('kind')!r} does not match the resource {kind.plural}"
            )
        obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
        body_namespace = metadata.get("namespace")
        if kind.namespaced:
            if body_namespace and namespace and body_namespace != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            namespace = namespace or body_namespace
            self._check_namespace(kind, namespace)
            metadata["namespace"] = namespace
        else:
            metadata.pop("namespace", None)
        if not metadata.get("name") and metadata.get("generateName"):
            metadata["name"] = metadata["generateName"] + secrets.token_hex(3)[:5]
        self._validate_name(kind, metadata.get("name"))
        check_container_resources(kind, obj)
        for server_field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            metadata.pop(server_field, None)
        metadata["uid"] = str(uuid.uuid4())
        metadata["creationTimestamp"] = self._now()
        if kind.has_generation:
            metadata["generation"] = 1
        else:
            metadata.pop("generation", None)
        if kind.status_subresource:
            obj.pop("status", None)
        self._default_fields(kind, obj)
        return conform(kind, obj, applied=applied)

    def _validate_name(self, kind: ResourceKind, name: Any) -> None:
        if not name:
            raise errors.invalid(
                name="",
                group=kind.group,
                kind=kind.kind,
                causes=[
                    ("FieldValueRequired", "metadata.name", "name or generateName is required")
                ],
            )
        if not isinstance(name, str) or len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
            raise errors.invalid(
                name=str(name),
                group=kind.group,
                kind=kind.kind,
                causes=[
                    (
                        "FieldValueInvalid",
                        "metadata.name",
                        f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist '
                        "of lower case alphanumeric characters, '-' or '.'",
                    )
                ],
            )

    def _default_fields(self, kind: ResourceKind, obj: dict[str, Any]) -> None:
        """Fields the real server fills in on create for the kinds where tests see them."""
        if kind.key == _NAMESPACES.key:
            name = obj["metadata"]["name"]
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj["status"] = {"phase": "Active"}
        elif kind.key == CRD_KIND.key:
            obj["status"] = _crd_status(obj)

    def create(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        body: dict[str, Any],
        manager: str = "unknown",
    ) -> dict[str, Any]:
        obj = self._prepare_new(kind, namespace=namespace, body=body)
        metadata = obj["metadata"]
        if self._bucket(kind).get(self._key(kind, metadata.get("namespace"), metadata["name"])):
            raise errors.already_exists(name=metadata["name"], group=kind.group, plural=kind.plural)
        # The creator owns what it sent, not what the server defaulted; but a custom
        # resource's body is pruned and defaulted by its schema before ownership is taken.
        sent = conform(kind, body)
        ownership = record_update(
            old=None,
            new={**sent, "metadata": {**(sent.get("metadata") or {}), "name": metadata["name"]}},
            manager=manager,
            subresource="",
            status_subresource=kind.status_subresource,
        )
        write_ownership(obj, ownership, previous={}, now=self._now())
        created = self._commit(kind, change_type="ADDED", obj=obj, old=None)
        self._after_write(kind, created)
        return created

    # ------------------------------------------------------------------ update

    def _check_preconditions(
        self, kind: ResourceKind, live: dict[str, Any], preconditions: Preconditions
    ) -> None:
        metadata = live["metadata"]
        name = metadata["name"]
        if preconditions.uid and preconditions.uid != metadata.get("uid"):
            raise errors.conflict(
                name=name,
                group=kind.group,
                plural=kind.plural,
                why=f"Precondition failed: UID in precondition: {preconditions.uid}, "
                f"UID in object meta: {metadata.get('uid')}",
            )
        wanted = preconditions.resource_version
        if wanted and wanted != metadata.get("resourceVersion"):
            raise errors.conflict(
                name=name, group=kind.group, plural=kind.plural, why=_MODIFIED_MESSAGE
            )

    def _settle(
        self,
        kind: ResourceKind,
        *,
        live: dict[str, Any],
        candidate: dict[str, Any],
        subresource: str,
        ownership: Ownership,
    ) -> dict[str, Any]:
        """Turn a proposed new state into the stored one; commit it unless nothing changed."""
        if subresource == "status":
            new = copy.deepcopy(live)
            if "status" in candidate:
                new["status"] = copy.deepcopy(candidate["status"])
            else:
                new.pop("status", None)
        else:
            new = self._main_resource_update(kind, live=live, candidate=candidate)
        write_ownership(new, ownership, previous=read_ownership(live), now=self._now())
        new["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
        if _content(new) == _content(live):
            return copy.deepcopy(live)
        if kind.has_generation and _spec_changed(kind, live, new):
            new["metadata"]["generation"] = int(live["metadata"].get("generation") or 0) + 1
        updated = self._commit(kind, change_type="MODIFIED", obj=new, old=live)
        self._after_write(kind, updated)
        return (
            self.find(
                kind,
                namespace=updated["metadata"].get("namespace"),
                name=updated["metadata"]["name"],
            )
            or updated
        )

    def _main_resource_update(
        self, kind: ResourceKind, *, live: dict[str, Any], candidate: dict[str, Any]
    ) -> dict[str, Any]:
        """The candidate with identity, deletion marks and (if a subresource) status kept."""
        new = copy.deepcopy(candidate)
        new["apiVersion"], new["kind"] = live["apiVersion"], live["kind"]
        metadata = _meta(new)
        for fixed in (
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ):
            if fixed in live["metadata"]:
                metadata[fixed] = live["metadata"][fixed]
            else:
                metadata.pop(fixed, None)
        if kind.status_subresource:
            if "status" in live:
                new["status"] = copy.deepcopy(live["status"])
            else:
                new.pop("status", None)
        if kind.key == CRD_KIND.key:
            new["status"] = _crd_status(new)
        self._check_finalizers(kind, live=live, new=new)
        check_container_resources(kind, new)
        return new

    def _check_finalizers(
        self, kind: ResourceKind, *, live: dict[str, Any], new: dict[str, Any]
    ) -> None:
        if "deletionTimestamp" not in live["metadata"]:
            return
        before = set(live["metadata"].get("finalizers") or [])
        added = set(new["metadata"].get("finalizers") or []) - before
        if added:
            raise errors.invalid(
                name=live["metadata"]["name"],
                group=kind.group,
                kind=kind.kind,
                causes=[
                    (
                        "FieldValueForbidden",
                        "metadata.finalizers",
                        "Forbidden: no new finalizers can be added if the object is being deleted",
                    )
                ],
            )

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
        if not isinstance(body, dict):
            raise errors.bad_request("the body must be a JSON object")
        body_name = (body.get("metadata") or {}).get("name")
        if body_name != name:
            raise errors.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        live = self._live(kind, namespace, name)
        self._check_preconditions(
            kind,
            live,
            Preconditions(
                uid=(body.get("metadata") or {}).get("uid"),
                resource_version=(body.get("metadata") or {}).get("resourceVersion"),
            ),
        )
        body = conform(kind, body)
        ownership = record_update(
            old=live,
            new=body,
            manager=manager,
            subresource=subresource,
            status_subresource=kind.status_subresource,
        )
        return self._settle(
            kind, live=live, candidate=body, subresource=subresource, ownership=ownership
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
        if content_type == APPLY_PATCH:
            return self._apply(
                kind,
                namespace=namespace,
                name=name,
                body=body,
                manager=manager,
                force=force,
                subresource=subresource,
            )
        live = self._live(kind, namespace, name)
        candidate = conform(kind, apply_patch(content_type=content_type, target=live, body=body))
        self._check_preconditions(
            kind,
            live,
            Preconditions(
                uid=(candidate.get("metadata") or {}).get("uid"),
                resource_version=(candidate.get("metadata") or {}).get("resourceVersion"),
            ),
        )
        ownership = record_update(
            old=live,
            new=candidate,
            manager=manager or "unknown",
            subresource=subresource,
            status_subresource=kind.status_subresource,
        )
        return self._settle(
            kind, live=live, candidate=candidate, subresource=subresource, ownership=ownership
        )

    def _apply(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        name: str,
        body: Any,
        manager: str | None,
        force: bool,
        subresource: str,
    ) -> dict[str, Any]:
        if not manager:
            raise errors.bad_request("PATCH, application/apply-patch+yaml requires fieldManager")
        if not isinstance(body, dict):
            raise errors.bad_request("an apply configuration must be an object")
        metadata = body.get("metadata") or {}
        if not body.get("apiVersion") or not body.get("kind"):
            raise errors.bad_request("an apply configuration needs apiVersion and kind")
        if metadata.get("name") != name:
            raise errors.bad_request(
                f"the name of the object ({metadata.get('name')}) does not match the name on "
                f"the URL ({name})"
            )
        check_apply_configuration(kind, body)
        live = self.find(kind, namespace=namespace, name=name)
        if live is None:
            if subresource:
                raise errors.not_found(name=name, group=kind.group, plural=kind.plural)
            merged = server_side_apply(
                live=None,
                applied=body,
                manager=manager,
                force=force,
                subresource="",
                status_subresource=kind.status_subresource,
            )
            obj = merged.obj
            obj["metadata"] = {**obj.get("metadata", {}), "name": name}
            if kind.namespaced and namespace:
                obj["metadata"]["namespace"] = namespace
            obj = self._prepare_new(kind, namespace=namespace, body=obj, applied=True)
            write_ownership(obj, merged.ownership, previous={}, now=self._now())
            created = self._commit(kind, change_type="ADDED", obj=obj, old=None)
            self._after_write(kind, created)
            return created
        self._check_preconditions(
            kind, live, Preconditions(resource_version=metadata.get("resourceVersion"))
        )
        merged = server_side_apply(
            live=live,
            applied=body,
            manager=manager,
            force=force,
            subresource=subresource,
            status_subresource=kind.status_subresource,
        )
        return self._settle(
            kind,
            live=live,
            candidate=conform(kind, merged.obj, applied=True),
            subresource=subresource,
            ownership=merged.ownership,
        )

    # ------------------------------------------------------------------ delete

    def delete(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        name: str,
        propagation: str | None = None,
        preconditions: Preconditions = Preconditions(),
    ) -> dict[str, Any]:
        """Delete now, or mark for deletion when finalizers remain (returns the object)."""
        live = self._live(kind, namespace, name)
        self._check_preconditions(kind, live, preconditions)
        policy = propagation or kind.default_propagation
        if policy not in ("Background", "Foreground", "Orphan"):
            raise errors.bad_request(f"unsupported propagationPolicy {policy!r}")
        if live["metadata"].get("finalizers"):
            if "deletionTimestamp" in live["metadata"]:
                return copy.deepcopy(live)
            self._pending_propagation[live["metadata"]["uid"]] = policy
            marked = copy.deepcopy(live)
            marked["metadata"]["deletionTimestamp"] = self._now()
            marked["metadata"]["deletionGracePeriodSeconds"] = 0
            return self._commit(kind, change_type="MODIFIED", obj=marked, old=live)
        return self._remove(kind, live, policy=policy)

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

    def _remove(self, kind: ResourceKind, live: dict[str, Any], *, policy: str) -> dict[str, Any]:
        uid = live["metadata"]["uid"]
        if policy == "Foreground":
            self._delete_dependents(uid)
        if kind.key == _NAMESPACES.key:
            self._empty_namespace(live["metadata"]["name"])
        removed = self._commit(kind, change_type="DELETED", obj=copy.deepcopy(live), old=live)
        self._pending_propagation.pop(uid, None)
        if kind.key == CRD_KIND.key:
            self._drop_crd(live)
        if policy == "Orphan":
            self._orphan_dependents(uid)
        elif policy == "Background":
            self._delete_dependents(uid)
        return removed

    def _dependents(self, owner_uid: str) -> list[tuple[ResourceKind, dict[str, Any]]]:
        found = []
        for kind in self._storage_kinds():
            for obj in list(self._bucket(kind).values()):
                references = obj["metadata"].get("ownerReferences") or []
                if any(reference.get("uid") == owner_uid for reference in references):
                    found.append((kind, obj))
        return found

    def _delete_dependents(self, owner_uid: str) -> None:
        for kind, obj in self._dependents(owner_uid):
            metadata = obj["metadata"]
            if self.find(kind, namespace=metadata.get("namespace"), name=metadata["name"]):
                self.delete(
                    kind,
                    namespace=metadata.get("namespace"),
                    name=metadata["name"],
                    propagation="Background",
                )

    def _orphan_dependents(self, owner_uid: str) -> None:
        for kind, obj in self._dependents(owner_uid):
            orphaned = copy.deepcopy(obj)
            kept = [
                reference
                for reference in orphaned["metadata"]["ownerReferences"]
                if reference.get("uid") != owner_uid
            ]
            if kept:
                orphaned["metadata"]["ownerReferences"] = kept
            else:
                del orphaned["metadata"]["ownerReferences"]
            self._commit(kind, change_type="MODIFIED", obj=orphaned, old=obj)

    def _empty_namespace(self, namespace: str) -> None:
        for kind in self._storage_kinds():
            if not kind.namespaced:
                continue
            for (object_namespace, _name), obj in list(self._bucket(kind).items()):
                if object_namespace == namespace:
                    self._remove(kind, obj, policy="Background")

    def _after_write(self, kind: ResourceKind, obj: dict[str, Any]) -> None:
        metadata = obj["metadata"]
        if kind.key == CRD_KIND.key:
            self._serve_crd(obj)
        if "deletionTimestamp" in metadata and not metadata.get("finalizers"):
            live = self._live(kind, metadata.get("namespace"), metadata["name"])
            policy = self._pending_propagation.get(metadata["uid"], kind.default_propagation)
            self._remove(kind, live, policy=policy)

    # ------------------------------------------------------------------ custom resources

    def _serve_crd(self, crd: dict[str, Any]) -> None:
        spec = crd.get("spec") or {}
        kinds = kinds_from_crd(crd)
        self.kinds.unregister(group=spec["group"], plural=spec["names"]["plural"])
        for served in kinds:
            self.kinds.register(served)
        # The real server prunes and defaults objects as it reads them from storage, so a
        # changed schema shows at once, with no new resourceVersion and no watch event.
        storage = next((served for served in kinds if served.storage_version), None)
        if storage is not None and storage.schema is not None:
            bucket = self._bucket(storage)
            for key, obj in bucket.items():
                bucket[key] = read_back(storage, obj)

    def _drop_crd(self, crd: dict[str, Any]) -> None:
        spec = crd.get("spec") or {}
        group, plural = spec.get("group", ""), (spec.get("names") or {}).get("plural", "")
        for key, obj in list(self._objects.get((group, plural), {}).items()):
            self._commit(
                _storage_only(group, plural, namespaced=bool(key[0])),
                change_type="DELETED",
                obj=copy.deepcopy(obj),
                old=obj,
            )
        self._objects.pop((group, plural), None)
        self.kinds.unregister(group=group, plural=plural)

    def register_crd(self, crd: dict[str, Any]) -> dict[str, Any]:
        """Create (or update) a CustomResourceDefinition as a client would; its kinds get served."""
        name = (crd.get("metadata") or {}).get("name", "")
        if self.find(CRD_KIND, namespace=None, name=name) is None:
            return self.create(CRD_KIND, namespace=None, body=crd, manager="kaiwo-kubefake")
        live = self._live(CRD_KIND, None, name)
        body = {**copy.deepcopy(crd), "metadata": {**crd.get("metadata", {}), "name": name}}
        body["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
        return self.replace(
            CRD_KIND, namespace=None, name=name, body=body, manager="kaiwo-kubefake"
        )

    def _storage_kinds(self) -> list[ResourceKind]:
        """One served kind per stored (group, plural), for walks over every object."""
        chosen: dict[tuple[str, str], ResourceKind] = {}
        for kind in self.kinds:
            chosen.setdefault(kind.key, kind)
        return list(chosen.values())

    # ------------------------------------------------------------------ test conveniences

    def put(self, kind: ResourceKind, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` as given (status included), creating or overwriting; tests use this to
        play the part of other controllers. Server fields are filled in; watchers are told."""
        metadata = obj.get("metadata") or {}
        live = self.find(kind, namespace=metadata.get("namespace"), name=metadata.get("name", ""))
        if live is None:
            fresh = self._prepare_new(kind, namespace=metadata.get("namespace"), body=obj)
            if "status" in obj:
                fresh["status"] = copy.deepcopy(obj["status"])
                fresh = conform(kind, fresh)
            created = self._commit(kind, change_type="ADDED", obj=fresh, old=None)
            self._after_write(kind, created)
            return created
        new = copy.deepcopy(obj)
        new["apiVersion"], new["kind"] = live["apiVersion"], live["kind"]
        new = conform(kind, new)
        new_metadata = _meta(new)
        for fixed in ("uid", "creationTimestamp", "namespace", "managedFields"):
            if fixed in live["metadata"]:
                new_metadata.setdefault(fixed, live["metadata"][fixed])
        if kind.has_generation and _spec_changed(kind, live, new):
            new_metadata["generation"] = int(live["metadata"].get("generation") or 0) + 1
        else:
            new_metadata["generation"] = live["metadata"].get("generation")
            if new_metadata["generation"] is None:
                del new_metadata["generation"]
        updated = self._commit(kind, change_type="MODIFIED", obj=new, old=live)
        self._after_write(kind, updated)
        return updated

    def set_status(
        self, kind: ResourceKind, *, namespace: str | None, name: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        """Replace an object's status as its controller would (e.g. a Job's ``succeeded``)."""
        live = self.get(kind, namespace=namespace, name=name)
        return self.put(kind, {**live, "status": copy.deepcopy(status)})


_NAMESPACES = ResourceKind(
    group="", version="v1", plural="namespaces", kind="Namespace", namespaced=False
)


def _storage_only(group: str, plural: str, *, namespaced: bool) -> ResourceKind:
    return ResourceKind(group=group, version="", plural=plural, kind="", namespaced=namespaced)


def _parse_resource_version(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise errors.bad_request(f"invalid resource version: {text!r}") from None
    if value < 0:
        raise errors.bad_request(f"invalid resource version: {text!r}")
    return value


def _spec_changed(kind: ResourceKind, old: dict[str, Any], new: dict[str, Any]) -> bool:
    ignored = {"metadata", "apiVersion", "kind"}
    if kind.status_subresource:
        ignored.add("status")
    return canonical(_without(old, *ignored)) != canonical(_without(new, *ignored))


def _crd_status(crd: dict[str, Any]) -> dict[str, Any]:
    """What the API server's CRD controllers report once the names are accepted."""
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    names.setdefault("singular", str(names.get("kind", "")).lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    condition_time = (crd.get("metadata") or {}).get("creationTimestamp", "")
    return {
        "acceptedNames": names,
        "storedVersions": [
            version["name"] for version in spec.get("versions") or [] if version.get("storage")
        ],
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "reason": "NoConflicts",
                "message": "no conflicts found",
                "lastTransitionTime": condition_time,
            },
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
                "lastTransitionTime": condition_time,
            },
        ],
    }
