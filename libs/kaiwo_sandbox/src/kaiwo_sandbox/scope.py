"""The sandbox confined to some namespaces: a :class:`~kaiwo_sandbox.cluster_port.SandboxCluster`
whose lists across namespaces return only objects of those namespaces (cluster-scoped kinds
pass), so that on a shared API server the simulated controllers touch only what they were
given."""

from __future__ import annotations

from collections.abc import Iterable

from kaiwo_kube import ObjectList
from kaiwo_kube.resources import ResourceType

from kaiwo_sandbox.cluster_port import SandboxCluster


class NamespaceScope:
    """Lists filtered; every other call goes to the wrapped port unchanged. Those are bound
    here rather than restated, so each signature stays written once (in the port)."""

    def __init__(self, kube: SandboxCluster, namespaces: Iterable[str]) -> None:
        self.kube = kube
        self.namespaces = frozenset(namespaces)
        self.get = kube.get
        self.create = kube.create
        self.apply = kube.apply
        self.merge_patch = kube.merge_patch
        self.patch_status = kube.patch_status

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
