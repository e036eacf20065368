"""Who a workload is, as its children see it: the workload's identity and the metadata its
children inherit (labels, annotations)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

WorkloadType = Literal["job", "service"]


@dataclass(frozen=True, slots=True)
class WorkloadIdentity:
    """Who a child belongs to: the workload's identity and the metadata children inherit."""

    api_version: str
    kind: str
    name: str
    namespace: str
    uid: str
    workload_type: WorkloadType
    user: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
