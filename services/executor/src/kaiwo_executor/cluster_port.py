"""What the executor asks of the API server: exactly the calls its steps make, declared here
where they are used (the kubernetes_asyncio adapter and the fake API server satisfy them by
their shape, without inheriting). The executor never watches, never reads a scale and installs
no CRD, so it cannot be handed a port that would let it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal, Protocol

from kaiwo_kube import ObjectList, PropagationPolicy, ResourceType
from kaiwo_kube.port import EventType


class LiveReader(Protocol):
    """Read one live object (the plan's admission checks what the plan claims against it)."""

    async def get(
        self, resource: ResourceType, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]: ...


class ExecutorCluster(LiveReader, Protocol):
    """Every call a plan's steps make: writes guarded by uid or resourceVersion, the prune
    selector's list, and the Events that explain a refusal."""

    async def list(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
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

    async def json_patch(
        self,
        resource: ResourceType,
        name: str,
        operations: Sequence[dict[str, Any]],
        *,
        namespace: str | None = None,
        field_manager: str,
    ) -> dict[str, Any]: ...

    async def delete(
        self,
        resource: ResourceType,
        name: str,
        *,
        namespace: str | None = None,
        propagation: PropagationPolicy = "Background",
        uid: str | None = None,
    ) -> None: ...

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

    async def patch_scale(
        self,
        resource: ResourceType,
        name: str,
        *,
        replicas: int,
        expected_replicas: int | None = None,
        namespace: str | None = None,
        field_manager: str,
    ) -> dict[str, Any]: ...

    async def create_event(
        self,
        *,
        involved: dict[str, Any],
        type: EventType,
        reason: str,
        message: str,
        component: str,
        now: datetime | None = None,
    ) -> dict[str, Any]: ...
