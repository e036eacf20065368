"""KaiwoQueueConfig: the cluster-wide singleton from which Kaiwo manages Kueue objects.

The controller keeps Kueue ResourceFlavors, ClusterQueues (with their LocalQueues),
WorkloadPriorityClasses and Topologies equal to this spec. Only the object named ``kaiwo`` is
acted on; that is a controller rule, not a validation, so other names still parse.

The Kueue sub-types (resource groups, preemption, fungibility, ...) follow Kueue v1beta1 field
for field, including the defaults and enums Kueue's own CRDs declare and the rules Kueue's
validation enforces on a ClusterQueue, so that a spec accepted here is accepted by Kueue.
``topologies`` and ``resourceFlavors[].topologyName`` exist only in the upstream operator (not
in the API reference); they are kept for topology-aware scheduling.

Limits: the API reference's MaxItems win over upstream's where both exist (10 clusterQueues
instead of 1000, 5 workloadPriorityClasses instead of 20, no limit on resourceFlavors instead
of 20). Names of the listed objects must be unique, since two entries with one name would make
the controller overwrite one with the other.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Annotated, ClassVar, Literal, Self

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from kaiwo_contracts.crds.base import CrdInfo, KubeModel, PrinterColumn
from kaiwo_contracts.crds.core_v1 import LabelSelector, Taint, Toleration
from kaiwo_contracts.crds.kaiwo_v1alpha1.common import (
    API_VERSION,
    CATEGORIES,
    GROUP,
    VERSION,
    Conditions,
    KaiwoObject,
    KaiwoObjectList,
    WorkloadStatus,
)
from kaiwo_contracts.crds.meta import DNS_LABEL_PATTERN, DNS_SUBDOMAIN_PATTERN, ListMeta, ObjectMeta
from kaiwo_contracts.crds.quantity import Quantity
from kaiwo_contracts.crds.structural import NoCrdDefault

KAIWO_QUEUE_CONFIG_NAME = "kaiwo"
"""The only KaiwoQueueConfig the controller acts on."""

# ------------------------------------------------------------------ Kueue ClusterQueue spec


class ResourceQuota(KubeModel):
    """The quota of one resource within one flavor."""

    name: str = Field(min_length=1, description="Resource name, e.g. cpu or amd.com/gpu.")
    nominal_quota: Quantity = Field(description="Quantity available to this ClusterQueue.")
    borrowing_limit: Quantity | None = Field(
        default=None, description="Most this queue may borrow from its cohort."
    )
    lending_limit: Quantity | None = Field(
        default=None, description="Most of the nominal quota this queue lends to its cohort."
    )


class FlavorQuotas(KubeModel):
    """The quotas a ClusterQueue has in one ResourceFlavor."""

    name: str = Field(min_length=1, max_length=253, description="ResourceFlavor name.")
    resources: list[ResourceQuota] = Field(min_length=1, max_length=16)


class ResourceGroup(KubeModel):
    """Resources that are assigned flavors together (tried in ``flavors`` order)."""

    covered_resources: list[str] = Field(min_length=1, max_length=16)
    flavors: list[FlavorQuotas] = Field(min_length=1, max_length=16)

    @model_validator(mode="after")
    def _flavors_cover_the_same_resources(self) -> Self:
        """Each flavor quotas exactly the covered resources, in any order: the ClusterQueue
        gets them in ``coveredResources`` order, as Kueue wants them (upstream reorders
        them too, and drops quotas of resources not covered, which this refuses)."""
        for flavor in self.flavors:
            names = [quota.name for quota in flavor.resources]
            if sorted(names) != sorted(self.covered_resources):
                raise PydanticCustomError(
                    "flavor_resources_mismatch",
                    "flavor {flavor} must list one quota for each of the coveredResources "
                    "({expected}) and for no other resource, got ({given})",
                    {
                        "flavor": repr(flavor.name),
                        "expected": ", ".join(self.covered_resources),
                        "given": ", ".join(names),
                    },
                )
        return self


class FlavorFungibility(KubeModel):
    """Whether Kueue borrows or preempts in a flavor before trying the next one."""

    when_can_borrow: Literal["Borrow", "TryNextFlavor"] = "Borrow"
    when_can_preempt: Literal["Preempt", "TryNextFlavor"] = "TryNextFlavor"


class BorrowWithinCohort(KubeModel):
    """Whether a workload may preempt others in the cohort while borrowing."""

    policy: Literal["Never", "LowerPriority"] = "Never"
    max_priority_threshold: int | None = None


class ClusterQueuePreemption(KubeModel):
    """Which workloads a pending workload may preempt."""

    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = "Never"
    borrow_within_cohort: BorrowWithinCohort | None = None
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = "Never"


class AdmissionCheckStrategyRule(KubeModel):
    """An admission check, optionally only for some flavors."""

    name: str = Field(min_length=1)
    on_flavors: list[str] | None = None


class AdmissionChecksStrategy(KubeModel):
    """Admission checks with per-flavor scoping."""

    admission_checks: list[AdmissionCheckStrategyRule]


class FairSharing(KubeModel):
    """Fair-sharing weight of the queue within its cohort."""

    weight: Quantity | None = None


class ClusterQueueSpec(KubeModel):
    """The Kueue ClusterQueueSpec Kaiwo applies to a managed ClusterQueue."""

    resource_groups: list[ResourceGroup] | None = Field(default=None, max_length=16)
    cohort: str | None = Field(default=None, max_length=253)
    queueing_strategy: Literal["StrictFIFO", "BestEffortFIFO"] = "BestEffortFIFO"
    namespace_selector: LabelSelector | None = Field(
        default=None, description="Namespaces whose workloads may use the queue; {} = all."
    )
    # Kueue's CRD defaults both to {} so the API server fills in their inner defaults.
    flavor_fungibility: FlavorFungibility = Field(
        default_factory=FlavorFungibility, json_schema_extra={"default": {}}
    )
    preemption: ClusterQueuePreemption = Field(
        default_factory=ClusterQueuePreemption, json_schema_extra={"default": {}}
    )
    admission_checks: list[str] | None = None
    admission_checks_strategy: AdmissionChecksStrategy | None = None
    stop_policy: Literal["None", "Hold", "HoldAndDrain"] = "None"
    fair_sharing: FairSharing | None = None

    @model_validator(mode="after")
    def _one_way_to_list_admission_checks(self) -> Self:
        if self.admission_checks and self.admission_checks_strategy is not None:
            raise PydanticCustomError(
                "admission_checks_twice",
                "set either admissionChecks or admissionChecksStrategy, not both",
            )
        return self

    @model_validator(mode="after")
    def _each_resource_in_one_group(self) -> Self:
        covered = [name for group in self.resource_groups or () for name in group.covered_resources]
        _require_unique(covered, what="resourceGroups[].coveredResources")
        return self


class ClusterQueue(KubeModel):
    """A Kueue ClusterQueue managed by Kaiwo, and the namespaces that get a LocalQueue for it."""

    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="ClusterQueue name (also the name of its LocalQueues).",
    )
    spec: Annotated[ClusterQueueSpec, NoCrdDefault] = Field(default_factory=ClusterQueueSpec)
    namespaces: list[Annotated[str, Field(max_length=63, pattern=DNS_LABEL_PATTERN)]] | None = (
        Field(
            default=None, description="Namespaces where a LocalQueue of the same name is created."
        )
    )


# ------------------------------------------------------------------ flavors, priorities, topologies


class ResourceFlavorSpec(KubeModel):
    """A Kueue ResourceFlavor managed by Kaiwo: a set of nodes selected by labels."""

    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="ResourceFlavor name.",
    )
    node_labels: dict[str, str] | None = Field(
        default=None, max_length=10, description="Node labels that select the flavor's nodes."
    )
    taints: list[Taint] | None = Field(default=None, max_length=5)
    tolerations: list[Toleration] | None = Field(default=None, max_length=5)
    topology_name: str | None = Field(
        default=None, description="Upstream: the Topology this flavor's nodes belong to."
    )


class WorkloadPriorityClass(KubeModel):
    """A Kueue WorkloadPriorityClass (whole object); workloads refer to it by name."""

    api_version: str | None = None
    kind: Literal["WorkloadPriorityClass"] | None = None
    metadata: ObjectMeta
    # Kueue's field is an int32: a larger value is refused when the class is applied.
    value: int = Field(
        ge=-(2**31),
        le=2**31 - 1,
        description="Priority; higher runs first and may preempt lower.",
    )
    description: str | None = None

    @model_validator(mode="after")
    def _named(self) -> Self:
        if not self.metadata.name:
            raise PydanticCustomError("missing_name", "a WorkloadPriorityClass needs metadata.name")
        _require_object_name(self.metadata.name)
        return self


class TopologyLevel(KubeModel):
    """One level of a topology, identified by a node label."""

    node_label: str = Field(min_length=1, max_length=316)


_HOSTNAME_LABEL = "kubernetes.io/hostname"


class TopologySpec(KubeModel):
    """The levels of a topology, from the widest (block) to the narrowest (host)."""

    levels: list[TopologyLevel] = Field(min_length=1, max_length=8)

    @model_validator(mode="after")
    def _levels_well_formed(self) -> Self:
        labels = [level.node_label for level in self.levels]
        _require_unique(labels, what="levels[].nodeLabel")
        if _HOSTNAME_LABEL in labels[:-1]:
            raise PydanticCustomError(
                "hostname_not_lowest",
                "the kubernetes.io/hostname label can only be used at the lowest level",
            )
        return self


class Topology(KubeModel):
    """Upstream: a Kueue Topology (whole object) for topology-aware scheduling."""

    api_version: str | None = None
    kind: Literal["Topology"] | None = None
    metadata: ObjectMeta
    spec: TopologySpec

    @model_validator(mode="after")
    def _named(self) -> Self:
        if not self.metadata.name:
            raise PydanticCustomError("missing_name", "a Topology needs metadata.name")
        _require_object_name(self.metadata.name)
        return self


_OBJECT_NAME = re.compile(DNS_SUBDOMAIN_PATTERN)


def _require_object_name(name: str) -> None:
    """The whole objects listed here are created under their own name: it must be one the
    API server takes, or every plan of the KaiwoQueueConfig fails to apply."""
    if len(name) > 253 or not _OBJECT_NAME.match(name):
        raise PydanticCustomError(
            "object_name",
            "metadata.name must be a lowercase RFC 1123 name such as team-a, not {name}",
            {"name": repr(name)},
        )


# ------------------------------------------------------------------ the kind


class KaiwoQueueConfigSpec(KubeModel):
    """The Kueue objects Kaiwo manages; everything of these kinds not listed is deleted."""

    cluster_queues: list[ClusterQueue] | None = Field(default=None, max_length=10)
    resource_flavors: list[ResourceFlavorSpec] | None = Field(
        default=None, description="Empty or unset: flavors are discovered from node pools."
    )
    workload_priority_classes: list[WorkloadPriorityClass] | None = Field(
        default=None, max_length=5
    )
    topologies: list[Topology] | None = Field(default=None, max_length=10)

    @model_validator(mode="after")
    def _names_unique(self) -> Self:
        _require_unique((q.name for q in self.cluster_queues or ()), what="clusterQueues[].name")
        _require_unique(
            (f.name for f in self.resource_flavors or ()), what="resourceFlavors[].name"
        )
        _require_unique(
            (str(p.metadata.name) for p in self.workload_priority_classes or ()),
            what="workloadPriorityClasses[].metadata.name",
        )
        _require_unique(
            (str(t.metadata.name) for t in self.topologies or ()),
            what="topologies[].metadata.name",
        )
        return self


class KaiwoQueueConfigStatus(KubeModel):
    """Whether the managed Kueue objects are in sync (READY) or not (FAILED)."""

    conditions: Conditions | None = None
    status: Annotated[WorkloadStatus, NoCrdDefault] = Field(
        default=WorkloadStatus.NEW,
        description="READY once the managed Kueue objects are in sync, FAILED when they cannot be.",
    )


class KaiwoQueueConfig(KaiwoObject):
    """Kaiwo's Kueue configuration; a cluster-scoped singleton named ``kaiwo``."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="KaiwoQueueConfig",
        plural="kaiwoqueueconfigs",
        scope="Cluster",
        short_names=("kqc",),
        categories=CATEGORIES,
        printer_columns=(PrinterColumn("WorkloadStatus", "string", ".status.status"),),
        status_subresource=True,
        description=(
            "KaiwoQueueConfig manages Kueue resources (ClusterQueues, ResourceFlavors, "
            "WorkloadPriorityClasses) for Kaiwo; only the one named 'kaiwo' is acted on."
        ),
    )

    api_version: Literal["kaiwo.silogen.ai/v1alpha1"] = API_VERSION
    kind: Literal["KaiwoQueueConfig"] = "KaiwoQueueConfig"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: KaiwoQueueConfigSpec = Field(default_factory=KaiwoQueueConfigSpec)
    status: KaiwoQueueConfigStatus = Field(default_factory=KaiwoQueueConfigStatus)


class KaiwoQueueConfigList(KaiwoObjectList):
    """A list of KaiwoQueueConfigs."""

    item_kind: ClassVar[str] = "KaiwoQueueConfig"

    api_version: Literal["kaiwo.silogen.ai/v1alpha1"] = API_VERSION
    kind: Literal["KaiwoQueueConfigList"] = "KaiwoQueueConfigList"
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[KaiwoQueueConfig] = Field(default_factory=list)


def _require_unique(names: Iterable[str], *, what: str) -> None:
    repeated = sorted(name for name, count in Counter(names).items() if count > 1)
    if repeated:
        raise PydanticCustomError(
            "duplicate_name",
            "{what} must be unique; repeated: {repeated}",
            {"what": what, "repeated": ", ".join(repeated)},
        )
