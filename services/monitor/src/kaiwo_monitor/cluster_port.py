"""What the monitor asks of the API server, declared here where it is used: it only reads (the
KaiwoConfig, the GPU pods, the workloads and the owners of pods it finds). The adapter and the
fake API server satisfy it by their shape; the monitor cannot be handed a port that writes or
watches."""

from __future__ import annotations

from typing import Protocol

from kaiwo_kube import ObjectGetter, ObjectLister


class ClusterReader(ObjectGetter, ObjectLister, Protocol):
    """Get and list."""
