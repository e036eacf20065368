"""One utilization reading of one GPU used by one pod, as the metrics endpoint reports it,
and which readings are current enough to judge (decision 0177)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True, slots=True)
class GpuSample:
    """``percent`` of ``gpu`` busy (``gpu_gfx_activity``) in pod ``namespace/pod`` at ``at``.

    ``gpu`` identifies the device within the pod's node: the GPU id, plus ``/<partition>``
    when the GPU is partitioned (each partition is a GPU a pod can request). ``at`` is when
    the reading was taken, as far as the endpoint tells (a Prometheus sample's own timestamp,
    an exporter's timestamp, else the time it was asked).
    """

    namespace: str
    pod: str
    gpu: str
    percent: float
    at: datetime


def current_samples(
    samples: Iterable[GpuSample], *, now: datetime, tolerance: timedelta
) -> tuple[GpuSample, ...]:
    """The samples taken within ``tolerance`` of ``now``, before or after it.

    An older one is a frozen reading (an exporter that stopped but stamped its samples
    itself, a Prometheus restarted on its old data): it says nothing about the GPU now, so it
    is no reading at all (decision 0173: a GPU pod nobody reads is not idle). One far ahead
    of ``now`` is a clock that cannot be trusted either.
    """
    return tuple(sample for sample in samples if abs(now - sample.at) <= tolerance)
