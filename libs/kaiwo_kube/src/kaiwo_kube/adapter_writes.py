"""The adapter's writing parts: :class:`~kaiwo_kube.port.ObjectWriter` (create, replace,
apply, patches, delete) and the status and scale subresources
(:class:`~kaiwo_kube.port.StatusWriter`, :class:`~kaiwo_kube.port.Scaler`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from kaiwo_kube.adapter_reads import Connected, flag
from kaiwo_kube.port import PropagationPolicy
from kaiwo_kube.resources import ResourceType

APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


NO_OBJECT_HAS_THIS_VERSION = "1"


def _for_apply(obj: dict[str, Any]) -> dict[str, Any]:
    """The apply body: server-maintained metadata the API server refuses in an apply is dropped."""
    metadata = {
        k: v
        for k, v in (obj.get("metadata") or {}).items()
        if k not in ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation")
    }
    return {**obj, "metadata": metadata}


class ObjectWrites(Connected):
    """:class:`~kaiwo_kube.port.ObjectWriter`."""

    def _object_path(self, resource: ResourceType, obj: dict[str, Any], *, sub: str = "") -> str:
        metadata = obj.get("metadata") or {}
        return resource.path(
            namespace=metadata.get("namespace"),
            name=metadata.get("name", ""),
            subresource=sub or None,
        )

    async def create(
        self, obj: dict[str, Any], *, field_manager: str | None = None
    ) -> dict[str, Any]:
        resource = await self._kinds.type_of(obj, None)
        namespace = (obj.get("metadata") or {}).get("namespace")
        query = [("fieldManager", field_manager)] if field_manager else []
        return await self.transport.request(
            "POST", resource.path(namespace=namespace), query=query, body=obj
        )

    async def replace(
        self, obj: dict[str, Any], *, field_manager: str | None = None
    ) -> dict[str, Any]:
        resource = await self._kinds.type_of(obj, None)
        query = [("fieldManager", field_manager)] if field_manager else []
        return await self.transport.request(
            "PUT", self._object_path(resource, obj), query=query, body=obj
        )

    async def apply(
        self,
        obj: dict[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        resource: ResourceType | None = None,
        if_absent: bool = False,
    ) -> dict[str, Any]:
        resource = await self._kinds.type_of(obj, resource)
        body = _for_apply(obj)
        if if_absent:
            # A resourceVersion in an apply is a precondition on an existing object, and
            # ignored when the apply creates one. No object has this one (etcd's first write
            # is revision 2), so an existing object is always a Conflict.
            body["metadata"]["resourceVersion"] = NO_OBJECT_HAS_THIS_VERSION
        return await self.transport.request(
            "PATCH",
            self._object_path(resource, obj),
            query=[("fieldManager", field_manager), ("force", flag(force))],
            body=body,
            content_type=APPLY_PATCH,
        )

    async def merge_patch(
        self,
        resource: ResourceType,
        name: str,
        patch: dict[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        query = [("fieldManager", field_manager)] if field_manager else []
        return await self.transport.request(
            "PATCH",
            resource.path(namespace=namespace, name=name),
            query=query,
            body=patch,
            content_type=MERGE_PATCH,
        )

    async def json_patch(
        self,
        resource: ResourceType,
        name: str,
        operations: Sequence[dict[str, Any]],
        *,
        namespace: str | None = None,
        field_manager: str,
    ) -> dict[str, Any]:
        return await self.transport.request(
            "PATCH",
            resource.path(namespace=namespace, name=name),
            query=[("fieldManager", field_manager)],
            body=list(operations),
            content_type=JSON_PATCH,
        )

    async def delete(
        self,
        resource: ResourceType,
        name: str,
        *,
        namespace: str | None = None,
        propagation: PropagationPolicy = "Background",
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> None:
        options: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": propagation,
        }
        preconditions = {
            key: value
            for key, value in (("uid", uid), ("resourceVersion", resource_version))
            if value
        }
        if preconditions:
            options["preconditions"] = preconditions
        await self.transport.request(
            "DELETE", resource.path(namespace=namespace, name=name), body=options
        )


class Subresources(Connected):
    """:class:`~kaiwo_kube.port.StatusWriter` and :class:`~kaiwo_kube.port.Scaler`."""

    async def patch_status(
        self,
        resource: ResourceType,
        name: str,
        status: dict[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str,
        method: Literal["apply", "merge"] = "apply",
        force: bool = True,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        path = resource.path(namespace=namespace, name=name, subresource="status")
        precondition = {"resourceVersion": resource_version} if resource_version else {}
        if method == "merge":
            return await self.transport.request(
                "PATCH",
                path,
                query=[("fieldManager", field_manager)],
                body={"status": status, **({"metadata": precondition} if precondition else {})},
                content_type=MERGE_PATCH,
            )
        metadata = {"name": name, **({"namespace": namespace} if namespace else {}), **precondition}
        body = {
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "metadata": metadata,
            "status": status,
        }
        return await self.transport.request(
            "PATCH",
            path,
            query=[("fieldManager", field_manager), ("force", flag(force))],
            body=body,
            content_type=APPLY_PATCH,
        )

    async def get_scale(
        self, resource: ResourceType, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        return await self.transport.request(
            "GET", resource.path(namespace=namespace, name=name, subresource="scale")
        )

    async def patch_scale(
        self,
        resource: ResourceType,
        name: str,
        *,
        replicas: int,
        expected_replicas: int | None = None,
        read_at: str | None = None,
        namespace: str | None = None,
        field_manager: str,
    ) -> dict[str, Any]:
        # "add" sets the field whether the Scale has it or not; "replace" needs it.
        operations: list[dict[str, Any]] = [
            {"op": "add", "path": "/spec/replicas", "value": replicas}
        ]
        if expected_replicas == 0:
            # autoscaling/v1 omits replicas of 0: a Scale at 0 has the spec {} and no
            # replicas a test could read (a test of 0 always failed: nothing at zero could be
            # scaled up). The spec is its replicas alone, so {} is exactly "at 0".
            operations = [{"op": "test", "path": "/spec", "value": {}}, *operations]
        elif expected_replicas is not None:
            operations = [
                {"op": "test", "path": "/spec/replicas", "value": expected_replicas},
                *operations,
            ]
        if read_at is not None:
            # The Scale carries the object's resourceVersion: the test holds only while the
            # object is the version read (any write since, to any field, moves it).
            operations = [
                {"op": "test", "path": "/metadata/resourceVersion", "value": read_at},
                *operations,
            ]
        return await self.transport.request(
            "PATCH",
            resource.path(namespace=namespace, name=name, subresource="scale"),
            query=[("fieldManager", field_manager)],
            body=operations,
            content_type=JSON_PATCH,
        )
