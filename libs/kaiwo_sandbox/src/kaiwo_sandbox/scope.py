"""The sandbox confined to some namespaces: a KubernetesPort whose lists across namespaces
return only objects of those namespaces (cluster-scoped kinds pass), so that on a shared API
server the simulated controllers touch only what they were given."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable, Sequence
from datetime import datetime
from typing import Any, Literal

from kaiwo_kube import KubernetesPort, ObjectList, PropagationPolicy, WatchEvent
from kaiwo_kube.port import EventType
from kaiwo_kube.resources import ResourceType


class NamespaceScope:
    def __init__(self, kube: KubernetesPort, namespaces: Iterable[str]) -> None:
        self.kube = kube
        self.namespaces = frozenset(namespaces)

    async def list(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        listed = await self.kube.list(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
        )
        if not resource.namespaced or namespace is not None:
            return listed
        items = [o for o in listed.items if o["metadata"].get("namespace") in self.namespaces]
        return ObjectList(items, listed.resource_version)

    async def get(
        self, resource: ResourceType, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        return await self.kube.get(resource, name, namespace=namespace)

    def watch(
        self,
        resource: ResourceType,
        *,
        resource_version: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int | None = None,
        bookmarks: bool = True,
    ) -> AsyncGenerator[WatchEvent, None]:
        return self.kube.watch(
            resource,
            resource_version=resource_version,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            timeout_seconds=timeout_seconds,
            bookmarks=bookmarks,
        )

    async def create(
        self, obj: dict[str, Any], *, field_manager: str | None = None
    ) -> dict[str, Any]:
        return await self.kube.create(obj, field_manager=field_manager)

    async def replace(
        self, obj: dict[str, Any], *, field_manager: str | None = None
    ) -> dict[str, Any]:
        return await self.kube.replace(obj, field_manager=field_manager)

    async def apply(
        self,
        obj: dict[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        resource: ResourceType | None = None,
    ) -> dict[str, Any]:
        return await self.kube.apply(
            obj, field_manager=field_manager, force=force, resource=resource
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
        return await self.kube.merge_patch(
            resource, name, patch, namespace=namespace, field_manager=field_manager
        )

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
        return await self.kube.patch_status(
            resource,
            name,
            status,
            namespace=namespace,
            field_manager=field_manager,
            method=method,
            force=force,
            resource_version=resource_version,
        )

    async def get_scale(
        self, resource: ResourceType, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        return await self.kube.get_scale(resource, name, namespace=namespace)

    async def patch_scale(
        self,
        resource: ResourceType,
        name: str,
        *,
        replicas: int,
        expected_replicas: int | None = None,
        namespace: str | None = None,
        field_manager: str,
    ) -> dict[str, Any]:
        return await self.kube.patch_scale(
            resource,
            name,
            replicas=replicas,
            expected_replicas=expected_replicas,
            namespace=namespace,
            field_manager=field_manager,
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
        return await self.kube.json_patch(
            resource, name, operations, namespace=namespace, field_manager=field_manager
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
        await self.kube.delete(
            resource,
            name,
            namespace=namespace,
            propagation=propagation,
            uid=uid,
            resource_version=resource_version,
        )

    async def create_event(
        self,
        *,
        involved: dict[str, Any],
        type: EventType,
        reason: str,
        message: str,
        component: str,
        now: datetime | None = None,
    ) -> dict[str, Any]:
        return await self.kube.create_event(
            involved=involved,
            type=type,
            reason=reason,
            message=message,
            component=component,
            now=now,
        )

    async def apply_crd(self, crd: dict[str, Any], *, field_manager: str) -> dict[str, Any]:
        return await self.kube.apply_crd(crd, field_manager=field_manager)

    async def ensure_crds(
        self, crds: Iterable[dict[str, Any]], *, field_manager: str, within: float = 30.0
    ) -> None:
        await self.kube.ensure_crds(crds, field_manager=field_manager, within=within)

    async def close(self) -> None:
        await self.kube.close()
