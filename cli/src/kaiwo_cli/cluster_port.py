"""What the ``kaiwo`` commands ask of the API server, declared here where it is used, in the
few shapes the commands need: listings read, ``--wait`` watches, ``submit``/``apply``/``delete``
write, and ``kaiwo logs`` reads a pod's log. The kubernetes_asyncio adapter satisfies them all
by its shape (the pod log is its own method: no service reads logs, so the operator's port has
none)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, Protocol

from kaiwo_kube import ObjectList, PropagationPolicy, ResourceType, WatchEvent


class ClusterReader(Protocol):
    """Read and list (``kaiwo list``, ``status``, ``gpus``, ``capacity``)."""

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


class ClusterWatcher(ClusterReader, Protocol):
    """List then watch (``--wait`` follows a workload until it settles)."""

    def watch(
        self,
        resource: ResourceType,
        *,
        resource_version: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> AsyncGenerator[WatchEvent, None]: ...


class ClusterWriter(ClusterReader, Protocol):
    """Create, apply and delete (``submit``, ``apply``, ``delete``, the stack's set-up)."""

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

    async def delete(
        self,
        resource: ResourceType,
        name: str,
        *,
        namespace: str | None = None,
        propagation: PropagationPolicy = "Background",
        uid: str | None = None,
    ) -> None: ...


class PodLogReader(ClusterReader, Protocol):
    """Find a workload's pods and read their logs (``kaiwo logs``)."""

    def pod_log_lines(
        self,
        name: str,
        *,
        namespace: str,
        container: str | None = None,
        tail_lines: int | None = None,
        follow: bool = False,
    ) -> AsyncGenerator[str, None]: ...


class CommandCluster(ClusterWatcher, ClusterWriter, PodLogReader, Protocol):
    """Everything a workload command may do, given to it by ``_run``."""
