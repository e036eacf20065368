"""What the simulated controllers ask of the API server, declared here where it is used: they
read and list, create, apply, merge-patch and write status. Nothing here deletes, scales,
records Events or installs CRDs. The kubernetes_asyncio adapter, the fake API server and
:class:`~kaiwo_sandbox.scope.NamespaceScope` satisfy it by their shape."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from kaiwo_kube import ObjectList, ResourceType


class ObjectGetter(Protocol):
    """Read one object (the kubelets' log endpoint reads a pod and its Job)."""

    async def get(
        self, resource: ResourceType, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]: ...


class SandboxCluster(ObjectGetter, Protocol):
    """Every call the sandbox's controllers make."""

    async def list(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList: ...

    async def create(
        self, obj: dict[str, Any], *, field_manager: str | None = None
    ) -> dict[str, Any]: ...

    async def apply(
        self,
        obj: dict[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        resource: ResourceType | None = None,
    ) -> dict[str, Any]: ...

    async def merge_patch(
        self,
        resource: ResourceType,
        name: str,
        patch: dict[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]: ...

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
    ) -> dict[str, Any]: ...
