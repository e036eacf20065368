"""GpuWorkload: the operator's record of one GPU workload no Kaiwo kind owns (decision 0047).

The operator makes one for every opted-in root of a GPU workload (a Pod, Job, Deployment,
StatefulSet, RayJob or RayCluster controlled by nothing; ``kaiwo_contracts.gpu_workloads``),
named ``<kind>-<name>-<uid[:8]>`` in the root's namespace, as upstream's controller does. Its
status says what GPU idle preemption makes of the workload: the GPUs it holds, its
utilization, since when it is idle, the settings in force, the verdict and, once it happened,
the preemption. ``kubectl get gpuworkloads -A`` and ``kaiwo gpus`` list them. The operator
keeps one ``status.finishedAt + ttl`` after its workload is gone, then deletes it.

Users do not write GpuWorkloads; the spec names the workload and nothing else.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar, Literal

from pydantic import Field

from kaiwo_contracts.crds.base import CrdInfo, KubeModel, PrinterColumn
from kaiwo_contracts.crds.kaiwo_v1alpha1.common import (
    API_VERSION,
    GROUP,
    VERSION,
    KaiwoObject,
    KaiwoObjectList,
)
from kaiwo_contracts.crds.meta import ListMeta, ObjectMeta

GpuWorkloadPhase = Literal[
    "Unknown", "PendingGpu", "Active", "Idle", "Preempting", "Preempted", "Deleted"
]


class WorkloadReference(KubeModel):
    """The root object of the workload, by uid (a new object of the same name is another)."""

    api_version: str = Field(description="apiVersion of the workload's root object.")
    kind: str = Field(description="Kind of the workload's root object.")
    name: str = Field(description="Name of the workload's root object, in this namespace.")
    uid: str = Field(description="UID of the workload's root object.")


class GpuWorkloadSpec(KubeModel):
    """Which workload this record is about."""

    workload_ref: WorkloadReference = Field(description="The workload's root object.")


class PreemptedFor(KubeModel):
    """The pending workload whose GPUs a preemption freed."""

    kind: str
    name: str
    namespace: str | None = None
    uid: str | None = None


class GpuWorkloadStatus(KubeModel):
    """What GPU idle preemption makes of the workload (written by the operator)."""

    phase: GpuWorkloadPhase | None = Field(
        default=None,
        description=(
            "Unknown (no current reading), PendingGpu (waiting for GPUs: Kueue does not admit "
            "it for GPUs, or the scheduler cannot place it for GPUs), Active, Idle, "
            "Preempting, Preempted, or Deleted "
            "(gone without being preempted)."
        ),
    )
    gpus: int | None = Field(default=None, ge=0, description="GPUs the workload's pods hold.")
    vendor: str | None = Field(default=None, description="amd or nvidia.")
    utilization: int | None = Field(
        default=None,
        ge=0,
        le=100,
        description=(
            "GPU utilization in percent, the pods' combined with the aggregation; rewritten "
            "when it moves by 5 points or the phase changes."
        ),
    )
    idle_since: datetime | None = Field(
        default=None, description="Start of the current stretch below the threshold."
    )
    policy: Literal["OnPressure", "Always"] | None = None
    threshold: float | None = Field(default=None, description="Idle below this percentage.")
    aggregation: Literal["Min", "Max", "Avg"] | None = None
    grace_period: str | None = Field(
        default=None, description="How long it must stay idle before it may be preempted."
    )
    ttl: str | None = Field(
        default=None, description="How long this record stays once the workload is gone."
    )
    verdict: str | None = Field(default=None, description="What the operator makes of it.")
    preempted_at: datetime | None = None
    preempted_for: PreemptedFor | None = None
    preemption_reason: str | None = None
    finished_at: datetime | None = Field(
        default=None, description="When the workload was found preempted or gone."
    )


class GpuWorkload(KaiwoObject):
    """The operator's record of one GPU workload no Kaiwo kind owns."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="GpuWorkload",
        plural="gpuworkloads",
        scope="Namespaced",
        short_names=("gpuw",),
        printer_columns=(
            PrinterColumn("Kind", "string", ".spec.workloadRef.kind"),
            PrinterColumn("Workload", "string", ".spec.workloadRef.name"),
            PrinterColumn("Phase", "string", ".status.phase"),
            PrinterColumn("GPUs", "integer", ".status.gpus"),
            PrinterColumn("Utilization", "integer", ".status.utilization"),
            PrinterColumn("IdleSince", "date", ".status.idleSince"),
            PrinterColumn("Policy", "string", ".status.policy"),
            PrinterColumn("Verdict", "string", ".status.verdict", priority=1),
        ),
        status_subresource=True,
        description=(
            "GpuWorkload is the operator's record of a GPU workload that no Kaiwo kind owns "
            "(a Pod, Job, Deployment, StatefulSet, RayJob or RayCluster opted in to GPU idle "
            "preemption): its utilization, idle stretch, settings and verdict."
        ),
    )

    api_version: Literal["kaiwo.silogen.ai/v1alpha1"] = API_VERSION
    kind: Literal["GpuWorkload"] = "GpuWorkload"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: GpuWorkloadSpec
    status: GpuWorkloadStatus = Field(default_factory=GpuWorkloadStatus)


class GpuWorkloadList(KaiwoObjectList):
    """A list of GpuWorkloads."""

    item_kind: ClassVar[str] = "GpuWorkload"

    api_version: Literal["kaiwo.silogen.ai/v1alpha1"] = API_VERSION
    kind: Literal["GpuWorkloadList"] = "GpuWorkloadList"
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[GpuWorkload] = Field(default_factory=list)
