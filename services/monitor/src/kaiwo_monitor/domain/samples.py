"""One utilization reading of one GPU used by one pod, as the metrics endpoint reports it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class GpuSample:
    """``percent`` of ``gpu`` busy (``gpu_gfx_activity``) in pod ``namespace/pod`` at ``at``.

    ``gpu`` identifies the device within the pod's node: the GPU id, plus ``/<partition>``
    when the GPU is partitioned (each partition is a GPU a pod can request).
    """

    namespace: str
    pod: str
    gpu: str
    percent: float
    at: datetime
