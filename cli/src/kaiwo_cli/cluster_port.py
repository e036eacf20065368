"""What the ``kaiwo`` commands ask of the API server, declared here where it is used (from
``kaiwo_kube``'s one-call protocols), in the few shapes the commands need: listings read,
``--wait`` watches, ``submit``/``apply``/``delete`` write, and ``kaiwo logs`` reads a pod's
log. The kubernetes_asyncio adapter satisfies them all by its shape (the pod log is its own
method: no service reads logs, so the operator's port has none)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Protocol

from kaiwo_kube import (
    ObjectApplier,
    ObjectCreator,
    ObjectDeleter,
    ObjectGetter,
    ObjectLister,
    ObjectWatcher,
)


class ClusterReader(ObjectGetter, ObjectLister, Protocol):
    """Get and list (``kaiwo list``, ``status``, ``gpus``, ``capacity``)."""


class ClusterWatcher(ClusterReader, ObjectWatcher, Protocol):
    """List then watch (``--wait`` follows a workload until it settles)."""


class ClusterWriter(ClusterReader, ObjectCreator, ObjectApplier, ObjectDeleter, Protocol):
    """Create, apply and delete (``submit``, ``apply``, ``delete``, the stack's set-up)."""


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
