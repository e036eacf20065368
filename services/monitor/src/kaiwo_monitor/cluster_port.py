"""What the monitor asks of the API server: it only reads (the KaiwoConfig, the GPU pods, the
workloads and the owners of pods it finds), declared here where it is used. The adapter and the
fake API server satisfy it by their shape; the monitor cannot be handed a port that writes."""

from __future__ import annotations

from typing import Any, Protocol

from kaiwo_kube import ObjectList, ResourceType


class ClusterReader(Protocol):
    async def get(
        self, resource: ResourceType, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]: ...

    async def list(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList: ...
