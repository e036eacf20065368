"""What the executor asks of the API server: exactly the calls its steps make, declared here
where they are used from ``kaiwo_kube``'s one-call protocols (each signature is written once,
there). The kubernetes_asyncio adapter and the fake API server satisfy them by their shape. The
executor never watches, replaces, reads a scale or installs a CRD, so it cannot be handed a
port that would let it."""

from __future__ import annotations

from typing import Protocol

from kaiwo_kube import (
    EventRecorder,
    JsonPatcher,
    MergePatcher,
    ObjectApplier,
    ObjectCreator,
    ObjectDeleter,
    ObjectGetter,
    ObjectLister,
    ScalePatcher,
    StatusWriter,
)


class LiveReader(ObjectGetter, Protocol):
    """Read one live object (the plan's admission checks what the plan claims against it)."""


class ExecutorCluster(
    LiveReader,
    ObjectLister,
    ObjectCreator,
    ObjectApplier,
    MergePatcher,
    JsonPatcher,
    ObjectDeleter,
    StatusWriter,
    ScalePatcher,
    EventRecorder,
    Protocol,
):
    """Every call a plan's steps make: writes guarded by uid or resourceVersion, the prune
    selector's list, and the Events that explain a refusal."""
